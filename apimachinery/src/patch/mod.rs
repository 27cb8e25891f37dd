//! The four PATCH body formats the API server accepts:
//! `application/merge-patch+json` ([`merge_patch`]), `application/json-patch+json`
//! ([`json_patch`]), `application/strategic-merge-patch+json` ([`strategic_merge_patch`]) and
//! `application/apply-patch+yaml` ([`apply_patch`], parsed to JSON by the caller).

mod directives;
mod identity;
mod json_patch;
mod keys;
mod merge;
mod order;
mod strategic;
#[cfg(test)]
mod strategic_tests;

use serde_json::Value;

pub use json_patch::{json_patch, MAX_COPY_BYTES, MAX_OPERATIONS};
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
    /// The patch would do more work than upstream allows (too many operations, too much copied).
    #[error("{0}")]
    TooLarge(String),
    /// A JSON patch operation would nest the object deeper than any reader accepts.
    #[error("JSON patch operation {index}: the object would be nested more than {MAX_DEPTH} levels deep")]
    TooDeep { index: usize },
}

/// The deepest nesting an object may have; serde_json refuses to read beyond 128 levels, so a
/// stored object deeper than that could not be loaded again.
pub const MAX_DEPTH: usize = 100;

/// Nesting depth: 0 for a scalar, one more than the deepest member for arrays and objects.
/// Recursive: callers pass values that JSON decoding (limited to 128 levels) produced, or values
/// whose depth the JSON patch limits keep below `MAX_DEPTH`.
pub fn depth(v: &Value) -> usize {
    let deepest = |it: &mut dyn Iterator<Item = &Value>| it.map(depth).max().unwrap_or(0);
    match v {
        Value::Array(a) => 1 + deepest(&mut a.iter()),
        Value::Object(m) => 1 + deepest(&mut m.values()),
        _ => 0,
    }
}

/// Counts bytes without keeping them.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length of `v` as compact JSON, without building the text.
pub fn encoded_len(v: &Value) -> usize {
    let mut c = Counter(0);
    // Writing into a counter cannot fail; on an error the count so far is a lower bound.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

impl PatchError {
    /// The HTTP status upstream answers with: 400 for a malformed patch document,
    /// 422 when a well-formed JSON patch cannot be applied to this object, 413 past the limits.
    pub fn status_code(&self) -> u16 {
        match self {
            PatchError::PathNotFound { .. }
            | PatchError::TestFailed { .. }
            | PatchError::TooDeep { .. } => 422,
            PatchError::BadPatch(_) | PatchError::BadStrategicPatch(_) => 400,
            PatchError::TooLarge(_) => 413,
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
