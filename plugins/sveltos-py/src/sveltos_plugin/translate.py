"""ServiceSet + ServiceTemplates -> one Sveltos Profile per service, claims, typed errors.

Field by field this follows kcm's own Sveltos adapter (k0rdent/kcm
internal/controller/adapters/sveltos/serviceset_controller.go: profileSpec, buildProfileSpec,
getHelmCharts, helmChartFromSpecOrRef, helmChartFromFluxSource, getKustomizationRefs,
getPolicyRefs, convertHelmOptions, applyProfileSpecDefaults); where it cannot (it makes one
Profile per ServiceSet, and sees only the Flux sources the host hands it), README.md says why.
"""

import json
import re

from . import config as cfg
from .names import MAX_LABEL_LEN, service_object_name

API_VERSION = "config.projectsveltos.io/v1beta1"
KIND = "Profile"
PAUSED_ANNOTATION = "k0rdent.mirantis.com/service-set-paused"
PROFILE_PAUSED_ANNOTATION = "profile.projectsveltos.io/paused"
#: kcm registers the management cluster as SveltosCluster mgmt/mgmt.
MANAGEMENT_CLUSTER = "mgmt"
SVELTOS_CLUSTER_API_VERSION = "lib.projectsveltos.io/v1beta1"
CAPI_CLUSTER_API_VERSION = "cluster.x-k8s.io/v1beta2"
DRIFT_IGNORE_PATCH = (
    "- op: add\n  path: /metadata/annotations/projectsveltos.io~1driftDetectionIgnore\n  value: ok"
)
#: Release names Helm accepts.
MAX_RELEASE_NAME = 53
#: Versions Masterminds/semver (kcm) accepts: `v`, 1 to 3 numbers, pre-release, build.
_SEMVER = re.compile(r"^v?[0-9]+(\.[0-9]+){0,2}(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")

# helmOptions keys (kcm's ServiceHelmOptions) and their JSON types.
_BOOL_OPTIONS = (
    "atomic", "createNamespace", "dependencyUpdate", "disableHooks", "disableOpenAPIValidation",
    "enableClientCache", "replace", "skipCRDs", "skipSchemaValidation", "wait", "waitForJobs",
)
_INSTALL_OPTIONS = {"createNamespace": bool, "replace": bool, "disableHooks": bool, "takeOwnership": bool}
_UPGRADE_OPTIONS = {
    "force": bool, "resetValues": bool, "reuseValues": bool, "resetThenReuseValues": bool, "recreate": bool,
    "maxHistory": int, "cleanupOnFail": bool, "subNotes": bool, "upgradeCRDs": bool, "disableHooks": bool,
    "takeOwnership": bool,
}
_UNINSTALL_OPTIONS = {"keepHistory": bool, "deletionPropagation": str, "disableHooks": bool}


class ServiceFailure(Exception):
    """One service cannot be translated: `kind` is a contract service-error case."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


class TranslateFailure(Exception):
    """The whole ServiceSet fails: `kind` is `invalid-config` (value: [(path, message)]) or
    `invalid-input` (value: a message)."""

    def __init__(self, kind, value):
        super().__init__(value)
        self.kind = kind
        self.value = value


def canonical(obj):
    """Canonical JSON (sorted keys), so equal objects are equal text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def translate(service_set_json, templates, sources, target, system_namespace):
    """`templates`: {name: object or None}; `sources`: {(kind, namespace, name): JSON text or
    None}, the Flux sources the templates refer to (contract `translate-input.sources`);
    `target`: None for self-management, or (cluster name, kubeconfig secret name, key). Returns
    a list of {"service", "objects" | "error": (kind, message), "claims": [(target, kind, ns, name)]}."""
    try:
        service_set = json.loads(service_set_json)
    except ValueError as e:
        raise TranslateFailure("invalid-input", "the ServiceSet is not JSON: %s" % e)
    if not isinstance(service_set, dict) or not isinstance(service_set.get("spec"), dict):
        raise TranslateFailure("invalid-input", "the ServiceSet has no spec")
    spec = service_set["spec"]
    provider = spec.get("provider") or {}
    config, errors = cfg.config_from_value(provider.get("config") if isinstance(provider, dict) else None)
    if errors:
        raise TranslateFailure("invalid-config", errors)
    meta = service_set.get("metadata") or {}
    ctx = {
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "paused": PAUSED_ANNOTATION in (meta.get("annotations") or {}),
        "self": target is None,
        "cluster": None if target is None else target[0],
        "config": config,
        "sources": sources,
    }
    ctx["profileNamespace"] = MANAGEMENT_CLUSTER if ctx["self"] else ctx["namespace"]
    ctx["claimTarget"] = "management" if ctx["self"] else "%s/%s" % (ctx["namespace"], ctx["cluster"])
    out = []
    for svc in spec.get("services") or []:
        name = svc.get("name", "") if isinstance(svc, dict) else ""
        try:
            objects, claims = _service(ctx, svc, templates)
            out.append({"service": name, "objects": objects, "claims": claims})
        except ServiceFailure as e:
            out.append({"service": name, "error": (e.kind, e.message), "claims": []})
        except Exception as e:  # one bad service never fails the others
            out.append({"service": name, "error": ("invalid-service", "internal error: %r" % (e,)), "claims": []})
    return out


