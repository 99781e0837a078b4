//! The scale benchmark at a small size, so that it cannot rot: ksm-adapter must converge, make
//! no writes in a steady state and apply spec changes; the floor (the least any adapter must ask)
//! must converge with exactly its writes and none in a steady state, and so must the floor writing
//! as ksm-adapter chooses to (applies and Events); the naive baseline (the
//! k0rdent guide's controller) must converge too, and cost more requests and steady-state writes. On the
//! simulator at 200 × 3; with envtest (`KUBEBUILDER_ASSETS`) at 50 × 3 on control planes of its
//! own (`ksm-scale-bench --apiserver envtest`).

use std::path::PathBuf;
use std::time::Duration;

use ksm_scale::bench::{ApiServer, Baseline, BaselineKind, CSV_HEADER, Options, run};
use ksm_scale::naive::DEFAULT_CONCURRENCY;
use ksm_test_harness::adapter::{binary, run_command};
use ksm_test_harness::{Backend, envtest};

#[tokio::test(flavor = "multi_thread")]
async fn the_scale_benchmark_runs_at_a_small_size() {
    let (apiserver, n) = match Backend::selected() {
        Backend::Simulator => (ApiServer::Simulated, 200),
        Backend::Envtest => (ApiServer::Envtest(std::env::var_os(envtest::ASSETS_VAR).unwrap().into()), 50),
        Backend::Cluster => {
            ksm_test_harness::env::report("scale-smoke", "skipped: the benchmark starts API servers of its own");
            return;
        }
    };
    ksm_test_harness::env::report("scale-smoke", &format!("runs at {n} x 3 on its own API servers"));
    let naive = Baseline {
        kind: BaselineKind::Naive,
        binary: PathBuf::from(env!("CARGO_BIN_EXE_ksm-naive-adapter")),
        timeout: Some(Duration::from_secs(60)),
        concurrency: 4,
        // Shorter than the guide's 30 s so that the 3 s steady window sees the periodic writes.
        requeue: Duration::from_secs(3),
    };
    let floor = Baseline {
        kind: BaselineKind::Floor,
        binary: PathBuf::from(env!("CARGO_BIN_EXE_ksm-floor-adapter")),
        ..naive.clone()
    };
    let floor_applies = Baseline { kind: BaselineKind::FloorApplies, ..floor.clone() };
    let options = Options {
        service_sets: n,
        services: 3,
        steady: Duration::from_secs(3),
        changes: 10,
        timeout: Duration::from_secs(120),
        binary: binary(),
        baselines: vec![floor, floor_applies, naive],
        restart: true,
        apiserver,
    };
    let report = run(options).await.expect("the benchmark runs");
    eprintln!("{}", report.table());
    let columns = |line: &str| line.split(',').count();
    assert_eq!(columns(&report.csv_row()), columns(CSV_HEADER), "{}", report.csv_row());
    let ours = &report.ours;
    let floor = report.baseline(BaselineKind::Floor).expect("the floor ran");
    let naive = report.baseline(BaselineKind::Naive).expect("the baseline ran");
    assert_eq!(ours.steady_writes, 0, "steady state makes no writes");
    assert_eq!((ours.latencies.len(), ours.latency_timeouts), (10, 0));
    assert!(ours.verb("patch") >= n * 3, "every HelmRelease was applied: {:?}", ours.requests);
    // One status write per new ServiceSet when Flux is quick (the status waits for the applied
    // children to come back); a slow spell makes some write `Provisioning` first, and a real API
    // server answers some writes with 409 Conflict. On the simulator two rounds each (the former
    // behaviour) fail. On a real API server on a busy machine nearly every ServiceSet may show
    // `Provisioning` before `Deployed` (two writes a user sees) plus a few conflicts; a third write
    // per ServiceSet fails.
    let bound = if Backend::selected() == Backend::Envtest { n * 5 / 2 } else { n * 3 / 2 };
    assert!(ours.verb("update") < bound, "about one status write per ServiceSet: {:?}", ours.requests);
    assert!(ours.peak_rss_kib > 0);
    let restart = ours.restart.as_ref().expect("the restart was measured");
    assert_eq!(restart.writes, 0, "a restart over a converged state writes nothing: {restart:?}");
    assert!(restart.first_reconcile <= restart.steady && restart.cpu > Duration::ZERO, "{restart:?}");
    assert!(ours.converge_cpu > Duration::ZERO, "the adapter's CPU time is read");
    assert!(ours.simulator_cpu > Duration::ZERO, "the simulator's CPU time is read");
    if Backend::selected() == Backend::Envtest {
        let names: Vec<&str> = ours.server_cpu.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["kube-apiserver", "etcd"], "the real server's processes are measured");
        assert!(ours.server_cpu.iter().all(|(_, cpu)| *cpu > Duration::ZERO), "{:?}", ours.server_cpu);
    }

    // Exactly its writes: a finalizer patch, three creates (or, writing as ksm-adapter chooses
    // to, three applies and an Event) and a status patch per ServiceSet, and no reads but its
    // list+watch of two kinds.
    let applies = report.baseline(BaselineKind::FloorApplies).expect("the floor writing as ksm-adapter ran");
    let floors = [(BaselineKind::Floor, floor, [n * 3, 0, 0]), (BaselineKind::FloorApplies, applies, [0, n * 3, n])];
    for (kind, floor, [creates, applies, events]) in floors {
        let kind = kind.name();
        assert!(floor.converged, "{kind} converged: {} of {n} deployed", floor.deployed);
        assert_eq!(floor.steady_writes, 0, "{kind} writes nothing in a steady state");
        assert_eq!((floor.latencies.len(), floor.latency_timeouts), (10, 0), "{kind} applies spec changes");
        let writes = [
            ("create", "helmreleases", creates),
            ("patch", "helmreleases", applies),
            ("patch", "servicesets", n),
            ("patch", "servicesets/status", n),
            ("update", "servicesets/status", 0),
            ("get", "servicesets", 0),
            ("get", "helmreleases", 0),
        ];
        for (verb, resource, count) in writes {
            assert_eq!(floor.verb_on(verb, resource), count, "{kind}: {verb} {resource}: {:?}", floor.requests);
        }
        // The last Events may come after the last status the benchmark waits for.
        let posted = floor.verb_on("create", "events");
        assert!(posted <= events && posted + n / 10 >= events, "{kind}: {posted} Events: {:?}", floor.requests);
        assert!(floor.verb("list") + floor.verb("watch") <= 8, "two list+watches: {:?}", floor.requests);
        assert!(floor.total_requests() < ours.total_requests(), "the floor is the least: {:?}", floor.requests);
    }

    assert!(naive.converged, "the baseline converged: {} of {n} deployed", naive.deployed);
    assert!(naive.verb("create") >= n * 3, "the baseline created every HelmRelease: {:?}", naive.requests);
    assert!(naive.steady_writes > 0, "the baseline writes status and children on every requeue");
    assert!(
        naive.total_requests() > ours.total_requests(),
        "the baseline makes more requests: {} vs {}",
        naive.total_requests(),
        ours.total_requests()
    );
    assert_eq!(naive.latency_timeouts, 0, "the baseline applies spec changes");
}

/// The baseline runs at ksm-adapter's concurrency unless told otherwise, so that a comparison
/// is fair: the two defaults must agree.
#[test]
fn the_baseline_defaults_to_the_adapters_concurrency() {
    let help = String::from_utf8(run_command(&["run", "--help"]).stdout).expect("help is UTF-8");
    let entry = help.split("--concurrency <CONCURRENCY>").nth(1).expect("run --help lists --concurrency");
    let entry = entry.split("\n      --").next().unwrap_or(entry);
    assert!(entry.contains(&format!("[default: {DEFAULT_CONCURRENCY}]")), "--concurrency's entry:{entry}");
}
