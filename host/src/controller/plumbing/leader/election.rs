//! The settings of a leader election, and the renewal timing they give.

use anyhow::bail;
use std::time::{Duration, SystemTime};

/// The lease duration of [`Election::new`]: a standby takes over at most this long after the
/// holder stopped renewing without releasing (a crash).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// The shortest lease duration (the crate counts whole seconds and renews before expiry).
pub const MIN_LEASE_DURATION: Duration = Duration::from_secs(2);

/// Settings of leader election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    /// Namespace of the Lease (usually the adapter's own namespace).
    pub namespace: String,
    /// Name of the Lease: the replicas that contend share it.
    pub lease_name: String,
    /// This replica's identity, written to `spec.holderIdentity`. It must be unique per
    /// process, not only per pod (a restarted container must not resume its predecessor's
    /// term): see [`unique_identity`].
    pub identity: String,
    /// How long the Lease stays valid after its last renewal (`spec.leaseDurationSeconds`;
    /// rounded up to whole seconds, at least [`MIN_LEASE_DURATION`]); default
    /// [`DEFAULT_LEASE_DURATION`].
    pub lease_duration: Duration,
}

impl Election {
    /// An election for the Lease `lease_name` in `namespace` as `identity`, with the
    /// [`DEFAULT_LEASE_DURATION`].
    pub fn new(namespace: impl Into<String>, lease_name: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: lease_name.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
        }
    }

    pub(super) fn check(&self) -> anyhow::Result<Timing> {
        for (what, value) in
            [("namespace", &self.namespace), ("lease name", &self.lease_name), ("identity", &self.identity)]
        {
            if value.is_empty() {
                bail!("leader election needs a {what}");
            }
        }
        Timing::of(self.lease_duration)
    }
}

/// An identity unique to this process: `base` (e.g. the pod name) and a suffix from the start
/// time and process id, `<base>_<hex>`, as client-go does with a UUID.
pub fn unique_identity(base: &str) -> String {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let suffix = nanos ^ (u64::from(std::process::id()) << 40) ^ call.rotate_right(8);
    format!("{base}_{suffix:016x}")
}

/// The lease timings, in the crate's whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Timing {
    /// `leaseDurationSeconds`.
    pub(super) duration: u64,
    /// The crate's grace: the holder renews this long before the Lease would expire.
    pub(super) grace: u64,
}

impl Timing {
    pub(super) fn of(lease_duration: Duration) -> anyhow::Result<Self> {
        if lease_duration < MIN_LEASE_DURATION {
            bail!("the lease duration ({lease_duration:?}) must be at least {MIN_LEASE_DURATION:?}");
        }
        let duration = lease_duration.as_secs() + u64::from(lease_duration.subsec_nanos() > 0);
        let interval = (duration / 3).max(1);
        Ok(Self { duration, grace: duration - interval })
    }

    pub(super) fn lease(self) -> Duration {
        Duration::from_secs(self.duration)
    }

    /// Time between two renewals.
    pub(super) fn interval(self) -> Duration {
        Duration::from_secs(self.duration - self.grace)
    }

    /// How long before the Lease would expire the holder declares it lost.
    pub(super) fn margin(self) -> Duration {
        self.lease() / 6
    }

    /// Time between two attempts at a failed renewal.
    pub(super) fn retry(self) -> Duration {
        (self.interval() / 2).min(Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_come_every_third_of_the_duration() {
        let default = Timing::of(DEFAULT_LEASE_DURATION).unwrap();
        assert_eq!(default, Timing { duration: 15, grace: 10 });
        assert_eq!(default.interval(), Duration::from_secs(5));
        assert_eq!(default.margin(), Duration::from_millis(2500));
        assert_eq!(default.retry(), Duration::from_secs(1));

        let short = Timing::of(Duration::from_secs(2)).unwrap();
        assert_eq!(short, Timing { duration: 2, grace: 1 });
        assert_eq!(short.retry(), Duration::from_millis(500));
        assert_eq!(Timing::of(Duration::from_millis(2500)).unwrap(), Timing { duration: 3, grace: 2 });
    }

    #[test]
    fn invalid_settings_are_refused() {
        assert!(Timing::of(Duration::from_millis(1999)).is_err());
        assert!(Election::new("ns", "lease", "").check().is_err());
        assert!(Election::new("", "lease", "me").check().is_err());
        assert!(Election::new("ns", "lease", "me").check().is_ok());
    }

    #[test]
    fn identities_are_unique() {
        let (first, second) = (unique_identity("pod-a"), unique_identity("pod-a"));
        assert!(first.starts_with("pod-a_") && first.len() == "pod-a_".len() + 16, "{first}");
        assert_ne!(first, second);
    }
}
