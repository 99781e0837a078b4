// ksm-adapter plugin for Argo CD: ServiceSet services become Argo CD Applications
// (`argoproj.io/v1alpha1`), and an Application's sync and health status maps back to the
// service's k0rdent state.
//
// This file is the component's entry point: it implements the `adapter-plugin` world of
// wit/since_v0.2.0/adapter.wit (`ksm:adapter@0.2.0`) as componentize-qjs maps it to JavaScript. The
// exported interface `ksm:adapter/plugin@0.2.0` is the `plugin` export; records have camelCase
// fields, variants are `{tag, val}`, enums are strings, `option<T>` is `T` or `null`, and a
// function returning `result<T, E>` returns `T` or throws `E`.

import host from "ksm:adapter/host@0.2.0";
import { configFromJson } from "./config.js";
import { translate } from "./translate.js";
import { mapStatus } from "./status.js";
import { APPLICATION } from "./argocd.js";

/** Plugin version; keep in step with package.json. */
export const VERSION = "0.1.0";
/** The contract version this plugin implements. */
export const CONTRACT_VERSION = "0.2.0";

export const plugin = {
  metadata() {
    const { group, version, kind, plural, namespaced } = APPLICATION;
    return {
      name: "argocd",
      version: VERSION,
      contractVersion: CONTRACT_VERSION,
      creates: [{ group, version, kind, plural, namespaced }],
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
