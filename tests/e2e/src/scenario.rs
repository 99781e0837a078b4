//! One test's world: an [`Env`] with the common fixtures (ServiceTemplates, a ready adapter and
//! provisioner workload, an SMP naming the adapter under test) and the adapter running; plus the
//! waits and shortcuts the scenarios share. Derefs to [`Env`] (and so to its object helpers).
//!
//! Every wait panics on timeout with what it waited for, what it saw last and the adapter's log
//! tail; it fails at once if the adapter process exited.

use std::ops::Deref;
use std::time::Duration;

use ksm_test_harness::adapter::{Adapter, Mode};
use ksm_test_harness::env::Env;
use ksm_test_harness::fixtures::{self, PROVISIONER_NAME, service_templates, set_workload_ready};
use ksm_test_harness::flux::FluxState;
use ksm_test_harness::objects::{Kind, ObjRef};
use ksm_test_harness::status::{
    condition_is, condition_is_current, generation, has_finalizer, recorded, spec_service_names, status_service_names,
};
use ksm_test_harness::wait::poll;
use ksm_test_harness::{ADAPTER_NAME, MANAGED_LABEL, SERVICE_LABEL, SERVICE_SET_LABEL, WAIT, host_finalizer};
use serde_json::{Value, json};

use crate::expect::Expected;
use crate::writes::{Writes, writes_during};

/// The AdapterPlugin CRD's name.
pub const ADAPTER_PLUGIN_CRD: &str = "adapterplugins.ksm.k0rdent.mirantis.com";

/// A running scenario. Fields drop in order: the adapter is stopped before the environment is
/// cleaned up.
pub struct Scenario {
    adapter: Adapter,
    env: Env,
    smp: ObjRef,
}

impl Scenario {
    /// Sets up the environment for `test` and starts the adapter in `mode`. The SMP
    /// `<namespace>-flux` names the adapter; in observe mode the test plays kcm and marks it
    /// ready, in manage mode its status is left to the host.
    pub async fn start(test: &str, mode: Mode) -> Self {
        Self::start_with(test, mode, &[]).await
    }

    /// [`start`](Self::start), with `extra_args` for the adapter (e.g. `--shard-selector`).
    pub async fn start_with(test: &str, mode: Mode, extra_args: &[&str]) -> Self {
        Self::start_in(Env::start(test).await, mode, extra_args, true).await
    }

    /// A scenario on an API server without the CRD `missing` (observe mode); without the
    /// AdapterPlugin CRD no AdapterPlugin names the scenario SMP. `None` where that cannot run
    /// (see [`Env::start_without_crd`]).
    pub async fn start_without_crd(test: &str, missing: &str) -> Option<Self> {
        let env = Env::start_without_crd(test, missing).await?;
        Some(Self::start_in(env, Mode::Observe, &[], missing != ADAPTER_PLUGIN_CRD).await)
    }

    async fn start_in(env: Env, mode: Mode, extra_args: &[&str], plugin: bool) -> Self {
        for template in service_templates(env.namespace()) {
            env.create(template).await;
        }
        for workload in [ADAPTER_NAME, PROVISIONER_NAME] {
            set_workload_ready(&env, workload, true).await;
        }
        let ready = (mode == Mode::Observe).then_some(true);
        let smp = create_smp(&env, "flux", ADAPTER_NAME, ready, plugin).await;
        let adapter = Adapter::start_with(&env, mode, extra_args);
        Self { adapter, env, smp }
    }

    /// Starts another adapter process (same identity) with `extra_args`, in observe mode.
    pub fn start_another_adapter(&self, extra_args: &[&str]) -> Adapter {
        Adapter::start_with(&self.env, Mode::Observe, extra_args)
    }

    /// Stops the adapter (SIGTERM, then waits until it exits) and starts it again with
    /// `extra_args`, in observe mode: a restart, as a new pod or a new leader makes one.
    pub async fn restart_adapter(&mut self, extra_args: &[&str]) {
        self.adapter.terminate();
        let exited = poll("the adapter to exit", WAIT, async || self.adapter.exited().ok_or(json!("running"))).await;
        exited.unwrap_or_else(|timed_out| panic!("{}", timed_out.report()));
        self.adapter = Adapter::start_with(&self.env, Mode::Observe, extra_args);
    }

