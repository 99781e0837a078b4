//! The values of the `self.…` fields a rule mentions, to explain why it is false.

use serde_json::Value;

/// `path=value` for each distinct `self.a.b` path in `rule` that leads to a scalar in `object`,
/// and `path=<absent>` where the path stops at a missing field; lists and maps are left out.
pub(crate) fn observed_fields(rule: &str, object: &Value) -> Vec<String> {
    let mut seen = Vec::new();
    for path in self_paths(rule) {
        if let Some(observed) = observe(&path, object)
            && !seen.contains(&observed)
        {
            seen.push(observed);
        }
    }
    seen
}

/// Every `self.x.y…` path written in `rule` (dotted identifiers after a standalone `self`).
fn self_paths(rule: &str) -> Vec<Vec<&str>> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    rule.match_indices("self.")
        .filter(|(at, _)| !rule[..*at].ends_with(|c: char| is_ident(c) || c == '.'))
        .map(|(at, prefix)| {
            let rest = &rule[at + prefix.len()..];
            let end = rest.find(|c: char| !is_ident(c) && c != '.').unwrap_or(rest.len());
            rest[..end].split('.').take_while(|s| !s.is_empty()).collect()
        })
        .collect()
}

/// `self.<path>=<value>` for the deepest scalar or missing field along `path`.
fn observe(path: &[&str], object: &Value) -> Option<String> {
    let mut current = object;
    let mut walked = vec!["self"];
    for segment in path {
        let Value::Object(fields) = current else { break };
        walked.push(segment);
        match fields.get(*segment) {
            Some(next) => current = next,
            None => return Some(format!("{}=<absent>", walked.join("."))),
        }
    }
    let scalar = !matches!(current, Value::Object(_) | Value::Array(_));
    scalar.then(|| format!("{}={current}", walked.join(".")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_scalars_and_absent_fields_once() {
        let object = json!({"status": {"readyReplicas": 0, "phase": "Running",
                                       "conditions": [{"type": "Available"}]}});
        let rule = r#"self.status.readyReplicas > 0 && self.status.readyReplicas == self.status.replicas
            && self.status.phase == "Running" && self.status.conditions.exists(c, c.type == "A")
            && myself.x && has(self.spec.paused)"#;
        assert_eq!(
            observed_fields(rule, &object),
            vec![
                "self.status.readyReplicas=0",
                "self.status.replicas=<absent>",
                r#"self.status.phase="Running""#,
                "self.spec=<absent>",
            ]
        );
    }

    #[test]
    fn method_after_a_scalar_reports_the_scalar() {
        let object = json!({"metadata": {"name": "helm-controller"}});
        let fields = observed_fields("self.metadata.name.startsWith('helm')", &object);
        assert_eq!(fields, vec![r#"self.metadata.name="helm-controller""#]);
    }
}
