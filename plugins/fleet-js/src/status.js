// `map-status`: a service's observed HelmOp or GitRepo to its k0rdent state.
//
// Fleet turns a HelmOp or GitRepo into a Bundle, and the Bundle into one BundleDeployment per
// target cluster, in that cluster's namespace; the agent on the cluster deploys it and reports
// back. The BundleDeployment is linked to the HelmOp by labels, across namespaces, so the host's
// `reads` (objects owned by the service's own, in their namespace) cannot hand it over; Fleet
// copies its state into the HelmOp's status instead: `status.summary` counts the
// BundleDeployments in each state and `summary.nonReadyResources[]` holds, per cluster that is
// not ready (`name: <Cluster namespace>/<Cluster name>`), the BundleDeployment's state, message
// and non-ready or modified resources. Every object of this plugin targets exactly one Fleet
// Cluster, so these are that cluster's. An object is judged in this order:
//
// 1. absent: Pending; `metadata.deletionTimestamp` set: Deleting;
// 2. Failed, with Fleet's message, when Fleet will not get there by itself: a BundleDeployment
//    `ErrApplied` (the agent's Helm or apply error, e.g. a chart that fails to install), or a
//    condition `Stalled=True` or `Accepted=False` (the object itself is refused, e.g. a chart or
//    version that cannot be resolved);
// 3. no BundleDeployment wanted yet (`summary.desiredReady` 0): Provisioning, saying no cluster
//    is targeted yet (is the Fleet Cluster registered?);
// 4. every wanted BundleDeployment Ready and none in another state: Deployed, with the chart
//    version Fleet installed (`status.version`, a HelmOp's);
// 5. otherwise (WaitApplied, Modified, OutOfSync, Pending, NotReady): Provisioning, with the
//    cluster's state and message.
//
// A Deployed service's `deployed-hash` is what Fleet records as deployed, times left out: for a
// HelmOp the chart (repository, name, the version Fleet installed), release, namespace, values
// and valuesFrom; for a GitRepo the repository, the commit Fleet deployed (`status.commit`) and
// its paths. A service with `helmAction: Uninstall` is Deleting while its object exists and
// Pending once it is gone (the host reports Deleted).

import { quote } from "../../argocd-js/src/config.js";
import { canonical } from "../../argocd-js/src/argocd.js";
import { UNINSTALL, isObject } from "../../argocd-js/src/translate.js";
import { GIT_REPO, HELM_OP } from "./fleet.js";

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
  const observed = input.observed.map((o) => {
    const id = `${o.kind} ${quote(`${o.namespace}/${o.name}`)}`;
    if (o.object == null) return { id, kind: o.kind, object: null };
    if (![HELM_OP.kind, GIT_REPO.kind].includes(o.kind)) throw new InvalidInput(`${id}: not a kind this plugin creates`);
    return { id, kind: o.kind, object: parse(o.object, id) };
  });
  const templateType = input.template != null ? typeOfTemplate(parse(input.template, "the ServiceTemplate").spec) : null;
  const first = observed.find((o) => o.object !== null);
  const serviceType = templateType ?? (first?.kind === GIT_REPO.kind ? "kustomize" : "helm");
  const services = Array.isArray(serviceSet?.spec?.services) ? serviceSet.spec.services : [];
  const uninstalling = services.some((s) => s?.name === input.service && s?.helmAction === UNINSTALL);
  let health;
  if (uninstalling) {
    health = first ? state("deleting", { failureMessage: `${first.id} is being removed (helmAction: Uninstall)` }) : state("pending");
  } else if (observed.length === 0) {
    health = state("pending");
  } else if (observed.length > 1) {
    throw new InvalidInput(`expected the service's one HelmOp or GitRepo, got ${observed.length} objects`);
  } else {
    health = objectHealth(observed[0]);
  }
  return {
    state: health.state,
    serviceType,
    version: health.version ?? null,
    failureMessage: health.failureMessage ?? null,
    deployedHash: health.deployedHash ?? null,
  };
}

/** The service type of a template: by which of `helm`, `kustomize`, `resources` it has. */
function typeOfTemplate(spec) {
  if (spec?.helm != null) return "helm";
  if (spec?.kustomize != null) return "kustomize";
  if (spec?.resources != null) return "resource";
  return null;
}

function state(s, extra = {}) {
  return { state: s, ...extra };
}

