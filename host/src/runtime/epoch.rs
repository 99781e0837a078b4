//! Wall time of plugin calls: one thread advances the engine's epoch every tick; a store's
//! deadline is a number of ticks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;
use wasmtime::Engine;

/// How often the epoch advances: the granularity of call timeouts.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// A thread that advances the engine's epoch every [`EPOCH_TICK`], so stores with an epoch
/// deadline trap when their call runs too long. Stops when the last owner drops it.
pub(super) struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl EpochTicker {
    pub(super) fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawning the epoch thread");
        Self { stop, thread: Some(thread) }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Epoch ticks that make up `timeout` (rounded up, plus one for the tick in progress).
pub(super) fn deadline_ticks(timeout: Duration) -> u64 {
    (timeout.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64).max(1) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_covers_the_whole_timeout() {
        assert_eq!(deadline_ticks(Duration::from_secs(1)), 101);
        assert_eq!(deadline_ticks(Duration::from_millis(1)), 2);
    }
}
