//! Where a ServiceSet's children were applied outside the management cluster, recorded on the
//! ServiceSet itself (annotation [`REGIONS_ANNOTATION`]) before the first apply there. What
//! deletes or moves children reads this record, not the route as it is now: the route may point
//! elsewhere (a Credential moved, a ClusterDeployment deleted first) and a region's cache may be
//! empty (a restart, a leader change, a rotated kubeconfig Secret, a region dropped while idle).
//! The management cluster needs no record: its caches always hold every child.
//!
//! The value is JSON, `[{"region": "eu"}]`. Whoever may edit the ServiceSet may edit it, so it
//! is trusted for Region names only (docs/security.md): how a region is reached always comes
//! from its Region object, which only operators write, and a name no Region stands for is
//! forgotten. Older records also name a Secret and key; those are ignored. A record that does not
//! read, or is longer than [`MAX_RECORD_BYTES`], is not trusted at all, and never holds a
//! finalizer: on deletion every Region is swept for the ServiceSet's children (see
//! [`Placements::others`]). Regions whose caches hold its children count as recorded, so a record
//! someone removed hides none of those.

use super::route::{RegionAccess, Route};
use crate::k0rdent::ServiceSet;
use serde::{Deserialize, Serialize};

/// The annotation holding the record.
pub const REGIONS_ANNOTATION: &str = "ksm.k0rdent.mirantis.com/regions";

/// The longest record read: far more than the host writes for every Region a cluster has, so
/// that parsing what someone else wrote costs little.
pub const MAX_RECORD_BYTES: usize = 16 * 1024;

/// One recorded region, as the annotation holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Recorded {
    region: String,
}

/// A record the host does not trust: someone edited it.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    /// It is not the host's JSON.
    #[error("annotation {REGIONS_ANNOTATION} is not the host's record of regions: {0}")]
    Json(#[source] serde_json::Error),
    /// It is longer than the host ever writes.
    #[error("annotation {REGIONS_ANNOTATION} is {0} bytes, more than the {MAX_RECORD_BYTES} the host reads")]
    TooLong(usize),
}

/// The region names recorded on `service_set`, or why the record is not trusted.
pub fn recorded(service_set: &ServiceSet) -> Result<Vec<String>, Unreadable> {
    let Some(text) = service_set.metadata.annotations.as_ref().and_then(|a| a.get(REGIONS_ANNOTATION)) else {
        return Ok(Vec::new());
    };
    if text.len() > MAX_RECORD_BYTES {
        return Err(Unreadable::TooLong(text.len()));
    }
    let recorded: Vec<Recorded> = serde_json::from_str(text).map_err(Unreadable::Json)?;
    let mut seen = std::collections::BTreeSet::new();
    Ok(recorded.into_iter().map(|r| r.region).filter(|name| seen.insert(name.clone())).collect())
}

/// The regions a ServiceSet's children may be on besides the management cluster, each reached
/// as its Region says now.
#[derive(Debug, Default)]
pub struct Placements {
    /// The recorded regions a Region stands for, those the host's caches see its children on,
    /// and the one the route names now: their children are cleared, and one that cannot be
    /// reached holds the finalizer.
    pub recorded: Vec<RegionAccess>,
    /// On deletion, when the record is not trusted: every other Region, swept for children
    /// best effort (one that cannot be reached holds nothing).
    pub others: Vec<RegionAccess>,
    /// Recorded names no Region (with a kubeconfig) stands for: forgotten, never reached.
    pub unknown: Vec<String>,
    /// Why the record is not trusted, if it is not.
    pub untrusted: Option<Unreadable>,
}

/// What the host knows of Regions besides a ServiceSet's record.
pub struct Regions<'a> {
    /// A Region by name, with how it is reached; `None` when there is none or it names no
    /// kubeconfig.
    pub by_name: &'a dyn Fn(&str) -> Option<RegionAccess>,
    /// The regions whose caches hold a child of the ServiceSet.
    pub holding: Vec<String>,
    /// Every Region that exists (asked only to sweep them).
    pub every: &'a dyn Fn() -> Vec<RegionAccess>,
}

/// Where `service_set`'s children may be: its record, the regions the host's caches see them on
/// and the region `route` names, each resolved through `regions`; when `deleting` and the record
/// is not trusted, every other Region too.
pub fn placements(service_set: &ServiceSet, route: Option<&Route>, regions: &Regions, deleting: bool) -> Placements {
    let (names, untrusted) = match recorded(service_set) {
        Ok(names) => (names, None),
        Err(why) => (Vec::new(), Some(why)),
    };
    let mut placements = Placements { untrusted, ..Placements::default() };
    for name in names {
        match (regions.by_name)(&name) {
            Some(access) => placements.recorded.push(access),
            None => placements.unknown.push(name),
        }
    }
    let routed = match route {
        Some(Route::Region(now)) => Some(now.clone()),
        _ => None,
    };
    let seen = regions.holding.iter().filter_map(|name| (regions.by_name)(name));
    for access in seen.chain(routed) {
        if !placements.recorded.iter().any(|r| r.name == access.name) {
            placements.recorded.push(access);
        }
    }
    if deleting && placements.untrusted.is_some() {
        let known = |access: &RegionAccess| placements.recorded.iter().any(|r| r.name == access.name);
        placements.others = (regions.every)().into_iter().filter(|access| !known(access)).collect();
    }
    placements
}

/// The record with region `access` in it; `None` when it is recorded already. A record that is
/// not trusted is replaced.
pub fn recording(service_set: &ServiceSet, access: &RegionAccess) -> Option<String> {
    let mut names = recorded(service_set).unwrap_or_default();
    if names.contains(&access.name) {
        return None;
    }
    names.push(access.name.clone());
    Some(text(&names))
}

