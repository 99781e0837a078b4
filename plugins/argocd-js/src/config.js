// The Argo CD provider config: a ServiceSet's `spec.provider.config` (merged over the
// AdapterPlugin's `spec.config` by the host).
//
// Every problem is reported, not just the first, each at its dotted path (list items as
// `path[index]`), in key order, as the Flux plugin does. A field set to `null` counts as unset.
//
// | field | type | default | what it sets |
// |---|---|---|---|
// | `project` | string (DNS-1123 subdomain) | `default` | Application `spec.project` |
// | `helmRepositories` | map: Flux HelmRepository name -> Argo CD `repoURL` | `{}` | `spec.source.repoURL` of Helm templates using `spec.helm.chartSpec` |
// | `syncPolicy.automated.enabled` | bool | `true` | `false` leaves out `syncPolicy.automated` (manual sync) |
// | `syncPolicy.automated.prune` | bool | `true` | `syncPolicy.automated.prune` |
// | `syncPolicy.automated.selfHeal` | bool | `true` | `syncPolicy.automated.selfHeal` |
// | `syncPolicy.automated.allowEmpty` | bool | `false` | `syncPolicy.automated.allowEmpty` |
// | `syncPolicy.syncOptions` | list of `Key=Value` strings | `[CreateNamespace=true]` | `syncPolicy.syncOptions` (replaces the default) |
// | `syncPolicy.retry.limit` | integer (negative: unlimited) | none | `syncPolicy.retry.limit` |
// | `syncPolicy.retry.backoff.{duration, maxDuration}` | durations (`5s`, `3m`, `1h30m`) | none | `syncPolicy.retry.backoff` |
// | `syncPolicy.retry.backoff.factor` | integer >= 1 | none | `syncPolicy.retry.backoff.factor` |
// | `priority` | integer 0..2147483647 | 100 | used by the host to arbitrate release conflicts |
// | `stopOnConflict` | bool | `false` | used by the host |

import { isDns1123Subdomain } from "./names.js";

/** The Argo CD project when the config names none. */
export const DEFAULT_PROJECT = "default";
/** Sync options when the config gives none: Helm and Flux create the release namespace too. */
export const DEFAULT_SYNC_OPTIONS = ["CreateNamespace=true"];
/** Largest `priority` (the CRD's int32 range). */
const MAX_PRIORITY = 2147483647;

/** The config with every default applied. */
export function defaultConfig() {
  return {
    project: DEFAULT_PROJECT,
    helmRepositories: {},
    automated: { enabled: true, prune: true, selfHeal: true, allowEmpty: false },
    syncOptions: DEFAULT_SYNC_OPTIONS.slice(),
    retry: null,
  };
}

/** A config problem at `path`. */
export class Problems {
  constructor(errors) {
    this.errors = errors;
  }
}

export function problem(path, message) {
  return new Problems([{ path, message }]);
}

/**
 * Parses the config as JSON text; `null` and blank text give the defaults. Returns
 * `{ config }` or `{ errors: [{path, message}] }`.
 */
export function configFromJson(text) {
  if (typeof text !== "string" || text.trim() === "") {
    return { config: defaultConfig() };
  }
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { errors: [{ path: "", message: `not valid JSON: ${e.message}` }] };
  }
  return configFromValue(value);
}

/** Parses the config as a JSON value; `null` (or absent) gives the defaults. */
export function configFromValue(value) {
  const config = defaultConfig();
  if (value === null || value === undefined) {
    return { config };
  }
  const errors = visitObject(value, "", (path, key, v) => {
    switch (key) {
      case "project": {
        const project = stringField(path, v);
        if (project === "") break;
        if (!isDns1123Subdomain(project)) {
          throw problem(path, `${quote(project)} is not a valid project name (DNS-1123 subdomain)`);
        }
        config.project = project;
        break;
      }
      case "helmRepositories":
        config.helmRepositories = repositoriesField(path, v);
        break;
      case "syncPolicy":
        syncPolicyField(path, v, config);
        break;
      // Conflict arbitration is the host's (priority, stopOnConflict): checked, not used.
      case "priority": {
        const priority = intField(path, v);
        if (priority < 0 || priority > MAX_PRIORITY) {
          throw problem(path, `must be between 0 and ${MAX_PRIORITY}`);
        }
        break;
      }
      case "stopOnConflict":
        boolField(path, v);
        break;
      default:
        throw problem(path, "unknown field");
    }
  });
  return errors.length === 0 ? { config } : { errors };
}

