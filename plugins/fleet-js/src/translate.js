// `translate`: a ServiceSet's services to Fleet objects, one service at a time: a Helm service
// becomes a `HelmOp`, a Kustomize or Resources service from a Git source a `GitRepo`. Each
// targets the one Fleet `Cluster` that stands for the ServiceSet's cluster (see README.md,
// "Which Fleet Cluster"): the plugin never creates Clusters.
//
// What the Argo CD plugin already does for any CD tool (reading the ServiceSet and its templates,
// the typed errors, values, merging helmOptions, names) is imported from it, not repeated.

import { quote } from "../../argocd-js/src/config.js";
import { MAX_LABEL_LEN, serviceObjectName } from "../../argocd-js/src/names.js";
import { parseValues, ValuesError } from "../../argocd-js/src/values.js";
import { canonical } from "../../argocd-js/src/argocd.js";
import {
  HELM_RELEASE_CLAIM,
  INSTALL,
  MAX_RELEASE_NAME_LEN,
  PAUSE_ANNOTATION,
  ServiceError,
  UNINSTALL,
  invalidService,
  invalidValues,
  isObject,
  leafPaths,
  mergeOptions,
  readServiceSet,
  resolveTemplate,
  unsupportedSource,
  utf8Length,
} from "../../argocd-js/src/translate.js";
import { configFromValue } from "./config.js";
import { GIT_REPO, HELM_OP } from "./fleet.js";

/** The key of a values ConfigMap or Secret, as Flux's HelmRelease and Fleet both default it. */
const VALUES_KEY = "values.yaml";

/**
 * Translates every service of the ServiceSet in `input` (contract `translate-input`), in spec
 * order. Returns `{ ok: [service-translation], notes }` or `{ err: translate-error }`; `notes`
 * are worth a debug log line (Helm options Fleet has no equivalent for).
 */
export function translate(input) {
  let serviceSet;
  try {
    serviceSet = readServiceSet(input.serviceSet);
  } catch (e) {
    return { err: { tag: "invalid-input", val: `the ServiceSet cannot be read: ${e.message}` } };
  }
  const metadata = serviceSet.metadata;
  if (!metadata.name || !metadata.namespace) {
    return { err: { tag: "invalid-input", val: "the ServiceSet has no metadata.name or metadata.namespace" } };
  }
  const parsed = configFromValue(serviceSet.spec.provider?.config ?? null);
  if (parsed.errors) return { err: { tag: "invalid-config", val: parsed.errors } };
  const notes = [];
  const context = {
    name: metadata.name,
    namespace: metadata.namespace,
    paused: Object.prototype.hasOwnProperty.call(metadata.annotations ?? {}, PAUSE_ANNOTATION),
    config: parsed.config,
    target: input.target,
    templates: input.templates,
    sources: input.sources ?? [],
    notes,
  };
  const ok = serviceSet.spec.services.map((service) => {
    let outcome;
    let claims = [];
    try {
      const objects = translateService(context, service);
      claims = objects.flatMap((object) => helmClaims(context, object));
      outcome = { tag: "ok", val: objects.map((object) => JSON.stringify(canonical(object))) };
    } catch (e) {
      // One service never fails the others, not even through a bug of this plugin.
      const error = e instanceof ServiceError ? e : invalidService(`service ${quote(service.name)}: internal error: ${e}`);
      outcome = { tag: "err", val: { tag: error.tag, val: error.message } };
    }
    return { service: service.name, outcome, claims };
  });
  return { ok, notes };
}

/**
 * Where the objects of a service go: the Fleet workspace (the objects' namespace: Fleet matches
 * `targets` against the Clusters of their own namespace) and the Fleet Cluster standing for the
 * service's cluster. The management cluster (self-management, or a `deploymentType: Local`
 * template) is Fleet's own `local` Cluster in `fleet-local`.
 */
function placement(context, local) {
  const config = context.config;
  if (local || context.target.tag !== "remote") {
    return { workspace: config.localWorkspace, cluster: config.localCluster };
  }
  const name = context.target.val.name;
  return { workspace: config.workspace ?? context.namespace, cluster: config.clusters[name] ?? name };
}

