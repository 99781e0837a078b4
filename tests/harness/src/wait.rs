//! Polling until something holds.

use std::time::{Duration, Instant};

use serde_json::Value;

/// How often a condition is polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// A wait that ran out of time.
#[derive(Debug)]
pub struct TimedOut {
    /// What was awaited.
    pub desc: String,
    /// How long it was awaited.
    pub waited: Duration,
    /// What the probe observed last.
    pub last: Value,
}

impl TimedOut {
    /// `desc`, the time waited and the last observation, pretty-printed.
    pub fn report(&self) -> String {
        let last = serde_json::to_string_pretty(&self.last).unwrap_or_else(|_| self.last.to_string());
        format!("timed out after {:.1?} waiting for: {}\nlast observed:\n{last}", self.waited, self.desc)
    }
}

/// Calls `probe` every [`POLL_INTERVAL`] until it returns `Ok`, for at most `timeout`. While the
/// condition does not hold, the probe returns `Err` with what it observed (the object, or a
/// description), which the timeout reports.
pub async fn poll<T>(
    desc: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, Value>,
) -> Result<T, TimedOut> {
    let start = Instant::now();
    loop {
        match probe().await {
            Ok(value) => return Ok(value),
            Err(last) if start.elapsed() >= timeout => {
                return Err(TimedOut { desc: desc.to_string(), waited: start.elapsed(), last });
            }
            Err(_) => tokio::time::sleep(POLL_INTERVAL).await,
        }
    }
}

/// [`poll`], panicking with the report on timeout.
pub async fn wait_for<T>(desc: &str, timeout: Duration, probe: impl AsyncFnMut() -> Result<T, Value>) -> T {
    match poll(desc, timeout, probe).await {
        Ok(value) => value,
        Err(timed_out) => panic!("{}", timed_out.report()),
    }
}
