//! Templates beyond `chartRef`: `chartSource` Helm templates (a Git repository, an OCI
//! repository) and `deploymentType: Local` Kustomize/Resources templates, from the Flux plugin's
//! golden cases, through kcm's ServiceTemplate schema and Flux's HelmRelease and Kustomization
//! schemas on a real API server.

use ksm_e2e::Scenario;
use ksm_test_harness::Mode;

#[tokio::test(flavor = "multi_thread")]
async fn chart_source_and_local_templates_pass_the_real_schemas() {
    let t = Scenario::start("templates", Mode::Observe).await;
    for (case, name) in [("helm-chart-source", "sources"), ("kustomize-local-deployment", "local")] {
        t.create_flux_golden_case(case, name).await;
    }
    let sources = t.wait_converged("sources").await;
    assert_eq!(sources.object_of("podinfo")["spec"]["chart"]["spec"]["sourceRef"]["kind"], "GitRepository");
    assert_eq!(sources.object_of("redis")["spec"]["chartRef"]["kind"], "OCIRepository");
    t.wait_converged("local").await;
    // Local: the management cluster, as the namespace's `default` account (issue 45), not with
    // kustomize-controller's own rights; Remote: the ServiceSet's cluster, as its kubeconfig says.
    let policies = t.child("local", "cluster-policies").await.expect("the Local Kustomization");
    assert!(policies["spec"].get("kubeConfig").is_none(), "{policies}");
    assert_eq!(policies["spec"]["serviceAccountName"], "default", "{policies}");
    let podinfo = t.child("local", "podinfo").await.expect("the Remote Kustomization");
    assert!(podinfo["spec"]["kubeConfig"].is_object(), "{podinfo}");
    assert!(podinfo["spec"].get("serviceAccountName").is_none(), "{podinfo}");
}
