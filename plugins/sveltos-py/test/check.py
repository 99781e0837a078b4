#!/usr/bin/env python3
"""Checks the Sveltos plugin against its golden cases, natively (the plugin's modules under
CPython, with the very inputs the host builds) and through the host binary (the built
component). Exits non-zero on any difference. Run by ../check.sh.

    check.py --wasm dist/sveltos.wasm --cli target/debug/ksm-adapter [--update]

- translate cases (testdata/translate/<case>/{input,expected}.yaml): native translate ==
  expected.yaml; `ksm-adapter plugin translate` == expected.yaml (the host's output policy
  applied: without `allowedNamespaces: [mgmt]`, which the CLI cannot set, the host refuses the
  self-management Profiles in namespace mgmt, and that refusal is what is expected of it);
- status table (testdata/status/cases.yaml, the SDK's StatusCase format: one observed Profile):
  natively, and through `ksm-adapter plugin test` (below);
- status cases with ClusterSummaries (testdata/status/<case>/{input,expected-status}.yaml):
  natively, with the ClusterSummaries attached to their Profile by owner reference as the host
  attaches read objects; and through `ksm-adapter plugin status`;
- `ksm-adapter plugin test` (the conformance suite) on the component with --fixtures testdata
  and testdata/status, namespace mgmt allowed (`--allowed-namespace mgmt`, as the AdapterPlugin's
  `allowedNamespaces`): every check must pass.

KSM_UPDATE_GOLDEN=1 (or --update) rewrites every translate case's expected.yaml and every
ClusterSummary case's expected-status.yaml from the native answers (review the diff).
"""

import argparse
import json
import os
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "src"))

from sveltos_plugin import CONTRACT_VERSION  # noqa: E402
from sveltos_plugin import config as plugin_config  # noqa: E402
from sveltos_plugin.names import derived_name  # noqa: E402
from sveltos_plugin.status import map_status  # noqa: E402
from sveltos_plugin.translate import TranslateFailure, translate  # noqa: E402

K0RDENT = "k0rdent.mirantis.com/v1beta1"
SYSTEM_NAMESPACE = "kcm-system"
READS = [("config.projectsveltos.io", "v1beta1", "ClusterSummary")]
SOURCE_API_VERSION = "source.toolkit.fluxcd.io/v1"
SOURCE_KINDS = ("HelmChart", "HelmRepository", "GitRepository", "Bucket", "OCIRepository")
ERROR_KINDS = {
    "template-not-found": ("TemplateNotFound", "Pending"),
    "template-not-ready": ("TemplateNotReady", "Pending"),
    "unsupported-source": ("UnsupportedSource", "Failed"),
    "invalid-values": ("InvalidValues", "Failed"),
    "invalid-service": ("InvalidService", "Failed"),
}
STATE_NAMES = {"deployed": "Deployed", "provisioning": "Provisioning", "failed": "Failed", "pending": "Pending", "deleting": "Deleting"}
TYPE_NAMES = {"helm": "Helm", "kustomize": "Kustomize", "resource": "Resource"}
MGMT_REFUSAL = 'namespace "mgmt" is not the ServiceSet\'s namespace'


class Report:
    def __init__(self):
        self.failed = 0
        self.passed = 0

    def ok(self, name, what):
        self.passed += 1
        print("PASS     %-48s %s" % (name, what))

    def fail(self, name, what):
        self.failed += 1
        print("FAIL     %-48s %s" % (name, what))


