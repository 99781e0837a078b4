"""The component's entry point: the `plugin` export of the `adapter-plugin` world of
wit/since_v0.2.0/adapter.wit (`ksm:adapter@0.2.0`), as componentize-py maps it to Python
(records are dataclasses, variants are `<Type>_<Case>` classes, `result` errors are raised as
`componentize_py_types.Err`). Everything else lives in the pure `sveltos_plugin` package; this
file only converts between its plain values and the generated types. The plugin never calls
`ksm:adapter/host` (no log lines), and WASI is stubbed (`--stub-wasi`).
"""

import json

import wit_world
from componentize_py_types import Err, Ok
from wit_world.exports import plugin as wit

from sveltos_plugin import CONTRACT_VERSION, VERSION
from sveltos_plugin.config import config_from_json
from sveltos_plugin.status import StatusFailure, map_status
from sveltos_plugin.translate import TranslateFailure, translate

_SERVICE_ERRORS = {
    "template-not-found": wit.ServiceError_TemplateNotFound,
    "template-not-ready": wit.ServiceError_TemplateNotReady,
    "unsupported-source": wit.ServiceError_UnsupportedSource,
    "invalid-values": wit.ServiceError_InvalidValues,
    "invalid-service": wit.ServiceError_InvalidService,
}
_STATES = {
    "deployed": wit.ServiceState.DEPLOYED,
    "provisioning": wit.ServiceState.PROVISIONING,
    "failed": wit.ServiceState.FAILED,
    "pending": wit.ServiceState.PENDING,
    "deleting": wit.ServiceState.DELETING,
}
_TYPES = {"helm": wit.ServiceType.HELM, "kustomize": wit.ServiceType.KUSTOMIZE, "resource": wit.ServiceType.RESOURCE}


def _kind(group, version, kind, plural):
    return wit.ObjectKind(group=group, version=version, kind=kind, plural=plural, namespaced=True)


class Plugin(wit_world.exports.Plugin):
    def metadata(self):
        return wit.PluginMetadata(
            name="sveltos",
            version=VERSION,
            contract_version=CONTRACT_VERSION,
            creates=[_kind("config.projectsveltos.io", "v1beta1", "Profile", "profiles")],
            reads=[_kind("config.projectsveltos.io", "v1beta1", "ClusterSummary", "clustersummaries")],
        )

    def validate_config(self, config):
        _, errors = config_from_json(config)
        if errors:
            raise Err([wit.ConfigError(path=p, message=m) for p, m in errors])

    def translate(self, input):
        templates = {}
        for t in input.templates:
            templates[t.name] = json.loads(t.object) if t.object is not None else None
        # Parsed where they are used: only a chart's repository is read.
        sources = {(s.kind, s.namespace, s.name): s.object for s in input.sources}
        target = None
        if isinstance(input.target, wit.Target_Remote):
            remote = input.target.value
            target = (remote.name, remote.kubeconfig.name, remote.kubeconfig.key)
        try:
            services = translate(input.service_set, templates, sources, target, input.system_namespace)
        except TranslateFailure as e:
            if e.kind == "invalid-config":
                raise Err(wit.TranslateError_InvalidConfig([wit.ConfigError(path=p, message=m) for p, m in e.value]))
            raise Err(wit.TranslateError_InvalidInput(e.value))
        out = []
        for s in services:
            if "error" in s:
                kind, message = s["error"]
                outcome = Err(_SERVICE_ERRORS[kind](message))
            else:
                outcome = Ok(s["objects"])
            claims = [wit.Claim(target=t, kind=k, namespace=ns, name=n) for t, k, ns, n in s["claims"]]
            out.append(wit.ServiceTranslation(service=s["service"], outcome=outcome, claims=claims))
        return out

    def map_status(self, input):
        observed = []
        try:
            for o in input.observed:
                observed.append({
                    "apiVersion": o.api_version,
                    "kind": o.kind,
                    "name": o.name,
                    "namespace": o.namespace,
                    "object": json.loads(o.object) if o.object is not None else None,
                })
            result = map_status(input.service_set, input.service, input.template, observed)
        except (StatusFailure, ValueError) as e:
            raise Err(wit.StatusError_InvalidInput(str(e)))
        return wit.ServiceStatus(
            state=_STATES[result["state"]],
            service_type=_TYPES[result["type"]],
            version=result["version"],
            failure_message=result["failureMessage"],
            deployed_hash=result["deployedHash"],
        )
