"""A service's observed Profile and the ClusterSummary Sveltos made for it -> k0rdent state.

The feature and release rules are kcm's (k0rdent/kcm internal/controller/adapters/sveltos/state.go:
featureHelm, featureKustomize, featureResources, featureStatusToServiceState), applied to the one
service a Profile of this plugin holds.

`observed` (from the host): first the service's own objects (its Profile; `object` None while it
does not exist), then every object of a read kind (ClusterSummary) whose ownerReferences name one
of them. Each entry is a dict {apiVersion, kind, name, namespace, object (parsed or None)}.

A Deployed service's `deployedHash` is what the ClusterSummary records as deployed, times left
out (a re-applied release is the same deployment): for Helm, what kcm fingerprints
(verify.go computeServiceHash) as far as a ClusterSummary holds it: the release, its chart
(repository URL, name, version: the release's entry in the ClusterSummary's spec, which Sveltos
deployed; kcm reads them and the app version from the ClusterConfiguration, which this plugin
does not read) and the values and patches hashes Sveltos reports for the release; for Kustomize
and Resources, the hash Sveltos reports for the feature it deployed.
"""

import json

from . import config as cfg
from .translate import API_VERSION, KIND

SUMMARY_KIND = "ClusterSummary"

# Returned states (the contract's service-state) and types.
DEPLOYED, PROVISIONING, FAILED, PENDING, DELETING = "deployed", "provisioning", "failed", "pending", "deleting"
HELM, KUSTOMIZE, RESOURCE = "helm", "kustomize", "resource"

# kcm's featureStatusToServiceState, with its NotDeployed and Deleted (states the contract does
# not have) mapped to Pending and Deleting.
_FEATURE_STATE = {
    "Provisioning": PROVISIONING,
    "Provisioned": DEPLOYED,
    "Failed": FAILED,
    "FailedNonRetriable": FAILED,
    "Removing": DELETING,
    "AgentRemoving": DELETING,
    "Removed": DELETING,
    "Blocked": DELETING,
}
_REMOVAL = ("Removing", "AgentRemoving", "Removed", "Blocked")


class StatusFailure(Exception):
    pass


def _result(state, service_type, message=None, version=None):
    return {"state": state, "type": service_type, "failureMessage": message, "version": version, "deployedHash": None}


def template_type(template):
    spec = (template or {}).get("spec") or {}
    if spec.get("kustomize") is not None:
        return KUSTOMIZE
    if spec.get("resources") is not None:
        return RESOURCE
    return HELM


def _profile_type(profile):
    spec = (profile or {}).get("spec") or {}
    if spec.get("kustomizationRefs"):
        return KUSTOMIZE
    if spec.get("policyRefs"):
        return RESOURCE
    return HELM


def _owned_by(summary, profile_entry):
    """Whether the ClusterSummary names the Profile among its owners (kind + name, uid when both
    have one); the host attaches only such objects, this keeps the plugin honest on its own."""
    meta = summary.get("metadata") or {}
    profile = profile_entry.get("object") or {}
    uid = (profile.get("metadata") or {}).get("uid")
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == KIND and ref.get("name") == profile_entry["name"]:
            if not uid or not ref.get("uid") or ref.get("uid") == uid:
                return True
    return False


def map_status(service_set_json, service, template_json, observed):
    try:
        service_set = json.loads(service_set_json)
        template = json.loads(template_json) if template_json else None
    except ValueError as e:
        raise StatusFailure("input is not JSON: %s" % e)
    spec_service = next(
        (s for s in ((service_set.get("spec") or {}).get("services") or []) if isinstance(s, dict) and s.get("name") == service),
        {},
    )
    profiles = [o for o in observed if o["kind"] == KIND and o["apiVersion"] == API_VERSION]
    summaries = [o for o in observed if o["kind"] == SUMMARY_KIND and o.get("object") is not None]
    live = [p for p in profiles if p.get("object") is not None]
    service_type = template_type(template) if template is not None else _profile_type(live[0]["object"] if live else None)
    release = (spec_service.get("namespace") or service, service)

    if spec_service.get("helmAction") == "Uninstall":
        if live:
            return _result(DELETING, service_type, "uninstalling: Profile %s/%s is being removed" % (live[0]["namespace"], live[0]["name"]))
        return _result(PENDING, service_type, "uninstalled")
    if not profiles:
        return _result(PENDING, service_type, "the service's Profile does not exist yet")
    if not live:
        p = profiles[0]
        return _result(PENDING, service_type, "Profile %s/%s does not exist yet" % (p["namespace"], p["name"]))
    profile_entry = live[0]
    profile = profile_entry["object"]
    where = "%s/%s" % (profile_entry["namespace"], profile_entry["name"])
    if (profile.get("metadata") or {}).get("deletionTimestamp"):
        return _result(DELETING, service_type, "Profile %s is being deleted" % where)
    owned = sorted(
        (s["object"] for s in summaries if _owned_by(s["object"], profile_entry)),
        key=lambda o: ((o.get("metadata") or {}).get("namespace", ""), (o.get("metadata") or {}).get("name", "")),
    )
    if not owned:
        matching = ((profile.get("status") or {}).get("matchingClusterRefs")) or []
        if not matching and profile.get("status") is not None:
            refs = ((profile.get("spec") or {}).get("clusterRefs")) or []
            names = ", ".join("%s %s/%s" % (r.get("kind"), r.get("namespace"), r.get("name")) for r in refs)
            return _result(PROVISIONING, service_type, "no cluster matches Profile %s yet (is %s registered?)" % (where, names or "its cluster"))
        return _result(PROVISIONING, service_type, "Sveltos has not created a ClusterSummary for Profile %s yet" % where)
    summary = owned[0]
    if (summary.get("metadata") or {}).get("deletionTimestamp"):
        return _result(DELETING, service_type, "ClusterSummary %s is being deleted" % (summary["metadata"].get("name")))
    status = summary.get("status") or {}
    summary_spec = ((summary.get("spec") or {}).get("clusterProfileSpec")) or {}
    summary_name = cfg.quote("%s/%s" % ((summary.get("metadata") or {}).get("namespace", ""), (summary.get("metadata") or {}).get("name", "")))
    features = {f.get("featureID"): f for f in status.get("featureSummaries") or [] if isinstance(f, dict)}
    if service_type == HELM:
        reported = _of_release(status.get("helmReleaseSummaries"), release)
        result = _helm(service_type, features.get("Helm"), reported, release)
        if result["state"] == DEPLOYED:
            chart = _of_release(summary_spec.get("helmCharts"), release) or {}
            result["deployedHash"] = "ClusterSummary %s: release %s/%s, chart %s %s %s, values %s, patches %s" % (
                summary_name, release[0], release[1], _or_none(chart.get("repositoryURL")), _or_none(chart.get("chartName")),
                _or_none(chart.get("chartVersion")), _or_none(reported.get("valuesHash")), _or_none(reported.get("patchesHash")),
            )
        return result
    feature_id = "Kustomize" if service_type == KUSTOMIZE else "Resources"
    refs_key = "kustomizationRefs" if service_type == KUSTOMIZE else "policyRefs"
    has_refs = bool(summary_spec.get(refs_key) or ((profile.get("spec") or {}).get(refs_key)))
    feature = features.get(feature_id)
    result = _feature(service_type, feature, has_refs)
    if result["state"] == DEPLOYED and (feature or {}).get("hash"):
        result["deployedHash"] = "ClusterSummary %s: %s feature %s" % (summary_name, feature_id, feature["hash"])
    return result


