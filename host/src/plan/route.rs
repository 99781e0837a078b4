//! Where a ServiceSet's CD-tool objects live (kcm 1.12 regions): on the management cluster, or on
//! the regional cluster of the Region its ClusterDeployment's Credential names. kcm's own adapter
//! writes them there because the child cluster's kubeconfig Secret and the CD tool live there.
//! Plugins are not told: the host does the routing.

use crate::k0rdent::{ClusterDeployment, Credential, NamespacedName, Region, ServiceSet};
use kube::ResourceExt;

/// The key of a kubeconfig in a ClusterDeployment's `<name>-kubeconfig` Secret (CAPI's).
pub const KUBECONFIG_KEY: &str = "value";

/// The Secret holding the kubeconfig of ClusterDeployment `name` in `namespace` (CAPI's
/// `<name>-kubeconfig`, key [`KUBECONFIG_KEY`]).
pub fn cluster_kubeconfig(namespace: &str, name: &str) -> NamespacedName {
    NamespacedName::new(namespace, format!("{name}-kubeconfig"))
}

/// Where a ServiceSet's children go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// The cluster the host runs in.
    Management,
    /// A regional cluster.
    Region(RegionAccess),
}

/// A regional cluster, and where its kubeconfig is (on the management cluster).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionAccess {
    /// The Region's name.
    pub name: String,
    /// The kubeconfig Secret.
    pub secret: NamespacedName,
    /// Its key.
    pub key: String,
}

/// Why the route of a ServiceSet's children cannot be told, naming the object and field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The ClusterDeployment names a Credential that does not exist.
    #[error("Credential {credential} (spec.credential of ClusterDeployment {cluster_deployment}) not found")]
    NoCredential {
        /// The Credential named.
        credential: NamespacedName,
        /// The ClusterDeployment naming it.
        cluster_deployment: NamespacedName,
    },
    /// The Credential names a Region that does not exist.
    #[error("Region {region} (spec.region of Credential {credential}) not found")]
    NoRegion {
        /// The Region named.
        region: String,
        /// The Credential naming it.
        credential: NamespacedName,
    },
    /// The Region says no kubeconfig, or two.
    #[error(
        "Region {region}: exactly one of spec.kubeConfig (with a name) and spec.clusterDeployment (with a name and namespace) must be set"
    )]
    NoKubeconfig {
        /// The Region.
        region: String,
    },
}

/// What routing reads: the ClusterDeployments, Credentials and Regions of the management cluster.
pub struct Topology<'a> {
    /// A ClusterDeployment by namespace and name.
    pub cluster_deployment: &'a dyn Fn(&NamespacedName) -> Option<ClusterDeployment>,
    /// A Credential by namespace and name.
    pub credential: &'a dyn Fn(&NamespacedName) -> Option<Credential>,
    /// A Region by name.
    pub region: &'a dyn Fn(&str) -> Option<Region>,
}

/// The route of `service_set`'s children, or why it cannot be told (naming the object and field).
/// Self-management, and a cluster that is no ClusterDeployment (a ServiceSet made by hand), go to
/// the management cluster; so does a Credential without `spec.region`.
pub fn route(service_set: &ServiceSet, topology: &Topology, system_namespace: &str) -> Result<Route, RouteError> {
    let spec = &service_set.spec;
    if spec.provider.self_management || spec.cluster.is_empty() {
        return Ok(Route::Management);
    }
    let namespace = service_set.namespace().unwrap_or_default();
    let cd_name = NamespacedName::new(&namespace, &spec.cluster);
    let Some(cd) = (topology.cluster_deployment)(&cd_name) else { return Ok(Route::Management) };
    if cd.spec.credential.is_empty() {
        return Ok(Route::Management);
    }
    let credential_name = NamespacedName::new(&namespace, &cd.spec.credential);
    let credential = (topology.credential)(&credential_name)
        .ok_or_else(|| RouteError::NoCredential { credential: credential_name.clone(), cluster_deployment: cd_name })?;
    let region_name = credential.spec.region;
    if region_name.is_empty() {
        return Ok(Route::Management);
    }
    let region = (topology.region)(&region_name)
        .ok_or_else(|| RouteError::NoRegion { region: region_name.clone(), credential: credential_name })?;
    access(&region_name, &region, system_namespace).map(Route::Region)
}

