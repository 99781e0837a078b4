//! What the host accepts from a plugin: every object a plugin returns is checked here before
//! anything is applied. A violation fails only the service that produced it, with a message
//! naming the plugin, the object and the rule.

use crate::rules::{RuleCache, RuleError};
use crate::tenancy::{Tenancy, is_flux};
use ksm_plugin_sdk::contract::{PluginMetadata, Target};
use ksm_plugin_sdk::names::is_dns1123_subdomain;
use serde_json::{Map, Value, json};
use std::sync::LazyLock;

/// Label prefix reserved for the host.
pub const RESERVED_LABEL_PREFIX: &str = "ksm.k0rdent.mirantis.com/";

/// Objects one service may produce unless an `AdapterPlugin` sets `limits.objectsPerService`.
pub const DEFAULT_OBJECTS_PER_SERVICE: usize = 32;

/// What an operator narrowed for one plugin (`AdapterPlugin.spec`), on top of the rules every
/// plugin gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// `(group, kind)` pairs the plugin may create, of those it declares; `None`: all it declares.
    pub allowed_kinds: Option<Vec<(String, String)>>,
    /// Namespaces besides the ServiceSet's own that objects may be placed in.
    pub allowed_namespaces: Vec<String>,
    /// Most objects one service may produce.
    pub objects_per_service: usize,
    /// Rules over what objects do (`spec.policy.validations`).
    pub validations: Vec<Validation>,
    /// Service accounts Flux's objects may name (`spec.policy.serviceAccountNames`).
    pub service_account_names: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            allowed_kinds: None,
            allowed_namespaces: Vec::new(),
            objects_per_service: DEFAULT_OBJECTS_PER_SERVICE,
            validations: Vec::new(),
            service_account_names: Vec::new(),
        }
    }
}

/// A CEL rule every object must pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validation {
    /// Where the rule comes from, e.g. `spec.policy.validations[0]`.
    pub origin: String,
    /// The CEL expression.
    pub expression: String,
    /// What a refusal says.
    pub message: String,
}

/// The host's facts about the service whose objects are checked: the variables of the rules.
pub struct Facts<'a> {
    /// The ServiceSet's namespace.
    pub namespace: &'a str,
    /// The ServiceSet.
    pub service_set: &'a Value,
    /// Where its services go.
    pub target: &'a Target,
    /// Whether a service's template deploys to the management cluster (`deploymentType:
    /// Local`), by service name.
    pub local: &'a dyn Fn(&str) -> bool,
    /// Who Flux's objects run as: filled in before the rules judge them.
    pub tenancy: Tenancy<'a>,
}

/// The built-in Flux rules: (name, expression, message).
pub(crate) const FLUX_RULES: [(&str, &str, &str); 2] = [
    (
        "kubeconfig",
        "has(object.spec.kubeConfig) ? (!target.selfManagement \
          && object.spec.kubeConfig.secretRef.name == target.kubeconfigSecret.name \
          && (!has(object.spec.kubeConfig.secretRef.key) || object.spec.kubeConfig.secretRef.key == target.kubeconfigSecret.key)) \
          : (target.selfManagement || target.local)",
        "spec.kubeConfig must name the kubeconfig Secret of the ServiceSet's target cluster; only self-management \
         and a deploymentType: Local template deploy without it (to the cluster the object is on)",
    ),
    (
        "serviceAccountName",
        "has(object.spec.serviceAccountName) \
          ? (object.spec.serviceAccountName in serviceAccountNames \
             || (localServiceAccount != '' && object.spec.serviceAccountName == localServiceAccount)) \
          : localServiceAccount == ''",
        "spec.serviceAccountName must be one of the AdapterPlugin's spec.policy.serviceAccountNames or, for an \
         object without spec.kubeConfig outside the system namespace, the host's local service account \
         (ksm-adapter run --local-service-account), which it runs as instead of Flux's own identity",
    ),
];

