//! __NAME__: a ksm-adapter plugin. Each service of a ServiceSet becomes one ConfigMap (in the
//! ServiceSet's namespace) carrying the service's values; its state is Deployed once the
//! ConfigMap exists. Replace the ConfigMap with your CD tool's objects.
//!
//! The contract (`ksm:adapter/plugin@0.1.0`): `metadata` is constant, `validate-config` rejects
//! unknown fields, `translate` answers for every service in spec order (one bad service never
//! fails the others) and is deterministic, `map-status` is Deployed only when everything exists.

use ksm_plugin_sdk::contract::{
    CONTRACT_VERSION, ConfigError, ObjectKind, PluginApi, PluginMetadata, ServiceError,
    ServiceState, ServiceStatus, ServiceTranslation, ServiceType, StatusError, StatusInput, Target,
    TranslateError, TranslateInput,
};
use ksm_plugin_sdk::k0rdent::{Service, ServiceSet, ServiceTemplate};
use ksm_plugin_sdk::names;
use serde_json::{Map, Value, json};

/// The plugin.
pub struct Plugin;

/// The ConfigMap data key holding a service's values when the config sets none.
const DEFAULT_VALUES_KEY: &str = "values.yaml";

/// `spec.provider.config`.
#[derive(Debug, PartialEq)]
struct Config {
    /// The ConfigMap data key holding the service's values.
    values_key: String,
}

impl Config {
    /// Parses the config (JSON text, `null` when the ServiceSet has none). Every problem is
    /// reported at its path; unknown fields are errors, so typos do not pass silently.
    fn parse(text: &str) -> Result<Self, Vec<ConfigError>> {
        let mut config = Config {
            values_key: DEFAULT_VALUES_KEY.into(),
        };
        let value: Value = serde_json::from_str(text)
            .map_err(|e| vec![ConfigError::new("", format!("not valid JSON: {e}"))])?;
        let fields = match value {
            Value::Null => return Ok(config),
            Value::Object(fields) => fields,
            _ => return Err(vec![ConfigError::new("", "expected an object")]),
        };
        let mut errors = Vec::new();
        for (key, value) in fields.iter().filter(|(_, v)| !v.is_null()) {
            match key.as_str() {
                "valuesKey" => match value.as_str() {
                    Some(k) if is_data_key(k) => config.values_key = k.into(),
                    _ => errors.push(ConfigError::new(
                        key,
                        "expected a ConfigMap data key (letters, digits, '-', '_', '.')",
                    )),
                },
                // Read by the host (release conflicts); kcm passes them to every provider.
                "priority" if value.is_i64() => {}
                "stopOnConflict" if value.is_boolean() => {}
                "priority" => errors.push(ConfigError::new(key, "expected an integer")),
                "stopOnConflict" => errors.push(ConfigError::new(key, "expected a boolean")),
                _ => errors.push(ConfigError::new(key, "unknown field")),
            }
        }
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(errors)
        }
    }
}

fn is_data_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

impl PluginApi for Plugin {
    fn metadata() -> PluginMetadata {
        PluginMetadata {
            name: "__NAME__".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            contract_version: CONTRACT_VERSION.into(),
            creates: vec![ObjectKind {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
                namespaced: true,
            }],
            reads: vec![],
        }
    }

    fn validate_config(config: String) -> Result<(), Vec<ConfigError>> {
        Config::parse(&config).map(|_| ())
    }

    fn translate(input: TranslateInput) -> Result<Vec<ServiceTranslation>, TranslateError> {
        let service_set: ServiceSet = serde_json::from_str(&input.service_set).map_err(|e| {
            TranslateError::InvalidInput(format!("the ServiceSet does not parse: {e}"))
        })?;
        let config = service_set
            .spec
            .provider
            .config
            .clone()
            .unwrap_or(Value::Null);
        let config = Config::parse(&config.to_string()).map_err(TranslateError::InvalidConfig)?;
        let target = match &input.target {
            Target::SelfManagement => "management".to_string(),
            Target::Remote(cluster) => cluster.name.clone(),
        };
        Ok(service_set
            .spec
            .services
            .iter()
            .map(|service| ServiceTranslation {
                service: service.name.clone(),
                outcome: config_map(&service_set, service, &input, &config, &target)
                    .map(|o| vec![o.to_string()]),
                claims: vec![],
            })
            .collect())
    }

