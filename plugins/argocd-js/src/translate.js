// `translate`: a ServiceSet's services to Argo CD Applications, one service at a time.
//
// Every function here works on plain JSON values and returns the contract's shapes as
// componentize-qjs maps them to JavaScript (records with camelCase fields, variants as
// `{tag, val}`), so plugin.js only passes them through.

import { compareStrings, configFromValue, quote } from "./config.js";
import { MAX_LABEL_LEN, serviceObjectName } from "./names.js";
import { parseValues, ValuesError } from "./values.js";
import { APPLICATION, canonical } from "./argocd.js";

/** Annotation that pauses reconciliation of a ServiceSet's CD-tool objects (any value). */
export const PAUSE_ANNOTATION = "k0rdent.mirantis.com/service-set-paused";
/** `helmAction` of a service whose objects are to be removed. */
export const UNINSTALL = "Uninstall";
/** `helmAction` of a service to deploy (the default). */
export const INSTALL = "Install";
/** What a claim on a Helm release is called (the same as the Flux plugin's). */
export const HELM_RELEASE_CLAIM = "helm-release";
/** Longest Helm release name. */
export const MAX_RELEASE_NAME_LEN = 53;
/** Argo CD's name for the cluster it runs in. */
export const IN_CLUSTER_SERVER = "https://kubernetes.default.svc";

/** A service's typed error (contract `service-error`). */
export class ServiceError extends Error {
  constructor(tag, message) {
    super(message);
    this.tag = tag;
  }
}

export const templateNotFound = (m) => new ServiceError("template-not-found", m);
export const templateNotReady = (m) => new ServiceError("template-not-ready", m);
export const unsupportedSource = (m) => new ServiceError("unsupported-source", m);
export const invalidValues = (m) => new ServiceError("invalid-values", m);
export const invalidService = (m) => new ServiceError("invalid-service", m);

/**
 * Translates every service of the ServiceSet in `input` (contract `translate-input`), in spec
 * order. Returns `{ ok: [service-translation] }` or `{ err: translate-error }`; `notes` lists
 * things worth a debug log line (e.g. Helm options Argo CD has no equivalent for).
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
  if (parsed.errors) {
    return { err: { tag: "invalid-config", val: parsed.errors } };
  }
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

/** Reads the ServiceSet JSON text; the checks Rust's serde does for the Flux plugin. */
export function readServiceSet(text) {
  const object = JSON.parse(text);
  if (!isObject(object)) throw new Error("expected an object");
  if (!isObject(object.spec)) throw new Error("missing field `spec`");
  const metadata = isObject(object.metadata) ? object.metadata : {};
  const spec = object.spec;
  const services = spec.services ?? [];
  if (!Array.isArray(services)) throw new Error("spec.services: expected a list");
  services.forEach((s, i) => {
    if (!isObject(s)) throw new Error(`spec.services[${i}]: expected an object`);
    for (const field of ["name", "template"]) {
      if (typeof s[field] !== "string") throw new Error(`spec.services[${i}]: missing field \`${field}\``);
    }
  });
  return { metadata, spec: { ...spec, services } };
}

/** The Application of one service (none when it is being uninstalled), or why there is none. */
function translateService(context, service) {
  const action = service.helmAction ?? INSTALL;
  if (action === UNINSTALL) return [];
  if (action !== INSTALL) {
    throw invalidService(
      `service ${quote(service.name)}: helmAction ${quote(action)} is neither ${INSTALL} nor ${UNINSTALL}`,
    );
  }
  const template = resolveTemplate(context, service.template);
  const spec = template.spec;
  let source;
  let createNamespace = true;
  if (spec.helm != null) {
    ({ source, createNamespace } = helmSource(context, service, template));
  } else if (spec.kustomize != null || spec.resources != null) {
    const field = spec.kustomize != null ? "kustomize" : "resources";
    source = gitSource(template, spec[field], `spec.${field}`);
  } else {
    throw invalidService(`${template.id} has none of spec.helm, spec.kustomize, spec.resources`);
  }
  const destination = { namespace: service.namespace || undefined };
  if (context.target.tag === "remote") {
    destination.name = context.target.val.name;
  } else {
    destination.server = IN_CLUSTER_SERVER;
  }
  return [
    {
      apiVersion: APPLICATION.apiVersion,
      kind: APPLICATION.kind,
      metadata: {
        name: serviceObjectName(context.name, service.name, MAX_LABEL_LEN),
        namespace: context.namespace,
      },
      spec: {
        project: context.config.project,
        source,
        destination,
        syncPolicy: nonEmpty(syncPolicy(context, createNamespace)),
      },
    },
  ];
}