/// Why the host refuses what a plugin returned for a service: the service fails, and the message
/// names the plugin, the object and the rule.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// More objects than the policy allows one service.
    #[error(
        "plugin {plugin:?} returned {count} objects for service {service:?}, over the limit of {limit} (limits.objectsPerService)"
    )]
    TooMany {
        /// The plugin's name.
        plugin: String,
        /// How many it returned.
        count: usize,
        /// The service.
        service: String,
        /// [`Policy::objects_per_service`].
        limit: usize,
    },
    /// An object breaks one of the rules every plugin gets.
    #[error("plugin {plugin:?} returned {object}: {violation}")]
    Object {
        /// The plugin's name.
        plugin: String,
        /// `Kind "name"`, or `an object` when it does not read as one.
        object: String,
        /// The rule it breaks.
        #[source]
        violation: Violation,
    },
    /// An object fails a rule of the policy: a built-in Flux rule or one of
    /// `spec.policy.validations`.
    #[error(
        "plugin {plugin:?} returned {object}: refused by {origin}: {message}{}",
        .error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default()
    )]
    Rule {
        /// The plugin's name.
        plugin: String,
        /// `Kind "name"`.
        object: String,
        /// The rule, by where it comes from.
        origin: String,
        /// What the rule says a refusal means.
        message: String,
        /// Why the rule gave no verdict, when it gave none.
        #[source]
        error: Option<Box<RuleError>>,
    },
}

