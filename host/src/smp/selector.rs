//! Kubernetes label-selector matching (`matchLabels` and `matchExpressions`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// Whether `labels` match `selector` with Kubernetes semantics: every `matchLabels` pair and every
/// `matchExpressions` requirement must hold; an empty selector matches everything.
///
/// Every expression is validated, whatever the labels: an unknown operator, `In`/`NotIn` without
/// values or `Exists`/`DoesNotExist` with values is an error naming the key and operator.
pub fn selector_matches(
    selector: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> Result<bool, InvalidRequirement> {
    let mut matches = selector.match_labels.iter().flatten().all(|(key, value)| labels.get(key) == Some(value));
    for requirement in selector.match_expressions.iter().flatten() {
        matches &= requirement_matches(requirement, labels)?;
    }
    Ok(matches)
}

/// Whether one `matchExpressions` requirement holds for `labels`.
fn requirement_matches(
    requirement: &LabelSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Result<bool, InvalidRequirement> {
    let values = requirement.values.as_deref().unwrap_or_default();
    let label = labels.get(&requirement.key);
    match requirement.operator.as_str() {
        "In" => needs_values(requirement, values, true).map(|()| label.is_some_and(|value| values.contains(value))),
        "NotIn" => needs_values(requirement, values, true).map(|()| label.is_none_or(|value| !values.contains(value))),
        "Exists" => needs_values(requirement, values, false).map(|()| label.is_some()),
        "DoesNotExist" => needs_values(requirement, values, false).map(|()| label.is_none()),
        _ => Err(invalid(requirement, "unknown operator")),
    }
}

/// Checks that the requirement has values (`In`, `NotIn`) or has none (`Exists`, `DoesNotExist`).
fn needs_values(
    requirement: &LabelSelectorRequirement,
    values: &[String],
    wanted: bool,
) -> Result<(), InvalidRequirement> {
    match (wanted, values.is_empty()) {
        (true, true) => Err(invalid(requirement, "values must be non-empty")),
        (false, false) => Err(invalid(requirement, "values must be empty")),
        _ => Ok(()),
    }
}

/// A `matchExpressions` requirement that is not valid, whatever the labels.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector requirement (key {key:?}, operator {operator:?}): {problem}")]
pub struct InvalidRequirement {
    /// Its key.
    pub key: String,
    /// Its operator.
    pub operator: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// The error for an invalid requirement, naming its key and operator.
fn invalid(requirement: &LabelSelectorRequirement, problem: &'static str) -> InvalidRequirement {
    InvalidRequirement { key: requirement.key.clone(), operator: requirement.operator.clone(), problem }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn expr(key: &str, operator: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: values.map(|v| v.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn with_exprs(exprs: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector { match_expressions: Some(exprs), match_labels: None }
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert_eq!(selector_matches(&LabelSelector::default(), &labels(&[])), Ok(true));
        let empty = LabelSelector { match_expressions: Some(vec![]), match_labels: Some(BTreeMap::new()) };
        assert_eq!(selector_matches(&empty, &labels(&[("a", "b")])), Ok(true));
    }

    #[test]
    fn match_labels_need_every_pair() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("ksm.k0rdent.mirantis.com/adapter", "flux"), ("tier", "x")])),
            ..Default::default()
        };
        let all = labels(&[("ksm.k0rdent.mirantis.com/adapter", "flux"), ("tier", "x"), ("other", "y")]);
        assert_eq!(selector_matches(&selector, &all), Ok(true));
        let one = labels(&[("ksm.k0rdent.mirantis.com/adapter", "flux")]);
        assert_eq!(selector_matches(&selector, &one), Ok(false));
        let wrong = labels(&[("ksm.k0rdent.mirantis.com/adapter", "kcm"), ("tier", "x")]);
        assert_eq!(selector_matches(&selector, &wrong), Ok(false));
    }

    #[test]
    fn in_and_not_in() {
        let is_in = with_exprs(vec![expr("env", "In", Some(&["dev", "prod"]))]);
        assert_eq!(selector_matches(&is_in, &labels(&[("env", "dev")])), Ok(true));
        assert_eq!(selector_matches(&is_in, &labels(&[("env", "qa")])), Ok(false));
        assert_eq!(selector_matches(&is_in, &labels(&[])), Ok(false));
        let not_in = with_exprs(vec![expr("env", "NotIn", Some(&["dev"]))]);
        assert_eq!(selector_matches(&not_in, &labels(&[("env", "dev")])), Ok(false));
        assert_eq!(selector_matches(&not_in, &labels(&[("env", "qa")])), Ok(true));
        assert_eq!(selector_matches(&not_in, &labels(&[])), Ok(true), "absent label is not in");
    }

    #[test]
    fn exists_and_does_not_exist() {
        let exists = with_exprs(vec![expr("env", "Exists", None)]);
        assert_eq!(selector_matches(&exists, &labels(&[("env", "")])), Ok(true));
        assert_eq!(selector_matches(&exists, &labels(&[("x", "y")])), Ok(false));
        let absent = with_exprs(vec![expr("env", "DoesNotExist", Some(&[]))]);
        assert_eq!(selector_matches(&absent, &labels(&[("x", "y")])), Ok(true));
        assert_eq!(selector_matches(&absent, &labels(&[("env", "dev")])), Ok(false));
    }

    #[test]
    fn labels_and_expressions_are_anded() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("a", "1")])),
            match_expressions: Some(vec![expr("b", "Exists", None)]),
        };
        assert_eq!(selector_matches(&selector, &labels(&[("a", "1"), ("b", "")])), Ok(true));
        assert_eq!(selector_matches(&selector, &labels(&[("a", "1")])), Ok(false));
        assert_eq!(selector_matches(&selector, &labels(&[("b", "")])), Ok(false));
    }

    #[test]
    fn invalid_expressions_are_errors_naming_key_and_operator() {
        let cases = [
            (expr("env", "In", None), "values must be non-empty"),
            (expr("env", "NotIn", Some(&[])), "values must be non-empty"),
            (expr("env", "Exists", Some(&["x"])), "values must be empty"),
            (expr("env", "DoesNotExist", Some(&["x"])), "values must be empty"),
            (expr("env", "Gt", Some(&["1"])), "unknown operator"),
        ];
        for (requirement, problem) in cases {
            let operator = requirement.operator.clone();
            // Invalid even when matchLabels already fail.
            let selector = LabelSelector {
                match_labels: Some(labels(&[("never", "there")])),
                match_expressions: Some(vec![requirement]),
            };
            let err = selector_matches(&selector, &labels(&[])).unwrap_err().to_string();
            assert!(err.contains("\"env\"") && err.contains(&format!("{operator:?}")), "{err}");
            assert!(err.contains(problem), "{err}");
        }
    }
}
