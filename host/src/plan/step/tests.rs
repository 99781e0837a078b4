//! Each path a round takes, walked step by step: the test plays the controller, filling in
//! what each step brought back.

use super::*;
use crate::conditions::types::{APPLIED, TRANSLATED};
use crate::plugin::{CallErrorKind, Function, NativePlugin};
use k8s_openapi::jiff::Timestamp;
use ksm_flux_plugin::FluxPlugin;
use serde_json::json;

/// The test's stand-in for the controller's handle on the children's cluster.
type Home = &'static str;

fn now() -> Time {
    Time(Timestamp::from_second(1_800_000_000).unwrap())
}

fn service_set(annotations: serde_json::Value, deleting: bool) -> ServiceSet {
    let mut object = json!({
        "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
        "metadata": {"name": "prod", "namespace": "team", "uid": "uid-1", "generation": 1,
                     "annotations": annotations},
        "spec": {"provider": {"name": "ksm-flux"}, "services": [{"name": "ingress", "namespace": "ingress", "template": "ingress-1"}]},
    });
    if deleting {
        object["metadata"]["deletionTimestamp"] = json!("2026-11-25T10:00:00Z");
    }
    serde_json::from_value(object).unwrap()
}

fn region() -> RegionAccess {
    RegionAccess {
        name: "eu".into(),
        secret: crate::k0rdent::NamespacedName::new("kcm-system", "eu-kubeconfig"),
        key: "value".into(),
    }
}

/// The test's stand-in for the controller's errors.
type Why = &'static str;

fn facts(gate: Gate, route: Result<Route, RouteError>) -> Facts<Why> {
    let flux = Arc::new(ServingPlugin::plain(Arc::new(NativePlugin::<FluxPlugin>::new())));
    Facts { gate, serving: Ok(flux), route, placements: Placements::default(), provider: None }
}

fn child(name: &str) -> ChildRef {
    ChildRef {
        api_version: "helm.toolkit.fluxcd.io/v2".into(),
        kind: "HelmRelease".into(),
        namespace: "team".into(),
        name: name.into(),
    }
}

/// A HelmRelease `name` of the ServiceSet of uid `uid`, as the management cluster's cache holds it.
fn owned_child(name: &str, uid: &str) -> serde_json::Value {
    json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
           "metadata": {"name": name, "namespace": "team",
                        "ownerReferences": [{"kind": "ServiceSet", "uid": uid, "controller": true}]}})
}

fn plan(unseen: &[&str], status: Option<ServiceSetStatus>) -> Arc<Plan> {
    let apply = unseen.iter().map(|n| json!({"metadata": {"name": n}})).collect();
    let unseen = unseen.iter().map(|n| child(n)).collect();
    Arc::new(Plan { apply, delete: vec![], unseen, status, deferred: None, refused: 0 })
}

fn condition<'a>(status: &'a ServiceSetStatus, type_: &str) -> (&'a str, &'a str) {
    let c = status.conditions.iter().find(|c| c.type_ == type_).expect(type_);
    (c.status.as_str(), c.reason.as_str())
}

fn written(step: Step<Home>) -> ServiceSetStatus {
    match step {
        Step::WriteStatus { status, best_effort: false, .. } => status,
        other => panic!("expected a status write, got {other:?}"),
    }
}

