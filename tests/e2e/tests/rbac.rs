//! The Helm chart's RBAC (deploy/chart) against the requests the host really makes.
//!
//! The chart's rules come from `.ci/helm-check.py --rbac-out` (Helm itself renders the chart):
//! `target/chart-rbac.json`, written by `.ci/run`, or rendered here when that file is missing or
//! older than the chart. The real `ksm-adapter run` then serves a scenario — plugins from a
//! ConfigMap and from OCI with a pull Secret (both failing to fetch), deploy to the management
//! cluster (self-management), Flux status, the services' health by the chart's default rules, an
//! unready provider (observe mode) or the host's own SMP status (manage mode), a removed service,
//! deletion — as its ServiceAccount:
//!
//! - **On a real API server** (envtest, a cluster) the test creates the ServiceAccount, the
//!   chart's ClusterRole and Role with their bindings, and runs the adapter with a token from the
//!   TokenRequest API, as a pod would: the real RBAC authorizer enforces the chart's rules, so
//!   the scenario converging (and the adapter's log holding no `forbidden`) shows they suffice.
//! - **On the simulated server**, which has no authorizer, the adapter impersonates its
//!   ServiceAccount (kubeconfig `as:`), so that the server records its requests apart from the
//!   test's own ([`ksm_test_apiserver::TestApiServer::accesses`]), together with the permissions
//!   it asked about in SelfSubjectAccessReviews (its own RBAC check, `RBACReady`). Then, for each
//!   mode's rules:
//!
//! - (a) every request the host made is allowed by the rules (the Role only in the release
//!   namespace), and so is every permission it checks (else its SMP would never be ready);
//! - (b) every verb the rules grant was used or checked, unless [`NOT_EXERCISED`] says why the
//!   scenario cannot show it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use ksm_e2e::chart;
use ksm_test_apiserver::Access;
use ksm_test_harness::adapter::{Adapter, Mode, run_command};
use ksm_test_harness::env::{Env, kubeconfig_client};
use ksm_test_harness::fixtures::{self, PROVISIONER_NAME, service_templates, set_workload_ready, two_services};
use ksm_test_harness::flux::FluxState;
use ksm_test_harness::objects::{Kind, ObjRef};
use ksm_test_harness::status::{condition_is, condition_message, generation, has_finalizer, service_state};
use ksm_test_harness::wait::poll;
use ksm_test_harness::{ADAPTER_NAME, SERVICE_SET_LABEL, TEST_NAMESPACE_LABEL, WAIT, host_finalizer};
use serde_json::{Value, json};

/// Granted verbs the scenario cannot show in use, with the reason. Everything else the chart
/// grants must be used by the host during the scenario, or (b) fails: remove the grant, or add
/// it here with a reason.
const NOT_EXERCISED: &[(&str, &str, &[&str], &str)] = &[
    (
        "coordination.k8s.io",
        "leases",
        &["get", "list", "watch", "create", "patch"],
        "leader election (--leader-elect): the scenario runs one replica without it; host/tests/leader.rs and e2e leader.rs exercise it",
    ),
    (
        "events.k8s.io",
        "events",
        &["patch"],
        "an Event repeated within minutes is patched into a series; the scenario repeats none",
    ),
    ("k0rdent.mirantis.com", "clusterdeployments", &["watch"], WITHOUT_REGIONS),
    ("k0rdent.mirantis.com", "credentials", &["watch"], WITHOUT_REGIONS),
    ("k0rdent.mirantis.com", "regions", &["watch"], WITHOUT_REGIONS),
];

/// Why the routing kinds may go unwatched.
const WITHOUT_REGIONS: &str = "the simulated API server serves no ClusterDeployment, Credential or Region (as a kcm before 1.12): their lists answer 404 and no watch follows; on envtest, with kcm's CRDs, they are watched";