/** `helmRepositories: {<HelmRepository name>: <repoURL>}`. */
function repositoriesField(path, value) {
  const repositories = {};
  const errors = visitObject(value, path, (p, key, v) => {
    if (!isDns1123Subdomain(key)) {
      throw problem(p, `${quote(key)} is not a valid HelmRepository name (DNS-1123 subdomain)`);
    }
    const url = stringField(p, v);
    if (url.trim() === "" || /\s/.test(url)) {
      throw problem(p, `${quote(url)} is not a repository URL`);
    }
    repositories[key] = url;
  });
  if (errors.length > 0) throw new Problems(errors);
  return repositories;
}

/** `syncPolicy: {automated, syncOptions, retry}`, written into `config`. */
function syncPolicyField(path, value, config) {
  const errors = visitObject(value, path, (p, key, v) => {
    switch (key) {
      case "automated":
        config.automated = automatedField(p, v);
        break;
      case "syncOptions":
        config.syncOptions = syncOptionsField(p, v);
        break;
      case "retry":
        config.retry = retryField(p, v);
        break;
      default:
        throw problem(p, "unknown field");
    }
  });
  if (errors.length > 0) throw new Problems(errors);
}

function automatedField(path, value) {
  const automated = defaultConfig().automated;
  const errors = visitObject(value, path, (p, key, v) => {
    if (!["enabled", "prune", "selfHeal", "allowEmpty"].includes(key)) {
      throw problem(p, "unknown field");
    }
    automated[key] = boolField(p, v);
  });
  if (errors.length > 0) throw new Problems(errors);
  return automated;
}

/** Argo CD sync options are `Key=Value` strings, e.g. `ServerSideApply=true`. */
function syncOptionsField(path, value) {
  if (!Array.isArray(value)) throw problem(path, "expected a list");
  const errors = [];
  const options = [];
  value.forEach((item, i) => {
    const p = `${path}[${i}]`;
    if (typeof item !== "string") {
      errors.push({ path: p, message: "expected a string" });
    } else if (!/^[A-Za-z][A-Za-z0-9]*=[^\s=]+$/.test(item)) {
      errors.push({ path: p, message: `${quote(item)} is not a sync option (Key=Value)` });
    } else {
      options.push(item);
    }
  });
  if (errors.length > 0) throw new Problems(errors);
  return options;
}

function retryField(path, value) {
  const retry = {};
  const errors = visitObject(value, path, (p, key, v) => {
    switch (key) {
      case "limit":
        retry.limit = intField(p, v);
        break;
      case "backoff":
        retry.backoff = backoffField(p, v);
        break;
      default:
        throw problem(p, "unknown field");
    }
  });
  if (errors.length > 0) throw new Problems(errors);
  return retry;
}

function backoffField(path, value) {
  const backoff = {};
  const errors = visitObject(value, path, (p, key, v) => {
    switch (key) {
      case "duration":
      case "maxDuration":
        backoff[key] = durationField(p, v);
        break;
      case "factor": {
        const factor = intField(p, v);
        if (factor < 1) throw problem(p, "must be at least 1");
        backoff.factor = factor;
        break;
      }
      default:
        throw problem(p, "unknown field");
    }
  });
  if (errors.length > 0) throw new Problems(errors);
  return backoff;
}

/**
 * Calls `field(path, key, value)` for every non-null field of the object `value` at `path`, in
 * key order, and collects the errors; a non-object is one error at `path`.
 */
export function visitObject(value, path, field) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return [{ path, message: "expected an object" }];
  }
  const errors = [];
  for (const key of Object.keys(value).sort(compareStrings)) {
    const v = value[key];
    if (v === null) continue;
    const p = path === "" ? key : `${path}.${key}`;
    try {
      field(p, key, v);
    } catch (e) {
      if (!(e instanceof Problems)) throw e;
      errors.push(...e.errors);
    }
  }
  return errors;
}

export function stringField(path, value) {
  if (typeof value !== "string") throw problem(path, "expected a string");
  return value;
}

export function boolField(path, value) {
  if (typeof value !== "boolean") throw problem(path, "expected a boolean");
  return value;
}

export function intField(path, value) {
  if (typeof value !== "number" || !Number.isSafeInteger(value)) throw problem(path, "expected an integer");
  return value;
}

/** A Go duration as Argo CD parses it: `<number><unit>` parts, units ns, us, µs, ms, s, m, h. */
export function durationField(path, value) {
  const text = stringField(path, value);
  if (!/^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$/.test(text)) {
    throw problem(path, `invalid duration ${quote(text)}`);
  }
  return text;
}

/** Byte-wise string order, as Rust's `BTreeMap` sorts the keys of a JSON object. */
export function compareStrings(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** `s` in double quotes, escaped like Rust's `{:?}` for the common cases. */
export function quote(s) {
  return JSON.stringify(String(s));
}