/** The Fleet object of one service (none when it is being uninstalled), or why there is none. */
function translateService(context, service) {
  const action = service.helmAction ?? INSTALL;
  if (action === UNINSTALL) return [];
  if (action !== INSTALL) {
    throw invalidService(`service ${quote(service.name)}: helmAction ${quote(action)} is neither ${INSTALL} nor ${UNINSTALL}`);
  }
  const template = resolveTemplate(context, service.template);
  const spec = template.spec;
  let kind;
  let objectSpec;
  let where;
  if (spec.helm != null) {
    where = placement(context, false);
    kind = HELM_OP;
    objectSpec = helmOpSpec(context, service, template, where);
  } else if (spec.kustomize != null || spec.resources != null) {
    const field = spec.kustomize != null ? "kustomize" : "resources";
    where = placement(context, spec[field]?.deploymentType === "Local");
    kind = GIT_REPO;
    objectSpec = gitRepoSpec(context, service, template, `spec.${field}`, where);
  } else {
    throw invalidService(`${template.id} has none of spec.helm, spec.kustomize, spec.resources`);
  }
  objectSpec.targets = [{ clusterName: where.cluster }];
  if (context.paused) objectSpec.paused = true;
  if (context.config.correctDrift) objectSpec.correctDrift = { enabled: true };
  return [
    {
      apiVersion: kind.apiVersion,
      kind: kind.kind,
      metadata: { name: serviceObjectName(context.name, service.name, MAX_LABEL_LEN), namespace: where.workspace },
      spec: objectSpec,
    },
  ];
}

/**
 * A HelmOp's spec: the chart of a `chartSpec` template's HelmRepository, the release (name,
 * namespace as `defaultNamespace`, values, valuesFrom) and the Helm options Fleet has.
 */
function helmOpSpec(context, service, template, where) {
  const helm = template.spec.helm;
  if (isObject(helm.chartRef) || isObject(helm.chartSource)) {
    const field = isObject(helm.chartRef) ? "chartRef" : "chartSource";
    throw unsupportedSource(
      `${template.id}: spec.helm.${field} is not supported: a Fleet HelmOp installs a chart from a Helm ` +
        "repository; use spec.helm.chartSpec with a HelmRepository",
    );
  }
  if (!isObject(helm.chartSpec)) {
    throw invalidService(`${template.id} has none of spec.helm.chartSpec, spec.helm.chartRef, spec.helm.chartSource`);
  }
  const name = service.name;
  if (utf8Length(name) > MAX_RELEASE_NAME_LEN) {
    throw invalidService(`service ${quote(name)}: release name ${quote(name)} is longer than ${MAX_RELEASE_NAME_LEN} characters`);
  }
  if (!service.namespace) {
    throw invalidService(`service ${quote(name)}: no namespace is set (a Helm release needs one)`);
  }
  const chart = chartOf(context, template, helm.chartSpec, where);
  let values;
  try {
    values = parseValues(service.values);
  } catch (e) {
    if (e instanceof ValuesError) throw invalidValues(`service ${quote(name)}: values ${e.message}`);
    throw e;
  }
  const valuesFrom = valuesFromOf(context, service, where);
  const options = helmOptions(context, service, template);
  return {
    helm: {
      ...chart.helm,
      releaseName: name,
      values: values ?? undefined,
      valuesFrom: valuesFrom.refs,
      ...options.helm,
    },
    helmSecretName: chart.helmSecretName,
    defaultNamespace: service.namespace,
    createNamespace: options.createNamespace,
    downstreamResources: valuesFrom.copies,
  };
}

/**
 * The chart of a `chartSpec` template: `repo` and `chart` for an HTTP(S) repository, `chart` as
 * the whole `oci://` URL for an OCI one; the version the template asks for (Fleet resolves a
 * range or none and reports what it installed). The URL comes from the provider config's
 * `helmRepositories` (an override) or from the HelmRepository the host hands over, whose
 * credentials Secret becomes `helmSecretName` (Fleet reads it from the HelmOp's namespace).
 */
