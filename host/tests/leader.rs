//! Leader election (`controller::plumbing::leader`) against the simulated API server (or a real
//! cluster with `KSM_E2E_KUBECONFIG`): contenders in one process, each with its own identity.

use ksm_adapter::controller::plumbing::leader;

use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use ksm_test_harness::Env;
use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use leader::{Election, Leadership, acquire};
use serde_json::json;

const LEASE: &str = "ksm-adapter-leader";

fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KSM_LOG").unwrap_or_else(|_| "info,leader=debug".into()),
        )
        .try_init();
}

async fn client(env: &Env) -> Client {
    let kubeconfig = Kubeconfig::read_from(env.kubeconfig()).expect("the test kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.expect("a config");
    Client::try_from(config).expect("a kube client")
}

fn election(env: &Env, identity: &str, seconds: u64) -> Election {
    Election { lease_duration: Duration::from_secs(seconds), ..Election::new(env.namespace(), LEASE, identity) }
}

fn leases(client: &Client, env: &Env) -> Api<Lease> {
    Api::namespaced(client.clone(), env.namespace())
}

/// `spec.holderIdentity` and `spec.renewTime` of the Lease.
async fn lease(client: &Client, env: &Env) -> (Option<String>, Option<SystemTime>) {
    let spec = leases(client, env).get_opt(LEASE).await.expect("reading the lease").and_then(|l| l.spec);
    let spec = spec.unwrap_or_default();
    (spec.holder_identity.filter(|h| !h.is_empty()), spec.renew_time.map(|t| SystemTime::from(t.0)))
}

async fn within<T>(limit: Duration, what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, future).await.unwrap_or_else(|_| panic!("{what}: not within {limit:?}"))
}

async fn acquired(client: &Client, election: Election) -> Leadership {
    let identity = election.identity.clone();
    within(Duration::from_secs(10), &format!("{identity} acquires"), acquire(client.clone(), election))
        .await
        .expect("valid settings")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_two_contenders_leads_and_its_release_hands_over_at_once() {
    init_logs();
    let env = Env::start("leader-release").await;
    let client = client(&env).await;
    let mut a = tokio::spawn(acquire(client.clone(), election(&env, "a", 15)));
    let mut b = tokio::spawn(acquire(client.clone(), election(&env, "b", 15)));
    let (leader, standby, leader_id, standby_id) = within(Duration::from_secs(10), "one contender acquires", async {
        tokio::select! {
            won = &mut a => (won.expect("a's task").expect("a acquires"), b, "a", "b"),
            won = &mut b => (won.expect("b's task").expect("b acquires"), a, "b", "a"),
        }
    })
    .await;
    assert_eq!(lease(&client, &env).await.0.as_deref(), Some(leader_id));

    // Longer than a renewal interval (5 s): the leader renews, the other stays a standby.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(!standby.is_finished(), "{standby_id} acquired the lease {leader_id} holds");
    assert!(!leader.is_lost(), "{leader_id} lost a lease it renews");
    assert_eq!(lease(&client, &env).await.0.as_deref(), Some(leader_id));

    // Released, the lease goes to the standby within moments, not after its 15 s duration.
    leader.release().await.expect("release");
    let standby = within(Duration::from_secs(3), &format!("{standby_id} acquires after the release"), standby)
        .await
        .expect("the standby's task")
        .expect("the standby acquires");
    assert_eq!(lease(&client, &env).await.0.as_deref(), Some(standby_id));
    assert!(!standby.is_lost());

    standby.release().await.expect("release");
    assert_eq!(lease(&client, &env).await.0, None, "a released lease has no holder");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_stops_renewing_is_replaced_once_its_lease_expires() {
    init_logs();
    let env = Env::start("leader-expiry").await;
    let client = client(&env).await;
    let a = acquired(&client, election(&env, "a", 2)).await;
    let b = tokio::spawn(acquire(client.clone(), election(&env, "b", 2)));

    // Longer than the lease: a renews it (every second), so b keeps waiting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!b.is_finished(), "b acquired the lease a renews");
    assert!(!a.is_lost(), "a lost a lease it renews");

    // Dropped without release, as in a crash: the renewals stop, the lease stays a's.
    drop(a);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (holder, renewed) = lease(&client, &env).await;
    assert_eq!(holder.as_deref(), Some("a"));
    let expiry = renewed.expect("a renewTime") + Duration::from_secs(2);

    let b =
        within(Duration::from_secs(6), "b acquires the expired lease", b).await.expect("b's task").expect("b acquires");
    assert!(SystemTime::now() >= expiry, "b took the lease over before it expired");
    assert_eq!(lease(&client, &env).await.0.as_deref(), Some("b"));
    b.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_learns_at_once_that_another_identity_took_the_lease() {
    init_logs();
    let env = Env::start("leader-taken").await;
    let client = client(&env).await;
    let a = acquired(&client, election(&env, "a", 15)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!a.is_lost());

    let taken = json!({"spec": {"holderIdentity": "intruder"}});
    leases(&client, &env).patch(LEASE, &PatchParams::default(), &Patch::Merge(taken)).await.expect("taking the lease");
    // Through the watch: the crate alone would notice at a's next renewal (up to 5 s).
    within(Duration::from_secs(2), "a learns it lost the lease", a.lost()).await;
    assert!(a.is_lost());

    // Nothing to release: the intruder keeps the lease.
    a.release().await.expect("release after a loss");
    assert_eq!(lease(&client, &env).await.0.as_deref(), Some("intruder"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_renewals_fail_gives_up_before_its_lease_expires() {
    init_logs();
    let env = Env::start("leader-failing").await;
    let Some(server) = env.server() else {
        eprintln!("skipped: fault injection needs the simulated API server");
        return;
    };
    let client = client(&env).await;
    let a = acquired(&client, election(&env, "a", 3)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!a.is_lost());

    // Every renewal (a PATCH) fails from now on.
    server.fail_next("patch", 1000, 500);
    let failing = Instant::now();
    within(Duration::from_secs(4), "a gives up", a.lost()).await;
    let (holder, renewed) = lease(&client, &env).await;
    assert_eq!(holder.as_deref(), Some("a"));
    let expiry = renewed.expect("a renewTime") + Duration::from_secs(3);
    assert!(SystemTime::now() < expiry, "a gave up only after its lease expired");
    assert!(failing.elapsed() >= Duration::from_millis(500), "a gave up at the first failed renewal");
}
