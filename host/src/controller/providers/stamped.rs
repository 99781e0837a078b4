//! Values cached per SMP name, each for one version of the SMP and good for a while: many
//! ServiceSets of one SMP cost one look.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Values per SMP name, each for one version `V` of the SMP and good for a while.
pub struct Stamped<V, T>(Mutex<HashMap<String, (V, Instant, T)>>);

impl<V, T> Default for Stamped<V, T> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

impl<V: PartialEq, T: Clone> Stamped<V, T> {
    /// The value for SMP `name` at `version`, if found less than `ttl` ago.
    pub fn get(&self, name: &str, version: &V, ttl: Duration) -> Option<T> {
        let map = self.0.lock().unwrap();
        let (v, at, value) = map.get(name)?;
        (v == version && at.elapsed() < ttl).then(|| value.clone())
    }

    /// Records `value` for SMP `name` at `version`, now.
    pub fn put(&self, name: String, version: V, value: T) {
        self.0.lock().unwrap().insert(name, (version, Instant::now(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_holds_for_its_version_and_while_fresh() {
        let stamped = Stamped::<Option<i64>, &str>::default();
        stamped.put("flux".into(), Some(2), "checked");
        assert_eq!(stamped.get("flux", &Some(2), Duration::from_secs(60)), Some("checked"));
        assert_eq!(stamped.get("flux", &Some(3), Duration::from_secs(60)), None, "another version");
        assert_eq!(stamped.get("argo", &Some(2), Duration::from_secs(60)), None, "another SMP");
        assert_eq!(stamped.get("flux", &Some(2), Duration::ZERO), None, "stale");
    }
}