function chartOf(context, template, chartSpec, where) {
  const ref = isObject(chartSpec.sourceRef) ? chartSpec.sourceRef : {};
  if (ref.kind !== "HelmRepository") {
    throw unsupportedSource(
      `${template.id}: spec.helm.chartSpec.sourceRef kind ${quote(ref.kind ?? "")} is not supported: a Fleet ` +
        "HelmOp installs charts from a HelmRepository",
    );
  }
  if (typeof chartSpec.chart !== "string" || chartSpec.chart === "") {
    throw invalidService(`${template.id} has no spec.helm.chartSpec.chart`);
  }
  const namespace = ref.namespace || template.namespace;
  const id = `HelmRepository ${quote(`${namespace}/${ref.name ?? ""}`)}`;
  const override = context.config.helmRepositories[ref.name];
  const repository = override === undefined ? handedRepository(context, template, namespace, ref.name, id) : { url: override };
  if (repository === undefined) {
    throw unsupportedSource(
      `${template.id}: ${id} was not found, and the provider config's helmRepositories does not list it ` +
        "(Fleet needs the repository URL)",
    );
  }
  let helmSecretName;
  if (override === undefined && repository.secretRef !== undefined) {
    if (namespace !== where.workspace) {
      throw unsupportedSource(
        `${template.id}: ${id} names credentials Secret ${quote(`${namespace}/${repository.secretRef}`)}, which Fleet ` +
          `cannot read from a HelmOp in namespace ${quote(where.workspace)}; copy it there and name the repository in ` +
          "the provider config's helmRepositories, or use a public repository",
      );
    }
    helmSecretName = repository.secretRef;
  }
  const version = typeof chartSpec.version === "string" && chartSpec.version !== "" ? chartSpec.version : undefined;
  const url = repository.url;
  const helm = url.startsWith("oci://")
    ? { chart: `${url.replace(/\/+$/, "")}/${chartSpec.chart}`, version }
    : { repo: url, chart: chartSpec.chart, version };
  return { helm, helmSecretName };
}

/**
 * The URL and credentials Secret of HelmRepository `namespace/name` among the sources the host
 * handed over (contract 0.2.0 `sources`); `undefined` when it is not there or has no URL.
 */
function handedRepository(context, template, namespace, name, id) {
  const found = context.sources.find(
    (s) => s.kind === "HelmRepository" && s.namespace === namespace && s.name === name && s.object != null,
  );
  if (found === undefined) return undefined;
  let spec;
  try {
    spec = JSON.parse(found.object).spec;
  } catch (e) {
    throw unsupportedSource(`${template.id}: ${id} cannot be read: ${e.message}`);
  }
  if (!isObject(spec) || typeof spec.url !== "string" || spec.url === "") return undefined;
  const secretRef = typeof spec.secretRef?.name === "string" && spec.secretRef.name !== "" ? spec.secretRef.name : undefined;
  return { url: spec.url, secretRef };
}

/**
 * kcm's `valuesFrom` (ConfigMaps and Secrets of the ServiceSet's namespace, on the management
 * cluster) as Fleet reads values: from the target cluster. Fleet copies the objects a HelmOp
 * lists in `downstreamResources` from the HelmOp's namespace to the target; `helm.valuesFrom`
 * then reads their `values.yaml` key in the release namespace. A HelmOp placed in another
 * namespace than the ServiceSet's cannot list them: such a service fails, naming the object.
 */
function valuesFromOf(context, service, where) {
  const list = service.valuesFrom ?? [];
  if (!Array.isArray(list)) throw invalidService(`service ${quote(service.name)}: valuesFrom: expected a list`);
  const refs = [];
  const copies = [];
  list.forEach((item, i) => {
    const path = `service ${quote(service.name)}: valuesFrom[${i}]`;
    if (!isObject(item) || !["ConfigMap", "Secret"].includes(item.kind) || typeof item.name !== "string" || item.name === "") {
      throw invalidService(`${path}: expected {kind: ConfigMap or Secret, name}`);
    }
    if (where.workspace !== context.namespace) {
      throw unsupportedSource(
        `${path}: ${item.kind} ${quote(`${context.namespace}/${item.name}`)} cannot reach Fleet: its HelmOp is in ` +
          `namespace ${quote(where.workspace)}, and Fleet copies values only from the HelmOp's own namespace; set ` +
          "the values in values",
      );
    }
    const key = item.kind === "ConfigMap" ? "configMapKeyRef" : "secretKeyRef";
    refs.push({ [key]: { name: item.name, namespace: service.namespace, key: VALUES_KEY } });
    copies.push({ kind: item.kind, name: item.name });
  });
  return { refs: refs.length > 0 ? refs : undefined, copies: copies.length > 0 ? copies : undefined };
}

