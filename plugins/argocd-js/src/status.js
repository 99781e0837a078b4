// `map-status`: a service's observed Argo CD Application to its k0rdent state.
//
// An Application is judged in this order:
// 1. absent: Pending; `metadata.deletionTimestamp` set: Deleting;
// 2. not yet compared against its current spec (`status.sync.comparedTo` missing, or its
//    source's repoURL, chart, path, targetRevision, Helm values or its destination namespace
//    differ from the spec): Provisioning, like a Flux object whose observedGeneration lags;
// 3. a sync operation `Running` or `Terminating`: Provisioning, whatever the health, as a Flux
//    object that is Reconciling (the operation may well be what mends it);
// 4. Failed, with Argo CD's reason, when Argo CD will not get there by itself:
//    - the last sync operation `Failed` or `Error` (`sync Failed: <message>`);
//    - `status.health.status` `Degraded` (`health Degraded: <Kind ns/name>: <message>` of the
//      first degraded resource, when Argo CD keeps resource health in the Application);
//    - an `InvalidSpecError` condition (the destination cluster is not registered, the project
//      forbids the destination), `ComparisonError` (the chart, path or revision cannot be
//      loaded or rendered: as Flux's ArtifactFailed and BuildFailed) or `SyncError` (automated
//      sync refuses to run, e.g. after a failed attempt at the same revision);
// 5. `Synced` and `Healthy`: Deployed, with the chart version Argo CD resolved
//    (`status.sync.revision`) for chart-repository sources;
// 6. otherwise (OutOfSync, Progressing, Missing, Suspended, Unknown): Provisioning.
//
// While in progress (2, 3, 6), a failure that may still resolve says so in the failure message
// as `retrying: ...` (the Flux plugin's convention), as do other `…Error` conditions (e.g.
// `UnknownError`); `…Warning` conditions change nothing. An OutOfSync Application without an
// automated sync policy (a paused ServiceSet, or `syncPolicy.automated.enabled: false`) says
// that it waits for a manual sync. A service with `helmAction: Uninstall` is Deleting while its
// Application exists and Pending once it is gone. The worst state of a service's objects wins:
// Failed > Deleting > Provisioning > Pending > Deployed.

import { APPLICATION, jsonEqual } from "./argocd.js";
import { UNINSTALL } from "./translate.js";

/** Maps `input` (contract `status-input`); returns `{ ok: service-status }` or `{ err }`. */
export function mapStatus(input) {
  try {
    return { ok: serviceStatus(input) };
  } catch (e) {
    if (e instanceof InvalidInput) return { err: { tag: "invalid-input", val: e.message } };
    throw e;
  }
}

class InvalidInput extends Error {}

function serviceStatus(input) {
  const serviceSet = parse(input.serviceSet, "the ServiceSet");
  const templateType = input.template != null ? typeOfTemplate(parse(input.template, "the ServiceTemplate").spec) : null;
  const firstApplication = input.observed.find((o) => o.kind === APPLICATION.kind && o.object != null);
  const serviceType =
    templateType ?? (firstApplication ? typeOfApplication(parse(firstApplication.object, "the Application")) : "helm");
  const services = Array.isArray(serviceSet?.spec?.services) ? serviceSet.spec.services : [];
  const uninstalling = services.some((s) => s?.name === input.service && s?.helmAction === UNINSTALL);
  let health;
  if (uninstalling) {
    health = state(input.observed.some((o) => o.object != null) ? "deleting" : "pending");
  } else {
    health = worst(input.observed.map(observedHealth));
  }
  return {
    state: health.state,
    serviceType,
    version: health.version ?? null,
    failureMessage: health.failureMessage ?? null,
  };
}

/** The service type of a template: by which of `helm`, `kustomize`, `resources` it has. */
function typeOfTemplate(spec) {
  if (spec?.helm != null) return "helm";
  if (spec?.kustomize != null) return "kustomize";
  if (spec?.resources != null) return "resource";
  return null;
}

/** The service type of an Application whose template is gone: Helm when it renders a chart. */
function typeOfApplication(app) {
  const source = app?.spec?.source ?? {};
  return source.chart || source.helm ? "helm" : "kustomize";
}

function state(s, extra = {}) {
  return { state: s, ...extra };
}

/** The health of one observed object; Pending when it does not exist. */
function observedHealth(observed) {
  if (observed.object == null) return state("pending");
  const id = `${observed.kind} "${observed.namespace}/${observed.name}"`;
  if (observed.kind !== APPLICATION.kind) throw new InvalidInput(`${id}: not a kind this plugin creates`);
  return health(parse(observed.object, id));
}

/** Conditions that fail the service: Argo CD will not deploy it until something changes. */
const FAILING_CONDITIONS = ["InvalidSpecError", "ComparisonError", "SyncError"];

