//! What the bench binaries share: timing by medians over batches, and the command line.

use std::time::{Duration, Instant};

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

/// Median time per iteration of `f` over [`BATCHES`] batches of `iterations`.
pub fn median(iterations: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..iterations / 10 + 1 {
        f(); // warm-up
    }
    let mut per_iteration: Vec<Duration> = (0..BATCHES)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..iterations {
                f();
            }
            started.elapsed() / iterations as u32
        })
        .collect();
    per_iteration.sort();
    per_iteration[BATCHES / 2]
}

/// Microseconds, for tables.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
