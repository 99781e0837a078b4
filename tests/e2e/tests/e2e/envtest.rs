//! The envtest harness itself: one test binary may start more than one control plane (a test's
//! other clusters, a region or a target, start their own beside the shared one), and they must
//! stay apart.

use ksm_test_harness::env::{Env, report};
use ksm_test_harness::envtest::{ASSETS_VAR, ControlPlane};
use ksm_test_harness::{Backend, objects::Kind};

/// A second control plane started and stopped in the same process leaves the shared one's
/// directory (certificates, etcd data, kubeconfig) alone: a test started after it still reaches
/// the shared API server. (They once shared `envtest-<pid>`: the second start rewrote the
/// shared kubeconfig, and every later test failed to connect once the second plane stopped.)
#[tokio::test(flavor = "multi_thread")]
async fn a_second_control_plane_leaves_the_shared_one_alone() {
    if Backend::selected() != Backend::Envtest {
        report("envtest-planes", "skipped: it tests the envtest harness (KUBEBUILDER_ASSETS)");
        return;
    }
    let first = Env::start("planes").await;
    let shared = first.control_plane().await.expect("the shared control plane");
    let kubeconfig = std::fs::read_to_string(shared.admin_kubeconfig()).expect("the shared kubeconfig");

    let assets = std::path::PathBuf::from(std::env::var_os(ASSETS_VAR).expect(ASSETS_VAR));
    let second = tokio::task::spawn_blocking(move || ControlPlane::start(&assets))
        .await
        .expect("start joins")
        .expect("a second control plane starts");
    second.wait_ready().await.expect("the second control plane is ready");
    tokio::task::spawn_blocking(move || drop(second)).await.expect("the second control plane stops");

    assert_eq!(
        std::fs::read_to_string(shared.admin_kubeconfig()).ok().as_deref(),
        Some(kubeconfig.as_str()),
        "the shared kubeconfig is untouched"
    );
    let later = Env::start("planes-after").await;
    assert!(!later.list(Kind::Namespace, "", "").await.is_empty(), "the shared API server still answers");
}