/** Finds, reads and checks the ServiceTemplate `name`, as the Flux plugin does. */
export function resolveTemplate(context, name) {
  const id = `ServiceTemplate "${context.namespace}/${name}"`;
  const found = context.templates.find((t) => t.name === name);
  const text = found?.object;
  if (text == null) throw templateNotFound(`${id} not found`);
  let object;
  try {
    object = JSON.parse(text);
    if (!isObject(object)) throw new Error("expected an object");
    if (!isObject(object.spec)) throw new Error("missing field `spec`");
  } catch (e) {
    throw invalidService(`${id} cannot be read: ${e.message}`);
  }
  const status = isObject(object.status) ? object.status : {};
  if (status.valid !== true) {
    const error = typeof status.validationError === "string" ? status.validationError : "";
    throw templateNotReady(error !== "" ? `${id} is not valid: ${error}` : `${id} has not been validated yet`);
  }
  return { id, namespace: object.metadata?.namespace || context.namespace, spec: object.spec, status };
}

/**
 * The Argo CD source of a Helm template: a chart of a Helm repository (`chartSpec` whose
 * HelmRepository the provider config maps to a URL), or a chart in a Git repository
 * (`chartSource` with a Git remote). Release name, values and `skipCRDs` go to `source.helm`.
 */
function helmSource(context, service, template) {
  const helm = template.spec.helm;
  let source;
  if (isObject(helm.chartSpec)) {
    source = chartRepositorySource(context, template, helm.chartSpec);
  } else if (isObject(helm.chartSource)) {
    source = gitSource(template, helm.chartSource, "spec.helm.chartSource");
  } else if (isObject(helm.chartRef)) {
    throw unsupportedSource(
      `${template.id}: spec.helm.chartRef names Flux ${helm.chartRef.kind || "object"} ${quote(helm.chartRef.name)}, ` +
        "which Argo CD cannot read; use spec.helm.chartSpec with a HelmRepository listed in the provider " +
        "config's helmRepositories, or spec.helm.chartSource with a Git remote",
    );
  } else {
    throw invalidService(`${template.id} has none of spec.helm.chartSpec, spec.helm.chartRef, spec.helm.chartSource`);
  }
  const name = service.name;
  if (utf8Length(name) > MAX_RELEASE_NAME_LEN) {
    throw invalidService(`service ${quote(name)}: release name ${quote(name)} is longer than ${MAX_RELEASE_NAME_LEN} characters`);
  }
  if (!service.namespace) {
    throw invalidService(`service ${quote(name)}: no namespace is set (a Helm release needs one)`);
  }
  if (Array.isArray(service.valuesFrom) && service.valuesFrom.length > 0) {
    throw invalidService(
      `service ${quote(name)}: valuesFrom ${quote(service.valuesFrom[0]?.name ?? "")} cannot be used: an Argo CD ` +
        "Application takes Helm values only from itself and from its repository; set them in values",
    );
  }
  let values;
  try {
    values = parseValues(service.values);
  } catch (e) {
    if (e instanceof ValuesError) throw invalidValues(`service ${quote(name)}: values ${e.message}`);
    throw e;
  }
  const options = helmOptions(context, service, template);
  source.helm = { releaseName: name, valuesObject: values ?? undefined, skipCrds: options.skipCrds || undefined };
  return { source, createNamespace: options.createNamespace ?? true };
}

/**
 * The template's `helmOptions` merged with the service's (the service's set fields override,
 * field by field; `null` and `""` count as unset), as the Flux plugin merges them, and read for
 * what Argo CD can express: `skipCRDs` (`helm.skipCrds`) and `createNamespace` /
 * `installOptions.createNamespace` (`false` drops `CreateNamespace=true` from the sync
 * options). Argo CD renders charts with `helm template` and applies the result itself (no Helm
 * release storage), so wait, timeout, atomic, hooks, history and upgrade options have no
 * equivalent: they are noted (a debug log line) and otherwise ignored.
 */