#[test]
fn a_new_service_set_is_planned_checked_applied_and_ends_until_its_children_come_back() {
    let ss = service_set(json!({}), false);
    let facts = facts(Gate::Serve, Ok(Route::Management));
    let mut done = Progress::<Home, Why>::default();
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::Admit(Route::Management)));
    done.admitted = Some(true);
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::ReachHome { route: Route::Management, .. }));
    done.home = Some(Ok("management"));
    assert!(
        matches!(next(&ss, &facts, &done, &now()), Step::Decide { home: "management", ref foreign, .. } if foreign.is_empty())
    );
    done.plan = Some(Ok(plan(&["ingress"], None)));
    assert!(
        matches!(next(&ss, &facts, &done, &now()), Step::CheckNames { ref unseen, .. } if unseen == &[child("ingress")])
    );
    done.foreign = Some(BTreeMap::new());
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::CarryOut { .. }), "no one else's: no second plan");
    done.carried_out = Some(CarriedOut { coming_back: true, refused: vec![] });
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::ClearElsewhere { ref regions, .. } if regions.is_empty()));
    done.cleared = Some(Cleared { emptied: vec![], refused: vec![] });
    assert_eq!(
        next(&ss, &facts, &done, &now()).end(),
        Some(End::Resync),
        "the changed children wake it: no status now, and no plugin asked for one"
    );
}

#[test]
fn a_name_someone_else_holds_is_planned_again_and_reported_as_not_applied() {
    let ss = service_set(json!({}), false);
    let facts = facts(Gate::Serve, Ok(Route::Management));
    let mut done = Progress::<Home, Why> { admitted: Some(true), home: Some(Ok("management")), ..Progress::default() };
    done.plan = Some(Ok(plan(&["ingress"], None)));
    let foreign = BTreeMap::from([(child("ingress"), "HelmRelease team/ingress is someone else's".to_string())]);
    done.foreign = Some(foreign.clone());
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::Decide { ref foreign, .. } if foreign.len() == 1));
    let knowing = plan(&[], None);
    done.plan = Some(Ok(knowing.clone()));
    done.plan_knew_foreign = true;
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::CarryOut { .. }));
    done.carried_out = Some(CarriedOut { coming_back: false, refused: vec![] });
    done.cleared = Some(Cleared { emptied: vec![], refused: vec![] });
    // The status is decided from the plan made knowing the names someone else holds.
    let step = next(&ss, &facts, &done, &now());
    assert!(matches!(step, Step::DecideStatus { ref plan, .. } if Arc::ptr_eq(plan, &knowing)));
    done.status = Some(Ok(ServiceSetStatus::default()));
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::VerifyHealth { .. }));
    done.verified = Some(Verified { status: ServiceSetStatus::default(), unsettled: false });
    let status = written(next(&ss, &facts, &done, &now()));
    assert_eq!(condition(&status, APPLIED), ("False", reasons::APPLY_FAILED));
    done.written = true;
    assert!(matches!(
        next(&ss, &facts, &done, &now()).end(),
        Some(End::Failed(Failure::Refused(why))) if matches!(&why.0[..], [decide::Refusal::Taken { child: taken, .. }] if taken == &child("ingress"))
    ));
}

#[test]
fn a_settled_round_writes_its_status_and_resyncs_or_polls_the_health() {
    let ss = service_set(json!({}), false);
    let facts = facts(Gate::Serve, Ok(Route::Management));
    let mut done = Progress::<Home, Why> { admitted: Some(true), home: Some(Ok("management")), ..Progress::default() };
    done.plan = Some(Ok(plan(&[], Some(ServiceSetStatus::default()))));
    done.carried_out = Some(CarriedOut { coming_back: false, refused: vec![] });
    done.cleared = Some(Cleared { emptied: vec![], refused: vec![] });
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::VerifyHealth { .. }), "the plan's own status");
    for (unsettled, end) in [(false, End::Resync), (true, End::HealthPoll)] {
        done.verified = Some(Verified { status: ServiceSetStatus::default(), unsettled });
        done.written = false;
        written(next(&ss, &facts, &done, &now()));
        done.written = true;
        assert_eq!(next(&ss, &facts, &done, &now()).end(), Some(end));
    }
}

#[test]
fn without_a_plugin_the_status_says_so_and_the_round_waits_for_one() {
    let ss = service_set(json!({}), false);
    let mut facts = facts(Gate::Serve, Ok(Route::Management));
    facts.serving = Err("no AdapterPlugin serves provider ksm-flux");
    let mut done = Progress::<Home, Why>::default();
    let status = written(next(&ss, &facts, &done, &now()));
    assert_eq!(condition(&status, TRANSLATED), ("False", reasons::PLUGIN_NOT_READY));
    done.written = true;
    assert_eq!(next(&ss, &facts, &done, &now()).end(), Some(End::AwaitChange));
}

