"""The provider config (a ServiceSet's `spec.provider.config`, merged over the AdapterPlugin's
`spec.config` by the host): the keys kcm's own Sveltos adapter reads (its `profileConfig`), plus
what a pure plugin needs to be told because it cannot read the cluster (`helmRepositories`,
`clusterKind`).

Every problem is reported, not only the first, each at its dotted path (list items as
`path[index]`), in key order. Unknown fields are errors. A field set to `null` counts as unset.
"""

import json

from .names import is_dns1123_label, is_dns1123_subdomain

#: Sveltos tier = MAX_INT32 - priority (kcm's priorityToTier).
MAX_INT32 = 2147483647
DEFAULT_PRIORITY = 100
SYNC_MODES = ("OneTime", "Continuous", "ContinuousWithDriftDetection", "DryRun")
STOP_MATCHING = ("WithdrawPolicies", "LeavePolicies")
CLUSTER_KINDS = ("Cluster", "SveltosCluster")

_SELECTOR_KEYS = ("annotationSelector", "group", "kind", "labelSelector", "name", "namespace", "version")
_REFERENCE_KEYS = ("apiVersion", "fieldPath", "kind", "name", "namespace", "resourceVersion", "uid")


class Problems(Exception):
    def __init__(self, errors):
        super().__init__(errors)
        self.errors = errors


def _problem(path, message):
    return Problems([(path, message)])


def default_config():
    return {
        "priority": DEFAULT_PRIORITY,
        "stopOnConflict": False,
        "syncMode": "Continuous",
        "stopMatchingBehavior": "WithdrawPolicies",
        "continueOnError": False,
        "reloader": False,
        "driftIgnore": [],
        "driftExclusions": [],
        "patches": [],
        "templateResourceRefs": [],
        "helmRepositories": {},
        "clusterKind": "Cluster",
    }


def config_from_json(text):
    """Parses the config JSON text; `null` or blank text gives the defaults.
    Returns `(config, None)` or `(None, [(path, message), ...])`."""
    if not isinstance(text, str) or text.strip() == "":
        return default_config(), None
    try:
        value = json.loads(text)
    except ValueError as e:
        return None, [("", "not valid JSON: %s" % e)]
    return config_from_value(value)


# How each plain field of the provider config is read: (path, value) -> the value kept.
PARSERS = {
    "stopOnConflict": lambda path, v: _bool(path, v),
    "continueOnError": lambda path, v: _bool(path, v),
    "reloader": lambda path, v: _bool(path, v),
    "syncMode": lambda path, v: _enum(path, v, SYNC_MODES),
    "stopMatchingBehavior": lambda path, v: _enum(path, v, STOP_MATCHING),
    "clusterKind": lambda path, v: _enum(path, v, CLUSTER_KINDS),
    "driftIgnore": lambda path, v: _list(path, v, _selector),
    "driftExclusions": lambda path, v: _list(path, v, _drift_exclusion),
    "patches": lambda path, v: _list(path, v, _patch),
    "templateResourceRefs": lambda path, v: _list(path, v, _template_resource_ref),
    "helmRepositories": lambda path, v: _repositories(path, v),
}


def config_from_value(value):
    config = default_config()
    if value is None:
        return config, None

    def field(path, key, v):
        if key == "priority":
            n = _int(path, v)
            if n < 1 or n > MAX_INT32 - 1:
                raise _problem(path, "must be between 1 and %d (Sveltos tier = %d - priority)" % (MAX_INT32 - 1, MAX_INT32))
            config["priority"] = n
        elif key in PARSERS:
            config[key] = PARSERS[key](path, v)
        elif key == "policyRefs":
            raise _problem(
                path,
                "not supported: this plugin makes one Profile per service, so ServiceSet-wide policyRefs "
                "have no Profile of their own; deploy them with a Resources ServiceTemplate",
            )
        else:
            raise _problem(path, "unknown field")

    errors = _visit(value, "", field)
    return (config, None) if not errors else (None, errors)


def _visit(value, path, field):
    """Calls `field(path, key, value)` for every non-null field of the object `value`, in key
    order, and collects the errors; a non-object is one error at `path`."""
    if not isinstance(value, dict):
        return [(path, "expected an object")]
    errors = []
    for key in sorted(value):
        v = value[key]
        if v is None:
            continue
        p = key if path == "" else "%s.%s" % (path, key)
        try:
            field(p, key, v)
        except Problems as e:
            errors.extend(e.errors)
    return errors


