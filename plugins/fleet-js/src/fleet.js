// The Fleet kinds this plugin creates (`fleet.cattle.io/v1alpha1`, Fleet v0.16).

const GROUP = "fleet.cattle.io";
const VERSION = "v1alpha1";

/** `HelmOp`: a Helm chart from a repository, deployed by Fleet to its target clusters. */
export const HELM_OP = {
  group: GROUP,
  version: VERSION,
  kind: "HelmOp",
  plural: "helmops",
  namespaced: true,
  apiVersion: `${GROUP}/${VERSION}`,
};

/** `GitRepo`: the contents of paths of a Git repository, deployed by Fleet to its target clusters. */
export const GIT_REPO = {
  group: GROUP,
  version: VERSION,
  kind: "GitRepo",
  plural: "gitrepos",
  namespaced: true,
  apiVersion: `${GROUP}/${VERSION}`,
};

/** Fleet's own workspace and Cluster for the cluster it runs on (the management cluster). */
export const LOCAL_WORKSPACE = "fleet-local";
export const LOCAL_CLUSTER = "local";