function helmOptions(context, service, template) {
  let merged = {};
  for (const layer of [template.spec.helmOptions, service.helmOptions]) {
    if (layer == null) continue;
    if (!isObject(layer)) throw invalidService(`service ${quote(service.name)}: helmOptions: expected an object`);
    merged = mergeOptions(merged, layer);
  }
  const bool = (value, path) => {
    if (value === undefined || typeof value === "boolean") return value;
    throw invalidService(`service ${quote(service.name)}: helmOptions: ${path}: expected a boolean`);
  };
  const skipCrds = bool(merged.skipCRDs, "skipCRDs");
  const install = isObject(merged.installOptions) ? merged.installOptions : {};
  const createNamespace =
    bool(install.createNamespace, "installOptions.createNamespace") ?? bool(merged.createNamespace, "createNamespace");
  const used = new Set(["skipCRDs", "createNamespace", "installOptions.createNamespace"]);
  for (const path of leafPaths(merged).filter((p) => !used.has(p))) {
    context.notes.push(`${template.id}, service ${quote(service.name)}: helmOptions.${path} has no Argo CD equivalent and is ignored`);
  }
  return { skipCrds, createNamespace };
}

/** `base` with `overrides` merged in, field by field (`null` and `""` are unset). */
export function mergeOptions(base, overrides) {
  const unset = (v) => v === null || v === undefined || v === "";
  if (!isObject(overrides)) return unset(overrides) ? base : overrides;
  const out = isObject(base) ? { ...base } : {};
  for (const [key, value] of Object.entries(overrides)) {
    if (!unset(value)) out[key] = mergeOptions(out[key], value);
  }
  return out;
}

/** The dotted paths of the non-object values in `value`, sorted. */
export function leafPaths(value, prefix = "") {
  return Object.keys(value)
    .sort(compareStrings)
    .flatMap((key) => {
      const path = prefix === "" ? key : `${prefix}.${key}`;
      return isObject(value[key]) ? leafPaths(value[key], path) : [path];
    });
}

/**
 * The source of a `chartSpec` template: its HelmRepository's URL, from the provider config's
 * `helmRepositories` when it lists the repository (an override), else from the HelmRepository
 * itself, which the host hands over (contract 0.2.0 `sources`).
 */
function chartRepositorySource(context, template, chartSpec) {
  const ref = isObject(chartSpec.sourceRef) ? chartSpec.sourceRef : {};
  if (ref.kind !== "HelmRepository") {
    throw unsupportedSource(
      `${template.id}: spec.helm.chartSpec.sourceRef kind ${quote(ref.kind ?? "")} is not supported: Argo CD ` +
        "charts come from a HelmRepository or, with spec.helm.chartSource, from a Git remote",
    );
  }
  const repoURL = context.config.helmRepositories[ref.name] ?? repositoryURL(context, template, ref);
  if (repoURL === undefined) {
    throw unsupportedSource(
      `${template.id}: HelmRepository ${quote(`${ref.namespace || template.namespace}/${ref.name ?? ""}`)} was not ` +
        "found, and the provider config's helmRepositories does not list it (Argo CD needs the repository URL)",
    );
  }
  if (typeof chartSpec.chart !== "string" || chartSpec.chart === "") {
    throw invalidService(`${template.id} has no spec.helm.chartSpec.chart`);
  }
  const version = typeof chartSpec.version === "string" && chartSpec.version !== "" ? chartSpec.version : "*";
  return { repoURL, chart: chartSpec.chart, targetRevision: version };
}

/**
 * The URL of the HelmRepository `ref` names (in the template's namespace unless it names one),
 * among the sources the host handed over, as Argo CD takes it: an OCI registry without its
 * `oci://` scheme. `undefined` when it is not among them or has no URL.
 */
