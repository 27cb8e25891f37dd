//! The schema check every write passes before it is stored: the object must decode into its
//! k8s-openapi type, so that every typed client (kubectl, the controllers, the proxy, the agent)
//! can still decode the lists it reads. Value rules are `validate`'s; this catches JSON types,
//! integer ranges (int32 fields) and the fields the typed structs require.

use crate::cause::Cause;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

/// Decodes an object into one kind's typed struct; the error names the field.
pub type Decode = fn(&Value) -> Result<(), Cause>;

/// The bodies of pods/binding and of the scale subresource.
pub const BINDING: Decode = decode::<k8s_openapi::api::core::v1::Binding>;
pub const SCALE: Decode = decode::<k8s_openapi::api::autoscaling::v1::Scale>;
pub const EVICTION: Decode = decode::<k8s_openapi::api::policy::v1::Eviction>;
pub const TOKEN_REQUEST: Decode = decode::<k8s_openapi::api::authentication::v1::TokenRequest>;
pub const TOKEN_REVIEW: Decode = decode::<k8s_openapi::api::authentication::v1::TokenReview>;

/// The `Decode` of the k8s-openapi type `T`.
pub fn decode<T: DeserializeOwned>(obj: &Value) -> Result<(), Cause> {
    // Most writes decode: tracking the path costs time, so it is paid only to name the field
    // of a failure.
    if T::deserialize(obj).is_ok() {
        return Ok(());
    }
    match serde_path_to_error::deserialize::<_, T>(obj) {
        Ok(_) => Ok(()),
        Err(e) => Err(cause(obj, e.path(), &e.inner().to_string())),
    }
}

/// Upstream's field notation for a decoder path: `spec.containers[0].ports[1].containerPort`.
fn field(segments: &[&Segment]) -> String {
    let mut out = String::new();
    for s in segments {
        match s {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Unknown => out.push_str(".?"),
        }
    }
    out
}

fn value_at<'a>(obj: &'a Value, segments: &[&Segment]) -> Option<&'a Value> {
    segments.iter().try_fold(obj, |cur, s| match s {
        Segment::Seq { index } => cur.get(*index),
        Segment::Map { key } => cur.get(key.as_str()),
        _ => None,
    })
}

/// A missing required field is FieldValueRequired on that field; any other decode error is
/// FieldValueTypeInvalid on the field that failed, with the value shown as upstream shows it.
fn cause(obj: &Value, path: &serde_path_to_error::Path, detail: &str) -> Cause {
    let segments: Vec<&Segment> = path.iter().collect();
    let at = field(&segments);
    if let Some(name) = missing_field(detail) {
        let full = if at.is_empty() {
            name.to_string()
        } else {
            format!("{at}.{name}")
        };
        return Cause::required(full, "");
    }
    let value = value_at(obj, &segments).unwrap_or(&Value::Null);
    Cause::type_invalid(at, value, detail)
}

/// The field named by serde's "missing field `x`" message.
fn missing_field(detail: &str) -> Option<&str> {
    detail
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
    use serde_json::json;

    #[test]
    fn wrong_types_name_their_field() {
        let cm = json!({"metadata": {"name": "a", "annotations": {"n": 1}}});
        let c = decode::<ConfigMap>(&cm).unwrap_err();
        assert_eq!(c.field, "metadata.annotations.n");
        assert_eq!(c.reason, "FieldValueTypeInvalid");
        assert!(
            c.message.starts_with("Invalid value: 1: invalid type"),
            "{c:?}"
        );
        let labels = json!({"metadata": {"name": "a", "labels": "app=x"}});
        assert_eq!(
            decode::<ConfigMap>(&labels).unwrap_err().field,
            "metadata.labels"
        );
    }

    #[test]
    fn int32_overflow_is_a_type_error() {
        let d = json!({"metadata": {"name": "d"}, "spec": {"replicas": 3_000_000_000u64,
            "selector": {}, "template": {}}});
        let c = decode::<Deployment>(&d).unwrap_err();
        assert_eq!(c.field, "spec.replicas");
        assert_eq!(
            c.message,
            "Invalid value: 3000000000: invalid value: integer `3000000000`, expected i32"
        );
    }

    #[test]
    fn required_fields_and_list_paths() {
        let p = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "ports": [{"containerPort": "80"}]}]}});
        let c = decode::<Pod>(&p).unwrap_err();
        assert_eq!(c.field, "spec.containers[0].ports[0].containerPort");
        let s = json!({"metadata": {"name": "s"}, "status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "R", "message": ""}]}});
        let c = decode::<Service>(&s).unwrap_err();
        let want = (
            "FieldValueRequired",
            "status.conditions[0].lastTransitionTime",
        );
        assert_eq!((c.reason.as_str(), c.field.as_str()), want);
        let ok = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": 1}}}]}});
        assert_eq!(decode::<Pod>(&ok), Ok(()));
    }
}