#[tokio::test(flavor = "multi_thread")]
async fn observe_mode_works_under_the_chart_rbac() {
    let rules = ChartRules::load("observe");
    if let Some(observed) = run_scenario("rbac-observe", &rules, Mode::Observe).await {
        check(&rules, &observed);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn manage_mode_works_under_the_chart_rbac() {
    let rules = ChartRules::load("manage");
    if let Some(observed) = run_scenario("rbac-manage", &rules, Mode::Manage).await {
        check(&rules, &observed);
    }
}

/// The chart's container arguments are flags `ksm-adapter run` has, and the environment
/// variables it sets are ones the binary reads (a wrong one would crash-loop the pod): for the
/// default values and for every shard's Deployment of a sharded installation.
#[test]
fn chart_container_flags_exist_in_the_binary() {
    let path = chart::rendered_file();
    let all = chart::rendered();
    let mut containers = vec![("default values".to_string(), &all["container"])];
    let shards = all["sharded"]["deployments"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no sharded Deployments", path.display()));
    containers.extend(shards.iter().map(|d| (format!("sharded Deployment {}", d["name"]), d)));
    let help = String::from_utf8(run_command(&["run", "--help"]).stdout).expect("UTF-8 help");
    let mut missing = Vec::new();
    for (what, container) in containers {
        let (args, env) = (chart::strings(&container["args"]), chart::strings(&container["env"]));
        assert_eq!(
            args.first().map(String::as_str),
            Some("run"),
            "{}: {what}: container args {args:?}",
            path.display()
        );
        for arg in &args[1..] {
            let flag = arg.split('=').next().unwrap_or(arg);
            if !help.lines().map(str::trim).any(|line| {
                line == flag || line.starts_with(&format!("{flag} ")) || line.contains(&format!(", {flag} "))
            }) {
                missing.push(format!("{what}: flag {flag}"));
            }
        }
        for name in &env {
            if !help.contains(&format!("[env: {name}=")) {
                missing.push(format!("{what}: environment variable {name}"));
            }
        }
    }
    assert!(missing.is_empty(), "the chart passes what `ksm-adapter run` does not know: {missing:?}\n{help}");
}

// ---------------------------------------------------------------------------------------------
// The chart's rules

/// One PolicyRule.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    #[serde(default)]
    api_groups: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
}

impl Rule {
    fn allows(&self, verb: &str, group: &str, resource: &str) -> bool {
        self.resource_names.is_empty()
            && self.verbs.iter().any(|v| v == verb)
            && self.api_groups.iter().any(|g| g == group)
            && self.resources.iter().any(|r| r == resource)
    }

    /// (group, resource, verb) for every combination the rule grants.
    fn grants(&self) -> impl Iterator<Item = (String, String, String)> + '_ {
        self.api_groups.iter().flat_map(move |g| {
            self.resources.iter().flat_map(move |r| self.verbs.iter().map(move |v| (g.clone(), r.clone(), v.clone())))
        })
    }
}

/// The rules one mode's values render: the ClusterRole's, and the Role's (release namespace);
/// parsed, and as the chart renders them (to create them on a real API server).
#[derive(Debug)]
struct ChartRules {
    mode: String,
    cluster: Vec<Rule>,
    namespaced: Vec<Rule>,
    rendered_cluster: Value,
    rendered_namespaced: Value,
}

impl ChartRules {
    /// Reads `target/chart-rbac.json` (or renders the chart) and takes `mode`'s rules.
    fn load(mode: &str) -> Self {
        let path = chart::rendered_file();
        let all = chart::rendered();
        let rendered = |key: &str| all["modes"][mode][key].clone();
        let rules = |key: &str| -> Vec<Rule> {
            serde_json::from_value(rendered(key))
                .unwrap_or_else(|e| panic!("{}: modes.{mode}.{key}: {e}", path.display()))
        };
        let cluster = rules("clusterRules");
        assert!(!cluster.is_empty(), "{}: no ClusterRole rules for mode {mode}", path.display());
        Self {
            mode: mode.to_string(),
            cluster,
            namespaced: rules("namespaceRules"),
            rendered_cluster: rendered("clusterRules"),
            rendered_namespaced: rendered("namespaceRules"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The scenario

/// Creates a `kind` (ClusterRole or Role) with `metadata` and `rules`, and its binding (same
/// metadata) to the adapter's ServiceAccount.
async fn grant(env: &Env, kind: &str, metadata: Value, rules: &Value) {
    let rbac = "rbac.authorization.k8s.io";
    let subjects = json!([{"kind": "ServiceAccount", "name": ADAPTER_NAME, "namespace": env.namespace()}]);
    let role_ref = json!({"apiGroup": rbac, "kind": kind, "name": metadata["name"]});
    env.create(json!({"apiVersion": format!("{rbac}/v1"), "kind": kind, "metadata": metadata, "rules": rules})).await;
    env.create(json!({"apiVersion": format!("{rbac}/v1"), "kind": format!("{kind}Binding"), "metadata": metadata,
        "subjects": subjects, "roleRef": role_ref}))
        .await;
}

/// The user the adapter impersonates: its ServiceAccount, as the chart would run it.
fn adapter_user(namespace: &str) -> String {
    format!("system:serviceaccount:{namespace}:{ADAPTER_NAME}")
}

/// Creates the adapter's ServiceAccount with the chart's ClusterRole and Role (in the test's
/// namespace, the release namespace) bound to it, and returns a kubeconfig with a token for it
/// from the TokenRequest API. The cluster-scoped objects carry the test's namespace label, so
/// the environment's cleanup deletes them.
async fn service_account_kubeconfig(env: &Env, rules: &ChartRules) -> PathBuf {
    let ns = env.namespace();
    env.create(
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ADAPTER_NAME, "namespace": ns}}),
    )
    .await;
    let cluster_role = format!("{ns}-{ADAPTER_NAME}");
    let cluster_metadata = json!({"name": cluster_role, "labels": {TEST_NAMESPACE_LABEL: ns}});
    grant(env, "ClusterRole", cluster_metadata, &rules.rendered_cluster).await;
    grant(env, "Role", json!({"name": ADAPTER_NAME, "namespace": ns}), &rules.rendered_namespaced).await;
    let plane = env.control_plane().await.expect("a ServiceAccount token needs the envtest control plane");
    let client = kubeconfig_client(env.kubeconfig()).await.expect("the test's client");
    let path = env.workdir().join("adapter.kubeconfig");
    plane.service_account_kubeconfig(&client, ns, ADAPTER_NAME, &path).await.unwrap_or_else(|e| panic!("{e:#}"))
}

/// Runs the scenario with the adapter in `mode` as its ServiceAccount. On the simulated server,
/// returns the adapter's requests (by the user it impersonates), with their counts; on a real
/// API server, where RBAC itself judged them, `None`.
async fn run_scenario(test: &str, rules: &ChartRules, mode: Mode) -> Option<Observed> {
    let env = Env::start(test).await;
    let ns = env.namespace().to_string();
    for template in service_templates(&ns) {
        env.create(template).await;
    }
    for workload in [ADAPTER_NAME, PROVISIONER_NAME] {
        set_workload_ready(&env, workload, true).await;
    }
    let smp_name = format!("{ns}-flux");
    let mut smp = fixtures::smp(&smp_name, ADAPTER_NAME, &ns);
    if mode == Mode::Observe {
        smp["status"] = fixtures::smp_status(true);
    }
    env.create(fixtures::adapter_plugin(&smp_name, &ns, json!({"builtin": "flux"}), &[&smp_name])).await;
    let smp = ObjRef::of(&env.create(smp).await);

    // The adapter's kubeconfig: the same server, as the chart's ServiceAccount.
    let kubeconfig = match env.server() {
        Some(server) => {
            let kubeconfig =
                server.kubeconfig_yaml().replace("user: {}", &format!("user:\n    as: {}", adapter_user(&ns)));
            assert!(kubeconfig.contains("as: system:serviceaccount:"), "kubeconfig layout changed:\n{kubeconfig}");
            let path = env.workdir().join("adapter.kubeconfig");
            std::fs::write(&path, kubeconfig).expect("writing the adapter's kubeconfig");
            path
        }
        None => service_account_kubeconfig(&env, rules).await,
    };
    // The test's namespace is the system namespace, where the chart puts its default health rules.
    let adapter = Adapter::start_as(&env, &kubeconfig, mode, &["--system-namespace", &ns]);
    env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "ksm-adapter-health-rules", "namespace": ns,
                                   "labels": {"k0rdent.mirantis.com/health-rule-target": "global"}},
                      "data": {"rules": chart::file("health-rules.yaml")}}))
        .await;
    let t = Waits { env: &env, adapter: &adapter };

    // Plugins from the other sources, for providers no ServiceSet names: the host reads the
    // ConfigMap (anywhere) and the OCI pull Secret (in its own namespace); both are missing, so
    // each AdapterPlugin reports its fetch failure without any registry.
    let sources = [
        ("cm", json!({"configMap": {"namespace": ns, "name": "ksm-e2e-no-plugin", "key": "plugin.wasm"}})),
        ("oci", json!({"oci": {"url": "127.0.0.1:9/ksm-e2e/no-plugin:v1", "pullSecret": "ksm-e2e-no-secret"}})),
    ];
    for (suffix, source) in sources {
        let name = format!("{ns}-{suffix}");
        let plugin = ObjRef::of(&env.create(fixtures::adapter_plugin(&name, &ns, source, &[&name])).await);
        t.object("fetch failed", &plugin, |p| {
            condition_is(p, "Fetched", "False", "FetchFailed")
                && p["status"]["error"].as_str().is_some_and(|e| !e.is_empty())
        })
        .await;
    }

    if mode == Mode::Manage {
        t.object("SMP ready, written by the host", &smp, |smp| smp["status"]["ready"] == true).await;
    }

    // Deploy to the management cluster: the host's finalizer, children applied, status written.
    let ss = ObjRef::new(Kind::ServiceSet, &ns, "web");
    let mut web = fixtures::service_set(&ns, "web", &smp_name, two_services());
    (web["spec"]["cluster"], web["spec"]["provider"]["selfManagement"]) = (json!(""), json!(true));
    env.create(web).await;
    t.object("host finalizer, translated", &ss, |ss| {
        has_finalizer(ss, &host_finalizer(&ns, ADAPTER_NAME))
            && condition_is(ss, "ServicesTranslated", "True", "Succeeded")
    })
    .await;
    let children = t.children("web", 2).await;

    // Status: Flux reports Ready, the services turn Deployed, and their workloads on the
    // management cluster are listed by the default rules' kinds (none found: healthy). A list
    // the rules forbid would leave the target unreadable, in condition ServiceHealth.
    for child in &children {
        let r = ObjRef::of(child);
        env.set_status(&r, FluxState::Ready.helm_release_status(generation(child))).await;
    }
    let deployed = t
        .object("both services Deployed, their health checked", &ss, |ss| {
            ["ingress-nginx", "cert-manager"].iter().all(|s| service_state(ss, s) == Some("Deployed"))
                && condition_is(ss, "ServiceSetHealthRules", "True", "AllRulesValid")
        })
        .await;
    for service in deployed["status"]["services"].as_array().into_iter().flatten() {
        let conditions = service["conditions"].as_array().into_iter().flatten();
        let health: Vec<&Value> =
            conditions.filter(|c| c["type"].as_str().is_some_and(|t| t.starts_with("ServiceHealth"))).collect();
        assert!(health.is_empty(), "the workloads of {} were not read: {health:#?}", service["name"]);
    }

    // The adapter Deployment turns unavailable. In observe mode kcm reports the SMP not ready
    // and the host explains why (it reads the workloads, the CRDs and its own permissions); in
    // manage mode the host finds out itself.
    set_workload_ready(&env, ADAPTER_NAME, false).await;
    if mode == Mode::Observe {
        env.set_status(&smp, fixtures::smp_status(false)).await;
    }
    t.object("ProviderReady=False with the host's diagnosis", &ss, |ss| {
        condition_is(ss, "ProviderReady", "False", "ProviderNotReady")
            && condition_message(ss, "ProviderReady").contains("AdapterReady=False")
    })
    .await;
    set_workload_ready(&env, ADAPTER_NAME, true).await;
    if mode == Mode::Observe {
        env.set_status(&smp, fixtures::smp_status(true)).await;
    }
    t.object("ProviderReady again", &ss, |ss| condition_is(ss, "ProviderReady", "True", "ProviderReady")).await;

    // A service removed from the spec: its child is deleted.
    let one = json!([two_services()[0].clone()]);
    env.merge_patch(&ss, json!({"spec": {"services": one}})).await;
    t.children("web", 1).await;

    // Deletion: children deleted, then the finalizer removed.
    env.delete(&ss).await;
    t.gone(&ss).await;

    let Some(server) = env.server() else {
        let log = std::fs::read_to_string(adapter.log_path()).unwrap_or_default();
        let denied: Vec<&str> = log.lines().filter(|l| l.contains("forbidden") || l.contains(" 403")).collect();
        assert!(denied.is_empty(), "the chart's {} rules denied the adapter:\n{}", rules.mode, denied.join("\n"));
        ksm_test_harness::env::report(
            test,
            "request-by-request comparison skipped: the real RBAC authorizer judged them",
        );
        return None;
    };
    let user = adapter_user(&ns);
    let mine = |all: BTreeMap<Access, usize>| -> BTreeMap<Access, usize> {
        all.into_iter().filter(|(a, _)| a.user == user).collect()
    };
    let (accesses, reviews) = (mine(server.accesses()), mine(server.access_reviews()));
    assert!(
        !accesses.is_empty(),
        "the server recorded no request as {user}: does the adapter still honour its kubeconfig's `as:`?"
    );
    eprintln!("requests of the adapter ({mode:?} mode):\n{}", table(&accesses));
    eprintln!("permissions it checked with SelfSubjectAccessReviews:\n{}", table(&reviews));
    drop(adapter);
    Some(Observed { release_namespace: ns, accesses, reviews })
}

