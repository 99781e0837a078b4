//! The oracle for a ServiceSet's children: what `ksm-adapter plugin translate` prints for the
//! live ServiceSet and its templates, plus what the host adds to every child (labels, applied
//! hash, controller owner reference, field manager).
//!
//! Using the binary's own offline translation keeps these tests about the controller (does it
//! apply exactly what the plugin translates, and keep it so?) while the plugin's translations
//! themselves are pinned by its golden tests.

use ksm_test_harness::adapter::run_command;
use ksm_test_harness::env::Env;
use ksm_test_harness::fixtures::yaml_documents;
use ksm_test_harness::objects::{Kind, ObjRef};
use ksm_test_harness::status::{recorded, uid};
use ksm_test_harness::{
    APPLIED_HASH_ANNOTATION, FIELD_MANAGER, MANAGED_LABEL, SERVICE_LABEL, SERVICE_SET_LABEL, SERVICE_SET_UID_LABEL,
};
use serde_json::{Value, json};

/// What the plugin translates one ServiceSet into.
#[derive(Clone, Debug)]
pub struct Expected {
    /// The ServiceSet as it was translated.
    pub service_set: Value,
    /// The whole translation, as printed: `{serviceSet, services: [{service, objects | error}]}`
    /// or `{serviceSet, error}`.
    pub translation: Value,
}

impl Expected {
    /// Translates the live ServiceSet `name` of the test's namespace with the namespace's
    /// ServiceTemplates, by running `ksm-adapter plugin translate` on them.
    pub async fn translate(env: &Env, name: &str) -> Self {
        let service_set = env.must_get(&env.obj(Kind::ServiceSet, name)).await;
        let mut inputs = vec![service_set.clone()];
        inputs.extend(env.list(Kind::ServiceTemplate, env.namespace(), "").await);
        let text: String = inputs.iter().map(|o| format!("---\n{}", to_yaml(&without_managed_fields(o)))).collect();
        // A ServiceSet name may have 253 characters; a file name at most 255 bytes.
        let short = match name.len() > 100 {
            true => format!(
                "{}-{:016x}",
                &name[..100],
                std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), name)
            ),
            false => name.to_string(),
        };
        let dir = env.workdir().join(format!("translate-{short}"));
        std::fs::create_dir_all(&dir).expect("creating the translate directory");
        std::fs::write(dir.join("input.yaml"), &text).expect("writing the translate input");
        let output = tokio::task::spawn_blocking(move || {
            run_command(&["plugin", "translate", "-f", dir.to_str().expect("a UTF-8 path")])
        })
        .await
        .expect("plugin translate ran");
        let key = format!("{}/{name}", env.namespace());
        let translation = yaml_documents(&String::from_utf8_lossy(&output.stdout))
            .into_iter()
            .find(|doc| doc["serviceSet"] == key.as_str())
            .unwrap_or_else(|| panic!("plugin translate printed nothing for ServiceSet {key}"));
        Self { service_set, translation }
    }

    /// The translation's error (the whole ServiceSet was rejected), if any.
    pub fn error(&self) -> Option<&Value> {
        self.translation.get("error")
    }

    /// Every object to apply, with the name of its service.
    pub fn objects(&self) -> Vec<(&str, &Value)> {
        self.translation["services"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| {
                let service = s["service"].as_str().unwrap_or_default();
                s["objects"].as_array().into_iter().flatten().map(move |o| (service, o))
            })
            .collect()
    }

    /// The one object of `service`; panics when the plugin gives it none or several.
    pub fn object_of(&self, service: &str) -> &Value {
        match self.objects().into_iter().filter(|(s, _)| *s == service).collect::<Vec<_>>().as_slice() {
            [(_, object)] => object,
            other => panic!("service {service} translates to {} objects: {:#}", other.len(), self.translation),
        }
    }

    /// Whether `children` (the live children of the ServiceSet) are exactly the plugin's objects
    /// as the host must apply them; `Err` describes every difference.
    pub fn check_children(&self, children: &[Value]) -> Result<(), Value> {
        let mut problems = Vec::new();
        let objects = self.objects();
        for (service, object) in &objects {
            let r = ObjRef::of(object);
            let live = children.iter().find(|c| ObjRef::of(c) == r);
            problems.extend(
                child_problems(object, live, &self.service_set, service).into_iter().map(|p| format!("{r}: {p}")),
            );
        }
        for child in children {
            let r = ObjRef::of(child);
            if !objects.iter().any(|(_, o)| ObjRef::of(o) == r) {
                problems.push(format!("{r}: not in the translation, yet labelled as a child"));
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(json!({"problems": problems, "children": children})) }
    }
}

