// Runs the Argo CD plugin's golden cases, twice:
//
// - directly under Node (src/plugin.js with a stub host import), with the same inputs the host
//   builds (ksm_plugin_sdk::inputs, plugins/flux/src/testdata.rs), for every case;
// - through the host binary on the built component: `ksm-adapter plugin translate` per
//   translate case, `ksm-adapter plugin status` on every status case the CLI can express (a
//   case with no template, or an Uninstall service whose Application still exists, needs the
//   controller's view and runs only directly), and `ksm-adapter plugin inspect`.
//
//   node --import ./test/register.mjs test/check.mjs --wasm dist/argocd.wasm --cli <ksm-adapter>
//   KSM_UPDATE_GOLDEN=1 ... rewrites every expected.yaml from the direct run (review the diff).
//
// Prints one line per check and "N passed, N failed"; exits 1 on any failure.

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import yaml from "js-yaml";
import { CONTRACT_VERSION, plugin } from "../src/plugin.js";
import { fnv1a32, isDns1123Label, isDns1123Subdomain, MAX_LABEL_LEN, serviceObjectName, utf8Encode } from "../src/names.js";
import { canonical } from "../src/argocd.js";

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const repo = join(here, "..", "..");
const SYSTEM_NAMESPACE = "kcm-system";
const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const wasm = option("--wasm");
const cli = option("--cli");
const update = process.env.KSM_UPDATE_GOLDEN === "1";

let passed = 0;
let failed = 0;
function check(name, problems) {
  const list = (Array.isArray(problems) ? problems : [problems]).filter(Boolean);
  if (list.length === 0) {
    passed++;
    console.log(`ok   ${name}`);
  } else {
    failed++;
    console.log(`FAIL ${name}\n  ${list.join("\n").replaceAll("\n", "\n  ")}`);
  }
}

const readYamlAll = (path) => yaml.loadAll(readFileSync(path, "utf8")).filter((d) => d != null);
const dump = (value) => yaml.dump(value, { sortKeys: true, lineWidth: -1, noRefs: true });
const same = (a, b) => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
const diff = (actual, expected) => `actual:\n${dump(actual)}expected:\n${dump(expected)}`;

// --- inputs, as the host builds them --------------------------------------------------------

/** ksm_plugin_sdk::inputs::target */
function target(spec) {
  const cluster = spec.cluster ?? "";
  if (spec.provider?.selfManagement || cluster === "") return { tag: "self-management" };
  return { tag: "remote", val: { name: cluster, kubeconfig: { name: `${cluster}-kubeconfig`, key: "value" } } };
}

const SOURCE_KINDS = ["HelmChart", "HelmRepository", "GitRepository", "Bucket", "OCIRepository"];
const SOURCE_API_VERSION = "source.toolkit.fluxcd.io/v1";