    /// The finalizer of the scenario's adapter.
    pub fn host_finalizer(&self) -> String {
        host_finalizer(self.namespace(), ADAPTER_NAME)
    }

    /// The SMP serving the scenario's ServiceSets.
    pub fn smp(&self) -> &ObjRef {
        &self.smp
    }

    /// The SMP's name.
    pub fn smp_name(&self) -> &str {
        &self.smp.name
    }

    /// Creates another SMP, `<namespace>-<suffix>`, whose adapter is `adapter` (in the test's
    /// namespace), with `status.ready` set when given.
    pub async fn create_smp(&self, suffix: &str, adapter: &str, ready: Option<bool>) -> ObjRef {
        create_smp(&self.env, suffix, adapter, ready, true).await
    }

    /// Writes the scenario SMP's `status.ready`, as kcm would.
    pub async fn set_smp_ready(&self, ready: bool) {
        self.set_status(&self.smp, fixtures::smp_status(ready)).await;
    }

    /// Sets the scenario SMP's `spec.suspend`.
    pub async fn set_smp_suspended(&self, suspended: bool) {
        self.merge_patch(&self.smp, json!({"spec": {"suspend": suspended}})).await;
    }

    /// A ServiceSet of the test's namespace.
    pub fn service_set(&self, name: &str) -> ObjRef {
        self.obj(Kind::ServiceSet, name)
    }

    /// The ServiceSet `name` with `services`, served by the scenario SMP (not created).
    pub fn service_set_object(&self, name: &str, services: Value) -> Value {
        fixtures::service_set(self.namespace(), name, self.smp_name(), services)
    }

    /// Creates the ServiceSet `name` with `services`, served by the scenario SMP.
    pub async fn create_service_set(&self, name: &str, services: Value) -> ObjRef {
        self.create(self.service_set_object(name, services)).await;
        self.service_set(name)
    }

    /// Creates, as ServiceSet `name`, the Flux plugin's golden translate `case`
    /// ([`fixtures::flux_golden_case`]): its ServiceTemplates the scenario does not hold yet (it
    /// starts with the standard ones, which the golden cases share), and its services with its
    /// provider config, if any.
    pub async fn create_flux_golden_case(&self, case: &str, name: &str) -> ObjRef {
        let (templates, golden) = fixtures::flux_golden_case(case, self.namespace());
        for template in templates {
            let template_name = template["metadata"]["name"].as_str().expect("a template's name");
            if self.get(&self.obj(Kind::ServiceTemplate, template_name)).await.is_none() {
                self.create(template).await;
            }
        }
        let mut service_set = self.service_set_object(name, golden["spec"]["services"].clone());
        let config = &golden["spec"]["provider"]["config"];
        if !config.is_null() {
            service_set["spec"]["provider"]["config"] = config.clone();
        }
        self.create(service_set).await;
        self.service_set(name)
    }

    /// The live children of ServiceSet `name` (the host's children whose recorded ServiceSet name
    /// is `name`: a long name is shortened in the label).
    pub async fn children(&self, service_set: &str) -> Vec<Value> {
        let mut children = Vec::new();
        for kind in Kind::CHILDREN {
            children.extend(self.list(kind, self.namespace(), &format!("{MANAGED_LABEL}=true")).await);
        }
        children.retain(|c| recorded(c, SERVICE_SET_LABEL) == Some(service_set));
        children
    }

    /// The live child of one service, if any (panics if there are several).
    pub async fn child(&self, service_set: &str, service: &str) -> Option<Value> {
        let mut found = self.children(service_set).await;
        found.retain(|c| recorded(c, SERVICE_LABEL) == Some(service));
        assert!(found.len() <= 1, "service {service} of {service_set} has several children: {found:#?}");
        found.pop()
    }

