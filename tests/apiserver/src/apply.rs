//! Server-side apply, approximated: per-manager ownership of leaf field paths recorded in `metadata.managedFields`.
//!
//! A *leaf* is any scalar, list or empty map in the applied configuration; lists are atomic (owned and replaced
//! whole, no `listType=map/set` merging). Maps merge key by key.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::errors::{ApiError, ApiResult};
use crate::store::now;

type Path = Vec<String>;

/// The metadata fields a manager can apply (and own).
const APPLIED_METADATA: [&str; 4] = ["labels", "annotations", "finalizers", "ownerReferences"];

fn leaves(value: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                prefix.push(k.clone());
                leaves(v, prefix, out);
                prefix.pop();
            }
        }
        Value::Null | Value::Object(_) => {}
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The leaf paths an applied configuration sets.
fn applied_paths(applied: &Value) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    for (k, v) in applied.as_object().into_iter().flatten() {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                for field in APPLIED_METADATA {
                    if let Some(v) = v.get(field) {
                        leaves(v, &mut vec!["metadata".into(), field.into()], &mut out);
                    }
                }
            }
            _ => leaves(v, &mut vec![k.clone()], &mut out),
        }
    }
    out
}

fn to_fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = json!({});
    for path in paths {
        let mut node = &mut root;
        for segment in path {
            node = node
                .as_object_mut()
                .expect("fieldsV1 nodes are maps")
                .entry(format!("f:{segment}"))
                .or_insert(json!({}));
        }
    }
    root
}

fn from_fields_v1(fields: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    let children: Vec<(&String, &Value)> =
        fields.as_object().into_iter().flatten().filter(|(k, _)| k.starts_with("f:")).collect();
    if children.is_empty() {
        if !prefix.is_empty() {
            out.insert(prefix.clone());
        }
        return;
    }
    for (k, v) in children {
        prefix.push(k[2..].to_string());
        from_fields_v1(v, prefix, out);
        prefix.pop();
    }
}

fn get<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, seg| v.get(seg))
}

fn remove(value: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut node = value;
    for seg in parents {
        match node.get_mut(seg) {
            Some(next) => node = next,
            None => return,
        }
    }
    node.as_object_mut().map(|m| m.remove(last));
}