def documents(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def is_k0rdent(doc, kind):
    return doc.get("kind") == kind and doc.get("apiVersion") == K0RDENT


# --- what the host builds -----------------------------------------------------------------------


def translate_input(docs):
    """The translate input the host builds (plugins/sdk/src/inputs.rs)."""
    (service_set,) = [d for d in docs if is_k0rdent(d, "ServiceSet")]
    spec = service_set.get("spec") or {}
    names = []
    for s in spec.get("services") or []:
        if s.get("template") not in names:
            names.append(s.get("template"))
    templates = {}
    for name in names:
        found = [d for d in docs if is_k0rdent(d, "ServiceTemplate") and d["metadata"]["name"] == name]
        templates[name] = found[0] if found else None
    provider = spec.get("provider") or {}
    if provider.get("selfManagement") or not spec.get("cluster"):
        target = None
    else:
        target = (spec["cluster"], spec["cluster"] + "-kubeconfig", "value")
    return service_set, templates, sources_of([t for t in templates.values() if t is not None], docs), target


def sources_of(templates, docs):
    """plugins/sdk/src/sources.rs sources_of over the case's documents: {(kind, namespace, name):
    JSON text of apiVersion, kind, metadata (name, namespace, labels, annotations) and spec, or
    None when not found}."""

    def reference(value, namespace):
        if not isinstance(value, dict) or value.get("kind") not in SOURCE_KINDS or not value.get("name"):
            return None
        return (value["kind"], value.get("namespace") or namespace, value["name"])

    refs = set()
    for t in templates:
        namespace = (t.get("metadata") or {}).get("namespace", "")
        spec, status = t.get("spec") or {}, t.get("status") or {}
        helm = spec.get("helm") or {}
        named = [
            status.get("chartRef"), helm.get("chartRef"), (helm.get("chartSpec") or {}).get("sourceRef"),
            status.get("sourceStatus"), (helm.get("chartSource") or {}).get("localSourceRef"),
            (spec.get("kustomize") or {}).get("localSourceRef"), (spec.get("resources") or {}).get("localSourceRef"),
        ]
        refs.update(r for r in (reference(n, namespace) for n in named) if r is not None)
    sources, queue = {}, sorted(refs, reverse=True)
    while queue:
        ref = queue.pop()
        if ref in sources:
            continue
        kind, namespace, name = ref
        found = next(
            (d for d in docs if d.get("apiVersion") == SOURCE_API_VERSION and d.get("kind") == kind
             and (d.get("metadata") or {}).get("namespace") == namespace and (d.get("metadata") or {}).get("name") == name),
            None,
        )
        if found is not None and kind == "HelmChart":
            chart_source = reference((found.get("spec") or {}).get("sourceRef"), namespace)
            if chart_source is not None:
                queue.append(chart_source)
        handed = None
        if found is not None:
            metadata = {k: v for k, v in found["metadata"].items() if k in ("name", "namespace", "labels", "annotations")}
            handed = json.dumps({"apiVersion": found["apiVersion"], "kind": kind, "metadata": metadata, "spec": found.get("spec")})
        sources[ref] = handed
    return sources


def config_error_text(path, message):
    return "%s: %s" % (path, message) if path else message


def render_translation(result):
    """report::translation (plugins/sdk/src/report.rs)."""
    if isinstance(result, TranslateFailure):
        if result.kind == "invalid-config":
            return {"error": {"kind": "InvalidConfig", "errors": [config_error_text(p, m) for p, m in result.value]}}
        return {"error": {"kind": "InvalidInput", "message": result.value}}
    services = []
    for s in result:
        if "error" in s:
            kind, message = s["error"]
            name, state = ERROR_KINDS[kind]
            rendered = {"service": s["service"], "error": {"kind": name, "state": state, "message": message}}
        else:
            rendered = {"service": s["service"], "objects": [json.loads(o) for o in s["objects"]]}
        if s["claims"]:
            rendered["claims"] = ["%s %s/%s on %s" % (k, ns, n, t) for t, k, ns, n in s["claims"]]
        services.append(rendered)
    return {"services": services}


def native_translate(docs):
    service_set, templates, sources, target = translate_input(docs)
    try:
        return translate(json.dumps(service_set), templates, sources, target, SYSTEM_NAMESPACE)
    except TranslateFailure as e:
        return e


def api_group(api_version):
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def owns(owner, obj):
    """The host's rule (host/src/plan/reads.rs): group, kind, name, uid when both carry one, and
    a namespaced owner's namespace."""
    om, m = owner.get("metadata") or {}, obj.get("metadata") or {}
    if om.get("namespace") and om.get("namespace") != m.get("namespace"):
        return False
    for ref in m.get("ownerReferences") or []:
        if (
            api_group(ref.get("apiVersion", "")) == api_group(owner.get("apiVersion", ""))
            and ref.get("kind") == owner.get("kind")
            and ref.get("name") == om.get("name")
            and (not ref.get("uid") or not om.get("uid") or ref.get("uid") == om.get("uid"))
        ):
            return True
    return False


def is_read(obj):
    group = api_group(obj.get("apiVersion", ""))
    version = obj.get("apiVersion", "").rsplit("/", 1)[-1]
    return any(obj.get("kind") == k and group == g and version == v for g, v, k in READS)


def observed_for(objects, docs):
    """`observed` as the host passes it: the service's objects (live or None), then the read
    objects they own, sorted by (apiVersion, kind, namespace, name)."""
    observed, owners = [], []
    for text in objects:
        o = json.loads(text)
        meta = o["metadata"]
        live = next(
            (d for d in docs if d.get("apiVersion") == o["apiVersion"] and d.get("kind") == o["kind"]
             and (d.get("metadata") or {}).get("name") == meta["name"]
             and (d.get("metadata") or {}).get("namespace") == meta["namespace"]),
            None,
        )
        observed.append({"apiVersion": o["apiVersion"], "kind": o["kind"], "name": meta["name"], "namespace": meta["namespace"], "object": live})
        if live is not None:
            owners.append(live)
    reads = [d for d in docs if is_read(d) and any(owns(owner, d) for owner in owners)]
    reads.sort(key=lambda d: (d["apiVersion"], d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]))
    for d in reads:
        observed.append({"apiVersion": d["apiVersion"], "kind": d["kind"], "name": d["metadata"]["name"], "namespace": d["metadata"].get("namespace", ""), "object": d})
    return observed