    /// The reference of one service's child; panics when it does not exist.
    pub async fn child_ref(&self, service_set: &str, service: &str) -> ObjRef {
        let child = self.child(service_set, service).await;
        ObjRef::of(&child.unwrap_or_else(|| panic!("service {service} of ServiceSet {service_set} has no child")))
    }

    /// Waits until an Event with `reason` about the object `name` exists in `namespace`
    /// (cluster-scoped objects' Events go to `default`); returns its note.
    pub async fn wait_event(&self, namespace: &str, name: &str, reason: &str) -> String {
        let desc = format!("an Event {reason} about {name} in {namespace}");
        self.wait_for(&desc, WAIT, async || {
            let events = self.list(Kind::Event, namespace, "").await;
            let found = events.iter().find(|e| e["regarding"]["name"] == name && e["reason"] == reason);
            match found {
                Some(event) => Ok(event["note"].as_str().unwrap_or_default().to_string()),
                None => Err(json!(
                    events.iter().map(|e| format!("{} {}", e["regarding"]["name"], e["reason"])).collect::<Vec<_>>()
                )),
            }
        })
        .await
    }

    /// The adapter under test.
    pub fn adapter(&self) -> &Adapter {
        &self.adapter
    }

    /// Whether the adapter process is still running.
    pub fn adapter_running(&self) -> bool {
        self.adapter.exited().is_none()
    }

    /// [`poll`] with the adapter's log on timeout; fails at once if the adapter exited.
    pub async fn wait_for<T>(
        &self,
        desc: &str,
        timeout: Duration,
        mut probe: impl AsyncFnMut() -> Result<T, Value>,
    ) -> T {
        let checked = async || {
            if self.adapter.exited().is_some() {
                panic!("while waiting for: {desc}\n{}", self.adapter.failure_context());
            }
            probe().await
        };
        match poll(desc, timeout, checked).await {
            Ok(value) => value,
            Err(timed_out) => panic!("{}\n{}", timed_out.report(), self.adapter.failure_context()),
        }
    }

    /// Waits until the object exists and `holds` for it; returns it.
    pub async fn wait_object(
        &self,
        desc: &str,
        r: &ObjRef,
        timeout: Duration,
        holds: impl Fn(&Value) -> bool,
    ) -> Value {
        self.wait_for(&format!("{r}: {desc}"), timeout, async || match self.get(r).await {
            Some(object) if holds(&object) => Ok(object),
            Some(object) => Err(object),
            None => Err(json!("<object absent>")),
        })
        .await
    }

    /// Waits (up to [`WAIT`]) until ServiceSet `name` exists and `holds` for it; returns it.
    pub async fn wait_service_set(&self, name: &str, desc: &str, holds: impl Fn(&Value) -> bool) -> Value {
        self.wait_object(desc, &self.service_set(name), WAIT, holds).await
    }

    /// Waits until the object no longer exists.
    pub async fn wait_gone(&self, r: &ObjRef, timeout: Duration) {
        self.wait_for(&format!("{r} to be gone"), timeout, async || match self.get(r).await {
            Some(object) => Err(object),
            None => Ok(()),
        })
        .await
    }

    /// Waits until the host has fully reconciled ServiceSet `name`: its finalizer is on, it has
    /// a service status per spec service, `ServicesTranslated` is True for the current
    /// generation, and its children are exactly the plugin's translation as the host applies
    /// it. Returns the translation.
    pub async fn wait_converged(&self, name: &str) -> Expected {
        self.wait_service_set(name, "host finalizer, translated, a status per service", |ss| {
            has_finalizer(ss, &self.host_finalizer())
                && condition_is(ss, "ServicesTranslated", "True", "Succeeded")
                && condition_is_current(ss, "ServicesTranslated")
                && status_service_names(ss) == spec_service_names(ss)
        })
        .await;
        let expected = self.wait_children_match(name).await;
        self.check_explained(name).await;
        expected
    }