/// What the adapter did, and the namespace it ran in (the chart's release namespace).
struct Observed {
    release_namespace: String,
    /// Its requests.
    accesses: BTreeMap<Access, usize>,
    /// The permissions it asked about in SelfSubjectAccessReviews.
    reviews: BTreeMap<Access, usize>,
}

/// Waits that fail with the adapter's log tail.
struct Waits<'a> {
    env: &'a Env,
    adapter: &'a Adapter,
}

impl Waits<'_> {
    async fn until<T>(&self, desc: &str, mut probe: impl AsyncFnMut() -> Result<T, Value>) -> T {
        let checked = async || {
            if self.adapter.exited().is_some() {
                panic!("while waiting for: {desc}\n{}", self.adapter.failure_context());
            }
            probe().await
        };
        match poll(desc, WAIT, checked).await {
            Ok(value) => value,
            Err(timed_out) => panic!("{}\n{}", timed_out.report(), self.adapter.failure_context()),
        }
    }

    async fn object(&self, desc: &str, r: &ObjRef, holds: impl Fn(&Value) -> bool) -> Value {
        self.until(&format!("{r}: {desc}"), async || match self.env.get(r).await {
            Some(object) if holds(&object) => Ok(object),
            Some(object) => Err(object),
            None => Err(json!("<absent>")),
        })
        .await
    }

    async fn gone(&self, r: &ObjRef) {
        self.until(&format!("{r} to be gone"), async || match self.env.get(r).await {
            Some(object) => Err(object),
            None => Ok(()),
        })
        .await
    }

    /// Waits until ServiceSet `name` has exactly `n` children; returns them.
    async fn children(&self, name: &str, n: usize) -> Vec<Value> {
        let labels = format!("{SERVICE_SET_LABEL}={name}");
        self.until(&format!("{n} children of ServiceSet {name}"), async || {
            let mut found = Vec::new();
            for kind in Kind::CHILDREN {
                found.extend(self.env.list(kind, self.env.namespace(), &labels).await);
            }
            if found.len() == n { Ok(found) } else { Err(json!(found)) }
        })
        .await
    }
}

