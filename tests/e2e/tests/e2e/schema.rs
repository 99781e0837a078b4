//! Whether a CD tool's own CRD, installed on a real API server, keeps an object a plugin creates
//! (or the status the plugin is tested on) whole: a field the schema refused or pruned would
//! never reach the CD tool, or never reach the plugin.

use ksm_test_harness::env::Env;
use ksm_test_harness::fixtures::yaml_documents;
use ksm_test_harness::objects::Kind;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::path::Path;

/// An object of a golden case, and where it comes from (for the messages).
pub type Golden = (Value, String);

/// The objects of plugin `plugins/<plugin>`'s golden cases its CD tool's CRD must keep whole,
/// each with where it comes from: those `translate` creates (`testdata/translate/*/expected.yaml`)
/// and those of the status table that carry a status (`testdata/status/cases.yaml`).
pub fn golden_objects(plugin: &str) -> (Vec<Golden>, Vec<Golden>) {
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins").join(plugin).join("testdata");
    let read = |path: &Path| {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        yaml_documents(&text).remove(0)
    };
    let mut translated = Vec::new();
    for case in std::fs::read_dir(testdata.join("translate")).expect("the translate cases") {
        let expected = case.expect("a case").path().join("expected.yaml");
        let services = read(&expected)["services"].as_array().cloned().unwrap_or_default();
        for object in services.iter().filter_map(|s| s["objects"].as_array()).flatten() {
            translated.push((object.clone(), format!("{} {}", expected.display(), object["metadata"]["name"])));
        }
    }
    let cases = read(&testdata.join("status/cases.yaml"));
    let statuses = (cases.as_array().expect("a list of status cases").iter())
        .filter(|case| case["object"].get("status").is_some())
        .map(|case| (case["object"].clone(), format!("status case {}", case["name"])))
        .collect();
    (translated, statuses)
}

/// [`kept_whole`] over `objects`, every problem.
pub async fn all_kept_whole(env: &Env, kind: Kind, objects: impl IntoIterator<Item = Golden>) -> Vec<String> {
    let mut problems = Vec::new();
    for (object, what) in objects {
        problems.extend(kept_whole(env, kind, object, &what).await);
    }
    problems
}

/// The problems, one line each, with what the API server stores of `object` (of `kind`, created
/// in the test's namespace, then deleted): refused, or its `spec` or `status` pruned or changed.
/// A CRD with a status subresource drops the status of a create: it is then written as a CD
/// tool writes it, through the subresource.
pub async fn kept_whole(env: &Env, kind: Kind, mut object: Value, what: &str) -> Vec<String> {
    object["metadata"] = json!({"generateName": "golden-", "namespace": env.namespace()});
    let sent: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
    let api = env.api(kind, env.namespace());
    let created = match api.create(&PostParams::default(), &sent).await {
        Ok(created) => created,
        Err(e) => return vec![format!("{what}: refused: {e}")],
    };
    let name = created.metadata.name.clone().expect("a created object has a name");
    let mut kept = serde_json::to_value(created).expect("objects serialize");
    let mut problems = Vec::new();
    if !object["status"].is_null() && kept["status"] != object["status"] {
        let patch = Patch::Merge(json!({"status": object["status"]}));
        match api.patch_status(&name, &PatchParams::default(), &patch).await {
            Ok(written) => kept = serde_json::to_value(written).expect("objects serialize"),
            Err(e) => problems.push(format!("{what}: status refused: {e}")),
        }
    }
    problems.extend(["spec", "status"].iter().flat_map(|part| lost(&object[part], &kept[part], part, what)));
    api.delete(&name, &DeleteParams::default()).await.expect("deleting a golden object");
    problems
}

/// Where `kept` lacks or changed what was `sent` (at `path`), one line each, for `what`.
fn lost(sent: &Value, kept: &Value, path: &str, what: &str) -> Vec<String> {
    match (sent, kept) {
        (Value::Object(sent), Value::Object(kept)) => sent
            .iter()
            .flat_map(|(key, value)| match kept.get(key) {
                Some(kept) => lost(value, kept, &format!("{path}.{key}"), what),
                None => vec![format!("{what}: {path}.{key} pruned")],
            })
            .collect(),
        (Value::Array(sent), Value::Array(kept)) if sent.len() == kept.len() => sent
            .iter()
            .zip(kept)
            .enumerate()
            .flat_map(|(i, (s, k))| lost(s, k, &format!("{path}[{i}]"), what))
            .collect(),
        _ if sent == kept => vec![],
        _ => vec![format!("{what}: {path} sent {sent}, kept {kept}")],
    }
}