def render_status(service, status):
    rendered = {"service": service, "state": STATE_NAMES[status["state"]], "type": TYPE_NAMES[status["type"]]}
    if status.get("version") is not None:
        rendered["version"] = status["version"]
    if status.get("failureMessage") is not None:
        rendered["failureMessage"] = status["failureMessage"]
    return rendered


def template_type_name(template):
    spec = (template or {}).get("spec") or {}
    return "Kustomize" if "kustomize" in spec else "Resource" if "resources" in spec else "Helm"


def native_states(docs):
    """`services:` as `plugin status` prints them (plan::service_status)."""
    service_set, templates, _, _ = translate_input(docs)
    result = native_translate(docs)
    if isinstance(result, TranslateFailure):
        return {"error": render_translation(result)["error"]}
    services = []
    specs = {s["name"]: s for s in service_set["spec"]["services"]}
    for s in result:
        template = templates.get(specs[s["service"]].get("template"))
        if "error" in s:
            kind, message = s["error"]
            services.append({"service": s["service"], "state": ERROR_KINDS[kind][1], "type": template_type_name(template), "failureMessage": message})
            continue
        status = map_status(
            json.dumps(service_set), s["service"], json.dumps(template) if template is not None else None,
            observed_for(s["objects"], docs),
        )
        services.append(render_status(s["service"], status))
    return {"services": services}


