//! `translate`: a ServiceSet's services to Flux objects, one service at a time.
//!
//! This module resolves what every service needs (its template, object name, target namespace,
//! kubeconfig, suspension); [`helm`](crate::helm) and [`kustomize`](crate::kustomize) build the
//! kind-specific specs.

use crate::config::FluxConfig;
use crate::flux::{KubeConfigReference, ObjectMeta, SecretKeyReference};
use crate::helm::{self, ReleaseId};
use crate::kustomize;
use crate::service::{Common, ResolvedTemplate};
use ksm_plugin_sdk::contract::{
    Claim, ServiceError, ServiceTranslation, Target, Template, TranslateError, TranslateInput,
};
use ksm_plugin_sdk::k0rdent::{PAUSE_ANNOTATION, Service, ServiceSet, ServiceTemplate};
use ksm_plugin_sdk::names;
use serde_json::Value;

/// `helmAction` of a service whose objects are to be removed.
pub const UNINSTALL: &str = "Uninstall";
/// `helmAction` of a service to deploy (the default).
const INSTALL: &str = "Install";

/// Translates every service of the ServiceSet in `input`, in spec order.
pub fn translate(input: &TranslateInput) -> Result<Vec<ServiceTranslation>, TranslateError> {
    let service_set: ServiceSet = serde_json::from_str(&input.service_set)
        .map_err(|e| TranslateError::InvalidInput(format!("the ServiceSet cannot be read: {e}")))?;
    let metadata = &service_set.metadata;
    if metadata.name.is_empty() || metadata.namespace.is_empty() {
        return Err(TranslateError::InvalidInput("the ServiceSet has no metadata.name or metadata.namespace".into()));
    }
    let config = service_set.spec.provider.config.as_ref().unwrap_or(&Value::Null);
    let config = FluxConfig::from_value(config).map_err(TranslateError::InvalidConfig)?;
    let context = Context {
        name: &metadata.name,
        namespace: &metadata.namespace,
        paused: metadata.annotations.contains_key(PAUSE_ANNOTATION),
        config: &config,
        target: &input.target,
        templates: &input.templates,
    };
    Ok(service_set
        .spec
        .services
        .iter()
        .map(|service| {
            let (outcome, claims) = match context.service(service) {
                Ok((objects, releases)) => (Ok(objects), context.claims(releases)),
                Err(e) => (Err(e), Vec::new()),
            };
            ServiceTranslation { service: service.name.clone(), outcome, claims }
        })
        .collect())
}

/// What a claim on a Helm release is called.
pub const HELM_RELEASE_CLAIM: &str = "helm-release";

impl Context<'_> {
    /// A claim on each Helm release a service's HelmReleases install on the target: its
    /// storage namespace (where Helm keeps the release) and release name.
    fn claims(&self, releases: Vec<ReleaseId>) -> Vec<Claim> {
        let target = match self.target {
            Target::SelfManagement => "management".to_string(),
            Target::Remote(cluster) => format!("{}/{}", self.namespace, cluster.name),
        };
        releases
            .into_iter()
            .map(|release| Claim {
                target: target.clone(),
                kind: HELM_RELEASE_CLAIM.into(),
                namespace: release.storage_namespace,
                name: release.name,
            })
            .collect()
    }
}

/// What the services of one ServiceSet share.
struct Context<'a> {
    name: &'a str,
    namespace: &'a str,
    paused: bool,
    config: &'a FluxConfig,
    target: &'a Target,
    templates: &'a [Template],
}

