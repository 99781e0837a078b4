// Kubernetes name rules and stable shortening of derived names: a faithful port of the Rust
// SDK's `names` module (plugins/sdk/src/names.rs), so an Argo CD Application gets the very name
// the Flux plugin gives its HelmRelease or Kustomization for the same service.
//
// Lengths are counted in UTF-8 bytes, as Rust's `str::len` does.

/** Longest DNS-1123 label (names of most objects, label values). */
export const MAX_LABEL_LEN = 63;
/** Longest DNS-1123 subdomain. */
export const MAX_SUBDOMAIN_LEN = 253;

/**
 * Whether `s` is a DNS-1123 label: lower-case alphanumerics and `-`, starting and ending with
 * an alphanumeric, at most 63 characters.
 */
export function isDns1123Label(s) {
  return (
    typeof s === "string" &&
    s.length > 0 &&
    s.length <= MAX_LABEL_LEN &&
    /^[a-z0-9-]+$/.test(s) &&
    !s.startsWith("-") &&
    !s.endsWith("-")
  );
}

/** Whether `s` is a DNS-1123 subdomain: dot-separated DNS-1123 labels, at most 253 characters. */
export function isDns1123Subdomain(s) {
  return typeof s === "string" && s.length > 0 && s.length <= MAX_SUBDOMAIN_LEN && s.split(".").every(isDns1123Label);
}

/**
 * The name of the object of service `service` of ServiceSet `serviceSet`:
 * `<serviceSet>.<service>`, of at most `max` bytes. Distinct pairs get distinct names (joined
 * with `-`, `a-b` + `c` and `a` + `b-c` would not): a service name without a dot puts the
 * ServiceSet's name before the last dot. A name with a dotted service, or too long, is cut and
 * ends in a stable hash of the pair.
 */
export function serviceObjectName(serviceSet, service, max) {
  const full = `${serviceSet}.${service}`;
  return utf8Encode(full).length <= max && !service.includes(".") ? full : hashed(full, max);
}

/** `full` cut to leave room for `-` and 8 hex characters of its hash (no `-` or `.` before it). */
function hashed(full, max) {
  const bytes = utf8Encode(full);
  const hash = fnv1a32(bytes).toString(16).padStart(8, "0");
  const keep = Math.max(0, max - (hash.length + 1));
  const prefix = utf8Decode(bytes.slice(0, keep)).replace(/[-.]+$/, "");
  return `${prefix}-${hash}`;
}

/** 32-bit FNV-1a: tiny, dependency-free and stable across platforms and versions. */
export function fnv1a32(bytes) {
  let h = 0x811c9dc5;
  for (const b of bytes) {
    h = Math.imul(h ^ b, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** The UTF-8 bytes of `s` (QuickJS has no TextEncoder). */
export function utf8Encode(s) {
  const out = [];
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 0x3f));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 0x3f), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
  }
  return out;
}

/**
 * Decodes UTF-8 `bytes`, dropping a character cut at the end. (Rust panics when a cut falls
 * inside a character; Kubernetes names are ASCII, so neither happens in practice.)
 */
function utf8Decode(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i];
    const len = b < 0x80 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
    if (i + len > bytes.length) break;
    let c = len === 1 ? b : b & (0xff >> (len + 1));
    for (let k = 1; k < len; k++) c = (c << 6) | (bytes[i + k] & 0x3f);
    out += String.fromCodePoint(c);
    i += len;
  }
  return out;
}