#[test]
fn a_plugin_that_fails_is_reported_at_best_and_fails_the_round() {
    let ss = service_set(json!({}), false);
    let facts = facts(Gate::Serve, Ok(Route::Management));
    let call = CallError {
        plugin: "flux".into(),
        function: Function::Translate,
        kind: CallErrorKind::Timeout(std::time::Duration::from_secs(1)),
    };
    let mut done = Progress::<Home, Why> { admitted: Some(true), home: Some(Ok("management")), ..Progress::default() };
    done.plan = Some(Err(call.clone()));
    let Step::WriteStatus { status, best_effort: true, .. } = next(&ss, &facts, &done, &now()) else {
        panic!("a best-effort status write")
    };
    assert_eq!(condition(&status, TRANSLATED), ("False", reasons::PLUGIN_ERROR));
    done.written = true;
    assert_eq!(next(&ss, &facts, &done, &now()).end(), Some(End::Failed(Failure::Plugin(call))));
}

#[test]
fn a_region_is_recorded_before_its_first_apply_and_one_out_of_reach_is_reported() {
    let ss = service_set(json!({}), false);
    let facts = facts(Gate::Serve, Ok(Route::Region(region())));
    let done = Progress::<Home, Why> { admitted: Some(true), ..Progress::default() };
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::RecordRegions(ref record) if record.contains("\"eu\"")));

    let recorded = placements::recording(&ss, &region()).unwrap();
    let ss = service_set(json!({placements::REGIONS_ANNOTATION: recorded}), false);
    let mut done = Progress::<Home, Why> { admitted: Some(true), ..Progress::default() };
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::ReachHome { route: Route::Region(_), .. }));
    done.home = Some(Err("region eu: connection refused"));
    let status = written(next(&ss, &facts, &done, &now()));
    assert_eq!(condition(&status, APPLIED), ("False", reasons::REGION_UNREACHABLE));
    done.written = true;
    assert!(matches!(next(&ss, &facts, &done, &now()).end(), Some(End::Failed(Failure::Unreachable(_)))));

    let done = Progress::<Home, Why> { admitted: Some(false), ..Progress::default() };
    assert_eq!(next(&ss, &facts, &done, &now()).end(), Some(End::Busy), "no slot free on the region");
}

/// Children in a region: the core decides what an earlier route left on the management cluster
/// goes, from what the management cluster's cache lists.
#[test]
fn a_regional_service_set_clears_the_children_it_left_on_the_management_cluster() {
    let recorded = placements::recording(&service_set(json!({}), false), &region()).unwrap();
    let ss = service_set(json!({placements::REGIONS_ANNOTATION: recorded}), false);
    let facts = facts(Gate::Serve, Ok(Route::Region(region())));
    let mut done = Progress::<Home, Why> { admitted: Some(true), home: Some(Ok("eu")), ..Progress::default() };
    done.plan = Some(Ok(plan(&[], Some(ServiceSetStatus::default()))));
    done.carried_out = Some(CarriedOut { coming_back: false, refused: vec![] });
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::ListManagement));
    done.on_management = Some(vec![owned_child("ingress", "uid-1"), owned_child("theirs", "uid-2")]);
    let Step::ClearElsewhere { management, .. } = next(&ss, &facts, &done, &now()) else { panic!("cleared") };
    assert_eq!(management, [child("ingress")]);
}

