// ksm-adapter plugin for Rancher Fleet: ServiceSet services become Fleet `HelmOp`s (Helm
// services) and `GitRepo`s (Kustomize and Resources services from Git), each targeting the Fleet
// Cluster that stands for the ServiceSet's cluster; their status maps back to the service's
// k0rdent state.
//
// The component's entry point: the `adapter-plugin` world of wit/since_v0.2.0/adapter.wit
// (`ksm:adapter@0.2.0`) as componentize-qjs maps it to JavaScript (see plugins/argocd-js/src/plugin.js).

import host from "ksm:adapter/host@0.2.0";
import { configFromJson } from "./config.js";
import { translate } from "./translate.js";
import { mapStatus } from "./status.js";
import { GIT_REPO, HELM_OP } from "./fleet.js";

/** Plugin version; keep in step with package.json. */
export const VERSION = "0.1.0";
/** The contract version this plugin implements. */
export const CONTRACT_VERSION = "0.2.0";

const kind = ({ group, version, kind, plural, namespaced }) => ({ group, version, kind, plural, namespaced });

export const plugin = {
  metadata() {
    return {
      name: "fleet",
      version: VERSION,
      contractVersion: CONTRACT_VERSION,
      creates: [kind(HELM_OP), kind(GIT_REPO)],
      reads: [],
    };
  },

  validateConfig(config) {
    const result = configFromJson(config);
    if (result.errors) throw result.errors;
  },

  translate(input) {
    const result = translate(input);
    if (result.err) throw result.err;
    for (const note of result.notes) host.log("debug", note);
    return result.ok;
  },

  mapStatus(input) {
    const result = mapStatus(input);
    if (result.err) throw result.err;
    return result.ok;
  },
};