    /// Pushes component `bytes` to `registry` as plugin `name` and serves provider
    /// `<namespace>-<name>` with it: an SMP naming the adapter (ready, as kcm would say) and an
    /// AdapterPlugin pulling it by digest, allowed `kinds` (group, kind), with `config`; returns
    /// the provider once the plugin is ready (within `ready_within`: interpreters compile slowly).
    pub async fn serve_plugin(
        &self,
        registry: &ksm_test_harness::registry::Registry,
        (name, bytes): (&str, &[u8]),
        kinds: &[(&str, &str)],
        config: Value,
        ready_within: Duration,
    ) -> String {
        let file = self.workdir().join(format!("{name}.wasm"));
        std::fs::write(&file, bytes).unwrap();
        let tag = format!("{}/ksm/{name}:0.1.0", registry.host());
        let pushed = ksm_test_harness::adapter::run_command(&["plugin", "push", file.to_str().unwrap(), &tag]);
        let pushed: Value = serde_norway::from_slice(&pushed.stdout).unwrap();
        let provider = format!("{}-{name}", self.namespace());
        let mut smp = fixtures::smp(&provider, ADAPTER_NAME, self.namespace());
        smp["status"] = fixtures::smp_status(true);
        self.create(smp).await;
        let source = json!({"oci": {"url": pushed["reference"], "sha256": pushed["sha256"]}});
        let mut plugin = fixtures::adapter_plugin(&provider, self.namespace(), source, &[&provider]);
        plugin["spec"]["allowedKinds"] =
            kinds.iter().map(|(group, kind)| json!({"group": group, "kind": kind})).collect();
        plugin["spec"]["config"] = config;
        plugin["spec"]["limits"] = json!({"timeoutMs": 5000}); // an interpreter's first calls are slow
        self.create(plugin).await;
        let plugin = ObjRef::cluster(Kind::AdapterPlugin, &provider);
        self.wait_object("ready", &plugin, ready_within, |p| p["status"]["ready"] == true).await;
        provider
    }

    /// `ksm-adapter explain` on ServiceSet `name`, its YAML answer parsed.
    pub async fn explain(&self, name: &str) -> Value {
        let target = format!("{}/{name}", self.namespace());
        let kubeconfig = self.kubeconfig().to_str().expect("a UTF-8 path").to_string();
        let namespace = self.namespace().to_string();
        let output = tokio::task::spawn_blocking(move || {
            let mut args = vec!["explain", &target, "--kubeconfig", &kubeconfig, "--adapter-namespace", &namespace];
            args.extend(ksm_test_harness::adapter::OTHER_CLUSTERS);
            ksm_test_harness::adapter::run_command(&args)
        })
        .await
        .expect("explain ran");
        serde_norway::from_slice(&output.stdout).expect("explain prints YAML")
    }

