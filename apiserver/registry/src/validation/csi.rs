//! VolumeAttachment rules, as upstream's ValidateVolumeAttachment(Update): who attaches what
//! where, each named, the volume given one way, and the spec fixed once written.

use super::field_checks::immutable;
use crate::cause::Cause;
use crate::json::{at, str_at};
use crate::path::Path;
use serde_json::{json, Value};

pub(crate) fn volume_attachment(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let path = Path::root().child("spec");
    for key in ["attacher", "nodeName"] {
        if str_at(&spec, key).is_empty() {
            out.push(Cause::required(path.child(key), ""));
        }
    }
    let source = path.child("source");
    let named = at(&spec, &["source", "persistentVolumeName"])
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    let inline = at(&spec, &["source", "inlineVolumeSpec"]).is_some_and(|v| !v.is_null());
    match (named, inline) {
        (false, false) => out.push(Cause::required(
            &source,
            "must specify exactly one of persistentVolumeName and inlineVolumeSpec",
        )),
        (true, true) => out.push(Cause::forbidden(
            &source,
            "must specify exactly one of persistentVolumeName and inlineVolumeSpec",
        )),
        _ => {}
    }
    if let Some(old) = old {
        immutable(
            obj.get("spec").unwrap_or(&Value::Null),
            old.get("spec").unwrap_or(&Value::Null),
            &path,
            out,
        );
    }
}
