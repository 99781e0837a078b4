// The Fleet provider config: a ServiceSet's `spec.provider.config` (merged over the
// AdapterPlugin's `spec.config` by the host). Every problem is reported at its dotted path, as
// the Argo CD plugin's config (whose field checks this module reuses).
//
// | field | type | default | what it sets |
// |---|---|---|---|
// | `workspace` | namespace (DNS-1123 label) | the ServiceSet's namespace | where a remote cluster's HelmOps and GitRepos go: Fleet matches `targets` against the Clusters of the object's own namespace |
// | `clusters` | map: ClusterDeployment name -> Fleet Cluster name | `{}` (the same name) | `targets[0].clusterName` |
// | `localWorkspace` | namespace | `fleet-local` | where self-management's objects go |
// | `localCluster` | Fleet Cluster name | `local` | their `targets[0].clusterName` |
// | `helmRepositories` | map: Flux HelmRepository name -> chart repository URL | `{}` | overrides the URL of that HelmRepository |
// | `correctDrift` | bool | `false` | `spec.correctDrift.enabled` |
// | `priority` | integer 0..2147483647 | 100 | used by the host to arbitrate release conflicts |
// | `stopOnConflict` | bool | `false` | used by the host |

import { isDns1123Label, isDns1123Subdomain } from "../../argocd-js/src/names.js";
import {
  Problems,
  boolField,
  intField,
  problem,
  quote,
  stringField,
  visitObject,
} from "../../argocd-js/src/config.js";
import { LOCAL_CLUSTER, LOCAL_WORKSPACE } from "./fleet.js";

/** Largest `priority` (the CRD's int32 range). */
const MAX_PRIORITY = 2147483647;

/** The config with every default applied (`workspace: null`: the ServiceSet's namespace). */
export function defaultConfig() {
  return {
    workspace: null,
    clusters: {},
    localWorkspace: LOCAL_WORKSPACE,
    localCluster: LOCAL_CLUSTER,
    helmRepositories: {},
    correctDrift: false,
  };
}

/** Parses the config as JSON text; `null` and blank text give the defaults. */
export function configFromJson(text) {
  if (typeof text !== "string" || text.trim() === "") return { config: defaultConfig() };
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { errors: [{ path: "", message: `not valid JSON: ${e.message}` }] };
  }
  return configFromValue(value);
}

/** Parses the config as a JSON value; returns `{ config }` or `{ errors: [{path, message}] }`. */
export function configFromValue(value) {
  const config = defaultConfig();
  if (value === null || value === undefined) return { config };
  const errors = visitObject(value, "", (path, key, v) => {
    switch (key) {
      case "workspace":
      case "localWorkspace":
        config[key] = namespaceField(path, v);
        break;
      case "localCluster":
        config.localCluster = clusterNameField(path, v);
        break;
      case "clusters":
        config.clusters = mapField(path, v, "ClusterDeployment", clusterNameField);
        break;
      case "helmRepositories":
        config.helmRepositories = mapField(path, v, "HelmRepository", urlField);
        break;
      case "correctDrift":
        config.correctDrift = boolField(path, v);
        break;
      // Conflict arbitration is the host's (priority, stopOnConflict): checked, not used.
      case "priority": {
        const priority = intField(path, v);
        if (priority < 0 || priority > MAX_PRIORITY) throw problem(path, `must be between 0 and ${MAX_PRIORITY}`);
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

function namespaceField(path, value) {
  const namespace = stringField(path, value);
  if (!isDns1123Label(namespace)) throw problem(path, `${quote(namespace)} is not a valid namespace (DNS-1123 label)`);
  return namespace;
}

/** A Fleet Cluster's name: a Kubernetes object name (DNS-1123 subdomain). */
function clusterNameField(path, value) {
  const name = stringField(path, value);
  if (!isDns1123Subdomain(name)) throw problem(path, `${quote(name)} is not a valid Fleet Cluster name (DNS-1123 subdomain)`);
  return name;
}

function urlField(path, value) {
  const url = stringField(path, value);
  if (url.trim() === "" || /\s/.test(url)) throw problem(path, `${quote(url)} is not a repository URL`);
  return url;
}

/** `{<name of a what>: <value>}`, each key a DNS-1123 subdomain, each value checked by `field`. */
function mapField(path, value, what, field) {
  const map = {};
  const errors = visitObject(value, path, (p, key, v) => {
    if (!isDns1123Subdomain(key)) throw problem(p, `${quote(key)} is not a valid ${what} name (DNS-1123 subdomain)`);
    map[key] = field(p, v);
  });
  if (errors.length > 0) throw new Problems(errors);
  return map;
}
