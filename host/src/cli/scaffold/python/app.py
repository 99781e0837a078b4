"""__NAME__: a ksm-adapter plugin in Python. Each service of a ServiceSet becomes one ConfigMap
(in the ServiceSet's namespace) carrying the service's values; its state is Deployed once the
ConfigMap exists. Replace the ConfigMap with your CD tool's objects.

The contract (wit/adapter.wit, ksm:adapter/plugin@0.2.0): `metadata` is constant,
`validate_config` rejects unknown fields, `translate` answers for every service in spec order
(one bad service never fails the others) and is deterministic, `map_status` is Deployed only
when everything exists. Objects cross the boundary as JSON text.

componentize-py generates the types from the WIT (`wit_world`): records are dataclasses with
snake_case fields, enums are Python enums, variants are one class per case (`Target_Remote`,
`ServiceError_TemplateNotFound`, ...), `option<T>` is `T` or `None`, a `result` is `Ok(value)` or
`Err(value)`, and a function's `result` error is raised as `Err`.
"""

import json
import re

import wit_world
from componentize_py_types import Err, Ok
from wit_world.exports import plugin as wit

CONTRACT_VERSION = "0.2.0"
DEFAULT_VALUES_KEY = "values.yaml"
MAX_NAME = 63
VALUES_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")


def parse_config(text):
    """Parses spec.provider.config (JSON text, "null" when absent). Returns (config, errors):
    every problem at its path; unknown fields are errors, so typos do not pass silently."""
    config = {"valuesKey": DEFAULT_VALUES_KEY}
    try:
        value = json.loads(text)
    except ValueError as e:
        return config, [wit.ConfigError(path="", message=f"not valid JSON: {e}")]
    if value is None:
        return config, []
    if not isinstance(value, dict):
        return config, [wit.ConfigError(path="", message="expected an object")]
    errors = []
    for key in sorted(value):
        field = value[key]
        if field is None:
            continue
        if key == "valuesKey":
            if isinstance(field, str) and VALUES_KEY.match(field):
                config["valuesKey"] = field
            else:
                errors.append(wit.ConfigError(path=key, message="expected a ConfigMap data key (letters, digits, '-', '_', '.')"))
        elif key == "priority":
            # Read by the host (release conflicts); kcm passes it to every provider.
            if not isinstance(field, int) or isinstance(field, bool):
                errors.append(wit.ConfigError(path=key, message="expected an integer"))
        elif key == "stopOnConflict":
            if not isinstance(field, bool):
                errors.append(wit.ConfigError(path=key, message="expected a boolean"))
        else:
            errors.append(wit.ConfigError(path=key, message="unknown field"))
    return config, errors


def fnv1a32(text):
    """32-bit FNV-1a, as ksm_plugin_sdk::names: stable across runs and builds."""
    h = 0x811C9DC5
    for byte in text.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


def object_name(service_set, service):
    """`<serviceSet>.<service>`, at most 63 characters, as ksm_plugin_sdk::names::service_object_name:
    distinct pairs get distinct names; a dotted service name or a longer name is cut and ends in a
    stable hash of the pair."""
    full = f"{service_set}.{service}"
    if len(full.encode()) <= MAX_NAME and "." not in service:
        return full
    prefix = full.encode()[: MAX_NAME - 9].decode(errors="ignore").rstrip("-.")
    return f"{prefix}-{fnv1a32(full)}"


def config_map(service_set, service, templates, config, cluster):
    """The ConfigMap of one service: `Ok([json])`, or `Err(service-error)`."""
    namespace = service_set["metadata"]["namespace"]
    name = service.get("template", "")
    template = templates.get(name)
    if template is None:
        return Err(wit.ServiceError_TemplateNotFound(f'ServiceTemplate "{namespace}/{name}" not found'))
    try:
        status = json.loads(template).get("status") or {}
    except ValueError as e:
        return Err(wit.ServiceError_TemplateNotReady(f'ServiceTemplate "{name}" does not parse: {e}'))
    if status.get("valid") is not True:
        return Err(wit.ServiceError_TemplateNotReady(f'ServiceTemplate "{name}" is not valid yet'))
    data = {"cluster": cluster, "namespace": service.get("namespace") or "", "template": name}
    if service.get("version"):
        data["version"] = service["version"]
    data[config["valuesKey"]] = service.get("values") or ""
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": object_name(service_set["metadata"]["name"], service["name"]), "namespace": namespace},
        "data": data,
    }
    return Ok([json.dumps(obj, sort_keys=True)])


def read_service_set(text):
    try:
        return json.loads(text)
    except ValueError as e:
        raise Err(wit.TranslateError_InvalidInput(f"the ServiceSet does not parse: {e}"))


class Plugin(wit_world.exports.Plugin):
    def metadata(self):
        return wit.PluginMetadata(
            name="__NAME__",
            version="0.1.0",
            contract_version=CONTRACT_VERSION,
            creates=[wit.ObjectKind(group="", version="v1", kind="ConfigMap", plural="configmaps", namespaced=True)],
            reads=[],
        )

    def validate_config(self, config):
        _, errors = parse_config(config)
        if errors:
            raise Err(errors)

    def translate(self, input):
        service_set = read_service_set(input.service_set)
        spec = service_set.get("spec") or {}
        provider = spec.get("provider") or {}
        config, errors = parse_config(json.dumps(provider.get("config")))
        if errors:
            raise Err(wit.TranslateError_InvalidConfig(errors))
        cluster = input.target.value.name if isinstance(input.target, wit.Target_Remote) else "management"
        templates = {t.name: t.object for t in input.templates if t.object is not None}
        return [
            wit.ServiceTranslation(
                service=service["name"],
                outcome=config_map(service_set, service, templates, config, cluster),
                claims=[],
            )
            for service in spec.get("services") or []
        ]

    def map_status(self, input):
        try:
            service_set = json.loads(input.service_set)
        except ValueError as e:
            raise Err(wit.StatusError_InvalidInput(f"the ServiceSet does not parse: {e}"))
        service_type = wit.ServiceType.HELM
        if input.template is not None:
            spec = json.loads(input.template).get("spec") or {}
            if spec.get("kustomize"):
                service_type = wit.ServiceType.KUSTOMIZE
            elif spec.get("resources"):
                service_type = wit.ServiceType.RESOURCE
        live = [json.loads(o.object) for o in input.observed if o.object is not None]
        state = wit.ServiceState.PENDING
        if any((o.get("metadata") or {}).get("deletionTimestamp") for o in live):
            state = wit.ServiceState.DELETING
        elif input.observed and len(live) == len(input.observed):
            state = wit.ServiceState.DEPLOYED
        version = None
        if state == wit.ServiceState.DEPLOYED:
            services = (service_set.get("spec") or {}).get("services") or []
            service = next((s for s in services if s.get("name") == input.service), None)
            if service is not None:
                version = service.get("version") or service.get("template")
        return wit.ServiceStatus(
            state=state, service_type=service_type, version=version, failure_message=None, deployed_hash=None
        )