/** ksm_plugin_sdk::sources::sources_of over the documents of one case. */
function sources(templates, documents) {
  const reference = (r, namespace) =>
    r && SOURCE_KINDS.includes(r.kind) && r.name ? { kind: r.kind, namespace: r.namespace || namespace, name: r.name } : null;
  const key = (r) => `${r.kind}\u0000${r.namespace}\u0000${r.name}`;
  const refs = new Map();
  for (const t of templates) {
    const namespace = t.metadata?.namespace ?? "";
    const { spec = {}, status = {} } = t;
    const named = [status.chartRef, spec.helm?.chartRef, spec.helm?.chartSpec?.sourceRef, status.sourceStatus,
      spec.helm?.chartSource?.localSourceRef,
      spec.kustomize?.localSourceRef, spec.resources?.localSourceRef];
    for (const r of named.map((n) => reference(n, namespace)).filter(Boolean)) refs.set(key(r), r);
  }
  const byKey = (a, b) => (a.kind !== b.kind ? (a.kind < b.kind ? -1 : 1) : a.namespace !== b.namespace ? (a.namespace < b.namespace ? -1 : 1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  const queue = [...refs.values()].sort(byKey).reverse();
  const seen = new Set();
  const out = [];
  while (queue.length > 0) {
    const r = queue.pop();
    if (seen.has(key(r))) continue;
    seen.add(key(r));
    const found = documents.find((d) => d.apiVersion === SOURCE_API_VERSION && d.kind === r.kind &&
      d.metadata?.namespace === r.namespace && d.metadata?.name === r.name);
    if (found && r.kind === "HelmChart") {
      const next = reference(found.spec?.sourceRef, r.namespace);
      if (next) queue.push(next);
    }
    const handed = found && { apiVersion: found.apiVersion, kind: found.kind,
      metadata: Object.fromEntries(["name", "namespace", "labels", "annotations"].filter((f) => f in found.metadata).map((f) => [f, found.metadata[f]])),
      spec: found.spec ?? null };
    out.push({ apiVersion: SOURCE_API_VERSION, kind: r.kind, namespace: r.namespace, name: r.name,
      object: handed ? JSON.stringify(handed) : null });
  }
  return out;
}

/** ksm_plugin_sdk::inputs::translate_input over the documents of one case. */
function translateInput(documents, path) {
  const sets = documents.filter((d) => d.kind === "ServiceSet");
  if (sets.length !== 1) throw new Error(`${path}: expected exactly one ServiceSet, found ${sets.length}`);
  const serviceSet = sets[0];
  const spec = serviceSet.spec ?? {};
  const names = [...new Set((spec.services ?? []).map((s) => s.template))];
  const found = names.map((name) => [name, documents.find((d) => d.kind === "ServiceTemplate" && d.metadata?.name === name)]);
  const templates = found.map(([name, t]) => ({ name, object: t ? JSON.stringify(t) : null }));
  return {
    serviceSet: JSON.stringify(serviceSet),
    templates,
    sources: sources(found.map(([, t]) => t).filter(Boolean), documents),
    target: target(spec),
    systemNamespace: SYSTEM_NAMESPACE,
  };
}

// --- rendering, as ksm_plugin_sdk::report does -----------------------------------------------

const ERROR_KINDS = {
  "template-not-found": ["TemplateNotFound", "Pending"],
  "template-not-ready": ["TemplateNotReady", "Pending"],
  "unsupported-source": ["UnsupportedSource", "Failed"],
  "invalid-values": ["InvalidValues", "Failed"],
  "invalid-service": ["InvalidService", "Failed"],
};
const claimText = (c) => `${c.kind} ${c.namespace}/${c.name} on ${c.target}`;
const configErrorText = (e) => (e.path === "" ? e.message : `${e.path}: ${e.message}`);

/** report::translation of a call of `translate` (its result, or what it threw). */
function renderTranslation(call) {
  let services;
  try {
    services = call();
  } catch (e) {
    if (e?.tag === "invalid-config") return { error: { kind: "InvalidConfig", errors: e.val.map(configErrorText) } };
    if (e?.tag === "invalid-input") return { error: { kind: "InvalidInput", message: e.val } };
    throw e;
  }
  return {
    services: services.map((t) => {
      let rendered;
      if (t.outcome.tag === "ok") {
        rendered = { service: t.service, objects: t.outcome.val.map((o) => JSON.parse(o)) };
      } else {
        const [kind, state] = ERROR_KINDS[t.outcome.val.tag];
        rendered = { service: t.service, error: { kind, state, message: t.outcome.val.val } };
      }
      if (t.claims.length > 0) rendered.claims = t.claims.map(claimText);
      return rendered;
    }),
  };
}

const STATE = { deployed: "Deployed", provisioning: "Provisioning", failed: "Failed", pending: "Pending", deleting: "Deleting" };
const TYPE = { helm: "Helm", kustomize: "Kustomize", resource: "Resource" };

// --- translate cases -------------------------------------------------------------------------

const translateDir = join(here, "testdata", "translate");
const caseDirs = readdirSync(translateDir)
  .map((d) => join(translateDir, d))
  .filter((d) => statSync(d).isDirectory())
  .sort();
const creates = plugin.metadata().creates;

for (const dir of caseDirs) {
  const name = dir.slice(translateDir.length + 1);
  const inputPath = join(dir, "input.yaml");
  const expectedPath = join(dir, "expected.yaml");
  const input = translateInput(readYamlAll(inputPath), inputPath);
  globalThis.ksmHostLog = [];
  const actual = renderTranslation(() => plugin.translate(structuredClone(input)));
  if (update) writeFileSync(expectedPath, dump(actual));
  const expected = yaml.load(readFileSync(expectedPath, "utf8"));
  check(`translate ${name} (node)`, same(actual, expected) ? null : diff(actual, expected));

  const again = renderTranslation(() => plugin.translate(structuredClone(input)));
  const problems = [];
  if (!same(actual, again)) problems.push("a second translation differs");
  for (const service of actual.services ?? []) {
    for (const object of service.objects ?? []) {
      if (!creates.some((k) => object.apiVersion === `${k.group}/${k.version}` && object.kind === k.kind)) {
        problems.push(`${service.service}: ${object.apiVersion}/${object.kind} is not a declared kind`);
      }
      for (const reserved of ["labels", "ownerReferences", "finalizers"]) {
        if (object.metadata?.[reserved] !== undefined) problems.push(`${service.service}: metadata.${reserved} is set`);
      }
    }
  }
  if (actual.error?.kind === "InvalidConfig") {
    const config = JSON.stringify(JSON.parse(input.serviceSet).spec.provider?.config ?? null);
    try {
      plugin.validateConfig(config);
      problems.push("validate-config accepts the config translate rejects");
    } catch (errors) {
      if (!same(errors.map(configErrorText), actual.error.errors)) problems.push("validate-config and translate disagree");
    }
  }
  check(`translate ${name} is deterministic, declared kinds only, validate-config agrees (node)`, problems);

  if (cli && wasm) {
    const out = execFileSync(cli, ["plugin", "translate", "--plugin", wasm, "-f", inputPath], { encoding: "utf8" });
    const documents = yaml.loadAll(out).filter((d) => d != null);
    const rendered = documents.map(({ serviceSet, ...rest }) => rest);
    const problem =
      rendered.length !== 1 ? `expected one ServiceSet, got ${rendered.length}` : same(rendered[0], expected) ? null : diff(rendered[0], expected);
    check(`translate ${name} (ksm-adapter plugin translate)`, problem);
  }
}

// --- status cases (plugins/flux/src/testdata.rs's format) -----------------------------------

const SERVICE_SET = "prod-eu-1";
const SERVICE = "ingress-nginx";
const TEMPLATE = "ingress-nginx-4-11-3";
const GIT_SOURCE = { remoteSourceSpec: { git: { url: "https://github.com/example/apps", ref: { tag: "v1.0.0" } } }, path: "./deploy" };

/** testdata.rs `template(kind)` (extended with a HelmRepository for the CLI run). */
function statusTemplate(kind, name = TEMPLATE) {
  const spec = {
    helm: { helm: { chartSpec: { chart: SERVICE, version: "4.11.3", sourceRef: { kind: "HelmRepository", name: "k0rdent-catalog" } } } },
    kustomize: { kustomize: GIT_SOURCE },
    resources: { resources: GIT_SOURCE },
  }[kind];
  return { apiVersion: "k0rdent.mirantis.com/v1beta1", kind: "ServiceTemplate", metadata: { name, namespace: SYSTEM_NAMESPACE }, spec, status: { valid: true } };
}

/** testdata.rs `StatusCase::input`. */
function statusInput(c) {
  const serviceSet = {
    apiVersion: "k0rdent.mirantis.com/v1beta1",
    kind: "ServiceSet",
    metadata: { name: SERVICE_SET, namespace: SYSTEM_NAMESPACE },
    spec: {
      cluster: SERVICE_SET,
      provider: { name: "ksm-argocd" },
      services: [{ name: SERVICE, namespace: SERVICE, template: TEMPLATE, helmAction: c.helmAction ?? null }],
    },
  };
  const [kind, apiVersion] = c.object ? [c.object.kind ?? "", c.object.apiVersion ?? ""] : ["HelmRelease", "helm.toolkit.fluxcd.io/v2"];
  return {
    serviceSet: JSON.stringify(serviceSet),
    service: SERVICE,
    template: c.template ? JSON.stringify(statusTemplate(c.template)) : null,
    observed: [
      {
        apiVersion,
        kind,
        name: serviceObjectName(SERVICE_SET, SERVICE, MAX_LABEL_LEN),
        namespace: SYSTEM_NAMESPACE,
        object: c.object ? JSON.stringify(c.object) : null,
      },
    ],
  };
}

/** testdata.rs `StatusCase::run`'s comparison: every mismatch, or none. */
function statusProblems(c, status) {
  const e = c.expect;
  const problems = [];
  if (status.state !== e.state) problems.push(`state ${status.state} instead of ${e.state}`);
  if (e.type !== undefined && status.type !== e.type) problems.push(`type ${status.type} instead of ${e.type}`);
  const messageOk =
    status.failureMessage != null && e.failureMessage !== undefined
      ? status.failureMessage.includes(e.failureMessage)
      : status.failureMessage == null && e.failureMessage === undefined;
  if (!messageOk) problems.push(`failure message ${JSON.stringify(status.failureMessage ?? null)} does not match ${JSON.stringify(e.failureMessage ?? null)}`);
  if ((status.version ?? null) !== (e.version ?? null)) problems.push(`version ${JSON.stringify(status.version ?? null)} instead of ${JSON.stringify(e.version ?? null)}`);
  return problems;
}

const STATUS_CASE_FIELDS = ["name", "template", "helmAction", "object", "expect"];
const EXPECT_FIELDS = ["state", "type", "failureMessage", "version"];
const cases = yaml.load(readFileSync(join(here, "testdata", "status", "cases.yaml"), "utf8"));
const names = new Set();
for (const c of cases) {
  const unknown = [
    ...Object.keys(c).filter((k) => !STATUS_CASE_FIELDS.includes(k)),
    ...Object.keys(c.expect ?? {}).filter((k) => !EXPECT_FIELDS.includes(k)).map((k) => `expect.${k}`),
  ];
  const problems = unknown.map((k) => `unknown field ${k} (testdata.rs denies unknown fields)`);
  if (names.has(c.name)) problems.push("duplicate case name");
  names.add(c.name);
  let status;
  try {
    const s = plugin.mapStatus(statusInput(c));
    status = { state: STATE[s.state], type: TYPE[s.serviceType], version: s.version, failureMessage: s.failureMessage };
  } catch (e) {
    problems.push(`map-status failed: ${JSON.stringify(e)}`);
  }
  if (status) problems.push(...statusProblems(c, status));
  check(`status ${c.name} (node)`, problems);
}

if (cli && wasm) {
  // Every case the CLI can express, each as a ServiceSet of its own (its own cluster, so no two
  // claim the same release), in one file and one run.
  const reachable = cases.filter((c) => c.template != null && !(c.helmAction === "Uninstall" && c.object != null));
  const documents = [];
  reachable.forEach((c, i) => {
    const ss = `case-${i}`;
    documents.push({
      apiVersion: "k0rdent.mirantis.com/v1beta1",
      kind: "ServiceSet",
      metadata: { name: ss, namespace: SYSTEM_NAMESPACE },
      spec: {
        cluster: ss,
        provider: { name: "ksm-argocd", config: { helmRepositories: { "k0rdent-catalog": "https://charts.example.com" } } },
        services: [{ name: SERVICE, namespace: SERVICE, template: `${ss}-template`, ...(c.helmAction ? { helmAction: c.helmAction } : {}) }],
      },
    });
    documents.push(statusTemplate(c.template, `${ss}-template`));
    if (c.object) {
      const object = structuredClone(c.object);
      object.metadata = { ...object.metadata, name: serviceObjectName(ss, SERVICE, MAX_LABEL_LEN), namespace: SYSTEM_NAMESPACE };
      documents.push(object);
    }
  });
  const dir = mkdtempSync(join(tmpdir(), "argocd-status-"));
  try {
    const file = join(dir, "cases.yaml");
    writeFileSync(file, documents.map((d) => `---\n${dump(d)}`).join(""));
    const out = execFileSync(cli, ["plugin", "status", "--plugin", wasm, "-f", file], { encoding: "utf8" });
    const results = new Map(yaml.loadAll(out).filter((d) => d != null).map((d) => [d.serviceSet, d]));
    reachable.forEach((c, i) => {
      const result = results.get(`${SYSTEM_NAMESPACE}/case-${i}`);
      const service = result?.services?.[0];
      check(
        `status ${c.name} (ksm-adapter plugin status)`,
        service ? statusProblems(c, service) : `no status for this case: ${JSON.stringify(result)}`,
      );
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  // The component's metadata and imports, as the host reads them.
  const inspect = yaml.load(execFileSync(cli, ["plugin", "inspect", wasm], { encoding: "utf8" }));
  const problems = [];
  if (!same(inspect.metadata, plugin.metadata())) problems.push(diff(inspect.metadata, plugin.metadata()));
  if (!same(inspect.component.imports, [`ksm:adapter/host@${CONTRACT_VERSION}`])) problems.push(`imports ${JSON.stringify(inspect.component.imports)}`);
  if (!inspect.component.exports.includes(`ksm:adapter/plugin@${CONTRACT_VERSION}`)) problems.push(`exports ${JSON.stringify(inspect.component.exports)}`);
  check(`inspect: metadata, imports and exports (${inspect.component.size} bytes)`, problems);
}

// --- metadata ------------------------------------------------------------------------------

{
  const pkg = JSON.parse(readFileSync(join(here, "package.json"), "utf8"));
  const metadata = plugin.metadata();
  const problems = [];
  if (metadata.version !== pkg.version) problems.push(`metadata says ${metadata.version}, package.json ${pkg.version}`);
  if (metadata.name !== "argocd" || metadata.contractVersion !== CONTRACT_VERSION) problems.push(JSON.stringify(metadata));
  check(`metadata: name argocd, contract ${CONTRACT_VERSION}, version as package.json`, problems);
}

// --- the names port against the Flux plugin's golden names -----------------------------------

{
  const fluxDir = join(repo, "plugins", "flux", "testdata", "translate");
  const problems = [];
  let compared = 0;
  for (const d of readdirSync(fluxDir).sort()) {
    const documents = readYamlAll(join(fluxDir, d, "input.yaml"));
    const ss = documents.find((x) => x.kind === "ServiceSet");
    const expected = yaml.load(readFileSync(join(fluxDir, d, "expected.yaml"), "utf8"));
    for (const service of expected.services ?? []) {
      for (const object of service.objects ?? []) {
        const ours = serviceObjectName(ss.metadata.name, service.service, MAX_LABEL_LEN);
        compared++;
        if (ours !== object.metadata.name) problems.push(`${d}/${service.service}: ${ours} instead of ${object.metadata.name}`);
      }
    }
  }
  check(`names: serviceObjectName gives the Flux plugin's ${compared} golden object names`, problems);
}

{
  // plugins/sdk/src/names.rs's unit tests, and FNV-1a's published test vectors.
  const problems = [];
  const expect = (what, ok) => ok || problems.push(what);
  expect("fnv1a32('') = 811c9dc5", fnv1a32(utf8Encode("")) === 0x811c9dc5);
  expect("fnv1a32('a') = e40c292c", fnv1a32(utf8Encode("a")) === 0xe40c292c);
  expect("fnv1a32('foobar') = bf9cf968", fnv1a32(utf8Encode("foobar")) === 0xbf9cf968);
  const long = "a".repeat(60);
  const one = serviceObjectName(long, "ingress-nginx", 63);
  const two = serviceObjectName(long, "cert-manager", 63);
  expect("long names are 63 bytes", one.length === 63 && isDns1123Label(one));
  expect("distinct long names stay distinct", one !== two);
  const hash = fnv1a32(utf8Encode(`${long}.ingress-nginx`)).toString(16).padStart(8, "0");
  expect("prefix and hash as in Rust", one === `${long.slice(0, 54)}-${hash}`);
  const dashes = serviceObjectName("a".repeat(53), "-b-c-d-e-f-g-h-i-j", 63);
  expect(`no dash before the hash (${dashes})`, isDns1123Label(dashes) && !dashes.includes("--"));
  expect("service object names", serviceObjectName("prod-eu-1", "ingress-nginx", 63) === "prod-eu-1.ingress-nginx");
  expect("no collision across the dash", serviceObjectName("a-b", "c", 63) !== serviceObjectName("a", "b-c", 63));
  expect("no collision across dots", serviceObjectName("a.b", "c.d", 63) !== serviceObjectName("a.b.c", "d", 63));
  const longPair = serviceObjectName("x".repeat(253), "ingress", 63);
  expect(`long pairs are 63-byte subdomains (${longPair})`, longPair.length === 63 && isDns1123Subdomain(longPair));
  expect("DNS rules", isDns1123Label("a-1") && !isDns1123Label("A") && !isDns1123Label("-a") && !isDns1123Label("a".repeat(64)));
  expect("DNS subdomains", isDns1123Subdomain("a.b-c") && !isDns1123Subdomain("a..b"));
  check("names: the SDK's unit cases", problems);
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