/// A provider that is not ready is diagnosed once, and the plan is made knowing why.
#[test]
fn an_unready_provider_is_diagnosed_before_the_plan() {
    let ss = service_set(json!({}), false);
    let mut facts = facts(Gate::Serve, Ok(Route::Management));
    let smp = |ready: bool, suspend: bool| -> Arc<StateManagementProvider> {
        Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": "ksm-flux"}, "spec": {"selector": {}, "suspend": suspend},
                                                "status": {"ready": ready}}),
            )
            .unwrap(),
        )
    };
    let mut done = Progress::<Home, Why> { admitted: Some(true), home: Some(Ok("management")), ..Progress::default() };
    facts.provider = Some(smp(false, false));
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::Diagnose(_)));
    done.diagnosis = Some("AdapterReady=False".into());
    let decide = next(&ss, &facts, &done, &now());
    assert!(matches!(decide, Step::Decide { diagnosis: Some(ref d), .. } if d == "AdapterReady=False"), "{decide:?}");
    for (ready, suspend) in [(true, false), (false, true)] {
        facts.provider = Some(smp(ready, suspend));
        let done = Progress::<Home, Why> { admitted: Some(true), home: Some(Ok("management")), ..Progress::default() };
        assert!(
            matches!(next(&ss, &facts, &done, &now()), Step::Decide { .. }),
            "ready or suspended: nothing to diagnose"
        );
    }
}

#[test]
fn only_answers_about_the_child_itself_refuse_it() {
    for code in [400, 403, 404, 422] {
        assert!(refuses_child(code), "{code}");
    }
    for code in [401, 409, 429, 500, 503] {
        assert!(!refuses_child(code), "{code}: the round fails and backs off");
    }
}

#[test]
fn a_region_left_empty_is_forgotten_before_the_status() {
    let recorded = placements::recording(&service_set(json!({}), false), &region()).unwrap();
    let ss = service_set(json!({placements::REGIONS_ANNOTATION: recorded}), false);
    let facts = facts(Gate::Serve, Ok(Route::Management));
    let mut done = Progress::<Home, Why> { admitted: Some(true), home: Some(Ok("management")), ..Progress::default() };
    done.plan = Some(Ok(plan(&[], Some(ServiceSetStatus::default()))));
    done.carried_out = Some(CarriedOut { coming_back: false, refused: vec![] });
    done.cleared = Some(Cleared { emptied: vec!["eu".into()], refused: vec![] });
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::RecordRegions(ref record) if record == "[]"));
}

#[test]
fn a_deleted_service_set_loses_its_finalizer_only_once_its_children_are_gone_everywhere() {
    let ss = service_set(json!({}), true);
    let mut facts = facts(Gate::CleanUp, Ok(Route::Management));
    facts.placements.recorded = vec![region()];
    let mut done = Progress::<Home, Why>::default();
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::ListManagement));
    done.on_management = Some(vec![owned_child("ingress", "uid-1"), owned_child("other", "uid-2")]);
    let Step::ClearManagement { deletion } = next(&ss, &facts, &done, &now()) else { panic!("management cleared") };
    assert_eq!(deletion.delete, [child("ingress")], "the deletion the core decided: its own children only");
    done.management_cleared = Some(ManagementCleared { deletion, remaining: vec![] });
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::ClearRegions { ref recorded, .. } if recorded.len() == 1));
    done.regions_cleared = Some(RegionsCleared { remaining: vec![child("ingress")], ..RegionsCleared::default() });
    written(next(&ss, &facts, &done, &now()));
    done.written = true;
    assert_eq!(next(&ss, &facts, &done, &now()).end(), Some(End::Deleting(vec![child("ingress")])));
    done.regions_cleared = Some(RegionsCleared::default());
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::RemoveFinalizer));
    done.regions_cleared = Some(RegionsCleared { busy: true, ..RegionsCleared::default() });
    assert_eq!(next(&ss, &facts, &done, &now()).end(), Some(End::Busy), "a busy region is cleared again");

    done.written = false;
    let unreachable = vec!["region eu: timed out".to_string()];
    done.regions_cleared = Some(RegionsCleared { unreachable, ..RegionsCleared::default() });
    let status = written(next(&ss, &facts, &done, &now()));
    let (_, reason) = condition(&status, APPLIED);
    assert_eq!(reason, reasons::REGION_UNREACHABLE, "the finalizer stays");
    done.written = true;
    assert!(matches!(next(&ss, &facts, &done, &now()).end(), Some(End::Failed(Failure::Unreachable(_)))));
}

