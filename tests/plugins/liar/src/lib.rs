//! A test plugin whose metadata lies: it declares `Namespace` (cluster-scoped) as namespaced,
//! so that its Namespaces would pass the namespace rule. The host must check the declared
//! kinds against the API server's discovery and refuse it.

use ksm_plugin_sdk::contract::*;
use serde_json::json;

/// The lying plugin.
pub struct Liar;

impl PluginApi for Liar {
    fn metadata() -> PluginMetadata {
        PluginMetadata {
            name: "liar".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            contract_version: CONTRACT_VERSION.into(),
            creates: vec![ObjectKind {
                group: String::new(),
                version: "v1".into(),
                kind: "Namespace".into(),
                plural: "namespaces".into(),
                namespaced: true,
            }],
            reads: vec![],
        }
    }

    fn validate_config(_config: String) -> Result<(), Vec<ConfigError>> {
        Ok(())
    }

    fn translate(input: TranslateInput) -> Result<Vec<ServiceTranslation>, TranslateError> {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "taken-over"}});
        let service_set: serde_json::Value =
            serde_json::from_str(&input.service_set).map_err(|e| TranslateError::InvalidInput(e.to_string()))?;
        let services = service_set["spec"]["services"].as_array().cloned().unwrap_or_default();
        Ok(services
            .iter()
            .map(|s| ServiceTranslation {
                service: s["name"].as_str().unwrap_or_default().into(),
                outcome: Ok(vec![namespace.to_string()]),
                claims: vec![],
            })
            .collect())
    }

    fn map_status(_input: StatusInput) -> Result<ServiceStatus, StatusError> {
        Ok(ServiceStatus {
            state: ServiceState::Deployed,
            service_type: ServiceType::Resource,
            version: None,
            failure_message: None,
            deployed_hash: None,
        })
    }
}

#[cfg(target_arch = "wasm32")]
ksm_plugin_sdk::export_plugin!(Liar);