def _service(ctx, svc, templates):
    if not isinstance(svc, dict):
        raise ServiceFailure("invalid-service", "a service is not an object")
    action = svc.get("helmAction") or "Install"
    if action not in ("Install", "Uninstall"):
        raise ServiceFailure("invalid-service", "helmAction %s is neither Install nor Uninstall" % cfg.quote(action))
    if action == "Uninstall":
        # The host deletes the Profile; with stopMatchingBehavior WithdrawPolicies Sveltos
        # uninstalls the release.
        return [], []
    template_name = svc.get("template", "")
    template = templates.get(template_name)
    key = "%s/%s" % (ctx["namespace"], template_name)
    if template is None:
        raise ServiceFailure("template-not-found", "ServiceTemplate %s not found" % cfg.quote(key))
    status = template.get("status") or {}
    if status.get("valid") is False:
        raise ServiceFailure(
            "template-not-ready", "ServiceTemplate %s is not valid: %s" % (cfg.quote(key), status.get("validationError") or "no reason given")
        )
    if status.get("valid") is not True:
        raise ServiceFailure("template-not-ready", "ServiceTemplate %s has not been validated yet" % cfg.quote(key))
    tspec = template.get("spec") or {}
    spec = _profile_spec(ctx)
    claims = []
    if tspec.get("helm") is not None:
        chart = _helm_chart(ctx, svc, template, key)
        spec["helmCharts"] = [chart]
        claims.append((ctx["claimTarget"], "helm-release", chart["releaseNamespace"], chart["releaseName"]))
    elif tspec.get("kustomize") is not None:
        spec["kustomizationRefs"] = [_kustomization_ref(ctx, svc, template, key)]
    elif tspec.get("resources") is not None:
        spec["policyRefs"] = [_policy_ref(ctx, template, key)]
    else:
        raise ServiceFailure("unsupported-source", "ServiceTemplate %s has neither helm, kustomize nor resources" % cfg.quote(key))
    metadata = {
        "name": service_object_name(ctx["name"], svc.get("name", ""), MAX_LABEL_LEN),
        "namespace": ctx["profileNamespace"],
    }
    if ctx["paused"]:
        metadata["annotations"] = {PROFILE_PAUSED_ANNOTATION: "true"}
    profile = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}
    return [canonical(profile)], claims


def _profile_spec(ctx):
    """buildProfileSpec + profileSpec + applyProfileSpecDefaults, for one Profile."""
    config = ctx["config"]
    if ctx["self"]:
        ref = {"apiVersion": SVELTOS_CLUSTER_API_VERSION, "kind": "SveltosCluster", "namespace": MANAGEMENT_CLUSTER, "name": MANAGEMENT_CLUSTER}
    elif config["clusterKind"] == "SveltosCluster":
        ref = {"apiVersion": SVELTOS_CLUSTER_API_VERSION, "kind": "SveltosCluster", "namespace": ctx["namespace"], "name": ctx["cluster"]}
    else:
        ref = {"apiVersion": CAPI_CLUSTER_API_VERSION, "kind": "Cluster", "namespace": ctx["namespace"], "name": ctx["cluster"]}
    spec = {
        "clusterRefs": [ref],
        "tier": cfg.MAX_INT32 - config["priority"],
        "syncMode": config["syncMode"],
        "stopMatchingBehavior": config["stopMatchingBehavior"],
    }
    if not config["stopOnConflict"]:
        spec["continueOnConflict"] = True
    if config["continueOnError"]:
        spec["continueOnError"] = True
    if config["reloader"]:
        spec["reloader"] = True
    if config["templateResourceRefs"]:
        spec["templateResourceRefs"] = config["templateResourceRefs"]
    if config["driftExclusions"]:
        spec["driftExclusions"] = config["driftExclusions"]
    patches = list(config["patches"]) + [{"target": t, "patch": DRIFT_IGNORE_PATCH} for t in config["driftIgnore"]]
    if patches:
        spec["patches"] = patches
    return spec