/** The health of the service's HelmOp or GitRepo (see the module comment). */
function objectHealth({ id, kind, object }) {
  if (object === null) return state("pending", { failureMessage: `${id} does not exist yet` });
  if (object.metadata?.deletionTimestamp) return state("deleting");
  const spec = isObject(object.spec) ? object.spec : {};
  const status = isObject(object.status) ? object.status : {};
  const summary = isObject(status.summary) ? status.summary : {};
  const count = (field) => (Number.isSafeInteger(summary[field]) ? summary[field] : 0);
  const cluster = `${object.metadata?.namespace ?? ""}/${spec.targets?.[0]?.clusterName ?? ""}`;
  const entries = Array.isArray(summary.nonReadyResources) ? summary.nonReadyResources.filter(isObject) : [];
  const entry = entries.find((e) => e.name === cluster) ?? entries[0];

  if (count("errApplied") > 0) {
    const failed = entries.find((e) => e.bundleState === "ErrApplied") ?? entry;
    return state("failed", { failureMessage: clusterMessage("ErrApplied", failed, cluster) });
  }
  const conditions = Array.isArray(status.conditions) ? status.conditions.filter(isObject) : [];
  const refused = conditions.find(
    (c) => (c.type === "Stalled" && c.status === "True") || (c.type === "Accepted" && c.status === "False"),
  );
  if (refused) return state("failed", { failureMessage: describe(`${id} ${refused.type}=${refused.status}`, refused.message) });
  if (count("desiredReady") === 0) {
    return state("provisioning", {
      failureMessage: `Fleet has not deployed ${id} to any cluster yet (is Fleet Cluster ${quote(cluster)} registered?)`,
    });
  }
  const waiting = ["waitApplied", "modified", "outOfSync", "pending", "notReady"].filter((f) => count(f) > 0);
  if (waiting.length === 0 && count("ready") >= count("desiredReady")) {
    const version = kind === HELM_OP.kind && typeof status.version === "string" && status.version !== "" ? status.version : undefined;
    return state("deployed", { version, deployedHash: deployedHash(kind, spec, status) });
  }
  const fleetState = entry?.bundleState || upperFirst(waiting[0] ?? "notReady");
  return state("provisioning", { failureMessage: clusterMessage(fleetState, entry, cluster) });
}

/**
 * `<state> on Fleet Cluster <ns/name>: <message>` from a BundleDeployment's entry in the summary:
 * its message, else its first non-ready resource's, else its first modified resource.
 */
function clusterMessage(fleetState, entry, cluster) {
  const where = `${fleetState} on Fleet Cluster ${quote(entry?.name || cluster)}`;
  if (!entry) return where;
  if (typeof entry.message === "string" && entry.message !== "") return `${where}: ${entry.message}`;
  const resource = (Array.isArray(entry.nonReadyStatus) ? entry.nonReadyStatus : []).find(isObject);
  if (resource) {
    const messages = Array.isArray(resource.summary?.message) ? resource.summary.message.join("; ") : "";
    return describe(`${where}: ${resourceName(resource)} ${resource.summary?.state ?? "not ready"}`, messages);
  }
  const modified = (Array.isArray(entry.modifiedStatus) ? entry.modifiedStatus : []).find(isObject);
  if (modified) {
    const how = modified.missing ? "missing" : modified.delete ? "to be deleted" : "modified";
    return `${where}: ${resourceName(modified)} ${how}`;
  }
  return where;
}

function resourceName(r) {
  const name = r.namespace ? `${r.namespace}/${r.name}` : r.name;
  return `${r.kind ?? "object"} ${name ?? ""}`.trim();
}

/** What Fleet records as deployed, as canonical JSON (the host hashes it). */
function deployedHash(kind, spec, status) {
  if (kind === HELM_OP.kind) {
    const helm = isObject(spec.helm) ? spec.helm : {};
    return JSON.stringify(
      canonical({
        repo: helm.repo ?? "",
        chart: helm.chart ?? "",
        version: status.version || helm.version || "",
        releaseName: helm.releaseName ?? "",
        namespace: spec.defaultNamespace ?? "",
        values: helm.values ?? null,
        valuesFrom: helm.valuesFrom ?? null,
      }),
    );
  }
  return JSON.stringify(
    canonical({ repo: spec.repo ?? "", commit: status.commit ?? "", paths: spec.paths ?? null, targetNamespace: spec.targetNamespace ?? "" }),
  );
}

/** `<what>: <message>`, or `<what>` alone. */
function describe(what, message) {
  return typeof message === "string" && message !== "" ? `${what}: ${message}` : what;
}

function upperFirst(s) {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function parse(text, what) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new InvalidInput(`${what} cannot be read: ${e.message}`);
  }
}