/// Where Region `name`'s kubeconfig is: `spec.kubeConfig` in the system namespace, or the
/// kubeconfig Secret of `spec.clusterDeployment`.
pub fn access(name: &str, region: &Region, system_namespace: &str) -> Result<RegionAccess, RouteError> {
    let (secret, key) = match (&region.spec.kube_config, &region.spec.cluster_deployment) {
        (Some(kubeconfig), None) if !kubeconfig.name.is_empty() => {
            let key = if kubeconfig.key.is_empty() { KUBECONFIG_KEY } else { &kubeconfig.key };
            (NamespacedName::new(system_namespace, &kubeconfig.name), key.to_string())
        }
        (None, Some(cd)) if !cd.name.is_empty() && !cd.namespace.is_empty() => {
            (cluster_kubeconfig(&cd.namespace, &cd.name), KUBECONFIG_KEY.to_string())
        }
        _ => return Err(RouteError::NoKubeconfig { region: name.to_string() }),
    };
    Ok(RegionAccess { name: name.to_string(), secret, key })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn service_set(cluster: &str, self_management: bool) -> ServiceSet {
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "web", "namespace": "team"},
            "spec": {"cluster": cluster, "provider": {"name": "ksm-flux", "selfManagement": self_management}},
        }))
        .unwrap()
    }

    fn object<T: serde::de::DeserializeOwned>(kind: &str, name: &str, spec: Value) -> T {
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": kind,
            "metadata": {"name": name, "namespace": "team"}, "spec": spec,
        }))
        .unwrap()
    }

    /// Routes `service_set` over one ClusterDeployment `web` (credential `cred`), one Credential
    /// `cred` (`region`) and the Region `regions` holds, if any.
    fn routed(service_set: &ServiceSet, region: &str, regions: Option<Value>) -> Result<Route, RouteError> {
        let cd = |n: &NamespacedName| {
            (n.name == "web").then(|| object("ClusterDeployment", "web", json!({"credential": "cred"})))
        };
        let credential =
            |n: &NamespacedName| (n.name == "cred").then(|| object("Credential", "cred", json!({"region": region})));
        let spec = regions.clone();
        let region = move |name: &str| spec.clone().filter(|_| name == "eu").map(|spec| object("Region", "eu", spec));
        let topology = Topology { cluster_deployment: &cd, credential: &credential, region: &region };
        route(service_set, &topology, "kcm-system")
    }

    #[test]
    fn self_management_an_unknown_cluster_and_a_credential_without_region_stay_on_the_management_cluster() {
        assert_eq!(routed(&service_set("", true), "eu", None), Ok(Route::Management));
        assert_eq!(routed(&service_set("", false), "eu", None), Ok(Route::Management));
        assert_eq!(routed(&service_set("by-hand", false), "eu", None), Ok(Route::Management));
        assert_eq!(routed(&service_set("web", false), "", None), Ok(Route::Management));
    }

    #[test]
    fn a_regional_cluster_is_reached_through_its_regions_kubeconfig() {
        let by_secret = routed(&service_set("web", false), "eu", Some(json!({"kubeConfig": {"name": "eu-kc"}})));
        let expected =
            RegionAccess { name: "eu".into(), secret: NamespacedName::new("kcm-system", "eu-kc"), key: "value".into() };
        assert_eq!(by_secret, Ok(Route::Region(expected.clone())));
        let keyed =
            routed(&service_set("web", false), "eu", Some(json!({"kubeConfig": {"name": "eu-kc", "key": "k"}})));
        assert_eq!(keyed, Ok(Route::Region(RegionAccess { key: "k".into(), ..expected })));
        let by_cd = routed(
            &service_set("web", false),
            "eu",
            Some(json!({"clusterDeployment": {"name": "eu-mgmt", "namespace": "regions"}})),
        );
        assert_eq!(
            by_cd,
            Ok(Route::Region(RegionAccess {
                name: "eu".into(),
                secret: NamespacedName::new("regions", "eu-mgmt-kubeconfig"),
                key: "value".into(),
            }))
        );
    }

    #[test]
    fn what_cannot_be_routed_names_the_object_and_field() {
        let missing = routed(&service_set("web", false), "us", None).unwrap_err().to_string();
        assert_eq!(missing, "Region us (spec.region of Credential team/cred) not found");
        let neither = routed(&service_set("web", false), "eu", Some(json!({}))).unwrap_err().to_string();
        assert!(neither.starts_with("Region eu: exactly one of spec.kubeConfig"), "{neither}");
        let both = json!({"kubeConfig": {"name": "a"}, "clusterDeployment": {"name": "b", "namespace": "c"}});
        assert!(routed(&service_set("web", false), "eu", Some(both)).is_err());
        let cd = |_: &NamespacedName| Some(object("ClusterDeployment", "web", json!({"credential": "gone"})));
        let topology = Topology { cluster_deployment: &cd, credential: &|_| None, region: &|_| None };
        assert_eq!(
            route(&service_set("web", false), &topology, "kcm-system").unwrap_err().to_string(),
            "Credential team/gone (spec.credential of ClusterDeployment team/web) not found"
        );
    }
}
