//! Where a ServiceSet's children were applied outside the management cluster, recorded on the
//! ServiceSet itself (annotation [`REGIONS_ANNOTATION`]) before the first apply there. What
//! deletes or moves children reads this record, not the route as it is now: the route may point
//! elsewhere (a Credential moved, a ClusterDeployment deleted first) and a region's cache may be
//! empty (a restart, a leader change, a rotated kubeconfig Secret, a region dropped while idle).
//! The management cluster needs no record: its caches always hold every child.
//!
//! The value is JSON, `[{"region": "eu", "secret": "kcm-system/eu-kubeconfig", "key": "value"}]`:
//! the Region's name and how it was reached. The Region's current kubeconfig Secret is preferred
//! when it still exists; the recorded one reaches a region whose Region object is gone.

use super::route::RegionAccess;
use crate::k0rdent::{NamespacedName, ServiceSet};
use serde::{Deserialize, Serialize};

/// The annotation holding the record.
pub const REGIONS_ANNOTATION: &str = "ksm.k0rdent.mirantis.com/regions";

/// One recorded region, as the annotation holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Recorded {
    region: String,
    /// `namespace/name` of the kubeconfig Secret.
    secret: String,
    key: String,
}

impl From<&RegionAccess> for Recorded {
    fn from(access: &RegionAccess) -> Self {
        Recorded { region: access.name.clone(), secret: access.secret.to_string(), key: access.key.clone() }
    }
}

impl From<Recorded> for RegionAccess {
    fn from(recorded: Recorded) -> Self {
        let (namespace, name) = recorded.secret.split_once('/').unwrap_or_default();
        RegionAccess { name: recorded.region, secret: NamespacedName::new(namespace, name), key: recorded.key }
    }
}

/// A record that does not read: someone edited it.
#[derive(Debug, thiserror::Error)]
#[error("annotation {REGIONS_ANNOTATION} is not the host's record of regions: {0}")]
pub struct Unreadable(#[source] serde_json::Error);

/// The regions recorded on `service_set`, or why the record does not read.
pub fn recorded(service_set: &ServiceSet) -> Result<Vec<RegionAccess>, Unreadable> {
    let Some(text) = service_set.metadata.annotations.as_ref().and_then(|a| a.get(REGIONS_ANNOTATION)) else {
        return Ok(Vec::new());
    };
    let recorded: Vec<Recorded> = serde_json::from_str(text).map_err(Unreadable)?;
    Ok(recorded.into_iter().map(RegionAccess::from).collect())
}

/// The record with `access` in it, replacing what it had for that region; `None` when it is
/// recorded as it is already. A record that does not read is replaced.
pub fn recording(service_set: &ServiceSet, access: &RegionAccess) -> Option<String> {
    let mut regions = recorded(service_set).unwrap_or_default();
    if regions.contains(access) {
        return None;
    }
    regions.retain(|r| r.name != access.name);
    regions.push(access.clone());
    Some(text(&regions))
}

/// The record without the regions `names`; `None` when none of them is recorded.
pub fn forgetting(service_set: &ServiceSet, names: &[String]) -> Option<String> {
    let regions = recorded(service_set).ok()?;
    let kept: Vec<RegionAccess> = regions.iter().filter(|r| !names.contains(&r.name)).cloned().collect();
    (kept.len() != regions.len()).then(|| text(&kept))
}

fn text(regions: &[RegionAccess]) -> String {
    let recorded: Vec<Recorded> = regions.iter().map(Recorded::from).collect();
    serde_json::to_string(&recorded).expect("strings serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service_set(record: Option<&str>) -> ServiceSet {
        let mut ss: ServiceSet = serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "web", "namespace": "team", "annotations": {"note": "kept"}},
            "spec": {"provider": {"name": "ksm-flux"}},
        }))
        .unwrap();
        if let Some(record) = record {
            ss.metadata.annotations.as_mut().unwrap().insert(REGIONS_ANNOTATION.into(), record.into());
        }
        ss
    }

    fn access(region: &str, secret: &str) -> RegionAccess {
        RegionAccess { name: region.into(), secret: NamespacedName::new("kcm-system", secret), key: "value".into() }
    }

    #[test]
    fn a_region_is_recorded_once_and_updated_when_it_is_reached_another_way() {
        let none = service_set(None);
        assert_eq!(recorded(&none).unwrap(), vec![]);
        let first = recording(&none, &access("eu", "eu-kc")).unwrap();
        assert_eq!(first, r#"[{"region":"eu","secret":"kcm-system/eu-kc","key":"value"}]"#);
        let eu = service_set(Some(&first));
        assert_eq!(recorded(&eu).unwrap(), vec![access("eu", "eu-kc")]);
        assert_eq!(recording(&eu, &access("eu", "eu-kc")), None, "recorded already: no write");
        let moved = service_set(Some(&recording(&eu, &access("eu", "eu-kc-2")).unwrap()));
        assert_eq!(recorded(&moved).unwrap(), vec![access("eu", "eu-kc-2")], "one entry per region");
        let both = service_set(Some(&recording(&moved, &access("us", "us-kc")).unwrap()));
        assert_eq!(recorded(&both).unwrap().len(), 2);
        let left = service_set(Some(&forgetting(&both, &["eu".into()]).unwrap()));
        assert_eq!(recorded(&left).unwrap(), vec![access("us", "us-kc")]);
        assert_eq!(forgetting(&left, &["eu".into()]), None, "not recorded: no write");
    }

    #[test]
    fn a_record_someone_edited_says_so_and_is_replaced_when_a_region_is_recorded() {
        let edited = service_set(Some("eu"));
        let why = recorded(&edited).unwrap_err().to_string();
        assert!(why.starts_with("annotation ksm.k0rdent.mirantis.com/regions is not the host's record"), "{why}");
        let replaced = service_set(Some(&recording(&edited, &access("eu", "eu-kc")).unwrap()));
        assert_eq!(recorded(&replaced).unwrap(), vec![access("eu", "eu-kc")]);
    }
}