def _chart_version(template, fallback):
    version = (template.get("status") or {}).get("chartVersion") or fallback or ""
    return version if _SEMVER.match(version) else None


def _helm_chart(ctx, svc, template, key):
    name = svc.get("name", "")
    if len(name) > MAX_RELEASE_NAME:
        raise ServiceFailure("invalid-service", "release name %s is longer than %d characters" % (cfg.quote(name), MAX_RELEASE_NAME))
    helm = template["spec"]["helm"]
    status = template.get("status") or {}
    not_updated = "status for ServiceTemplate %s has not been updated yet" % cfg.quote(key)
    credentials = None
    if helm.get("chartSpec") is not None:
        chart_spec = helm["chartSpec"]
        chart_ref = status.get("chartRef")
        if not chart_ref:
            raise ServiceFailure("template-not-ready", not_updated)
        chart = chart_spec.get("chart", "")
        source = chart_spec.get("sourceRef") or {}
        version = _chart_version(template, chart_spec.get("version"))
        if version is None:
            raise ServiceFailure(
                "template-not-ready",
                "ServiceTemplate %s has no exact chart version yet (status.chartVersion %s)"
                % (cfg.quote(key), cfg.quote(status.get("chartVersion", ""))),
            )
        if source.get("kind") == "HelmRepository":
            repo = _helm_repository(ctx, template, key, chart_ref, source)
            entry = {
                "repositoryURL": repo["url"],
                "repositoryName": chart,
                # Sveltos takes <repository>/<chart> for non-OCI repositories; kcm has no
                # repository name and uses the chart's.
                "chartName": chart if repo["oci"] else "%s/%s" % (chart, chart),
                "chartVersion": version,
            }
            if repo.get("insecure") or repo.get("secretRef") or repo.get("certSecretRef"):
                credentials = {}
                if repo.get("insecure"):
                    credentials["plainHTTP"] = True
                if repo.get("secretRef"):
                    credentials["credentials"] = {"name": repo["secretRef"], "namespace": ctx["profileNamespace"]}
                if repo.get("certSecretRef"):
                    credentials["ca"] = {"name": repo["certSecretRef"], "namespace": ctx["profileNamespace"]}
        elif source.get("kind") == "GitRepository":
            namespace = chart_ref.get("namespace") or ctx["namespace"]
            _same_namespace(ctx, namespace, "the chart's GitRepository")
            entry = {
                "repositoryURL": "gitrepository://%s/%s/%s" % (namespace, source.get("name", ""), chart),
                "repositoryName": chart,
                "chartName": chart,
                "chartVersion": version,
            }
        else:
            raise ServiceFailure(
                "unsupported-source",
                "chartSpec.sourceRef kind %s: Sveltos takes charts from a HelmRepository URL or a GitRepository"
                % cfg.quote(source.get("kind", "")),
            )
    elif helm.get("chartSource") is not None:
        source_status = status.get("sourceStatus")
        if not source_status:
            raise ServiceFailure("template-not-ready", not_updated)
        _same_namespace(ctx, source_status.get("namespace", ""), "the chart's Flux source")
        path = helm["chartSource"].get("path", "") or ""
        path = path[1:] if path.startswith(".") else path
        path = path[1:] if path.startswith("/") else path
        entry = {
            "repositoryURL": "%s://%s/%s/%s"
            % (source_status.get("kind", ""), source_status.get("namespace", ""), source_status.get("name", ""), path),
        }
    elif helm.get("chartRef") is not None:
        raise ServiceFailure(
            "unsupported-source",
            "ServiceTemplate %s: spec.helm.chartRef is not supported; use spec.helm.chartSpec (a chart from a "
            "HelmRepository or a GitRepository) or spec.helm.chartSource" % cfg.quote(key),
        )
    else:
        raise ServiceFailure("unsupported-source", "ServiceTemplate %s has no Helm chart defined" % cfg.quote(key))
    entry["releaseName"] = name
    entry["releaseNamespace"] = svc.get("namespace") or name
    entry["helmChartAction"] = "Install"
    if credentials is not None:
        entry["registryCredentialsConfig"] = credentials
    values = svc.get("values")
    if values:
        if not isinstance(values, str):
            raise ServiceFailure("invalid-values", "values must be a YAML string")
        entry["values"] = values  # verbatim: Sveltos renders them as a Go template first
    values_from = _values_from(ctx, svc)
    if values_from:
        entry["valuesFrom"] = values_from
    options = _helm_options(template.get("spec", {}).get("helmOptions"), svc.get("helmOptions"))
    if options is not None:
        entry["options"] = options
    return entry