// ---------------------------------------------------------------------------------------------
// The comparison

/// `resource` or `resource/subresource`, as RBAC rules name it.
fn rbac_resource(access: &Access) -> String {
    match &access.subresource {
        Some(sub) => format!("{}/{sub}", access.resource),
        None => access.resource.clone(),
    }
}

fn describe(access: &Access) -> String {
    if let Some(path) = &access.non_resource_path {
        return format!("{} {path}", access.verb);
    }
    let group = if access.group.is_empty() { "core".to_string() } else { access.group.clone() };
    let scope = access.namespace.as_ref().map(|ns| format!(" in namespace {ns}")).unwrap_or_default();
    format!("{} {} ({group}){scope}", access.verb, rbac_resource(access))
}

fn table(accesses: &BTreeMap<Access, usize>) -> String {
    accesses.iter().map(|(a, n)| format!("  {n:>5}  {}", describe(a))).collect::<Vec<_>>().join("\n")
}

/// Discovery documents, which every authenticated user may read (the default
/// `system:discovery` ClusterRole): the chart grants none.
fn is_discovery(path: &str) -> bool {
    path == "/version" || path == "/api" || path == "/apis" || path.starts_with("/api/") || path.starts_with("/apis/")
}

fn check(rules: &ChartRules, observed: &Observed) {
    let Observed { release_namespace, accesses, reviews } = observed;
    let mut problems = Vec::new();
    let allows = |access: &Access| {
        let resource = rbac_resource(access);
        let by = |rules: &[Rule]| rules.iter().any(|r| r.allows(&access.verb, &access.group, &resource));
        by(&rules.cluster) || (access.namespace.as_ref() == Some(release_namespace) && by(&rules.namespaced))
    };

    // (a) Everything the host did, and everything it checks it may do, is allowed.
    for (access, what) in
        accesses.keys().map(|a| (a, "request")).chain(reviews.keys().map(|a| (a, "checked permission")))
    {
        if let Some(path) = &access.non_resource_path {
            if !is_discovery(path) {
                problems.push(format!("(a) non-resource {what} outside discovery: {}", describe(access)));
            }
        } else if !allows(access) {
            problems.push(format!("(a) {what} not allowed by the chart's {} rules: {}", rules.mode, describe(access)));
        }
    }

    // (b) Everything granted is needed: used, or checked by the host's own RBAC check.
    let used: BTreeSet<(String, String, String)> =
        accesses.keys().chain(reviews.keys()).map(|a| (a.group.clone(), rbac_resource(a), a.verb.clone())).collect();
    let excused = |group: &str, resource: &str, verb: &str| {
        NOT_EXERCISED.iter().any(|(g, r, verbs, _)| *g == group && *r == resource && verbs.contains(&verb))
    };
    let mut excused_but_used = Vec::new();
    for (group, resource, verb) in rules.cluster.iter().chain(&rules.namespaced).flat_map(Rule::grants) {
        let named = format!("`{verb}` on {resource} ({})", if group.is_empty() { "core" } else { &group });
        if used.contains(&(group.clone(), resource.clone(), verb.clone())) {
            if excused(&group, &resource, &verb) {
                excused_but_used.push(named);
            }
        } else if !excused(&group, &resource, &verb) {
            problems.push(format!(
                "(b) the chart's {} rules grant {named} but the host neither used nor checked it: remove the \
                 grant, or list it in NOT_EXERCISED with the reason",
                rules.mode
            ));
        }
    }
    if !excused_but_used.is_empty() {
        eprintln!("note: NOT_EXERCISED lists what this scenario did use: {excused_but_used:?}");
    }
    assert!(
        problems.is_empty(),
        "the chart's RBAC ({} mode) does not match the host's requests:\n{}\n\nrequests of the adapter:\n{}\n\
         permissions it checked:\n{}",
        rules.mode,
        problems.join("\n"),
        table(accesses),
        table(reviews)
    );
}