/// A rule every object a plugin returns must keep.
#[derive(Debug, thiserror::Error)]
pub enum Violation {
    /// Not JSON.
    #[error("not valid JSON ({0})")]
    NotJson(#[source] serde_json::Error),
    /// JSON, but no object.
    #[error("not a JSON object")]
    NotAnObject,
    /// A kind the plugin does not declare.
    #[error("kind {api_version}/{kind} is not among the kinds the plugin declares")]
    Undeclared {
        /// The object's `apiVersion`.
        api_version: String,
        /// The object's `kind`.
        kind: String,
    },
    /// A kind the AdapterPlugin does not allow.
    #[error("kind {api_version}/{kind} is not among the AdapterPlugin's allowedKinds")]
    NotAllowed {
        /// The object's `apiVersion`.
        api_version: String,
        /// The object's `kind`.
        kind: String,
    },
    /// A cluster-scoped kind.
    #[error("cluster-scoped objects are not allowed")]
    ClusterScoped,
    /// A name Kubernetes would refuse.
    #[error("metadata.name is not a valid DNS-1123 subdomain")]
    InvalidName,
    /// A status, which only the object's controller writes.
    #[error("status must not be set by a plugin")]
    Status,
    /// Metadata that is no object.
    #[error("metadata is not an object")]
    Metadata,
    /// A namespace the AdapterPlugin does not allow.
    #[error("namespace {namespace:?} is not the ServiceSet's namespace {own:?} nor among allowedNamespaces")]
    Namespace {
        /// The object's namespace.
        namespace: String,
        /// The ServiceSet's.
        own: String,
    },
    /// A metadata field the host sets.
    #[error("metadata.{0} is set by the host, not by plugins")]
    Reserved(&'static str),
    /// A label of the host's prefix.
    #[error("label {0:?} is reserved for the host")]
    ReservedLabel(String),
}

/// The compiled rules of every policy (operators' rules are few; each is compiled once).
static RULES: LazyLock<RuleCache> = LazyLock::new(|| RuleCache::new().with_own(FLUX_RULES.map(|(_, rule, _)| rule)));

/// `target` as the rules see it for one service: `{selfManagement, local, cluster,
/// kubeconfigSecret: {name, key}}`; `local` when the service's template deploys to the
/// management cluster.
fn target_value(target: &Target, local: bool) -> Value {
    match target {
        Target::SelfManagement => json!({"selfManagement": true, "local": local, "cluster": "",
            "kubeconfigSecret": {"name": "", "key": ""}}),
        Target::Remote(cluster) => json!({"selfManagement": false, "local": local, "cluster": cluster.name,
            "kubeconfigSecret": {"name": cluster.kubeconfig.name, "key": cluster.kubeconfig.key}}),
    }
}

impl Policy {
    /// Whether kind `group`/`kind` is allowed (it must also be declared by the plugin).
    pub fn allows_kind(&self, group: &str, kind: &str) -> bool {
        self.allowed_kinds.as_ref().is_none_or(|kinds| kinds.iter().any(|(g, k)| g == group && k == kind))
    }

    /// What both `self` and `other` allow: while a new AdapterPlugin spec fails to load and the
    /// previous version keeps serving, it serves under this, so narrowing the policy takes
    /// effect even when the rest of the change cannot.
    pub fn narrowest(&self, other: &Policy) -> Policy {
        let allowed_kinds = match (&self.allowed_kinds, &other.allowed_kinds) {
            (Some(mine), Some(theirs)) => Some(mine.iter().filter(|k| theirs.contains(k)).cloned().collect()),
            (Some(kinds), None) | (None, Some(kinds)) => Some(kinds.clone()),
            (None, None) => None,
        };
        let allowed_namespaces =
            self.allowed_namespaces.iter().filter(|ns| other.allowed_namespaces.contains(ns)).cloned().collect();
        let mut validations = self.validations.clone();
        validations.extend(other.validations.iter().filter(|v| !self.validations.contains(v)).cloned());
        let service_account_names =
            self.service_account_names.iter().filter(|n| other.service_account_names.contains(n)).cloned().collect();
        Policy {
            allowed_kinds,
            allowed_namespaces,
            objects_per_service: self.objects_per_service.min(other.objects_per_service),
            validations,
            service_account_names,
        }
    }

    /// Checks the objects one service returned (see [`check_object`]), their number, and what
    /// they do (the built-in Flux rules and `spec.policy.validations`), once the local service
    /// account is filled in ([`Tenancy::fill`]).
    pub fn check_service(
        &self,
        plugin: &PluginMetadata,
        facts: &Facts,
        service: &str,
        objects: &[String],
    ) -> Result<Vec<Value>, Refused> {
        if objects.len() > self.objects_per_service {
            return Err(Refused::TooMany {
                plugin: plugin.name.clone(),
                count: objects.len(),
                service: service.into(),
                limit: self.objects_per_service,
            });
        }
        let target = target_value(facts.target, (facts.local)(service));
        let accounts = json!(self.service_account_names);
        objects
            .iter()
            .map(|text| {
                let mut object = check_object(plugin, self, facts.namespace, text)?;
                let local_account = facts.tenancy.fill(facts.namespace, &mut object);
                self.validate(plugin, facts, (&target, &accounts, local_account), &object).map(|()| object)
            })
            .collect()
    }

    /// Runs the rules that apply to `object`, with the service's `target` and `accounts` (as
    /// CEL variables, made once per service) and the account it must run as
    /// (`localServiceAccount`, empty for none, as [`Tenancy::fill`] found it); the first it fails
    /// refuses it, naming the rule.
    fn validate(
        &self,
        plugin: &PluginMetadata,
        facts: &Facts,
        (target, accounts, local_account): (&Value, &Value, Option<&str>),
        object: &Value,
    ) -> Result<(), Refused> {
        let flux: &[_] = if is_flux(object) { &FLUX_RULES } else { &[] };
        let expressions = flux
            .iter()
            .map(|(_, expression, _)| *expression)
            .chain(self.validations.iter().map(|v| v.expression.as_str()));
        let local_account = json!(local_account.unwrap_or_default());
        let variables = [
            ("object", object),
            ("serviceSet", facts.service_set),
            ("target", target),
            ("serviceAccountNames", accounts),
            ("localServiceAccount", &local_account),
        ];
        let Some((i, error)) = RULES.first_failing(expressions, &variables) else { return Ok(()) };
        let (origin, message) = match flux.get(i) {
            Some((name, _, message)) => (format!("the built-in Flux rule {name:?}"), *message),
            None => {
                let rule = &self.validations[i - flux.len()];
                (rule.origin.clone(), rule.message.as_str())
            }
        };
        let (kind, name) = (object["kind"].as_str().unwrap_or_default(), &object["metadata"]["name"]);
        Err(Refused::Rule {
            plugin: plugin.name.clone(),
            object: format!("{kind} {name}"),
            origin,
            message: message.into(),
            error: error.map(Box::new),
        })
    }
}

/// Checks one object returned by `plugin` for a ServiceSet in `namespace`, and returns it
/// parsed, with `metadata.namespace` filled in.
pub fn check_object(plugin: &PluginMetadata, policy: &Policy, namespace: &str, text: &str) -> Result<Value, Refused> {
    let violation = |object: &str, broken| Refused::Object {
        plugin: plugin.name.clone(),
        object: object.into(),
        violation: broken,
    };
    let mut object: Value = serde_json::from_str(text).map_err(|e| violation("an object", Violation::NotJson(e)))?;
    let Some(fields) = object.as_object_mut() else {
        return Err(violation("an object", Violation::NotAnObject));
    };
    let api_version = str_field(fields, "apiVersion");
    let kind = str_field(fields, "kind");
    let name = fields.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("").to_string();
    let what = format!("{kind} {name:?}");
    let declared = plugin.creates.iter().find(|k| k.api_version() == api_version && k.kind == kind);
    let Some(declared) = declared else {
        return Err(violation(&what, Violation::Undeclared { api_version, kind }));
    };
    if !policy.allows_kind(&declared.group, &declared.kind) {
        return Err(violation(&what, Violation::NotAllowed { api_version, kind }));
    }
    if !declared.namespaced {
        return Err(violation(&what, Violation::ClusterScoped));
    }
    if !is_dns1123_subdomain(&name) {
        return Err(violation(&what, Violation::InvalidName));
    }
    if fields.contains_key("status") {
        return Err(violation(&what, Violation::Status));
    }
    let Some(metadata) = fields.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Err(violation(&what, Violation::Metadata));
    };
    match metadata.get("namespace").and_then(Value::as_str) {
        None | Some("") => {
            metadata.insert("namespace".into(), Value::String(namespace.into()));
        }
        Some(ns) if ns == namespace || policy.allowed_namespaces.iter().any(|allowed| allowed == ns) => {}
        Some(ns) => {
            let (namespace, own) = (ns.to_string(), namespace.to_string());
            return Err(violation(&what, Violation::Namespace { namespace, own }));
        }
    }
    for reserved in ["ownerReferences", "managedFields", "uid", "resourceVersion", "deletionTimestamp", "finalizers"] {
        if metadata.contains_key(reserved) {
            return Err(violation(&what, Violation::Reserved(reserved)));
        }
    }
    let labels = metadata.get("labels").and_then(Value::as_object);
    if let Some(label) = labels.and_then(|l| l.keys().find(|k| k.starts_with(RESERVED_LABEL_PREFIX))) {
        return Err(violation(&what, Violation::ReservedLabel(label.clone())));
    }
    Ok(object)
}

fn str_field(fields: &Map<String, Value>, key: &str) -> String {
    fields.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksm_plugin_sdk::contract::{CONTRACT_VERSION, ObjectKind};
    use serde_json::json;

    fn meta() -> PluginMetadata {
        let kind = |kind: &str, namespaced| ObjectKind {
            group: "helm.toolkit.fluxcd.io".into(),
            version: "v2".into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
            namespaced,
        };
        PluginMetadata {
            name: "flux".into(),
            version: "1".into(),
            contract_version: CONTRACT_VERSION.into(),
            creates: vec![kind("HelmRelease", true), kind("ClusterThing", false)],
            reads: vec![],
        }
    }

    fn check(object: Value) -> Result<Value, Refused> {
        check_object(&meta(), &Policy::default(), "team-a", &object.to_string())
    }

    fn hr(metadata: Value) -> Value {
        json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": metadata, "spec": {}})
    }

    static SERVICE_SET: LazyLock<Value> = LazyLock::new(
        || json!({"metadata": {"name": "prod", "namespace": "team-a"}, "spec": {"cluster": "prod-eu-1"}}),
    );

    fn facts(target: &Target) -> Facts<'_> {
        facts_in("team-a", target)
    }