def _source(ctx, kind, namespace, name):
    """The Flux source the host handed over, parsed; None when it was not found."""
    text = ctx["sources"].get((kind, namespace, name))
    if text is None:
        return None
    try:
        source = json.loads(text)
    except ValueError as e:
        raise ServiceFailure("unsupported-source", "%s %s cannot be read: %s" % (kind, cfg.quote("%s/%s" % (namespace, name)), e))
    return source if isinstance(source, dict) else {}


def _repository_reference(ctx, template, chart_ref, source_ref):
    """Namespace and name of a chart's HelmRepository: as kcm reads it, the `spec.sourceRef` of
    the HelmChart kcm made (`status.chartRef`, the repository in the chart's namespace); while
    the host has no such HelmChart, the template's `chartSpec.sourceRef` (in the template's
    namespace unless it names one)."""
    template_namespace = (template.get("metadata") or {}).get("namespace") or ctx["namespace"]
    chart_namespace = chart_ref.get("namespace") or template_namespace
    chart = _source(ctx, "HelmChart", chart_namespace, chart_ref.get("name", ""))
    ref = ((chart or {}).get("spec") or {}).get("sourceRef") or {}
    if ref.get("kind") == "HelmRepository" and ref.get("name"):
        return ref.get("namespace") or chart_namespace, ref["name"]
    return source_ref.get("namespace") or template_namespace, source_ref.get("name", "")


def _helm_repository(ctx, template, key, chart_ref, source_ref):
    """The chart's repository as {url, oci, insecure, secretRef, certSecretRef}: the provider
    config's `helmRepositories` entry for its name when there is one (an override, e.g. a mirror
    Sveltos reaches), else the HelmRepository the host hands over (kcm's helmChartFromSpecOrRef:
    `spec.url`, `spec.type: oci`, `spec.insecure`, `spec.secretRef`, `spec.certSecretRef`)."""
    namespace, name = _repository_reference(ctx, template, chart_ref, source_ref)
    configured = ctx["config"]["helmRepositories"].get(name)
    if configured is not None:
        return dict(configured, oci=configured["url"].startswith("oci://"))
    where = cfg.quote("%s/%s" % (namespace, name))
    repository = _source(ctx, "HelmRepository", namespace, name)
    if repository is None:
        raise ServiceFailure(
            "unsupported-source",
            "ServiceTemplate %s: HelmRepository %s was not found, and the provider config's helmRepositories "
            "does not list it (Sveltos needs the repository URL)" % (cfg.quote(key), where),
        )
    spec = repository.get("spec") or {}
    url = spec.get("url")
    if not isinstance(url, str) or url.strip() == "":
        raise ServiceFailure("unsupported-source", "HelmRepository %s has no spec.url" % where)
    repo = {"url": url, "oci": spec.get("type") == "oci", "insecure": spec.get("insecure") is True}
    for field in ("secretRef", "certSecretRef"):
        secret = (spec.get(field) or {}).get("name")
        if secret:
            # Sveltos reads a Profile's registry Secrets from the Profile's namespace; Flux reads
            # the HelmRepository's from its own.
            _same_namespace(ctx, namespace, "Secret %s (spec.%s of HelmRepository %s)" % (cfg.quote(secret), field, where))
            repo[field] = secret
    return repo


def _same_namespace(ctx, namespace, what):
    """A Profile references objects in its own namespace only: for self-management (Profile in
    `mgmt`), objects in the ServiceSet's namespace are out of its reach."""
    if namespace != ctx["profileNamespace"]:
        raise ServiceFailure(
            "unsupported-source",
            "%s is in namespace %s, but the Profile for the management cluster lives in %s (where SveltosCluster "
            "mgmt/mgmt is) and a Profile references objects of its own namespace only; kcm uses a "
            "cluster-scoped ClusterProfile here, which this host does not apply"
            % (what, cfg.quote(namespace), cfg.quote(ctx["profileNamespace"])),
        )


def _values_from(ctx, svc):
    items = svc.get("valuesFrom") or []
    if not items:
        return []
    if ctx["self"]:
        raise ServiceFailure(
            "invalid-service",
            "valuesFrom: the Profile for the management cluster lives in namespace %s and reads ConfigMaps and "
            "Secrets from there only, not from %s" % (cfg.quote(MANAGEMENT_CLUSTER), cfg.quote(ctx["namespace"])),
        )
    out = []
    for i, item in enumerate(items):
        kind = (item or {}).get("kind")
        if kind not in ("ConfigMap", "Secret") or not item.get("name"):
            raise ServiceFailure("invalid-service", "valuesFrom[%d]: expected {kind: ConfigMap|Secret, name}" % i)
        out.append({"kind": kind, "name": item["name"], "namespace": ctx["namespace"]})
    return out