/// Merges maps key by key; anything else (scalars, lists) replaces; `null` removes.
fn merge(target: &mut Value, applied: &Value) {
    match (target.as_object_mut(), applied.as_object()) {
        (Some(t), Some(a)) => {
            for (k, v) in a {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = applied.clone(),
    }
}

fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// A `managedFields` entry with its owned leaf paths.
struct Owner {
    entry: Map<String, Value>,
    paths: BTreeSet<Path>,
}

impl Owner {
    fn is(&self, manager: &str, subresource: &str) -> bool {
        self.entry.get("manager").and_then(Value::as_str) == Some(manager)
            && self.entry.get("subresource").and_then(Value::as_str).unwrap_or("") == subresource
    }
}

/// Applies `applied` for `manager` to `current` (`None`: the object does not exist yet) and returns the result,
/// with `metadata.managedFields` updated. `subresource` is `""` or `"status"`.
pub(crate) fn apply(
    current: Option<&Value>,
    applied: &Value,
    manager: &str,
    subresource: &str,
    force: bool,
) -> ApiResult<Value> {
    let mut result = current.cloned().unwrap_or_else(|| json!({"metadata": {}}));
    let mut owners: Vec<Owner> = result["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_object().cloned())
        .map(|entry| {
            let mut paths = BTreeSet::new();
            from_fields_v1(entry.get("fieldsV1").unwrap_or(&Value::Null), &mut Vec::new(), &mut paths);
            Owner { entry, paths }
        })
        .collect();
    let applying = applied_paths(applied);

    let mut conflicts = Vec::new();
    for owner in owners.iter_mut().filter(|o| !o.is(manager, subresource)) {
        let taken: Vec<Path> = owner
            .paths
            .iter()
            .filter(|owned| applying.iter().any(|p| overlaps(p, owned) && get(&result, p) != get(applied, p)))
            .cloned()
            .collect();
        for path in taken {
            if force {
                owner.paths.remove(&path);
            } else {
                let who = owner.entry.get("manager").and_then(Value::as_str).unwrap_or("");
                conflicts.push(format!("conflict with \"{who}\": .{}", path.join(".")));
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(ApiError::conflict(format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            conflicts.join(", ")
        )));
    }

    let previous = owners.iter().find(|o| o.is(manager, subresource)).map(|o| o.paths.clone()).unwrap_or_default();
    for dropped in previous.difference(&applying) {
        let still_owned =
            owners.iter().filter(|o| !o.is(manager, subresource)).any(|o| o.paths.iter().any(|p| overlaps(p, dropped)));
        if !still_owned && !applying.iter().any(|p| overlaps(p, dropped)) {
            remove(&mut result, dropped);
        }
    }

    let mut applied_body = applied.clone();
    if let Some(meta) = applied_body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| APPLIED_METADATA.contains(&k.as_str()));
    }
    merge(&mut result, &applied_body);

    owners.retain(|o| !o.is(manager, subresource));
    if !applying.is_empty() {
        let mut entry = Map::new();
        entry.insert("manager".into(), json!(manager));
        entry.insert("operation".into(), json!("Apply"));
        entry.insert("apiVersion".into(), applied["apiVersion"].clone());
        entry.insert("time".into(), json!(now()));
        entry.insert("fieldsType".into(), json!("FieldsV1"));
        if !subresource.is_empty() {
            entry.insert("subresource".into(), json!(subresource));
        }
        owners.push(Owner { entry, paths: applying });
    }
    let managed: Vec<Value> = owners
        .into_iter()
        .filter(|o| !o.paths.is_empty())
        .map(|mut o| {
            o.entry.insert("fieldsV1".into(), to_fields_v1(&o.paths));
            Value::Object(o.entry)
        })
        .collect();
    result["metadata"]["managedFields"] = json!(managed);
    Ok(result)
}

/// What an *Update* (PUT, JSON, merge or strategic merge patch) from `old` to `new` does to the Apply managers in
/// `new`'s `managedFields`, as in Kubernetes: a field the update sets, changes or removes is no longer owned by
/// them (an entry left with nothing is dropped). Kubernetes would then record the updater as the field's owner;
/// Update managers are not recorded here. This is what lets another manager apply a field that an update changed
/// or removed (e.g. a Lease's `holderIdentity`, taken by apply and cleared by a patch) without a conflict.
pub(crate) fn disown_updated(old: &Value, new: &mut Value) {
    let (before, after) = (applied_paths(old), applied_paths(new));
    let changed: Vec<&Path> = before.union(&after).filter(|p| get(old, p) != get(new, p)).collect();
    let Some(entries) = new["metadata"]["managedFields"].as_array() else { return };
    if changed.is_empty() {
        return;
    }
    let managed: Vec<Value> = entries
        .iter()
        .filter_map(|entry| {
            let mut owned = BTreeSet::new();
            from_fields_v1(entry.get("fieldsV1").unwrap_or(&Value::Null), &mut Vec::new(), &mut owned);
            let kept: BTreeSet<Path> =
                owned.iter().filter(|o| !changed.iter().any(|c| overlaps(c, o))).cloned().collect();
            if kept.len() == owned.len() {
                return Some(entry.clone());
            }
            let mut entry = entry.clone();
            entry["fieldsV1"] = to_fields_v1(&kept);
            (!kept.is_empty()).then_some(entry)
        })
        .collect();
    let metadata = new["metadata"].as_object_mut().expect("objects have metadata");
    if managed.is_empty() {
        metadata.remove("managedFields");
    } else {
        metadata.insert("managedFields".into(), json!(managed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_round_trip() {
        let applied = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"a": [1], "b": {"c": true}}});
        let paths = applied_paths(&applied);
        let mut back = BTreeSet::new();
        from_fields_v1(&to_fields_v1(&paths), &mut Vec::new(), &mut back);
        assert_eq!(paths, back);
        assert_eq!(paths.len(), 3);
    }

    #[test]
    fn omitted_fields_are_removed_unless_owned_by_another_manager() {
        let first = apply(None, &json!({"spec": {"a": 1, "b": 2}}), "m1", "", false).unwrap();
        let second = apply(Some(&first), &json!({"spec": {"b": 2, "c": 3}}), "m2", "", false).unwrap();
        let third = apply(Some(&second), &json!({"spec": {}}), "m1", "", false).unwrap();
        assert_eq!(third["spec"], json!({"b": 2, "c": 3}));
        let conflict = apply(Some(&third), &json!({"spec": {"c": 4}}), "m1", "", false).unwrap_err();
        assert_eq!(conflict.code, 409);
        let forced = apply(Some(&third), &json!({"spec": {"c": 4}}), "m1", "", true).unwrap();
        assert_eq!(forced["spec"]["c"], 4);
    }

    #[test]
    fn an_update_disowns_what_it_changes_or_removes() {
        let applied = json!({"metadata": {"labels": {"l": "x"}}, "spec": {"holder": "a", "renewed": 1, "keep": true}});
        let old = apply(None, &applied, "a", "", false).unwrap();
        // An update (here: a merge patch) clears `holder`, changes `renewed`, leaves `keep` and the label alone.
        let mut new = old.clone();
        json_patch::merge(&mut new, &json!({"spec": {"holder": null, "renewed": 2}}));
        disown_updated(&old, &mut new);
        let mut owned = BTreeSet::new();
        from_fields_v1(&new["metadata"]["managedFields"][0]["fieldsV1"], &mut Vec::new(), &mut owned);
        let owned: Vec<String> = owned.iter().map(|p| p.join(".")).collect();
        assert_eq!(owned, ["metadata.labels.l", "spec.keep"]);
        // Another manager now applies `holder` without a conflict.
        let taken = apply(Some(&new), &json!({"spec": {"holder": "b"}}), "b", "", false).unwrap();
        assert_eq!(taken["spec"]["holder"], "b");

        // An update of everything `a` owned drops its entry.
        let mut bare = old.clone();
        json_patch::merge(&mut bare, &json!({"metadata": {"labels": null}, "spec": null}));
        disown_updated(&old, &mut bare);
        assert!(bare["metadata"].get("managedFields").is_none());
    }
}