    /// [`facts`] of a ServiceSet in `namespace` (`kcm-system` is the system namespace).
    fn facts_in<'a>(namespace: &'a str, target: &'a Target) -> Facts<'a> {
        let tenancy = Tenancy::default();
        Facts { namespace, service_set: &SERVICE_SET, target, local: &|service| service == "local", tenancy }
    }

    fn remote() -> Target {
        Target::Remote(ksm_plugin_sdk::contract::RemoteCluster {
            name: "prod-eu-1".into(),
            kubeconfig: ksm_plugin_sdk::contract::SecretKeyRef {
                name: "prod-eu-1-kubeconfig".into(),
                key: "value".into(),
            },
        })
    }

    /// `spec` as a HelmRelease's, checked with `policy` for a ServiceSet going to `target`.
    fn checked(policy: &Policy, target: &Target, spec: Value) -> Result<Vec<Value>, Refused> {
        checked_service(policy, target, "ingress", spec)
    }

    /// `spec` with the kubeconfig of [`remote`]'s cluster, which the built-in rules want.
    fn to_target(mut spec: Value) -> Value {
        spec["kubeConfig"] = json!({"secretRef": {"name": "prod-eu-1-kubeconfig", "key": "value"}});
        spec
    }

    /// [`checked`], for service `service` (`local` has a `deploymentType: Local` template).
    fn checked_service(policy: &Policy, target: &Target, service: &str, spec: Value) -> Result<Vec<Value>, Refused> {
        checked_in("team-a", policy, target, service, spec)
    }