def _check_options(path, options, types):
    if not isinstance(options, dict):
        raise ServiceFailure("invalid-service", "%s: expected an object" % path)
    for k, v in options.items():
        if k not in types:
            raise ServiceFailure("invalid-service", "%s.%s: unknown field" % (path, k))
        want = types[k]
        if v is not None and (not isinstance(v, want) or (want is int and isinstance(v, bool))):
            raise ServiceFailure("invalid-service", "%s.%s: expected a %s" % (path, k, want.__name__))


def _merged_options(template_options, service_options):
    """kcm's mergeHelmOptions: the template's helmOptions (or, without them, the service's) as
    the base, every field the service sets overriding it (`labels` merged key by key)."""
    types = {k: bool for k in _BOOL_OPTIONS}
    types.update({"timeout": str, "description": str, "labels": dict, "installOptions": dict, "upgradeOptions": dict, "uninstallOptions": dict})
    for path, options in (("template helmOptions", template_options), ("helmOptions", service_options)):
        if options is not None:
            _check_options(path, options, types)
            for sub, sub_types in (("installOptions", _INSTALL_OPTIONS), ("upgradeOptions", _UPGRADE_OPTIONS), ("uninstallOptions", _UNINSTALL_OPTIONS)):
                if options.get(sub) is not None:
                    _check_options("%s.%s" % (path, sub), options[sub], sub_types)
    if template_options is None and service_options is None:
        return None
    merged = dict(template_options if template_options is not None else service_options)
    for k, v in (service_options or {}).items():
        if v is None or v == "" or v == {}:
            continue
        if k == "labels" and isinstance(merged.get("labels"), dict):
            merged["labels"] = dict(merged["labels"], **v)
        else:
            merged[k] = v
    return merged


def _helm_options(template_options, service_options):
    """kcm's convertHelmOptions: ServiceSet helmOptions -> Sveltos HelmOptions."""
    options = _merged_options(template_options, service_options)
    if options is None:
        return None
    out = {}
    for k in ("timeout", "description"):
        if options.get(k):
            out[k] = options[k]
    install = dict((k, v) for k, v in (options.get("installOptions") or {}).items() if v is not None)
    for k in ("skipCRDs", "skipSchemaValidation", "wait", "waitForJobs", "disableHooks", "disableOpenAPIValidation", "atomic", "dependencyUpdate", "enableClientCache"):
        if options.get(k) is not None:
            out[k] = options[k]
    if options.get("labels"):
        out["labels"] = options["labels"]
    # The deprecated top-level createNamespace and replace, and disableHooks, go to installOptions.
    for src, dst in (("createNamespace", "createNamespace"), ("replace", "replace"), ("disableHooks", "disableHooks")):
        if options.get(src) is not None:
            install[dst] = options[src]
    if install:
        out["installOptions"] = install
    for k in ("upgradeOptions", "uninstallOptions"):
        sub = dict((kk, vv) for kk, vv in (options.get(k) or {}).items() if vv is not None)
        if sub:
            out[k] = sub
    return out


def _source_status(template, key):
    source = (template.get("status") or {}).get("sourceStatus")
    if not source or not source.get("kind") or not source.get("name"):
        raise ServiceFailure("template-not-ready", "status for ServiceTemplate %s has not been updated yet" % cfg.quote(key))
    return source


def _source_ref(ctx, template, key, field):
    """The reference to the Flux source of the template's `spec.<field>` (kustomize or
    resources): the source its status names, the deployment type and the path."""
    source = _source_status(template, key)
    _same_namespace(ctx, source.get("namespace", ""), "the ServiceTemplate's Flux source")
    spec = template["spec"][field]
    ref = {
        "namespace": source.get("namespace", ""),
        "name": source["name"],
        "kind": source["kind"],
        "deploymentType": spec.get("deploymentType") or "Remote",
    }
    if spec.get("path"):
        ref["path"] = spec["path"]
    return ref


def _kustomization_ref(ctx, svc, template, key):
    ref = _source_ref(ctx, template, key, "kustomize")
    if svc.get("namespace"):
        ref["targetNamespace"] = svc["namespace"]
    values_from = _values_from(ctx, svc)
    if values_from:
        ref["valuesFrom"] = values_from
    return ref


def _policy_ref(ctx, template, key):
    return _source_ref(ctx, template, key, "resources")