/** The health of a live Application (see the module comment). */
function health(app) {
  if (app?.metadata?.deletionTimestamp) return state("deleting");
  const spec = app?.spec ?? {};
  const status = app?.status ?? {};
  const sync = status.sync ?? {};
  const appHealth = status.health ?? {};
  const operation = status.operationState ?? {};
  const conditions = Array.isArray(status.conditions) ? status.conditions : [];
  const condition = (types) => {
    const found = types.map((t) => conditions.find((c) => c?.type === t)).find((c) => c != null);
    return found ? describe(found.type, found.message) : null;
  };

  const operationFailure = ["Failed", "Error"].includes(operation.phase)
    ? describe(`sync ${operation.phase}`, operation.message)
    : null;
  const degraded =
    appHealth.status === "Degraded" ? describe("health Degraded", degradedMessage(app, appHealth, status)) : null;
  const failure = operationFailure ?? degraded ?? condition(FAILING_CONDITIONS);
  const errorTypes = conditions.map((c) => c?.type).filter((t) => typeof t === "string" && t.endsWith("Error"));
  const retrying = failure ?? condition(errorTypes);

  const inProgress = (message) => state("provisioning", message ? { failureMessage: message } : {});
  if (!isCurrent(spec, sync.comparedTo)) {
    return inProgress(retrying && `retrying: ${retrying}`);
  }
  if (["Running", "Terminating"].includes(operation.phase)) {
    const retry = operation.retryCount > 0 && operation.message ? `retrying: ${operation.message}` : null;
    return inProgress(retry ?? (retrying && `retrying: ${retrying}`));
  }
  if (failure) return state("failed", { failureMessage: failure });
  if (sync.status === "Synced" && appHealth.status === "Healthy") {
    const revision = spec.source?.chart && typeof sync.revision === "string" && sync.revision !== "" ? sync.revision : null;
    return state("deployed", revision ? { version: revision } : {});
  }
  if (retrying) return inProgress(`retrying: ${retrying}`);
  if (sync.status === "OutOfSync" && !spec.syncPolicy?.automated) {
    return inProgress("OutOfSync: the Application has no automated sync policy and waits for a manual sync");
  }
  return inProgress(null);
}

/**
 * Whether Argo CD compared the Application against its current spec: `status.sync.comparedTo`
 * holds the spec it compared. Only what this plugin sets is compared, so defaults Argo CD may
 * fill in never make an Application look stale.
 */
function isCurrent(spec, comparedTo) {
  if (comparedTo == null || typeof comparedTo !== "object") return false;
  const source = (s) => ({
    repoURL: s?.repoURL ?? "",
    chart: s?.chart ?? "",
    path: s?.path ?? "",
    targetRevision: s?.targetRevision ?? "",
    values: s?.helm?.valuesObject ?? null,
  });
  return (
    jsonEqual(source(spec.source), source(comparedTo.source)) &&
    (spec.destination?.namespace ?? "") === (comparedTo.destination?.namespace ?? "")
  );
}

/**
 * Why the Application is Degraded: its health message (Argo CD 2), else the first degraded
 * resource's. Argo CD 3 keeps resource health out of the Application by default
 * (`status.resourceHealthSource: appTree`, unless `controller.resource.health.persist` is set),
 * so the message then says where to look.
 */
function degradedMessage(app, appHealth, status) {
  if (typeof appHealth.message === "string" && appHealth.message !== "") return appHealth.message;
  const resources = Array.isArray(status.resources) ? status.resources : [];
  const resource = resources.find((r) => r?.health?.status === "Degraded");
  if (resource) {
    const name = resource.namespace ? `${resource.namespace}/${resource.name}` : resource.name;
    return describe(`${resource.kind} ${name}`, resource.health.message);
  }
  if (status.resourceHealthSource !== "appTree") return "";
  const { namespace, name } = app.metadata ?? {};
  return `see \`argocd app get ${namespace}/${name}\` for the degraded resources (Argo CD keeps their health in its resource tree, not the Application)`;
}

/** `<what>: <message>`, or `<what>` alone. */
function describe(what, message) {
  return typeof message === "string" && message !== "" ? `${what}: ${message}` : what;
}

/** The worst of several healths (Pending when there are none), with the first message and version in that state. */
function worst(healths) {
  const rank = { deployed: 0, pending: 1, provisioning: 2, deleting: 3, failed: 4 };
  const worstState = healths.reduce((w, h) => (rank[h.state] > rank[w] ? h.state : w), healths.length ? healths[0].state : "pending");
  const result = state(worstState);
  for (const h of healths.filter((h) => h.state === worstState)) {
    result.failureMessage ??= h.failureMessage;
    result.version ??= h.version;
  }
  return result;
}

function parse(text, what) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new InvalidInput(`${what} cannot be read: ${e.message}`);
  }
}
