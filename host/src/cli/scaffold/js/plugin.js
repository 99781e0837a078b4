// __NAME__: a ksm-adapter plugin in JavaScript. Each service of a ServiceSet becomes one
// ConfigMap (in the ServiceSet's namespace) carrying the service's values; its state is
// Deployed once the ConfigMap exists. Replace the ConfigMap with your CD tool's objects.
//
// The contract (wit/since_v0.2.0/adapter.wit, ksm:adapter/plugin@0.2.0): `metadata` is constant,
// `validateConfig` rejects unknown fields, `translate` answers for every service in spec order
// (one bad service never fails the others) and is deterministic, `mapStatus` is Deployed only
// when everything exists. Objects cross the boundary as JSON text.

const CONTRACT_VERSION = "0.2.0";
const DEFAULT_VALUES_KEY = "values.yaml";
const MAX_NAME = 63;

// Parses spec.provider.config (JSON text, "null" when absent). Returns [config, errors]: every
// problem at its path; unknown fields are errors, so typos do not pass silently.
function parseConfig(text) {
  const config = { valuesKey: DEFAULT_VALUES_KEY };
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return [config, [{ path: "", message: `not valid JSON: ${e.message}` }]];
  }
  if (value === null) return [config, []];
  if (typeof value !== "object" || Array.isArray(value)) {
    return [config, [{ path: "", message: "expected an object" }]];
  }
  const errors = [];
  for (const key of Object.keys(value).sort()) {
    const field = value[key];
    if (field === null) continue;
    if (key === "valuesKey") {
      if (typeof field === "string" && /^[-._a-zA-Z0-9]{1,253}$/.test(field)) config.valuesKey = field;
      else errors.push({ path: key, message: "expected a ConfigMap data key (letters, digits, '-', '_', '.')" });
    } else if (key === "priority") {
      // Read by the host (release conflicts); kcm passes it to every provider.
      if (!Number.isInteger(field)) errors.push({ path: key, message: "expected an integer" });
    } else if (key === "stopOnConflict") {
      if (typeof field !== "boolean") errors.push({ path: key, message: "expected a boolean" });
    } else {
      errors.push({ path: key, message: "unknown field" });
    }
  }
  return [config, errors];
}

// The UTF-8 bytes of `text`.
function utf8(text) {
  const bytes = [];
  for (const ch of text) {
    const c = ch.codePointAt(0);
    if (c < 0x80) bytes.push(c);
    else if (c < 0x800) bytes.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) bytes.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else bytes.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return bytes;
}

// 32-bit FNV-1a, as ksm_plugin_sdk::names: stable across runs and builds.
function fnv1a32(text) {
  let hash = 0x811c9dc5;
  for (const byte of utf8(text)) {
    hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, "0");
}

// `<serviceSet>.<service>`, at most 63 characters, as ksm_plugin_sdk::names::service_object_name:
// distinct pairs get distinct names; a dotted service name or a longer name is cut and ends in a
// stable hash of the pair.
function objectName(serviceSet, service) {
  const full = `${serviceSet}.${service}`;
  if (full.length <= MAX_NAME && !service.includes(".")) return full;
  const prefix = full.slice(0, MAX_NAME - 9).replace(/[-.]+$/, "");
  return `${prefix}-${fnv1a32(full)}`;
}

function serviceError(tag, message) {
  return { tag: "err", val: { tag, val: message } };
}

// The ConfigMap of one service, as a nested result: {tag: "ok", val: [json]} or {tag: "err", val: error}.
function configMap(serviceSet, service, input, config, cluster) {
  const namespace = serviceSet.metadata.namespace;
  const template = input.templates.find((t) => t.name === service.template);
  if (!template || template.object === null) {
    return serviceError("template-not-found", `ServiceTemplate "${namespace}/${service.template}" not found`);
  }
  let status;
  try {
    status = JSON.parse(template.object).status;
  } catch (e) {
    return serviceError("template-not-ready", `ServiceTemplate "${service.template}" does not parse: ${e.message}`);
  }
  if (!status || status.valid !== true) {
    return serviceError("template-not-ready", `ServiceTemplate "${service.template}" is not valid yet`);
  }
  const data = { cluster, namespace: service.namespace || "", template: service.template };
  if (service.version) data.version = service.version;
  data[config.valuesKey] = service.values || "";
  const object = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: objectName(serviceSet.metadata.name, service.name), namespace },
    data,
  };
  return { tag: "ok", val: [JSON.stringify(object)] };
}

export const plugin = {
  metadata() {
    return {
      name: "__NAME__",
      version: "0.1.0",
      contractVersion: CONTRACT_VERSION,
      creates: [{ group: "", version: "v1", kind: "ConfigMap", plural: "configmaps", namespaced: true }],
      reads: [],
    };
  },

  // A `result<_, list<config-error>>`: return to accept, throw the errors to reject.
  validateConfig(config) {
    const [, errors] = parseConfig(config);
    if (errors.length > 0) throw errors;
  },

  translate(input) {
    let serviceSet;
    try {
      serviceSet = JSON.parse(input.serviceSet);
    } catch (e) {
      throw { tag: "invalid-input", val: `the ServiceSet does not parse: ${e.message}` };
    }
    const spec = serviceSet.spec || {};
    const provider = spec.provider || {};
    const [config, errors] = parseConfig(JSON.stringify(provider.config === undefined ? null : provider.config));
    if (errors.length > 0) throw { tag: "invalid-config", val: errors };
    const cluster = input.target.tag === "remote" ? input.target.val.name : "management";
    return (spec.services || []).map((service) => ({
      service: service.name,
      outcome: configMap(serviceSet, service, input, config, cluster),
      claims: [],
    }));
  },

  mapStatus(input) {
    let serviceSet;
    try {
      serviceSet = JSON.parse(input.serviceSet);
    } catch (e) {
      throw { tag: "invalid-input", val: `the ServiceSet does not parse: ${e.message}` };
    }
    let serviceType = "helm";
    if (input.template !== null) {
      const spec = JSON.parse(input.template).spec || {};
      if (spec.kustomize) serviceType = "kustomize";
      else if (spec.resources) serviceType = "resource";
    }
    const live = input.observed.filter((o) => o.object !== null).map((o) => JSON.parse(o.object));
    let state = "pending";
    if (live.some((o) => o.metadata && o.metadata.deletionTimestamp)) state = "deleting";
    else if (input.observed.length > 0 && live.length === input.observed.length) state = "deployed";
    let version = null;
    if (state === "deployed") {
      const service = ((serviceSet.spec || {}).services || []).find((s) => s.name === input.service);
      if (service) version = service.version || service.template;
    }
    return { state, serviceType, version, failureMessage: null };
  },
};