    /// [`checked_service`], for a ServiceSet in `namespace`.
    fn checked_in(
        namespace: &str,
        policy: &Policy,
        target: &Target,
        service: &str,
        spec: Value,
    ) -> Result<Vec<Value>, Refused> {
        let object = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "prod.ingress"}, "spec": spec});
        policy.check_service(&meta(), &facts_in(namespace, target), service, &[object.to_string()])
    }

    #[test]
    fn flux_objects_may_use_only_the_targets_kubeconfig_and_no_other_service_account() {
        let open = Policy::default();
        let kubeconfig = |name: &str, key: &str| json!({"kubeConfig": {"secretRef": {"name": name, "key": key}}});
        assert!(checked(&open, &remote(), kubeconfig("prod-eu-1-kubeconfig", "value")).is_ok());
        assert!(checked(&open, &Target::SelfManagement, json!({})).is_ok(), "self-management: no kubeconfig");
        assert!(checked_service(&open, &remote(), "local", json!({})).is_ok(), "a Local template: none either");
        for (target, spec) in [
            // Without a kubeconfig an object deploys to the cluster it is on: management or a region.
            (remote(), json!({})),
            (remote(), kubeconfig("other-cluster-kubeconfig", "value")),
            (remote(), kubeconfig("prod-eu-1-kubeconfig", "admin")),
            (Target::SelfManagement, kubeconfig("prod-eu-1-kubeconfig", "value")),
        ] {
            let err = checked(&open, &target, spec).unwrap_err().to_string();
            assert!(err.contains("refused by the built-in Flux rule \"kubeconfig\""), "{err}");
            assert!(err.starts_with("plugin \"flux\" returned HelmRelease \"prod.ingress\""), "{err}");
        }
        let err = checked(&open, &remote(), to_target(json!({"serviceAccountName": "cluster-admin"})))
            .unwrap_err()
            .to_string();
        assert!(err.contains("spec.policy.serviceAccountNames"), "{err}");
        let configured = Policy { service_account_names: vec!["deployer".into()], ..Policy::default() };
        assert!(checked(&configured, &remote(), to_target(json!({"serviceAccountName": "deployer"}))).is_ok());
        assert!(checked(&configured, &remote(), to_target(json!({"serviceAccountName": "cluster-admin"}))).is_err());
    }

    #[test]
    fn a_flux_object_without_kubeconfig_outside_the_system_namespace_runs_as_its_namespaces_account() {
        let open = Policy::default();
        let account = |objects: Vec<Value>| objects[0]["spec"].get("serviceAccountName").cloned();
        // A tenant's Local template and a tenant's self-management: the namespace's `default`.
        let local = checked_service(&open, &remote(), "local", json!({})).unwrap();
        assert_eq!(account(local), Some(json!("default")), "a Local template in team-a");
        let own = checked(&open, &Target::SelfManagement, json!({})).unwrap();
        assert_eq!(account(own), Some(json!("default")), "self-management from team-a");
        // The system namespace's self-management and a remote target keep what they had.
        let system = checked_in("kcm-system", &open, &Target::SelfManagement, "ingress", json!({})).unwrap();
        assert_eq!(account(system), None, "self-management in the system namespace");
        let remote_target = checked(&open, &remote(), to_target(json!({}))).unwrap();
        assert_eq!(account(remote_target), None, "a remote target");
        // The plugin may name the same account, or one the operator lists, and nothing else.
        let named = |name: &str| json!({"serviceAccountName": name});
        assert!(checked_service(&open, &remote(), "local", named("default")).is_ok());
        let err = checked_service(&open, &remote(), "local", named("cluster-admin")).unwrap_err().to_string();
        assert!(err.contains("refused by the built-in Flux rule \"serviceAccountName\""), "{err}");
        assert!(err.contains("--local-service-account"), "{err}");
        let configured = Policy { service_account_names: vec!["deployer".into()], ..Policy::default() };
        assert!(checked_service(&configured, &remote(), "local", named("deployer")).is_ok());
        // A remote target runs as what its kubeconfig says: the local account is no licence there.
        assert!(checked(&open, &remote(), to_target(named("default"))).is_err());
        // A spec the account cannot be filled into is refused, not let through as Flux's own.
        let err = checked_service(&open, &remote(), "local", json!("not a map")).unwrap_err().to_string();
        assert!(err.contains("refused by the built-in Flux rule"), "{err}");
    }

    #[test]
    fn an_operators_rules_see_the_object_the_service_set_and_the_target() {
        let rule = |expression: &str| Validation {
            origin: "spec.policy.validations[0]".into(),
            expression: expression.into(),
            message: "releases go to the ServiceSet's own cluster only".into(),
        };
        let policy = |expression: &str| Policy { validations: vec![rule(expression)], ..Policy::default() };
        let own = "object.spec.targetNamespace == serviceSet.metadata.namespace && target.cluster == 'prod-eu-1'";
        assert!(checked(&policy(own), &remote(), to_target(json!({"targetNamespace": "team-a"}))).is_ok());
        let err = checked(&policy(own), &remote(), to_target(json!({"targetNamespace": "kube-system"})))
            .unwrap_err()
            .to_string();
        assert!(err.contains("refused by spec.policy.validations[0]: releases go to"), "{err}");
        // A rule that cannot run refuses: a policy fails closed.
        let err =
            checked(&policy("object.spec.missing == 1"), &remote(), to_target(json!({}))).unwrap_err().to_string();
        assert!(err.contains("failed to evaluate"), "{err}");
        let err = checked(&policy("object.spec.("), &remote(), to_target(json!({}))).unwrap_err().to_string();
        assert!(err.contains("does not compile"), "{err}");
        // So does one over its budget, named with the budget.
        let costly = "object.spec.values.all(a, object.spec.values.all(b, a == b || a != b))";
        let values = |n: usize| to_target(json!({"values": (0..n).collect::<Vec<_>>()}));
        assert!(checked(&policy(costly), &remote(), values(10)).is_ok());
        let err = checked(&policy(costly), &remote(), values(5000)).unwrap_err().to_string();
        assert!(err.contains("refused by spec.policy.validations[0]: releases go to"), "{err}");
        assert!(err.contains("exceeds its budget: its estimated cost "), "{err}");
        assert!(err.ends_with(" is over the cost limit of 1000000)"), "{err}");
    }

    #[test]
    fn a_good_object_gets_its_namespace() {
        let object = check(hr(json!({"name": "prod-ingress"}))).unwrap();
        assert_eq!(object["metadata"]["namespace"], "team-a");
    }

    #[test]
    fn each_rule_names_plugin_object_and_rule() {
        let cases = [
            (
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "x"}}),
                "not among the kinds",
            ),
            (
                json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "ClusterThing", "metadata": {"name": "x"}}),
                "cluster-scoped",
            ),
            (hr(json!({"name": "Bad_Name"})), "DNS-1123"),
            (hr(json!({"name": "x", "namespace": "kube-system"})), "not the ServiceSet's namespace"),
            (hr(json!({"name": "x", "ownerReferences": []})), "metadata.ownerReferences"),
            (hr(json!({"name": "x", "labels": {"ksm.k0rdent.mirantis.com/managed": "true"}})), "reserved"),
            (
                json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "x"}, "status": {}}),
                "status",
            ),
        ];
        for (object, rule) in cases {
            let err = check(object).unwrap_err().to_string();
            assert!(err.starts_with("plugin \"flux\" returned "), "{err}");
            assert!(err.contains(rule), "{err} should mention {rule}");
        }
        assert!(
            check_object(&meta(), &Policy::default(), "ns", "{not json")
                .unwrap_err()
                .to_string()
                .contains("not valid JSON")
        );
    }

    #[test]
    fn an_operator_narrows_kinds_widens_namespaces_and_bounds_the_count() {
        let policy = Policy {
            allowed_kinds: Some(vec![("example.org".into(), "Other".into())]),
            allowed_namespaces: vec!["flux-system".into()],
            objects_per_service: 1,
            ..Policy::default()
        };
        let check = |object: Value| check_object(&meta(), &policy, "team-a", &object.to_string());
        let err = check(hr(json!({"name": "x"}))).unwrap_err().to_string();
        assert!(err.contains("allowedKinds"), "{err}");
        let open = Policy { allowed_kinds: None, ..policy.clone() };
        let placed =
            check_object(&meta(), &open, "team-a", &hr(json!({"name": "x", "namespace": "flux-system"})).to_string());
        assert_eq!(placed.unwrap()["metadata"]["namespace"], "flux-system");
        let two = [hr(json!({"name": "a"})).to_string(), hr(json!({"name": "b"})).to_string()];
        let err =
            open.check_service(&meta(), &facts(&Target::SelfManagement), "ingress", &two).unwrap_err().to_string();
        assert!(err.contains("2 objects for service \"ingress\", over the limit of 1"), "{err}");
        assert_eq!(
            open.check_service(&meta(), &facts(&Target::SelfManagement), "ingress", &two[..1]).unwrap().len(),
            1
        );
    }

    #[test]
    fn the_narrowest_of_two_policies_allows_only_what_both_allow() {
        let kinds =
            |ks: &[&str]| Some(ks.iter().map(|k| ("helm.toolkit.fluxcd.io".to_string(), k.to_string())).collect());
        let old = Policy {
            allowed_kinds: None,
            allowed_namespaces: vec!["flux-system".into(), "tenants".into()],
            objects_per_service: 32,
            ..Policy::default()
        };
        let new = Policy {
            allowed_kinds: kinds(&["HelmRelease", "HelmRepository"]),
            allowed_namespaces: vec!["tenants".into()],
            objects_per_service: 4,
            ..Policy::default()
        };
        let narrowest = old.narrowest(&new);
        assert_eq!(narrowest, Policy { allowed_namespaces: vec!["tenants".into()], ..new.clone() });
        assert_eq!(new.narrowest(&old), narrowest);
        let other = Policy { allowed_kinds: kinds(&["HelmRelease", "Kustomization"]), ..old.clone() };
        assert_eq!(new.narrowest(&other).allowed_kinds, kinds(&["HelmRelease"]));
        assert_eq!(old.narrowest(&old), old);
    }
}
