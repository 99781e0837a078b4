use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::common::{code, start, widget, widgets};

fn applied(spec: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}

#[tokio::test]
async fn server_side_apply_create_update_conflict_and_force() {
    let (_server, client) = start().await;
    let api = widgets(&client);
    let m1 = PatchParams::apply("m1");
    let created = api.patch("w", &m1, &Patch::Apply(applied(json!({"a": 1, "b": 2})))).await.unwrap();
    assert_eq!(created.data["spec"], json!({"a": 1, "b": 2}));
    assert_eq!(created.metadata.generation, Some(1));
    let managers = |o: &kube::api::DynamicObject| {
        o.managed_fields().iter().map(|m| m.manager.clone().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(managers(&created), ["m1"]);

    // m1 drops `b` and changes `a`: `b` is removed, `a` updated.
    let updated = api.patch("w", &m1, &Patch::Apply(applied(json!({"a": 3})))).await.unwrap();
    assert_eq!(updated.data["spec"], json!({"a": 3}));
    assert_eq!(updated.metadata.generation, Some(2));

    // m2 sets another field (no conflict), then a conflicting value for m1's field.
    let m2 = PatchParams::apply("m2");
    api.patch("w", &m2, &Patch::Apply(applied(json!({"c": true})))).await.unwrap();
    let conflict = api.patch("w", &m2, &Patch::Apply(applied(json!({"a": 4, "c": true})))).await;
    assert_eq!(code(conflict), 409);
    // The same value is shared ownership, not a conflict.
    api.patch("w", &m2, &Patch::Apply(applied(json!({"a": 3, "c": true})))).await.unwrap();

    let forced = api.patch("w", &m2.clone().force(), &Patch::Apply(applied(json!({"a": 5, "c": true})))).await.unwrap();
    assert_eq!(forced.data["spec"], json!({"a": 5, "c": true}));
    // m1 lost `a`: applying without it no longer removes it, and m1 can no longer set it without force.
    let after = api.patch("w", &m1, &Patch::Apply(applied(json!({})))).await.unwrap();
    assert_eq!(after.data["spec"], json!({"a": 5, "c": true}));
    assert_eq!(managers(&after), ["m2"]);

    // Status apply owns only status.
    let status = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"a": 0}, "status": {"ready": true}});
    let with_status = api.patch_status("w", &PatchParams::apply("ctl"), &Patch::Apply(status)).await.unwrap();
    assert_eq!(with_status.data["status"]["ready"], true);
    assert_eq!(with_status.data["spec"]["a"], 5);
    assert_eq!(with_status.metadata.generation, after.metadata.generation);

    // Metadata labels are applied and owned like any other field.
    let labelled =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"team": "x"}}});
    let labelled = api.patch("w", &PatchParams::apply("labeller"), &Patch::Apply(labelled)).await.unwrap();
    assert_eq!(labelled.labels().get("team").map(String::as_str), Some("x"));
    assert_eq!(labelled.data["spec"]["a"], 5);
}

#[tokio::test]
async fn json_patch_test_failure_is_422_and_success_applies() {
    let (_server, client) = start().await;
    let api = widgets(&client);
    api.create(&PostParams::default(), &widget("w", json!({"size": 1}))).await.unwrap();
    let url = "/apis/example.com/v1/namespaces/default/widgets/w";
    let request = |ops: serde_json::Value| {
        http::Request::patch(url)
            .header("content-type", "application/json-patch+json")
            .body(serde_json::to_vec(&ops).unwrap())
            .unwrap()
    };
    let failed = client.request::<kube::api::DynamicObject>(request(json!([
        {"op": "test", "path": "/spec/size", "value": 2},
        {"op": "replace", "path": "/spec/size", "value": 3},
    ])));
    assert_eq!(code(failed.await), 422);
    let ok = client
        .request::<kube::api::DynamicObject>(request(json!([
            {"op": "test", "path": "/spec/size", "value": 1},
            {"op": "replace", "path": "/spec/size", "value": 3},
        ])))
        .await
        .unwrap();
    assert_eq!(ok.data["spec"]["size"], 3);
    assert_eq!(ok.metadata.generation, Some(2));
}

#[tokio::test]
async fn strategic_merge_patch_acts_as_merge_patch() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: kube::api::ObjectMeta { name: Some("c".into()), ..Default::default() },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let patched =
        cms.patch("c", &PatchParams::default(), &Patch::Strategic(json!({"data": {"x": "1"}}))).await.unwrap();
    assert_eq!(patched.data.unwrap()["x"], "1");
}

/// The writes of leader election with `kube-lease-manager`: a free Lease is taken by a (not forced) apply, renewed
/// and released by strategic merge patches. As in Kubernetes, a field a patch removes is no longer owned by its
/// applier, so the next contender's apply succeeds; two appliers of different holders conflict.
#[tokio::test]
async fn a_lease_taken_by_apply_and_cleared_by_a_patch_can_be_taken_by_another_manager() {
    use k8s_openapi::api::coordination::v1::Lease;

    let (_server, client) = start().await;
    let leases: Api<Lease> = Api::default_namespaced(client);
    let take = |holder: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {
            "holderIdentity": holder, "renewTime": "2026-01-01T00:00:00.000000Z", "leaseDurationSeconds": 15}})
    };
    let holder = |lease: &Lease| lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
    leases
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "l"}})).unwrap())
        .await
        .unwrap();

    let taken = leases.patch("l", &PatchParams::apply("a"), &Patch::Apply(take("a"))).await.unwrap();
    assert_eq!(holder(&taken).as_deref(), Some("a"));
    assert_eq!(code(leases.patch("l", &PatchParams::apply("b"), &Patch::Apply(take("b"))).await), 409);

    // A renewal by a's strategic patch changes renewTime only: b still conflicts on holderIdentity.
    let renew = json!({"spec": {"renewTime": "2026-01-01T00:00:05.000000Z"}});
    leases.patch("l", &PatchParams::default(), &Patch::Strategic(renew)).await.unwrap();
    assert_eq!(code(leases.patch("l", &PatchParams::apply("b"), &Patch::Apply(take("b"))).await), 409);

    // Released: holderIdentity and the times removed by a patch; nobody owns them any more.
    let release = json!({"spec": {"holderIdentity": null, "renewTime": null, "leaseDurationSeconds": null}});
    let released = leases.patch("l", &PatchParams::default(), &Patch::Strategic(release)).await.unwrap();
    assert_eq!(holder(&released), None);
    assert!(released.metadata.managed_fields.is_none(), "{:?}", released.metadata.managed_fields);
    let retaken = leases.patch("l", &PatchParams::apply("b"), &Patch::Apply(take("b"))).await.unwrap();
    assert_eq!(holder(&retaken).as_deref(), Some("b"));
}
