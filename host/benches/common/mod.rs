//! What the bench binaries share: the host's allocator, timing by medians over interleaved
//! batches, and the command line.

use std::time::{Duration, Instant};

/// The allocator `ksm-adapter` runs with (`host/src/main.rs`), so that the host-side work of
/// every build measured costs what it costs in the controller.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Batches per measurement; the median batch is reported.
pub const BATCHES: usize = 15;

/// `--iterations N` from the command line, else `default`.
pub fn iterations(default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--iterations")
        .and_then(|i| args.get(i + 1))
        .map_or(default, |n| n.parse().expect("--iterations takes a number"))
}

/// Median time per iteration of each of `fs` over [`BATCHES`] batches of `iterations`.
///
/// The batches are interleaved (one batch of each function per round, the order rotating each
/// round), so a slow spell of a shared machine falls on all of them alike and their ratios stay
/// comparable.
pub fn medians(iterations: usize, fs: &mut [&mut dyn FnMut()]) -> Vec<Duration> {
    for f in fs.iter_mut() {
        for _ in 0..iterations / 10 + 1 {
            f(); // warm-up
        }
    }
    let mut batches = vec![Vec::with_capacity(BATCHES); fs.len()];
    for round in 0..BATCHES {
        for k in 0..fs.len() {
            let i = (round + k) % fs.len();
            let started = Instant::now();
            for _ in 0..iterations {
                fs[i]();
            }
            batches[i].push(started.elapsed() / iterations as u32);
        }
    }
    batches
        .into_iter()
        .map(|mut per_iteration| {
            per_iteration.sort();
            per_iteration[BATCHES / 2]
        })
        .collect()
}

/// Microseconds, for tables.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