    /// What `explain` says about a converged ServiceSet agrees with it: served, by a plugin,
    /// every service named with the state its status has, the status up to date (asked again
    /// a few times: a status write may be on its way, and may land between explain's read and
    /// this one).
    async fn check_explained(&self, name: &str) {
        for attempt in 1..=3 {
            let explained = self.explain(name).await;
            let live = self.must_get(&self.service_set(name)).await;
            let context = || format!("explain {name}:\n{}", serde_norway::to_string(&explained).unwrap_or_default());
            assert_eq!(explained["serviceSet"], format!("{}/{name}", self.namespace()), "{}", context());
            assert!(explained["plugin"]["servedBy"].is_string(), "{}", context());
            let states = |services: &Value| -> Vec<(String, String)> {
                let mut states: Vec<(String, String)> = services
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|s| {
                        (s["name"].as_str().unwrap_or_default().into(), s["state"].as_str().unwrap_or_default().into())
                    })
                    .collect();
                states.sort();
                states
            };
            let agree = states(&explained["services"]) == states(&live["status"]["services"]);
            if explained["statusUpToDate"] == true && agree {
                return;
            }
            assert!(
                attempt < 3,
                "explain says the status is not up to date, or disagrees with the live one {:?}: {}",
                states(&live["status"]["services"]),
                context()
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Waits until the children of ServiceSet `name` are exactly what the plugin translates the
    /// live ServiceSet into (translated once, now). Returns the translation.
    pub async fn wait_children_match(&self, name: &str) -> Expected {
        let expected = Expected::translate(&self.env, name).await;
        self.wait_for(&format!("children of ServiceSet {name} as translated"), WAIT, async || {
            expected.check_children(&self.children(name).await)
        })
        .await;
        expected
    }

    /// Waits until service `service` of ServiceSet `name` is in `state`; returns the ServiceSet.
    pub async fn wait_service_state(&self, name: &str, service: &str, state: &str, timeout: Duration) -> Value {
        let desc = format!("service {service} in state {state}");
        self.wait_object(&desc, &self.service_set(name), timeout, |ss| {
            ksm_test_harness::status::service_state(ss, service) == Some(state)
        })
        .await
    }

    /// Plays Flux: writes `state` as the status of the HelmRelease of one service.
    pub async fn set_flux(&self, service_set: &str, service: &str, state: FluxState) {
        let r = self.child_ref(service_set, service).await;
        let live = self.must_get(&r).await;
        self.set_status(&r, state.helm_release_status(generation(&live))).await;
    }

    /// Asserts that nothing is written during `period`: no write requests (simulated server)
    /// and no change to the SMP, any ServiceSet or any child of the namespace.
    pub async fn assert_no_writes(&self, period: Duration) {
        let mut watched = vec![self.smp.clone()];
        for ss in self.list(Kind::ServiceSet, self.namespace(), "").await {
            watched.push(ObjRef::of(&ss));
        }
        let writes: Writes = writes_during(&self.env, &watched, period).await;
        assert!(
            writes.is_empty(),
            "expected no writes during {period:?}, got:\n{}\n{}",
            writes.breakdown(),
            self.adapter.failure_context()
        );
    }

    /// On the simulated server, serves one successful request of each write verb the fault
    /// tests inject failures for (update, patch, delete on a scratch ConfigMap), so that no injected failure is left
    /// queued for the test's own writes. A no-op on a real cluster.
    pub async fn drain_faults(&self) {
        if self.server().is_none() {
            return;
        }
        let scratch = self.obj(Kind::ConfigMap, "ksm-e2e-drain");
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": scratch.name, "namespace": scratch.namespace}});
        if self.get(&scratch).await.is_none() {
            self.create(object.clone()).await;
        }
        let api = self.api(Kind::ConfigMap, self.namespace());
        let body: kube::api::DynamicObject = serde_json::from_value(object).expect("a ConfigMap");
        let patch = kube::api::Patch::Merge(json!({"data": {"drained": "true"}}));
        for verb in ["update", "patch", "delete"] {
            self.wait_for(&format!("a {verb} without an injected failure"), WAIT, async || {
                let result = match verb {
                    "update" => api.replace(&scratch.name, &Default::default(), &body).await.map(drop),
                    "patch" => api.patch(&scratch.name, &Default::default(), &patch).await.map(drop),
                    _ => api.delete(&scratch.name, &Default::default()).await.map(drop),
                };
                result.map_err(|e| json!(e.to_string()))
            })
            .await;
        }
    }
}

impl Deref for Scenario {
    type Target = Env;

    fn deref(&self) -> &Env {
        &self.env
    }
}

/// Creates the SMP `<namespace>-<suffix>` naming `adapter`, with `status.ready` when given, and
/// the AdapterPlugin of the same name serving it with the built-in Flux plugin.
/// Creates the SMP `<namespace>-<suffix>` and, with `plugin`, the AdapterPlugin serving it with
/// the built-in Flux plugin.
async fn create_smp(env: &Env, suffix: &str, adapter: &str, ready: Option<bool>, plugin: bool) -> ObjRef {
    let name = format!("{}-{suffix}", env.namespace());
    let mut smp = fixtures::smp(&name, adapter, env.namespace());
    if let Some(ready) = ready {
        smp["status"] = fixtures::smp_status(ready);
    }
    if plugin {
        env.create(fixtures::adapter_plugin(&name, env.namespace(), json!({"builtin": "flux"}), &[&name])).await;
    }
    ObjRef::of(&env.create(smp).await)
}
