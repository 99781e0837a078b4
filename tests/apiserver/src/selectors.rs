//! Label and field selectors for list and watch.

use serde_json::Value;

use crate::errors::{ApiError, ApiResult};

#[derive(Debug, Clone)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector` plus `fieldSelector` (only `metadata.name` and `metadata.namespace`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Selector {
    labels: Vec<Requirement>,
    fields: Vec<Requirement>,
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut parts) = (0, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect()
}

fn parse_set(key: &str, rest: &str) -> ApiResult<(String, Vec<String>)> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| ApiError::bad_request(format!("invalid selector set {rest:?}")))?;
    Ok((key.trim().to_string(), inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect()))
}

fn parse_requirement(req: &str, set_based: bool) -> ApiResult<Requirement> {
    if let Some((key, op_and_values)) = req.split_once(char::is_whitespace).filter(|_| set_based) {
        let op_and_values = op_and_values.trim_start();
        if let Some(rest) = op_and_values.strip_prefix("notin") {
            let (k, v) = parse_set(key, rest)?;
            return Ok(Requirement::NotIn(k, v));
        }
        if let Some(rest) = op_and_values.strip_prefix("in") {
            let (k, v) = parse_set(key, rest)?;
            return Ok(Requirement::In(k, v));
        }
    }
    if let Some((k, v)) = req.split_once("!=") {
        return Ok(Requirement::NotEquals(k.trim().into(), v.trim().into()));
    }
    if let Some((k, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
        return Ok(Requirement::Equals(k.trim().into(), v.trim().into()));
    }
    if !set_based {
        return Err(ApiError::bad_request(format!("invalid field selector {req:?}")));
    }
    match req.strip_prefix('!') {
        Some(key) => Ok(Requirement::NotExists(key.trim().into())),
        None => Ok(Requirement::Exists(req.into())),
    }
}

impl Requirement {
    fn matches(&self, lookup: impl Fn(&str) -> Option<String>) -> bool {
        match self {
            Requirement::Equals(k, v) => lookup(k).as_deref() == Some(v),
            Requirement::NotEquals(k, v) => lookup(k).as_deref() != Some(v),
            Requirement::In(k, vs) => lookup(k).is_some_and(|x| vs.contains(&x)),
            Requirement::NotIn(k, vs) => lookup(k).is_none_or(|x| !vs.contains(&x)),
            Requirement::Exists(k) => lookup(k).is_some(),
            Requirement::NotExists(k) => lookup(k).is_none(),
        }
    }

    fn key(&self) -> &str {
        match self {
            Requirement::Equals(k, _)
            | Requirement::NotEquals(k, _)
            | Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::NotExists(k) => k,
        }
    }
}

impl Selector {
    pub fn parse(label_selector: Option<&str>, field_selector: Option<&str>) -> ApiResult<Self> {
        let labels = split_top_level(label_selector.unwrap_or(""))
            .into_iter()
            .map(|r| parse_requirement(r, true))
            .collect::<ApiResult<_>>()?;
        let fields: Vec<Requirement> = split_top_level(field_selector.unwrap_or(""))
            .into_iter()
            .map(|r| parse_requirement(r, false))
            .collect::<ApiResult<_>>()?;
        if let Some(bad) = fields.iter().find(|r| !matches!(r.key(), "metadata.name" | "metadata.namespace")) {
            return Err(ApiError::bad_request(format!("field label not supported: {}", bad.key())));
        }
        Ok(Self { labels, fields })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let meta = &obj["metadata"];
        let label = |k: &str| meta["labels"][k].as_str().map(String::from);
        let field = |k: &str| {
            let v = &meta[k.trim_start_matches("metadata.")];
            Some(v.as_str().unwrap_or("").to_string())
        };
        self.labels.iter().all(|r| r.matches(label)) && self.fields.iter().all(|r| r.matches(field))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn label_selector_operators() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"app": "web", "tier": "front"}}});
        let m = |s: &str| Selector::parse(Some(s), None).unwrap().matches(&obj);
        assert!(m("app=web") && m("app==web") && m("app!=db") && m("missing!=x"));
        assert!(m("app in (web, db),tier") && m("app notin (db)") && m("!missing") && m("missing notin (x)"));
        assert!(!m("app=db") && !m("app in (db)") && !m("!app") && !m("missing") && !m("app,missing"));
    }

    #[test]
    fn field_selector_name_and_namespace() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}});
        let m = |s: &str| Selector::parse(None, Some(s)).unwrap().matches(&obj);
        assert!(m("metadata.name=a,metadata.namespace==ns") && m("metadata.name!=b"));
        assert!(!m("metadata.namespace=other"));
        assert!(Selector::parse(None, Some("spec.x=1")).is_err());
    }
}
