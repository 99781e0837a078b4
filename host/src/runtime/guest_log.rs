//! Plugin log lines in the host log: tagged with the plugin name, each cut to a bounded length,
//! and rate-limited per plugin in lines and in bytes (token buckets), so a noisy plugin cannot
//! flood the host's log with many lines or with a few huge ones.

use std::sync::Mutex;
use std::time::Instant;
use tracing::Level;

/// Lines a plugin may log in a burst.
const BURST_LINES: f64 = 50.0;
/// Lines per second a plugin may log in the long run.
const LINES_PER_SECOND: f64 = 10.0;
/// Bytes a plugin may log in a burst.
const BURST_BYTES: f64 = 64.0 * 1024.0;
/// Bytes per second a plugin may log in the long run.
const BYTES_PER_SECOND: f64 = 16.0 * 1024.0;
/// Bytes of one line kept; the rest is cut.
const MAX_LINE: usize = 4 * 1024;

/// The log of one plugin.
pub struct GuestLog {
    plugin: String,
    bucket: Mutex<Bucket>,
}

struct Bucket {
    lines: f64,
    bytes: f64,
    refilled: Instant,
    suppressed: u64,
}

impl GuestLog {
    /// A log for `plugin`.
    pub fn new(plugin: impl Into<String>) -> Self {
        let bucket = Bucket { lines: BURST_LINES, bytes: BURST_BYTES, refilled: Instant::now(), suppressed: 0 };
        Self { plugin: plugin.into(), bucket: Mutex::new(bucket) }
    }

    /// Logs `message`, cut to [`MAX_LINE`] bytes, unless the plugin is over its rate; says how
    /// many lines were suppressed once it may log again. Returns whether the line was written.
    pub fn line(&self, level: Level, message: &str) -> bool {
        let message = cut(message);
        let suppressed = {
            let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let elapsed = now.duration_since(b.refilled).as_secs_f64();
            b.lines = (b.lines + elapsed * LINES_PER_SECOND).min(BURST_LINES);
            b.bytes = (b.bytes + elapsed * BYTES_PER_SECOND).min(BURST_BYTES);
            b.refilled = now;
            let size = message.len() as f64;
            if b.lines < 1.0 || b.bytes < size {
                b.suppressed += 1;
                return false;
            }
            b.lines -= 1.0;
            b.bytes -= size;
            std::mem::take(&mut b.suppressed)
        };
        let plugin = self.plugin.as_str();
        if suppressed > 0 {
            tracing::warn!(plugin, suppressed, "plugin log lines suppressed by the rate limit");
        }
        match level {
            Level::ERROR => tracing::error!(plugin, "{message}"),
            Level::WARN => tracing::warn!(plugin, "{message}"),
            Level::INFO => tracing::info!(plugin, "{message}"),
            _ => tracing::debug!(plugin, "{message}"),
        }
        true
    }
}

/// `message`, or its first [`MAX_LINE`] bytes (on a character boundary) and how much was cut.
fn cut(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_LINE {
        return message.into();
    }
    let end = message.floor_char_boundary(MAX_LINE);
    format!("{}... ({} more bytes cut)", &message[..end], message.len() - end).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_beyond_the_limit_is_suppressed() {
        let log = GuestLog::new("noisy");
        let written = (0..200).filter(|i| log.line(Level::INFO, &format!("line {i}"))).count();
        // The burst, plus what refilled while the loop ran (well under one more second).
        assert!((BURST_LINES as usize..BURST_LINES as usize + 10).contains(&written), "{written}");
    }

    #[test]
    fn a_few_huge_lines_are_cut_and_limited_in_bytes() {
        let log = GuestLog::new("verbose");
        let huge = "é".repeat(1 << 20);
        let written = (0..40).filter(|_| log.line(Level::INFO, &huge)).count();
        // Each line is cut to about 4 KiB, and 64 KiB may be logged in a burst: about 16 lines,
        // far fewer than the 50 the line limit allows.
        assert!((14..=18).contains(&written), "{written}");
        let kept = cut(&huge);
        assert!(kept.len() < MAX_LINE + 40 && kept.ends_with("more bytes cut)"), "{}", kept.len());
    }
}
