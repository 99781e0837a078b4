//! The differences between two JSON values, for people: the conformance suite's golden files.

use serde_json::Value;
use std::fmt::Write as _;

/// At most five differences between `expected` and `actual`, as `path: expected X, got Y`.
pub fn differences_summary(expected: &Value, actual: &Value) -> String {
    let mut found = Vec::new();
    differences("", expected, actual, &mut found);
    let mut summary = found.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
    if found.len() > 5 {
        let _ = write!(summary, "; and {} more", found.len() - 5);
    }
    summary
}

/// Collects the differences between `expected` and `actual` under `path`. Array items that name
/// a service are shown by that name (`services[cert-manager]`).
fn differences(path: &str, expected: &Value, actual: &Value, found: &mut Vec<String>) {
    let at = |key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, value) in e {
                match a.get(key) {
                    Some(other) => differences(&at(key), value, other, found),
                    None => found.push(format!("{}: expected {}, missing", at(key), short(value))),
                }
            }
            for (key, value) in a.iter().filter(|(key, _)| !e.contains_key(*key)) {
                found.push(format!("{}: not expected, got {}", at(key), short(value)));
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            for i in 0..e.len().max(a.len()) {
                let item =
                    e.get(i).or(a.get(i)).and_then(|v| v["service"].as_str()).map_or(i.to_string(), String::from);
                let path = format!("{path}[{item}]");
                match (e.get(i), a.get(i)) {
                    (Some(e), Some(a)) => differences(&path, e, a, found),
                    (Some(e), None) => found.push(format!("{path}: expected {}, missing", short(e))),
                    (None, Some(a)) => found.push(format!("{path}: not expected, got {}", short(a))),
                    (None, None) => {}
                }
            }
        }
        (e, a) if e == a => {}
        (e, a) => {
            found.push(format!("{}: expected {}, got {}", if path.is_empty() { "." } else { path }, short(e), short(a)))
        }
    }
}

/// Compact JSON, cut at 80 characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 80 { text } else { format!("{}…", text.chars().take(79).collect::<String>()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_name_the_path_and_both_values() {
        let expected = json!({"services": [{"service": "a", "objects": [{"spec": {"interval": "10m"}}]}]});
        let actual = json!({"services": [{"service": "a", "objects": [{"spec": {"interval": "5m", "x": 1}}]}]});
        assert_eq!(
            differences_summary(&expected, &actual),
            r#"services[a].objects[0].spec.interval: expected "10m", got "5m"; services[a].objects[0].spec.x: not expected, got 1"#
        );
    }
}