/** Helm options with a Fleet equivalent: `helmOptions` path -> HelmOp `helm` field. */
const FLEET_HELM_OPTIONS = {
  atomic: "atomic",
  skipSchemaValidation: "skipSchemaValidation",
  waitForJobs: "waitForJobs",
  "installOptions.takeOwnership": "takeOwnership",
  "upgradeOptions.takeOwnership": "takeOwnership",
  "upgradeOptions.force": "force",
};

/**
 * The template's `helmOptions` merged with the service's (the service's set fields override,
 * field by field), as the Flux and Argo CD plugins merge them, read for what a HelmOp has:
 * `timeout` (`timeoutSeconds`), `atomic`, `skipSchemaValidation`, `waitForJobs`,
 * `takeOwnership`, `upgradeOptions.force`, `upgradeOptions.maxHistory`, `dependencyUpdate:
 * false` (`disableDependencyUpdate`) and `createNamespace`. The rest has no Fleet equivalent:
 * noted (a debug log line) and otherwise ignored.
 */
function helmOptions(context, service, template) {
  let merged = {};
  for (const layer of [template.spec.helmOptions, service.helmOptions]) {
    if (layer == null) continue;
    if (!isObject(layer)) throw invalidService(`service ${quote(service.name)}: helmOptions: expected an object`);
    merged = mergeOptions(merged, layer);
  }
  const at = (path) => path.split(".").reduce((v, k) => (isObject(v) ? v[k] : undefined), merged);
  const bad = (path, what) => invalidService(`service ${quote(service.name)}: helmOptions.${path}: expected ${what}`);
  const bool = (path) => {
    const value = at(path);
    if (value === undefined || typeof value === "boolean") return value;
    throw bad(path, "a boolean");
  };
  const helm = {};
  for (const [path, field] of Object.entries(FLEET_HELM_OPTIONS)) {
    const value = bool(path);
    if (value !== undefined) helm[field] = helm[field] || value;
  }
  if (at("timeout") !== undefined) {
    const seconds = durationSeconds(at("timeout"));
    if (seconds === undefined) throw bad("timeout", `a duration (e.g. 5m0s), not ${quote(at("timeout"))}`);
    helm.timeoutSeconds = seconds;
  }
  const maxHistory = at("upgradeOptions.maxHistory");
  if (maxHistory !== undefined) {
    if (!Number.isSafeInteger(maxHistory) || maxHistory < 0) throw bad("upgradeOptions.maxHistory", "a non-negative integer");
    helm.maxHistory = maxHistory;
  }
  if (bool("dependencyUpdate") === false) helm.disableDependencyUpdate = true;
  const createNamespace = bool("installOptions.createNamespace") ?? bool("createNamespace");
  const used = new Set([
    ...Object.keys(FLEET_HELM_OPTIONS),
    "timeout",
    "upgradeOptions.maxHistory",
    "dependencyUpdate",
    "createNamespace",
    "installOptions.createNamespace",
  ]);
  for (const path of leafPaths(merged).filter((p) => !used.has(p))) {
    context.notes.push(`${template.id}, service ${quote(service.name)}: helmOptions.${path} has no Fleet equivalent and is ignored`);
  }
  return { helm, createNamespace };
}

