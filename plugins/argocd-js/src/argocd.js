// The Argo CD kinds this plugin creates, and JSON helpers shared by translate and status.

/** The Application kind (`argoproj.io/v1alpha1`). */
export const APPLICATION = {
  group: "argoproj.io",
  version: "v1alpha1",
  kind: "Application",
  plural: "applications",
  namespaced: true,
  apiVersion: "argoproj.io/v1alpha1",
};

/**
 * `value` with object keys sorted (byte order) and `undefined` fields dropped: the output
 * is deterministic whatever order the code built it in.
 */
export function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === "object") {
    const out = {};
    for (const key of Object.keys(value).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (value[key] !== undefined) out[key] = canonical(value[key]);
    }
    return out;
  }
  return value;
}

/** Whether two JSON values are equal, whatever the order of object keys. */
export function jsonEqual(a, b) {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}