impl Context<'_> {
    /// The objects of one service and the Helm releases they install, or why there are none.
    fn service(&self, service: &Service) -> Result<(Vec<String>, Vec<ReleaseId>), ServiceError> {
        match service.helm_action.as_deref() {
            Some(UNINSTALL) => return Ok((Vec::new(), Vec::new())),
            None | Some(INSTALL) => {}
            Some(other) => {
                return Err(ServiceError::InvalidService(format!(
                    "service {:?}: helmAction {other:?} is neither {INSTALL} nor {UNINSTALL}",
                    service.name
                )));
            }
        }
        let resolved = self.template(&service.template)?;
        let common = self.common(service);
        let spec = &resolved.spec;
        match (&spec.helm, &spec.kustomize, &spec.resources) {
            (Some(_), _, _) => {
                let (object, release) = helm::release(&common, &resolved)?;
                Ok((vec![object], vec![release]))
            }
            (None, Some(source), _) | (None, None, Some(source)) => {
                Ok((vec![kustomize::kustomization(&common, &resolved, source)?], Vec::new()))
            }
            (None, None, None) => Err(ServiceError::InvalidService(format!(
                "{} has none of spec.helm, spec.kustomize, spec.resources",
                resolved.id
            ))),
        }
    }

    /// Finds, reads and checks the ServiceTemplate `name`.
    fn template(&self, name: &str) -> Result<ResolvedTemplate, ServiceError> {
        let id = format!("ServiceTemplate \"{}/{name}\"", self.namespace);
        let text = self
            .templates
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.object.as_deref())
            .ok_or_else(|| ServiceError::TemplateNotFound(format!("{id} not found")))?;
        let ServiceTemplate { spec, status, .. } = serde_json::from_str(text)
            .map_err(|e| ServiceError::InvalidService(format!("{id} cannot be read: {e}")))?;
        let status = status.unwrap_or_default();
        if !status.valid {
            let message = match status.validation_error.as_deref().filter(|e| !e.is_empty()) {
                Some(error) => format!("{id} is not valid: {error}"),
                None => format!("{id} has not been validated yet"),
            };
            return Err(ServiceError::TemplateNotReady(message));
        }
        Ok(ResolvedTemplate { id, spec, status })
    }

    /// What every object of `service` shares.
    fn common<'s>(&'s self, service: &'s Service) -> Common<'s> {
        let target_namespace = Some(service.namespace.clone())
            .filter(|ns| !ns.is_empty())
            .or_else(|| self.config.target_namespace.clone());
        let kube_config = match self.target {
            Target::SelfManagement => None,
            Target::Remote(remote) => Some(KubeConfigReference {
                secret_ref: SecretKeyReference {
                    name: remote.kubeconfig.name.clone(),
                    key: remote.kubeconfig.key.clone(),
                },
            }),
        };
        Common {
            service,
            config: self.config,
            metadata: ObjectMeta {
                name: names::service_object_name(self.name, &service.name, names::MAX_LABEL_LEN),
                namespace: self.namespace.to_string(),
            },
            target_namespace,
            kube_config,
            suspend: (self.paused || self.config.suspend).then_some(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksm_plugin_sdk::inputs;
    use serde_json::json;

    fn service_set(config: Value, services: Value) -> Value {
        json!({"metadata": {"name": "prod-eu-1", "namespace": "kcm-system"},
            "spec": {"provider": {"name": "ksm-flux", "config": config}, "services": services}})
    }

    fn helm_template(name: &str, chart_ref_kind: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"helm": {}},
            "status": {"valid": true, "chartRef": {"kind": chart_ref_kind, "name": name}}})
    }

    fn kustomize_template(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"kustomize": {"path": "./deploy"}},
            "status": {"valid": true, "sourceStatus": {"kind": "GitRepository", "name": name}}})
    }

    /// Translates `service_set` with `templates` and returns each service's outcome, objects
    /// parsed.
    fn outcomes(service_set: &Value, templates: &[Value]) -> Vec<Result<Vec<Value>, ServiceError>> {
        let find = |name: &str| templates.iter().find(|t| t["metadata"]["name"] == name).cloned();
        let input = inputs::translate_input(service_set, find, |_| None, "kcm-system").unwrap();
        translate(&input)
            .unwrap()
            .into_iter()
            .map(|t| t.outcome.map(|objects| objects.iter().map(|o| serde_json::from_str(o).unwrap()).collect()))
            .collect()
    }

    fn input_error(service_set: &str) -> String {
        let input = TranslateInput {
            service_set: service_set.into(),
            templates: vec![],
            sources: vec![],
            target: Target::SelfManagement,
            system_namespace: "kcm-system".into(),
        };
        match translate(&input) {
            Err(TranslateError::InvalidInput(message)) => message,
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn unreadable_service_sets_are_invalid_input() {
        assert!(input_error("{").starts_with("the ServiceSet cannot be read"));
        assert!(input_error(r#"{"metadata": {"name": "a"}}"#).contains("missing field `spec`"));
        assert_eq!(
            input_error(r#"{"metadata": {"name": "a"}, "spec": {}}"#),
            "the ServiceSet has no metadata.name or metadata.namespace"
        );
    }

    #[test]
    fn config_target_namespace_and_suspend_apply_to_both_kinds() {
        let set = service_set(
            json!({"targetNamespace": "apps", "suspend": true}),
            json!([{"name": "web", "namespace": "", "template": "web-1"},
                {"name": "conf", "namespace": "", "template": "conf-1"}]),
        );
        let outcomes = outcomes(&set, &[helm_template("web-1", "HelmChart"), kustomize_template("conf-1")]);
        let release = &outcomes[0].as_ref().unwrap()[0]["spec"];
        assert_eq!((&release["targetNamespace"], &release["storageNamespace"]), (&json!("apps"), &json!("apps")));
        assert_eq!(release["suspend"], json!(true));
        let kustomization = &outcomes[1].as_ref().unwrap()[0]["spec"];
        assert_eq!(kustomization["targetNamespace"], json!("apps"));
        assert_eq!(kustomization["suspend"], json!(true));
    }

    #[test]
    fn without_any_namespace_helm_fails_and_kustomize_keeps_resource_namespaces() {
        let set = service_set(
            Value::Null,
            json!([{"name": "web", "template": "web-1"}, {"name": "conf", "template": "conf-1"}]),
        );
        let outcomes = outcomes(&set, &[helm_template("web-1", "HelmChart"), kustomize_template("conf-1")]);
        assert_eq!(
            outcomes[0],
            Err(ServiceError::InvalidService(
                "service \"web\": no namespace is set and the provider config has no targetNamespace".into()
            ))
        );
        let kustomization = &outcomes[1].as_ref().unwrap()[0]["spec"];
        assert!(kustomization.get("targetNamespace").is_none(), "{kustomization}");
    }

    #[test]
    fn per_service_errors_name_their_cause() {
        let set = service_set(
            Value::Null,
            json!([
                {"name": "a", "namespace": "a", "template": "web-1", "helmAction": "Upgrade"},
                {"name": "b", "namespace": "b", "template": "broken"},
                {"name": "c", "namespace": "c", "template": "repo-chart"},
                {"name": "d", "namespace": "d", "template": "web-1", "helmOptions": {"wait": "no"}},
                {"name": "e", "namespace": "e", "template": "web-1", "helmOptions": {"timeout": "5 min"}},
                {"name": "f", "namespace": "f", "template": "web-1", "values": "true"},
            ]),
        );
        let templates = [
            helm_template("web-1", "HelmChart"),
            helm_template("repo-chart", "HelmRepository"),
            json!({"metadata": {"name": "broken"}, "status": {"valid": true}}),
        ];
        let messages: Vec<String> = outcomes(&set, &templates)
            .into_iter()
            .map(|o| o.map(|_| String::new()).unwrap_or_else(|e| format!("{e:?}")))
            .collect();
        assert_eq!(
            messages[0],
            r#"InvalidService("service \"a\": helmAction \"Upgrade\" is neither Install nor Uninstall")"#
        );
        assert!(
            messages[1].starts_with(
                r#"InvalidService("ServiceTemplate \"kcm-system/broken\" cannot be read: missing field `spec`"#
            ),
            "{}",
            messages[1]
        );
        assert_eq!(
            messages[2],
            r#"UnsupportedSource("ServiceTemplate \"kcm-system/repo-chart\": status.chartRef kind \"HelmRepository\" is not one of OCIRepository, HelmChart, ExternalArtifact")"#
        );
        assert!(
            messages[3].starts_with(
                r#"InvalidService("service \"d\": helmOptions: invalid type: string \"no\", expected a boolean"#
            ),
            "{}",
            messages[3]
        );
        assert_eq!(messages[4], r#"InvalidService("service \"e\": helmOptions: timeout: invalid duration \"5 min\"")"#);
        assert_eq!(messages[5], r#"InvalidValues("service \"f\": values must be a mapping, not a boolean")"#);
    }

    #[test]
    fn chart_ref_without_namespace_omits_it() {
        let set = service_set(Value::Null, json!([{"name": "web", "namespace": "web", "template": "web-1"}]));
        let outcomes = outcomes(&set, &[helm_template("web-1", "HelmChart")]);
        assert_eq!(outcomes[0].as_ref().unwrap()[0]["spec"]["chartRef"], json!({"kind": "HelmChart", "name": "web-1"}));
    }
}