/// How a live child differs from the plugin's `expected` object as the host must apply it for
/// `service` of `service_set` (empty: as expected).
pub fn child_problems(expected: &Value, live: Option<&Value>, service_set: &Value, service: &str) -> Vec<String> {
    let Some(live) = live else { return vec!["missing".into()] };
    let mut problems = Vec::new();
    // A real API server adds the CRD's defaults (a HelmRelease's `chart.spec.reconcileStrategy`
    // and `version`): every expected field must be live; `values` (free-form) must be exact, so
    // that a removed value shows.
    if !is_subset(&expected["spec"], &live["spec"]) || live["spec"]["values"] != expected["spec"]["values"] {
        problems.push(format!("spec differs: expected {}, live {}", expected["spec"], live["spec"]));
    }
    let ss_name = service_set["metadata"]["name"].as_str().unwrap_or_default();
    let mut labels = expected["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    labels.insert(MANAGED_LABEL.into(), json!("true"));
    labels.insert(SERVICE_SET_UID_LABEL.into(), json!(uid(service_set)));
    for (key, value) in &labels {
        if live["metadata"]["labels"][key] != *value {
            problems.push(format!("label {key} is {}, expected {value}", live["metadata"]["labels"][key]));
        }
    }
    // A value over 63 characters is shortened in the label and kept whole in the annotation.
    for (key, whole) in [(SERVICE_SET_LABEL, ss_name), (SERVICE_LABEL, service)] {
        let label = live["metadata"]["labels"][key].as_str().unwrap_or_default();
        let label_ok = if whole.len() <= 63 { label == whole } else { !label.is_empty() && label.len() <= 63 };
        if !label_ok || recorded(live, key) != Some(whole) {
            problems.push(format!("label {key} is {label:?}, recorded {:?}, expected {whole:?}", recorded(live, key)));
        }
    }
    for (key, value) in expected["metadata"]["annotations"].as_object().into_iter().flatten() {
        if live["metadata"]["annotations"][key] != *value {
            problems.push(format!("annotation {key} is {}, expected {value}", live["metadata"]["annotations"][key]));
        }
    }
    if live["metadata"]["annotations"][APPLIED_HASH_ANNOTATION].as_str().is_none_or(str::is_empty) {
        problems.push(format!("annotation {APPLIED_HASH_ANNOTATION} is missing"));
    }
    let owner = json!([{
        "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet", "name": ss_name,
        "uid": uid(service_set), "controller": true, "blockOwnerDeletion": true,
    }]);
    if live["metadata"]["ownerReferences"] != owner {
        problems.push(format!("ownerReferences are {}, expected {owner}", live["metadata"]["ownerReferences"]));
    }
    let applied_by_host = live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["manager"] == FIELD_MANAGER && m["operation"] == "Apply");
    if !applied_by_host {
        problems.push(format!("managedFields have no Apply entry of manager {FIELD_MANAGER:?}"));
    }
    problems
}

fn without_managed_fields(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.remove("managedFields");
    }
    object
}

fn to_yaml(value: &Value) -> String {
    serde_norway::to_string(value).expect("JSON values serialize as YAML")
}

/// Whether every field of `part` is in `whole` with the same value (objects key by key, anything
/// else exactly).
fn is_subset(part: &Value, whole: &Value) -> bool {
    match (part, whole) {
        (Value::Object(p), Value::Object(w)) => p.iter().all(|(k, v)| w.get(k).is_some_and(|wv| is_subset(v, wv))),
        _ => part == whole,
    }
}