function repositoryURL(context, template, ref) {
  const namespace = ref.namespace || template.namespace;
  const found = context.sources.find(
    (s) => s.kind === "HelmRepository" && s.namespace === namespace && s.name === ref.name && s.object != null,
  );
  if (found === undefined) return undefined;
  let spec;
  try {
    spec = JSON.parse(found.object).spec;
  } catch (e) {
    throw unsupportedSource(`${template.id}: HelmRepository ${quote(`${namespace}/${ref.name}`)} cannot be read: ${e.message}`);
  }
  const url = isObject(spec) && typeof spec.url === "string" && spec.url !== "" ? spec.url : undefined;
  return spec?.type === "oci" && url?.startsWith("oci://") ? url.slice("oci://".length) : url;
}

/**
 * The Argo CD source of a template whose source (`spec.kustomize`, `spec.resources` or
 * `spec.helm.chartSource`, at `field`) is a Git remote: `repoURL`, `path` and the revision the
 * Flux GitRepository would check out (`ref.commit`, `name`, `semver`, `tag`, `branch`, in
 * Flux's order of precedence; none: `HEAD`, the repository's default branch).
 */
function gitSource(template, spec, field) {
  if (!isObject(spec)) throw invalidService(`${template.id}: ${field} is not an object`);
  const local = spec.localSourceRef;
  if (isObject(local)) {
    throw unsupportedSource(
      `${template.id}: ${field}.localSourceRef names a ${local.kind || "source"} (${quote(local.name ?? "")}); ` +
        `Argo CD needs a Git repository URL and revision: use ${field}.remoteSourceSpec.git`,
    );
  }
  const remote = isObject(spec.remoteSourceSpec) ? spec.remoteSourceSpec : null;
  if (remote === null) {
    throw invalidService(`${template.id}: ${field} has neither localSourceRef nor remoteSourceSpec`);
  }
  if (!isObject(remote.git)) {
    const kind = ["oci", "bucket"].find((k) => remote[k] != null) ?? "empty";
    throw unsupportedSource(
      `${template.id}: ${field}.remoteSourceSpec is ${kind === "oci" ? "an" : "a"} ${kind} source; ` +
        "the Argo CD plugin deploys Git remotes only",
    );
  }
  const git = remote.git;
  if (typeof git.url !== "string" || git.url === "") {
    throw invalidService(`${template.id}: ${field}.remoteSourceSpec.git has no url`);
  }
  const ref = isObject(git.ref) ? git.ref : {};
  const revision = ["commit", "name", "semver", "tag", "branch"].map((k) => ref[k]).find((v) => typeof v === "string" && v !== "");
  return { repoURL: git.url, path: argoPath(spec.path), targetRevision: revision ?? "HEAD" };
}

/** A Flux path (`./deploy/`, empty for the root) as Argo CD writes it (`deploy`, `.`). */
function argoPath(path) {
  const trimmed = String(path ?? "")
    .replace(/^(\.\/)+/, "")
    .replace(/\/+$/, "");
  return trimmed === "" || trimmed === "." ? "." : trimmed;
}

/**
 * `spec.syncPolicy`: automated unless the config disables it or the ServiceSet is paused; the
 * config's sync options, less `CreateNamespace=true` when the Helm options say not to.
 */
function syncPolicy(context, createNamespace) {
  const config = context.config;
  const policy = {};
  if (config.automated.enabled && !context.paused) {
    policy.automated = {
      prune: config.automated.prune,
      selfHeal: config.automated.selfHeal,
      allowEmpty: config.automated.allowEmpty || undefined,
    };
  }
  const options = config.syncOptions.filter((o) => createNamespace || o !== "CreateNamespace=true");
  if (options.length > 0) policy.syncOptions = options;
  if (config.retry !== null) policy.retry = config.retry;
  return policy;
}

/**
 * The Helm release an Application of a Helm service installs on the target: the same claim the
 * Flux plugin makes for its HelmRelease, so the host arbitrates between Flux and Argo CD
 * ServiceSets deploying the same release.
 */
function helmClaims(context, object) {
  const helm = object.spec.source.helm;
  if (!helm) return [];
  const target =
    context.target.tag === "remote" ? `${context.namespace}/${context.target.val.name}` : "management";
  return [{ target, kind: HELM_RELEASE_CLAIM, namespace: object.spec.destination.namespace, name: helm.releaseName }];
}

/** `value` unless it is an empty object. */
export function nonEmpty(value) {
  return Object.keys(value).length > 0 ? value : undefined;
}

export function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

export function utf8Length(s) {
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return n;
}