def status_case_input(case):
    """StatusCase::input (plugins/sdk/src/status_table.rs): service ingress-nginx of ServiceSet
    kcm-system/prod-eu-1 with one observed object, then the read objects it owns (`reads`)."""
    service_set = {
        "apiVersion": K0RDENT, "kind": "ServiceSet",
        "metadata": {"name": "prod-eu-1", "namespace": SYSTEM_NAMESPACE},
        "spec": {"cluster": "prod-eu-1", "provider": {"name": "ksm-flux"}, "services": [
            {"name": "ingress-nginx", "namespace": "ingress-nginx", "template": "ingress-nginx-4-11-3", "helmAction": case.get("helmAction")},
        ]},
    }
    kind = case.get("template")
    template = None
    if kind is not None:
        source = {"remoteSourceSpec": {"git": {"url": "https://github.com/example/apps", "ref": {"tag": "v1.0.0"}}}, "path": "./deploy"}
        spec = {"helm": {"chartSpec": {"chart": "ingress-nginx", "version": "4.11.3"}}} if kind == "helm" else {kind: source}
        template = {"apiVersion": K0RDENT, "kind": "ServiceTemplate", "metadata": {"name": "ingress-nginx-4-11-3", "namespace": SYSTEM_NAMESPACE}, "spec": spec, "status": {"valid": True}}
    obj = case.get("object")
    if obj is not None:
        kind_name, api_version = obj.get("kind", ""), obj.get("apiVersion", "")
    elif kind in ("helm", None):
        kind_name, api_version = "HelmRelease", "helm.toolkit.fluxcd.io/v2"
    else:
        kind_name, api_version = "Kustomization", "kustomize.toolkit.fluxcd.io/v1"
    observed = [{"apiVersion": api_version, "kind": kind_name, "name": derived_name(["prod-eu-1", "ingress-nginx"]), "namespace": SYSTEM_NAMESPACE, "object": obj}]
    for read in case.get("reads") or []:
        meta = read.get("metadata") or {}
        observed.append({"apiVersion": read.get("apiVersion", ""), "kind": read.get("kind", ""), "name": meta.get("name", ""), "namespace": meta.get("namespace", ""), "object": read})
    return json.dumps(service_set), "ingress-nginx", json.dumps(template) if template else None, observed


def compare_status_case(case, status):
    """StatusCase::compare."""
    expect = case["expect"]
    problems = []
    state = STATE_NAMES[status["state"]]
    if state != expect["state"]:
        problems.append("state %s instead of %s" % (state, expect["state"]))
    if expect.get("type") and TYPE_NAMES[status["type"]] != expect["type"]:
        problems.append("type %s instead of %s" % (TYPE_NAMES[status["type"]], expect["type"]))
    actual, wanted = status.get("failureMessage"), expect.get("failureMessage")
    if not ((actual is not None and wanted is not None and wanted in actual) or (actual is None and wanted is None)):
        problems.append("failure message %r does not match %r" % (actual, wanted))
    if status.get("version") != expect.get("version"):
        problems.append("version %r instead of %r" % (status.get("version"), expect.get("version")))
    if expect.get("deployedHash") is not None and status.get("deployedHash") != expect["deployedHash"]:
        problems.append("deployed hash %r instead of %r" % (status.get("deployedHash"), expect["deployedHash"]))
    return problems


# --- the host binary ------------------------------------------------------------------------------


_RUNS = {}
_POOL = None


def _run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


def start_cli(cli, *args):
    """Starts `cli args` in the background (each run compiles the 18 MB component, seconds of
    CPU: the runs go in parallel, one per core)."""
    global _POOL
    if _POOL is None:
        import concurrent.futures

        _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
    if args not in _RUNS:
        _RUNS[args] = _POOL.submit(_run, [cli, *args])


def run_cli(cli, *args):
    start_cli(cli, *args)
    return _RUNS[args].result()


def cli_documents(text):
    return [d for d in yaml.safe_load_all(text) if d is not None]


def expected_through_host(expected, namespace):
    """expected.yaml as `plugin translate` shows it under the default policy: services with
    objects outside the ServiceSet's namespace (the self-management Profiles in mgmt) refused."""
    if "services" not in expected:
        return expected, False
    out, refused = [], False
    for s in expected["services"]:
        if any(o["metadata"]["namespace"] != namespace for o in s.get("objects", [])):
            refused = True
            s = dict(s)
            del s["objects"]
            s.pop("claims", None)  # a refused service claims nothing
            s["error"] = {"kind": "Refused", "state": "Failed", "message": MGMT_REFUSAL}
        out.append(s)
    return {"services": out}, refused


