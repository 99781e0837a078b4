//! Building contract inputs from k0rdent objects, the same way for the host and for tests.

use crate::contract::{RemoteCluster, SecretKeyRef, Target, Template, TranslateInput};
use crate::k0rdent::ServiceSetSpec;
use crate::sources::{SourceRef, sources_of};
use serde_json::Value;
use std::collections::BTreeSet;

/// Key of the kubeconfig in a Cluster API `<cluster>-kubeconfig` Secret.
pub const KUBECONFIG_KEY: &str = "value";

/// Where a ServiceSet's services go: self-management, or the remote cluster whose kubeconfig
/// is in Secret `<cluster>-kubeconfig`, key `value` (Cluster API convention).
pub fn target(spec: &ServiceSetSpec) -> Target {
    if spec.is_self_management() {
        Target::SelfManagement
    } else {
        Target::Remote(RemoteCluster {
            name: spec.cluster.clone(),
            kubeconfig: SecretKeyRef { name: format!("{}-kubeconfig", spec.cluster), key: KUBECONFIG_KEY.to_string() },
        })
    }
}

/// The names of the templates a ServiceSet's services reference, each once, in spec order.
pub fn template_names(spec: &ServiceSetSpec) -> Vec<String> {
    let mut seen = BTreeSet::new();
    spec.services.iter().filter(|s| seen.insert(s.template.as_str())).map(|s| s.template.clone()).collect()
}

/// Builds the input of `translate` for `service_set` (the whole object), looking templates up
/// with `find_template` (by name, in the ServiceSet's namespace; `None` = missing) and the
/// sources they refer to with `find_source` (see [`sources_of`]).
pub fn translate_input(
    service_set: &Value,
    find_template: impl Fn(&str) -> Option<Value>,
    find_source: impl Fn(&SourceRef) -> Option<Value>,
    system_namespace: &str,
) -> Result<TranslateInput, serde_json::Error> {
    let spec: ServiceSetSpec = serde_json::from_value(service_set["spec"].clone())?;
    let found: Vec<(String, Option<Value>)> =
        template_names(&spec).into_iter().map(|name| (name.clone(), find_template(&name))).collect();
    let sources = sources_of(found.iter().filter_map(|(_, t)| t.as_ref()), find_source);
    let templates =
        found.into_iter().map(|(name, object)| Template { name, object: object.map(|t| t.to_string()) }).collect();
    Ok(TranslateInput {
        service_set: service_set.to_string(),
        templates,
        sources,
        target: target(&spec),
        system_namespace: system_namespace.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn remote_cluster_uses_cluster_api_kubeconfig_secret() {
        let spec: ServiceSetSpec = serde_json::from_value(json!({"cluster": "prod-eu-1"})).unwrap();
        let Target::Remote(remote) = target(&spec) else { panic!("expected remote") };
        assert_eq!(remote.name, "prod-eu-1");
        assert_eq!(remote.kubeconfig, SecretKeyRef { name: "prod-eu-1-kubeconfig".into(), key: "value".into() });
    }

    #[test]
    fn self_management_by_flag_or_missing_cluster() {
        let flag: ServiceSetSpec =
            serde_json::from_value(json!({"cluster": "x", "provider": {"selfManagement": true}})).unwrap();
        assert_eq!(target(&flag), Target::SelfManagement);
        assert_eq!(target(&ServiceSetSpec::default()), Target::SelfManagement);
    }

    #[test]
    fn templates_are_listed_once_and_missing_ones_are_none() {
        let ss = json!({"metadata": {"name": "a"}, "spec": {"services": [
            {"name": "one", "namespace": "n", "template": "t1"},
            {"name": "two", "namespace": "n", "template": "t2"},
            {"name": "three", "namespace": "n", "template": "t1"}]}});
        let input = translate_input(&ss, |n| (n == "t1").then(|| json!({"found": n})), |_| None, "kcm-system").unwrap();
        assert_eq!(input.templates.len(), 2);
        assert_eq!(input.templates[0].name, "t1");
        assert!(input.templates[0].object.is_some());
        assert_eq!(input.templates[1], Template { name: "t2".into(), object: None });
    }
}