/// The record without the regions `names`; `None` when none of them is recorded (or the record
/// is not trusted: it is left as it is).
pub fn forgetting<'a>(service_set: &ServiceSet, names: impl IntoIterator<Item = &'a String>) -> Option<String> {
    let recorded = recorded(service_set).ok()?;
    let names: Vec<&String> = names.into_iter().collect();
    let kept: Vec<String> = recorded.iter().filter(|r| !names.contains(r)).cloned().collect();
    (kept.len() != recorded.len()).then(|| text(&kept))
}

fn text(names: &[String]) -> String {
    let recorded: Vec<Recorded> = names.iter().map(|name| Recorded { region: name.clone() }).collect();
    serde_json::to_string(&recorded).expect("strings serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k0rdent::NamespacedName;
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

    /// The Regions that exist: `eu` and `us`, each reached through its own Secret.
    fn region(name: &str) -> Option<RegionAccess> {
        ["eu", "us"].contains(&name).then(|| access(name, &format!("{name}-kc")))
    }

    #[test]
    fn a_region_is_recorded_once_by_name_and_forgotten_by_name() {
        let none = service_set(None);
        assert_eq!(recorded(&none).unwrap(), Vec::<String>::new());
        let first = recording(&none, &access("eu", "eu-kc")).unwrap();
        assert_eq!(first, r#"[{"region":"eu"}]"#, "the record names no Secret");
        let eu = service_set(Some(&first));
        assert_eq!(recorded(&eu).unwrap(), ["eu"]);
        assert_eq!(recording(&eu, &access("eu", "eu-kc-2")), None, "recorded already: no write");
        let both = service_set(Some(&recording(&eu, &access("us", "us-kc")).unwrap()));
        assert_eq!(recorded(&both).unwrap(), ["eu", "us"]);
        let left = service_set(Some(&forgetting(&both, &["eu".to_string()]).unwrap()));
        assert_eq!(recorded(&left).unwrap(), ["us"]);
        assert_eq!(forgetting(&left, &["eu".to_string()]), None, "not recorded: no write");
    }

    /// What the host knows: Regions `eu` and `us`, each reached through its own Secret, and
    /// `ap`; the caches of `holding` hold children.
    fn place(ss: &ServiceSet, route: Option<&Route>, holding: &[&str], deleting: bool) -> Placements {
        let every = || ["eu", "us", "ap"].into_iter().map(|n| access(n, &format!("{n}-kc"))).collect();
        let holding = holding.iter().map(|n| n.to_string()).collect();
        placements(ss, route, &Regions { by_name: &region, holding, every: &every }, deleting)
    }

    /// Issue 45: a record naming another namespace's Secret made the host read it and connect
    /// with it. A region is reached only as its Region says; the Secret a record names is ignored.
    #[test]
    fn a_region_is_reached_as_its_region_says_never_as_the_record_says() {
        let forged = r#"[{"region":"eu","secret":"other-team/creds-raw","key":"value"},
                         {"region":"nope3","secret":"other-team/prod-kubeconfig","key":"value"}]"#;
        let placed = place(&service_set(Some(forged)), None, &[], true);
        assert_eq!(placed.recorded, [access("eu", "eu-kc")], "eu's own Secret, not the record's");
        assert_eq!(placed.unknown, ["nope3"], "no Region: never reached");
        assert!(placed.untrusted.is_none() && placed.others.is_empty(), "a trusted record: no sweep");
    }

    #[test]
    fn the_route_and_the_caches_count_beside_the_record() {
        let eu = service_set(Some(r#"[{"region":"eu"}]"#));
        let routed = Route::Region(access("us", "us-kc"));
        let placed = place(&eu, Some(&routed), &[], false);
        assert_eq!(placed.recorded, [access("eu", "eu-kc"), access("us", "us-kc")]);
        let removed = service_set(None);
        let placed = place(&removed, Some(&Route::Management), &["us"], true);
        assert_eq!(placed.recorded, [access("us", "us-kc")], "a removed record hides no child the caches see");
    }

    /// Issue 45: a garbled record held the finalizer forever, and a removed one orphaned the
    /// children on regions. Neither is trusted for anything now: deletion sweeps every Region.
    #[test]
    fn a_record_someone_garbled_is_not_trusted_and_is_replaced_when_a_region_is_recorded() {
        let edited = service_set(Some("eu"));
        assert!(place(&edited, None, &[], false).others.is_empty(), "swept only on deletion");
        let placed = place(&edited, None, &["us"], true);
        let why = placed.untrusted.unwrap().to_string();
        assert!(why.starts_with("annotation ksm.k0rdent.mirantis.com/regions is not the host's record"), "{why}");
        assert_eq!(placed.recorded, [access("us", "us-kc")]);
        assert_eq!(placed.others, [access("eu", "eu-kc"), access("ap", "ap-kc")], "every other Region");
        let replaced = service_set(Some(&recording(&edited, &access("eu", "eu-kc")).unwrap()));
        assert_eq!(recorded(&replaced).unwrap(), ["eu"]);
        assert_eq!(forgetting(&edited, &["eu".to_string()]), None, "left as it is");

        let long = format!("[{}]", vec![r#"{"region":"eu"}"#; 2_000].join(","));
        let why = recorded(&service_set(Some(&long))).unwrap_err().to_string();
        assert!(why.ends_with("more than the 16384 the host reads"), "{why}");
    }
}