/// Issue 45: a record someone garbled held the finalizer forever (the namespace never finished
/// terminating). Now it is not trusted: every Region is swept, and none holds the finalizer.
#[test]
fn a_record_that_is_not_trusted_never_holds_the_finalizer() {
    let ss = service_set(json!({placements::REGIONS_ANNOTATION: "garbled"}), true);
    let mut facts = facts(Gate::CleanUp, Ok(Route::Management));
    let every = || vec![region()];
    let regions = placements::Regions { by_name: &|_| None, holding: vec![], every: &every };
    facts.placements = placements::placements(&ss, Some(&Route::Management), &regions, true);
    assert!(facts.placements.untrusted.is_some());
    let cleared = || Progress::<Home, Why> {
        on_management: Some(vec![]),
        management_cleared: Some(ManagementCleared {
            deletion: Arc::new(decide::deletion(&ss, &[], &now())),
            remaining: vec![],
        }),
        ..Progress::default()
    };
    let mut done = cleared();
    let Step::ClearRegions { recorded, others } = next(&ss, &facts, &done, &now()) else { panic!("regions swept") };
    assert!(recorded.is_empty() && others == [region()], "every Region, best effort");
    done.regions_cleared = Some(RegionsCleared::default());
    written(next(&ss, &facts, &done, &now()));
    done.written = true;
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::RemoveFinalizer));

    let no_regions = Facts { placements: Placements::default(), ..facts };
    assert!(
        matches!(next(&ss, &no_regions, &cleared(), &now()), Step::WriteStatus { .. }),
        "no Region: nothing to sweep"
    );
}

/// A recorded name no Region stands for is never reached, and forgotten.
#[test]
fn a_recorded_name_without_a_region_is_forgotten() {
    let ss = service_set(json!({placements::REGIONS_ANNOTATION: r#"[{"region":"gone"}]"#}), false);
    let mut facts = facts(Gate::Serve, Ok(Route::Management));
    let regions = placements::Regions { by_name: &|_| None, holding: vec![], every: &Vec::new };
    facts.placements = placements::placements(&ss, Some(&Route::Management), &regions, false);
    let mut done = Progress::<Home, Why> { admitted: Some(true), home: Some(Ok("management")), ..Progress::default() };
    done.plan = Some(Ok(plan(&[], Some(ServiceSetStatus::default()))));
    done.carried_out = Some(CarriedOut { coming_back: false, refused: vec![] });
    let Step::ClearElsewhere { regions, .. } = next(&ss, &facts, &done, &now()) else { panic!("cleared elsewhere") };
    assert!(regions.is_empty(), "never reached");
    done.cleared = Some(Cleared { emptied: vec![], refused: vec![] });
    assert!(matches!(next(&ss, &facts, &done, &now()), Step::RecordRegions(ref record) if record == "[]"));
}

#[test]
fn the_gate_decides_alone_for_service_sets_not_served_now() {
    let ss = service_set(json!({}), false);
    let done = Progress::<Home, Why>::default();
    assert_eq!(next(&ss, &facts(Gate::Leave, Ok(Route::Management)), &done, &now()).end(), Some(End::AwaitChange));
    assert!(matches!(next(&ss, &facts(Gate::Release, Ok(Route::Management)), &done, &now()), Step::Release));
    let add = next(&ss, &facts(Gate::AddFinalizer, Ok(Route::Region(region()))), &done, &now());
    assert!(matches!(add, Step::AddFinalizer(Some(ref record)) if record.contains("\"eu\"")), "recorded with it");
}

impl<H> Step<H> {
    fn end(self) -> Option<End> {
        match self {
            Step::End(end) => Some(end),
            _ => None,
        }
    }
}