def _object(path, value, keys, check=None):
    """A copy of the object `value` restricted to `keys` (others are unknown fields); `check`
    validates each value."""
    out = {}

    def field(p, key, v):
        if key not in keys:
            raise _problem(p, "unknown field")
        out[key] = check(p, key, v) if check else v

    errors = _visit(value, path, field)
    if errors:
        raise Problems(errors)
    return out


def _list(path, value, item):
    if not isinstance(value, list):
        raise _problem(path, "expected a list")
    out, errors = [], []
    for i, v in enumerate(value):
        try:
            out.append(item("%s[%d]" % (path, i), v))
        except Problems as e:
            errors.extend(e.errors)
    if errors:
        raise Problems(errors)
    return out


def _selector(path, value):
    """A Sveltos PatchSelector: group, version, kind, name, namespace, labelSelector,
    annotationSelector (strings)."""
    return _object(path, value, _SELECTOR_KEYS, lambda p, k, v: _str(p, v))


def _patch(path, value):
    def check(p, key, v):
        return _str(p, v) if key == "patch" else _selector(p, v)

    patch = _object(path, value, ("patch", "target"), check)
    if not patch.get("patch"):
        raise _problem(path + ".patch", "required")
    return patch


def _drift_exclusion(path, value):
    def check(p, key, v):
        if key == "paths":
            return _list(p, v, _str)
        return _selector(p, v)

    exclusion = _object(path, value, ("paths", "target"), check)
    if not exclusion.get("paths"):
        raise _problem(path + ".paths", "required")
    return exclusion


def _template_resource_ref(path, value):
    def check(p, key, v):
        if key == "resource":
            return _object(p, v, _REFERENCE_KEYS, lambda pp, kk, vv: _str(pp, vv))
        if key == "identifier":
            return _str(p, v)
        if key in ("optional", "ignoreStatusChanges"):
            return _bool(p, v)
        return _list(p, v, _str)  # watchFields

    ref = _object(path, value, ("identifier", "ignoreStatusChanges", "optional", "resource", "watchFields"), check)
    errors = []
    if not ref.get("identifier"):
        errors.append((path + ".identifier", "required"))
    if not ref.get("resource", {}).get("kind"):
        errors.append((path + ".resource.kind", "required"))
    if errors:
        raise Problems(errors)
    return ref


def _repositories(path, value):
    """`helmRepositories: {<Flux HelmRepository name>: <url> | {url, insecure, secretRef, certSecretRef}}`."""
    out = {}

    def field(p, key, v):
        if not is_dns1123_subdomain(key):
            raise _problem(p, "%s is not a valid HelmRepository name (DNS-1123 subdomain)" % _quote(key))
        if isinstance(v, str):
            repo = {"url": v}
        elif not isinstance(v, dict):
            raise _problem(p, "expected a repository URL or {url, insecure, secretRef, certSecretRef}")
        else:

            def check(pp, kk, vv):
                if kk == "insecure":
                    return _bool(pp, vv)
                text = _str(pp, vv)
                if kk in ("secretRef", "certSecretRef") and not is_dns1123_subdomain(text):
                    raise _problem(pp, "%s is not a Secret name" % _quote(text))
                return text

            repo = _object(p, v, ("certSecretRef", "insecure", "secretRef", "url"), check)
        url = repo.get("url", "")
        if url.strip() == "" or any(c.isspace() for c in url) or "://" not in url:
            raise _problem(p if isinstance(v, str) else p + ".url", "%s is not a repository URL (http(s):// or oci://)" % _quote(url))
        out[key] = repo

    errors = _visit(value, path, field)
    if errors:
        raise Problems(errors)
    return out


def _str(path, value):
    if not isinstance(value, str):
        raise _problem(path, "expected a string")
    return value


def _bool(path, value):
    if not isinstance(value, bool):
        raise _problem(path, "expected a boolean")
    return value


def _int(path, value):
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _problem(path, "expected an integer")
    return value


def _enum(path, value, allowed):
    text = _str(path, value)
    if text not in allowed:
        raise _problem(path, "%s is not one of %s" % (_quote(text), ", ".join(allowed)))
    return text


def _quote(s):
    return json.dumps(str(s), ensure_ascii=False)


def quote(s):
    return _quote(s)


def valid_label(s):
    return is_dns1123_label(s)