    fn map_status(input: StatusInput) -> Result<ServiceStatus, StatusError> {
        let service_set: ServiceSet = serde_json::from_str(&input.service_set).map_err(|e| {
            StatusError::InvalidInput(format!("the ServiceSet does not parse: {e}"))
        })?;
        let service_type = match input
            .template
            .as_deref()
            .map(serde_json::from_str::<ServiceTemplate>)
        {
            Some(Ok(t)) if t.spec.kustomize.is_some() => ServiceType::Kustomize,
            Some(Ok(t)) if t.spec.resources.is_some() => ServiceType::Resource,
            _ => ServiceType::Helm,
        };
        let live: Vec<Value> = input
            .observed
            .iter()
            .filter_map(|o| {
                o.object
                    .as_deref()
                    .and_then(|t| serde_json::from_str(t).ok())
            })
            .collect();
        let state = if live
            .iter()
            .any(|o| !o["metadata"]["deletionTimestamp"].is_null())
        {
            ServiceState::Deleting
        } else if !input.observed.is_empty() && live.len() == input.observed.len() {
            ServiceState::Deployed
        } else {
            ServiceState::Pending
        };
        let version = (state == ServiceState::Deployed)
            .then(|| {
                service_set
                    .spec
                    .services
                    .iter()
                    .find(|s| s.name == input.service)
            })
            .flatten()
            .map(|s| s.expected_version().to_string());
        Ok(ServiceStatus {
            state,
            service_type,
            version,
            failure_message: None,
            // What your CD tool records as deployed (a revision, a digest), when Deployed; the
            // host fingerprints what it applied when you give none.
            deployed_hash: None,
        })
    }
}

/// The ConfigMap of one service, or why there is none.
fn config_map(
    service_set: &ServiceSet,
    service: &Service,
    input: &TranslateInput,
    config: &Config,
    target: &str,
) -> Result<Value, ServiceError> {
    let namespace = &service_set.metadata.namespace;
    let template = input
        .templates
        .iter()
        .find(|t| t.name == service.template)
        .and_then(|t| t.object.as_deref());
    let Some(template) = template else {
        return Err(ServiceError::TemplateNotFound(format!(
            "ServiceTemplate \"{namespace}/{}\" not found",
            service.template
        )));
    };
    let template: ServiceTemplate = serde_json::from_str(template).map_err(|e| {
        ServiceError::TemplateNotReady(format!(
            "ServiceTemplate \"{}\" does not parse: {e}",
            service.template
        ))
    })?;
    if !template.status.as_ref().is_some_and(|s| s.valid) {
        return Err(ServiceError::TemplateNotReady(format!(
            "ServiceTemplate \"{}\" is not valid yet",
            service.template
        )));
    }
    let mut data = Map::new();
    data.insert("cluster".into(), json!(target));
    data.insert("namespace".into(), json!(service.namespace));
    data.insert("template".into(), json!(service.template));
    if let Some(version) = &service.version {
        data.insert("version".into(), json!(version));
    }
    data.insert(
        config.values_key.clone(),
        json!(service.values.clone().unwrap_or_default()),
    );
    Ok(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            // At most 63 characters: long names are cut and end in a stable hash.
            "name": names::service_object_name(&service_set.metadata.name, &service.name, names::MAX_LABEL_LEN),
            "namespace": namespace,
        },
        "data": data,
    }))
}

#[cfg(target_arch = "wasm32")]
ksm_plugin_sdk::export_plugin!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;
    use ksm_plugin_sdk::contract::Template;

    fn input(config: Value, template: Option<Value>) -> TranslateInput {
        let service_set = json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "prod", "namespace": "team-a"},
            "spec": {"cluster": "prod", "provider": {"name": "p", "config": config},
                     "services": [{"name": "web", "namespace": "web", "template": "web-1-0-0", "values": "replicas: 2\n"}]},
        });
        TranslateInput {
            service_set: service_set.to_string(),
            templates: vec![Template {
                name: "web-1-0-0".into(),
                object: template.map(|t| t.to_string()),
            }],
            sources: vec![],
            target: Target::SelfManagement,
            system_namespace: "kcm-system".into(),
        }
    }

    fn template() -> Value {
        json!({"metadata": {"name": "web-1-0-0"}, "spec": {"helm": {}}, "status": {"valid": true}})
    }

    #[test]
    fn one_config_map_per_service() {
        let services = Plugin::translate(input(Value::Null, Some(template()))).unwrap();
        let object: Value =
            serde_json::from_str(&services[0].outcome.as_ref().unwrap()[0]).unwrap();
        assert_eq!(
            object["metadata"],
            json!({"name": "prod-web", "namespace": "team-a"})
        );
        assert_eq!(object["data"]["values.yaml"], "replicas: 2\n");
    }

    #[test]
    fn a_missing_template_fails_only_its_service() {
        let services = Plugin::translate(input(Value::Null, None)).unwrap();
        assert!(matches!(
            services[0].outcome,
            Err(ServiceError::TemplateNotFound(_))
        ));
    }

    #[test]
    fn unknown_config_fields_are_rejected() {
        assert_eq!(Plugin::validate_config("{}".into()), Ok(()));
        let errors = Plugin::validate_config(r#"{"valuesKye": "x"}"#.into()).unwrap_err();
        assert_eq!(errors, [ConfigError::new("valuesKye", "unknown field")]);
        let result = Plugin::translate(input(json!({"valuesKye": "x"}), Some(template())));
        assert!(matches!(result, Err(TranslateError::InvalidConfig(_))));
    }
}
