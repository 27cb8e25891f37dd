//! One field error, in the shape of a 422 Status `details.causes[]` entry.
//!
//! Messages follow upstream's `field.Error.ErrorBody()` so kubectl prints the same text
//! (e.g. `Required value`, `Invalid value: "Foo": must be ...`).

use serde::Serialize;
use serde_json::Value;
use std::fmt::Display;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    /// Upstream's CauseType, e.g. "FieldValueRequired".
    pub reason: String,
    pub message: String,
    /// Upstream field path, e.g. "spec.template.spec.containers[0].image".
    pub field: String,
}

/// Renders a bad value like upstream: strings quoted, numbers and others as compact JSON.
fn show(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn with_detail(head: String, detail: &str) -> String {
    if detail.is_empty() {
        head
    } else {
        format!("{head}: {detail}")
    }
}

impl Cause {
    fn new(reason: &str, field: impl Display, message: String) -> Cause {
        Cause {
            reason: reason.to_string(),
            message,
            field: field.to_string(),
        }
    }

    pub fn required(field: impl Display, detail: &str) -> Cause {
        let message = with_detail("Required value".into(), detail);
        Cause::new("FieldValueRequired", field, message)
    }

    pub fn invalid(field: impl Display, value: &Value, detail: &str) -> Cause {
        let message = with_detail(format!("Invalid value: {}", show(value)), detail);
        Cause::new("FieldValueInvalid", field, message)
    }

    /// A value of the wrong JSON type or out of its integer range (upstream's TypeInvalid).
    pub fn type_invalid(field: impl Display, value: &Value, detail: &str) -> Cause {
        let message = with_detail(format!("Invalid value: {}", show(value)), detail);
        Cause::new("FieldValueTypeInvalid", field, message)
    }

    pub fn not_supported(field: impl Display, value: &Value, supported: &[&str]) -> Cause {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        let detail = format!("supported values: {}", list.join(", "));
        let message = with_detail(format!("Unsupported value: {}", show(value)), &detail);
        Cause::new("FieldValueNotSupported", field, message)
    }

    pub fn duplicate(field: impl Display, value: &Value) -> Cause {
        let message = format!("Duplicate value: {}", show(value));
        Cause::new("FieldValueDuplicate", field, message)
    }

    pub fn not_found(field: impl Display, value: &Value) -> Cause {
        let message = format!("Not found: {}", show(value));
        Cause::new("FieldValueNotFound", field, message)
    }

    pub fn forbidden(field: impl Display, detail: &str) -> Cause {
        let message = with_detail("Forbidden".into(), detail);
        Cause::new("FieldValueForbidden", field, message)
    }

    pub fn too_many(field: impl Display, count: usize, max: usize) -> Cause {
        let message = format!("Too many: {count}: must have at most {max} items");
        Cause::new("FieldValueTooMany", field, message)
    }

    pub fn too_long(field: impl Display, max_bytes: usize) -> Cause {
        let message = format!("Too long: may not be more than {max_bytes} bytes");
        Cause::new("FieldValueTooLong", field, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_match_upstream_error_body() {
        let c = Cause::required("spec.containers", "");
        assert_eq!(c.message, "Required value");
        assert_eq!(c.reason, "FieldValueRequired");
        let c = Cause::invalid("metadata.name", &json!("A"), "bad");
        assert_eq!(c.message, "Invalid value: \"A\": bad");
        let c = Cause::not_supported("spec.restartPolicy", &json!("X"), &["Always", "Never"]);
        assert_eq!(
            c.message,
            "Unsupported value: \"X\": supported values: \"Always\", \"Never\""
        );
        assert_eq!(
            Cause::invalid("spec.replicas", &json!(-1), "x").message,
            "Invalid value: -1: x"
        );
        let json = serde_json::to_value(Cause::duplicate("a[1].name", &json!("n"))).unwrap();
        assert_eq!(json["reason"], "FieldValueDuplicate");
        assert_eq!(json["field"], "a[1].name");
    }
}