/** A Go duration (`1h2m3.5s`, `90s`, `500ms`) in whole seconds, rounded up; `undefined` if not one. */
function durationSeconds(text) {
  if (typeof text !== "string" || !/^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$/.test(text)) return undefined;
  const unit = { ns: 1e-9, us: 1e-6, "µs": 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
  let seconds = 0;
  for (const [, number, , u] of text.matchAll(/([0-9]+(\.[0-9]+)?)(ns|us|µs|ms|s|m|h)/g)) seconds += Number(number) * unit[u];
  return Math.ceil(seconds);
}

/**
 * A GitRepo's spec from a template source (`spec.kustomize` or `spec.resources`, at `field`): a
 * Git remote (`remoteSourceSpec.git`) or a Flux GitRepository (`localSourceRef`, handed over by
 * the host), its `path`, the service namespace as `targetNamespace`.
 */
function gitRepoSpec(context, service, template, field, where) {
  const spec = template.spec[field.slice("spec.".length)];
  if (!isObject(spec)) throw invalidService(`${template.id}: ${field} is not an object`);
  let git;
  if (isObject(spec.localSourceRef)) {
    git = localGitRepository(context, template, spec.localSourceRef, field);
  } else if (isObject(spec.remoteSourceSpec)) {
    const remote = spec.remoteSourceSpec;
    if (!isObject(remote.git)) {
      const kind = ["oci", "bucket"].find((k) => remote[k] != null) ?? "empty";
      throw unsupportedSource(
        `${template.id}: ${field}.remoteSourceSpec is ${kind === "oci" ? "an" : "a"} ${kind} source; a Fleet ` +
          "GitRepo deploys Git remotes only",
      );
    }
    git = remote.git;
  } else {
    throw invalidService(`${template.id}: ${field} has neither localSourceRef nor remoteSourceSpec`);
  }
  if (typeof git.url !== "string" || git.url === "") throw invalidService(`${template.id}: ${field}: the Git source has no url`);
  if (isObject(git.secretRef)) {
    throw unsupportedSource(
      `${template.id}: ${field}: the Git source's credentials (Secret ${quote(git.secretRef.name ?? "")}) are in Flux's ` +
        "format; Fleet reads Git credentials from a Secret of its own (GitRepo clientSecretName): not supported",
    );
  }
  const path = String(spec.path ?? "").replace(/^(\.\/)+/, "").replace(/\/+$/, "");
  return {
    repo: git.url,
    ...gitRevision(template, field, isObject(git.ref) ? git.ref : {}),
    paths: path === "" || path === "." ? undefined : [path],
    targetNamespace: service.namespace || undefined,
  };
}

/** The Git remote of a template's `localSourceRef`: a Flux GitRepository the host handed over. */
function localGitRepository(context, template, ref, field) {
  if (ref.kind !== "GitRepository") {
    throw unsupportedSource(
      `${template.id}: ${field}.localSourceRef names a ${ref.kind || "source"} (${quote(ref.name ?? "")}); a Fleet ` +
        "GitRepo deploys from a Git repository only",
    );
  }
  const namespace = ref.namespace || template.namespace;
  const found = context.sources.find(
    (s) => s.kind === "GitRepository" && s.namespace === namespace && s.name === ref.name && s.object != null,
  );
  const id = `GitRepository ${quote(`${namespace}/${ref.name ?? ""}`)}`;
  if (found === undefined) throw unsupportedSource(`${template.id}: ${field}.localSourceRef: ${id} was not found`);
  let spec;
  try {
    spec = JSON.parse(found.object).spec;
  } catch (e) {
    throw unsupportedSource(`${template.id}: ${id} cannot be read: ${e.message}`);
  }
  return isObject(spec) ? spec : {};
}

/**
 * The revision Fleet checks out, from a Flux GitRepository `ref`: `commit` or `tag` as
 * `revision`, `branch` as `branch`; none: Fleet's default branch. Flux's `semver` and `name`
 * (a refspec) have no Fleet equivalent.
 */
function gitRevision(template, field, ref) {
  const set = (k) => typeof ref[k] === "string" && ref[k] !== "";
  for (const k of ["semver", "name"]) {
    if (set(k)) {
      throw unsupportedSource(`${template.id}: ${field}: Git ref.${k} ${quote(ref[k])} has no Fleet equivalent; use a commit, tag or branch`);
    }
  }
  if (set("commit")) return { revision: ref.commit };
  if (set("tag")) return { revision: ref.tag };
  if (set("branch")) return { branch: ref.branch };
  return {};
}

/**
 * The Helm release a HelmOp installs on its target: the same claim the Flux and Argo CD plugins
 * make, so the host arbitrates between ServiceSets of any of them asking for one release.
 */
function helmClaims(context, object) {
  if (object.kind !== HELM_OP.kind) return [];
  const remote = context.target.tag === "remote";
  const target = remote ? `${context.namespace}/${context.target.val.name}` : "management";
  return [{ target, kind: HELM_RELEASE_CLAIM, namespace: object.spec.defaultNamespace, name: object.spec.helm.releaseName }];
}
