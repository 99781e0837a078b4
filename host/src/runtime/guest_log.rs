//! Plugin log lines in the host log: tagged with the plugin name and rate-limited per plugin
//! (a token bucket), so a noisy plugin cannot flood the host's log.

use super::bindings::LogLevel;
use std::sync::Mutex;
use std::time::Instant;

/// Lines a plugin may log in a burst.
const BURST: f64 = 50.0;
/// Lines per second a plugin may log in the long run.
const PER_SECOND: f64 = 10.0;

/// The log of one plugin.
pub struct GuestLog {
    plugin: String,
    bucket: Mutex<Bucket>,
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
    suppressed: u64,
}

impl GuestLog {
    /// A log for `plugin`.
    pub fn new(plugin: impl Into<String>) -> Self {
        let bucket = Bucket { tokens: BURST, refilled: Instant::now(), suppressed: 0 };
        Self { plugin: plugin.into(), bucket: Mutex::new(bucket) }
    }

    /// Logs `message` unless the plugin is over its rate; says how many lines were suppressed
    /// once it may log again. Returns whether the line was written.
    pub fn line(&self, level: LogLevel, message: &str) -> bool {
        let suppressed = {
            let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            b.tokens = (b.tokens + now.duration_since(b.refilled).as_secs_f64() * PER_SECOND).min(BURST);
            b.refilled = now;
            if b.tokens < 1.0 {
                b.suppressed += 1;
                return false;
            }
            b.tokens -= 1.0;
            std::mem::take(&mut b.suppressed)
        };
        let plugin = self.plugin.as_str();
        if suppressed > 0 {
            tracing::warn!(plugin, suppressed, "plugin log lines suppressed by the rate limit");
        }
        match level {
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_beyond_the_limit_is_suppressed() {
        let log = GuestLog::new("noisy");
        let written = (0..200).filter(|i| log.line(LogLevel::Info, &format!("line {i}"))).count();
        // The burst, plus what refilled while the loop ran (well under one more second).
        assert!((BURST as usize..BURST as usize + 10).contains(&written), "{written}");
    }
}
