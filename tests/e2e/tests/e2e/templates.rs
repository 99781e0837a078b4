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
    let local = t.wait_converged("local").await;
    assert!(local.object_of("cluster-policies")["spec"].get("kubeConfig").is_none(), "Local: the management cluster");
    assert!(local.object_of("podinfo")["spec"]["kubeConfig"].is_object(), "Remote: the ServiceSet's cluster");
}
