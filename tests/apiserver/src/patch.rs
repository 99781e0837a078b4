//! JSON patch, JSON merge patch and (approximated) strategic merge patch.

use serde_json::Value;

use crate::errors::{ApiError, ApiResult};

/// The patch formats accepted on PATCH, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Json,
    Merge,
    /// Applied as a JSON merge patch (no patch directives, lists replaced whole).
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> ApiResult<Self> {
        match content_type.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Ok(Self::Json),
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(Self::Apply),
            other => Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!("the body of the request was in an unknown format: {other}"),
            )),
        }
    }
}

/// Applies a JSON, merge or strategic-merge patch to `current`.
pub(crate) fn patched(current: &Value, patch_type: PatchType, body: &[u8]) -> ApiResult<Value> {
    let mut doc = current.clone();
    match patch_type {
        PatchType::Json => {
            let patch: json_patch::Patch =
                serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut doc, &patch).map_err(|e| {
                ApiError::invalid(format!("the server rejected our request due to an error in our request: {e}"))
            })?;
        }
        PatchType::Merge | PatchType::Strategic => {
            let patch: Value =
                serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid merge patch: {e}")))?;
            json_patch::merge(&mut doc, &patch);
        }
        PatchType::Apply => unreachable!("server-side apply is handled by crate::apply"),
    }
    Ok(doc)
}