def matches_refusal(expected, actual):
    """Equal, except that a Refused error's expected message is a substring of the actual one."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        if expected.get("kind") == "Refused" and actual.get("kind") == "Refused":
            return expected["message"] in actual.get("message", "") and expected["state"] == actual.get("state")
        return expected.keys() == actual.keys() and all(matches_refusal(expected[k], actual[k]) for k in expected)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(matches_refusal(e, a) for e, a in zip(expected, actual))
    return expected == actual


def diff(expected, actual):
    e = yaml.safe_dump(expected, sort_keys=True).splitlines()
    a = yaml.safe_dump(actual, sort_keys=True).splitlines()
    import difflib

    return "\n".join(difflib.unified_diff(e, a, "expected", "actual", lineterm="", n=2))


# --- the checks -----------------------------------------------------------------------------------


def check_translate(report, cli, wasm, update):
    base = os.path.join(HERE, "testdata", "translate")
    for case in sorted(os.listdir(base)):
        d = os.path.join(base, case)
        docs = documents(os.path.join(d, "input.yaml"))
        name = "translate/" + case
        actual = render_translation(native_translate(docs))
        expected_path = os.path.join(d, "expected.yaml")
        if update:
            with open(expected_path, "w") as f:
                yaml.safe_dump(actual, f, sort_keys=True, allow_unicode=True)
            report.ok(name, "expected.yaml written (review it)")
        expected = documents(expected_path)[0]
        again = render_translation(native_translate(docs))
        if actual != expected:
            report.fail(name, "native translate differs from expected.yaml:\n" + diff(expected, actual))
        elif actual != again:
            report.fail(name, "native translate is not deterministic")
        else:
            report.ok(name, "native translate matches expected.yaml (twice)")
        service_set, _, _, _ = translate_input(docs)
        config = ((service_set.get("spec") or {}).get("provider") or {}).get("config")
        _, errors = plugin_config.config_from_value(config)
        if bool(errors) != ("error" in expected and expected["error"]["kind"] == "InvalidConfig"):
            report.fail(name, "validate-config and translate disagree on the config")
        code, out, err = run_cli(cli, "plugin", "translate", "--plugin", wasm, "-f", os.path.join(d, "input.yaml"))
        if code != 0:
            report.fail(name, "plugin translate exited %d: %s" % (code, err.strip()[-2000:]))
            continue
        (doc,) = cli_documents(out)
        doc.pop("serviceSet", None)
        host_expected, refused = expected_through_host(expected, service_set["metadata"]["namespace"])
        if matches_refusal(host_expected, doc):
            note = " (the mgmt Profiles refused by the host's default policy, as expected without allowedNamespaces: [mgmt])" if refused else ""
            report.ok(name, "plugin translate matches expected.yaml" + note)
        else:
            report.fail(name, "plugin translate differs from expected.yaml:\n" + diff(host_expected, doc))


def check_status_table(report):
    path = os.path.join(HERE, "testdata", "status", "cases.yaml")
    with open(path) as f:
        cases = yaml.safe_load(f)
    for case in cases:
        name = "status/cases.yaml#" + case["name"]
        status = map_status(*status_case_input(case))
        problems = compare_status_case(case, status)
        if problems:
            report.fail(name, "; ".join(problems))
        else:
            report.ok(name, "native map-status: %s" % STATE_NAMES[status["state"]])


def summary_case_dirs():
    base = os.path.join(HERE, "testdata", "status")
    return [os.path.join(base, c) for c in sorted(os.listdir(base)) if os.path.isfile(os.path.join(base, c, "input.yaml"))]


def check_summary_cases(report, cli, wasm, update):
    for d in summary_case_dirs():
        name = "status/" + os.path.basename(d)
        docs = documents(os.path.join(d, "input.yaml"))
        actual = native_states(docs)
        path = os.path.join(d, "expected-status.yaml")
        if update:
            with open(path, "w") as f:
                yaml.safe_dump(actual, f, sort_keys=True, allow_unicode=True)
            report.ok(name, "expected-status.yaml written (review it)")
        expected = documents(path)[0]
        if actual != expected:
            report.fail(name, "native map-status differs from expected-status.yaml:\n" + diff(expected, actual))
        else:
            report.ok(name, "native map-status (ClusterSummaries attached by owner reference) matches expected-status.yaml")
        code, out, err = run_cli(cli, "plugin", "status", "--plugin", wasm, "-f", os.path.join(d, "input.yaml"))
        if code != 0:
            report.fail(name, "plugin status exited %d: %s" % (code, err.strip()[-2000:]))
            continue
        (doc,) = cli_documents(out)
        doc.pop("serviceSet", None)
        if doc == expected:
            report.ok(name, "plugin status matches expected-status.yaml")
        else:
            report.fail(name, "plugin status differs from expected-status.yaml:\n" + diff(expected, doc))


def suite_args():
    fixtures = ("--fixtures", os.path.join(HERE, "testdata"), "--fixtures", os.path.join(HERE, "testdata", "status"))
    # No provider config: the chart repositories of the suite's own cases come from the
    # HelmRepositories among their objects, as the host hands them over.
    return ("--config", "{}", "--allowed-namespace", "mgmt") + fixtures


def check_suite(report, cli, wasm):
    code, out, err = run_cli(cli, "plugin", "test", wasm, *suite_args())
    lines = out.splitlines()
    counted = 0
    for line in lines:
        if not line.startswith("FAIL"):
            if line.startswith("PASS"):
                counted += 1
            continue
        parts = line.split(None, 2)
        case, rest = parts[1], parts[2] if len(parts) > 2 else ""
        report.fail("plugin test " + case, rest)
    if not lines or " passed" not in lines[-1]:
        report.fail("plugin test", "no summary line; exit %d; %s" % (code, err.strip()[-2000:]))
    else:
        report.ok("plugin test", "%s (%d PASS lines)" % (lines[-1], counted))


def check_inspect(report, cli, wasm):
    code, out, err = run_cli(cli, "plugin", "inspect", wasm)
    if code != 0:
        report.fail("plugin inspect", err.strip()[-2000:])
        return False
    doc = cli_documents(out)[0]
    component, metadata = doc["component"], doc["metadata"]
    problems = []
    if component["imports"]:
        problems.append("imports %s (expected none)" % component["imports"])
    export = "ksm:adapter/plugin@" + CONTRACT_VERSION
    if export not in component["exports"]:
        problems.append("does not export " + export)
    kinds = [(k["group"], k["version"], k["kind"], k["plural"], k["namespaced"]) for k in metadata["creates"]]
    if kinds != [("config.projectsveltos.io", "v1beta1", "Profile", "profiles", True)]:
        problems.append("creates %s" % kinds)
    reads = [(k["group"], k["version"], k["kind"], k["plural"], k["namespaced"]) for k in metadata["reads"]]
    if reads != [("config.projectsveltos.io", "v1beta1", "ClusterSummary", "clustersummaries", True)]:
        problems.append("reads %s" % reads)
    if problems:
        report.fail("plugin inspect", "; ".join(problems))
    else:
        report.ok("plugin inspect", "imports nothing; creates Profile, reads ClusterSummary; %d bytes" % component["size"])
    return True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--wasm", required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--update", action="store_true")
    args = parser.parse_args()
    update = args.update or os.environ.get("KSM_UPDATE_GOLDEN") == "1"
    report = Report()
    cli, wasm = args.cli, args.wasm
    start_cli(cli, "plugin", "inspect", wasm)
    start_cli(cli, "plugin", "test", wasm, *suite_args())
    base = os.path.join(HERE, "testdata", "translate")
    for case in sorted(os.listdir(base)):
        start_cli(cli, "plugin", "translate", "--plugin", wasm, "-f", os.path.join(base, case, "input.yaml"))
    for d in summary_case_dirs():
        start_cli(cli, "plugin", "status", "--plugin", wasm, "-f", os.path.join(d, "input.yaml"))
    if check_inspect(report, args.cli, args.wasm):
        check_translate(report, args.cli, args.wasm, update)
        check_status_table(report)
        check_summary_cases(report, args.cli, args.wasm, update)
        check_suite(report, args.cli, args.wasm)
    print("%d passed, %d failed" % (report.passed, report.failed))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