def _or_none(value):
    return value if value else "none"


def _of_release(entries, release):
    """The entry of `entries` (helmCharts, helmReleaseSummaries) for release (namespace, name)."""
    return next(
        (e for e in entries or [] if isinstance(e, dict) and (e.get("releaseNamespace"), e.get("releaseName")) == release),
        None,
    )


def _feature(service_type, feature, has_refs):
    """kcm's featureKustomize / featureResources: Deployed once the feature is Provisioned,
    Failed while it carries a failure message; absent feature: Deployed only when there is
    nothing to deploy. Removal states (not read by kcm here) go Deleting."""
    what = "Kustomizations" if service_type == KUSTOMIZE else "Resources"
    if feature is None:
        if has_refs:
            return _result(PROVISIONING, service_type, "Sveltos has not reported the %s feature yet" % ("Kustomize" if service_type == KUSTOMIZE else "Resources"))
        return _result(DEPLOYED, service_type)
    status = feature.get("status")
    message = feature.get("failureMessage")
    if message:
        sep = ": "
        return _result(FAILED, service_type, "One or more %s failed to deploy%s%s" % (what, sep, message))
    if status in _REMOVAL:
        return _result(DELETING, service_type, "Sveltos feature status %s" % status)
    if status == "Provisioned":
        return _result(DEPLOYED, service_type)
    return _result(PROVISIONING, service_type, "Sveltos feature status %s" % (status or "unknown"))


def _helm(service_type, feature, summary, release):
    """kcm's featureHelm for the service's release (namespace, name), `summary` its entry in
    the ClusterSummary's helmReleaseSummaries (None when not reported)."""
    feature_status = (feature or {}).get("status")
    feature_message = (feature or {}).get("failureMessage") or ""
    converted = _FEATURE_STATE.get(feature_status, PENDING)
    if feature_status in _REMOVAL:
        return _result(DELETING, service_type, "Sveltos Helm feature status %s" % feature_status)
    name = "%s/%s" % release
    if summary is None:
        # kcm: NotDeployed (the release is not in the ClusterSummary yet).
        if feature_status in (None, "Provisioning"):
            return _result(PROVISIONING, service_type, "Sveltos has not reported release %s yet" % name)
        if feature_message:
            return _result(FAILED, service_type, feature_message)
        return _result(PENDING, service_type, "Sveltos has not reported release %s" % name)
    if summary.get("status") == "Conflict":
        return _result(FAILED, service_type, summary.get("conflictMessage") or "release %s conflicts with another profile" % name)
    hashed = bool(summary.get("valuesHash"))
    message = summary.get("failureMessage") or ""
    if message:
        # Failing now (with or without an earlier deployed version).
        return _result(FAILED, service_type, message)
    if not hashed:
        if feature_status == "Provisioning":
            return _result(PROVISIONING, service_type, "installing release %s" % name)
        if feature_status in ("Failed", "FailedNonRetriable") and feature_message:
            # One chart per Profile: the feature's failure is this release's.
            return _result(FAILED, service_type, feature_message)
        return _result(PENDING, service_type, "release %s not attempted yet" % name)
    # valuesHash set, no failure of its own: deployed once the feature settles.
    if feature_status == "Provisioning":
        return _result(PROVISIONING, service_type, "upgrading release %s" % name)
    if feature_status in ("Provisioned", "Failed", "FailedNonRetriable"):
        return _result(DEPLOYED, service_type)
    if converted == FAILED:
        return _result(FAILED, service_type, feature_message or "Sveltos Helm feature status %s" % feature_status)
    return _result(converted, service_type, None if converted == DEPLOYED else "Sveltos Helm feature status %s" % feature_status)
