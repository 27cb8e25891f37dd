//! The four PATCH body formats the API server accepts:
//! `application/merge-patch+json` ([`merge_patch`]), `application/json-patch+json`
//! ([`json_patch`]), `application/strategic-merge-patch+json` ([`strategic_merge_patch`]) and
//! `application/apply-patch+yaml` ([`apply_patch`], parsed to JSON by the caller).

mod directives;
mod json_patch;
mod keys;
mod merge;
mod order;
mod strategic;
#[cfg(test)]
mod strategic_tests;

use serde_json::Value;

pub use json_patch::json_patch;
pub use merge::merge_patch;
pub use strategic::strategic_merge_patch;

#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum PatchError {
    /// The patch (or the object) is not the JSON shape the format requires.
    #[error("invalid patch: {0}")]
    BadPatch(String),
    /// A JSON patch operation names a location that does not exist.
    #[error("JSON patch operation {index} ({op}): path {path:?} does not exist")]
    PathNotFound {
        index: usize,
        op: String,
        path: String,
    },
    /// A JSON patch `test` operation did not hold.
    #[error("JSON patch operation {index} (test): value at {path:?} is not the expected value")]
    TestFailed { index: usize, path: String },
    /// A strategic merge patch directive or list element is malformed.
    #[error("invalid strategic merge patch: {0}")]
    BadStrategicPatch(String),
}

impl PatchError {
    /// The HTTP status upstream answers with: 400 for a malformed patch document,
    /// 422 when a well-formed JSON patch cannot be applied to this object.
    pub fn status_code(&self) -> u16 {
        match self {
            PatchError::PathNotFound { .. } | PatchError::TestFailed { .. } => 422,
            PatchError::BadPatch(_) | PatchError::BadStrategicPatch(_) => 400,
        }
    }
}

/// Server-side apply, approximated: the applied configuration is strategic-merged onto the live
/// object (or onto an empty object when there is none yet).
///
/// Simplifications against upstream: no `managedFields` bookkeeping, so no field ownership, no
/// conflicts (`force` is irrelevant) and fields dropped from a later applied configuration are
/// not removed from the live object. `metadata.managedFields` in the applied configuration is
/// ignored. List merging uses the same per-kind key table as strategic merge patch, which agrees
/// with the upstream `listType=map` keys for the built-in kinds covered there.
pub fn apply_patch(
    original: Option<&Value>,
    applied: &Value,
    kind: &str,
) -> Result<Value, PatchError> {
    let mut applied = applied.clone();
    let Some(obj) = applied.as_object_mut() else {
        return Err(PatchError::BadPatch(
            "an applied configuration must be an object".into(),
        ));
    };
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        meta.remove("managedFields");
    }
    let empty = Value::Object(Default::default());
    strategic_merge_patch(original.unwrap_or(&empty), &applied, kind)
}

/// JSON equality where numbers compare by value (`1` equals `1.0`), as Go's decoded
/// `float64`/`int64` comparisons do in the upstream patch libraries.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}
