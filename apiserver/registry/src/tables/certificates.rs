//! CertificateSigningRequest rows (upstream printCertificateSigningRequest).

use super::age::human_duration;
use super::{age, age_col, col, name, name_col, text_at, Column};
use crate::json::{at, items, str_at};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

pub(super) fn csr_columns() -> Vec<Column> {
    vec![
        name_col(),
        age_col(),
        col("SignerName", "string", 0, "signerName indicates the requested signer, and is a qualified name."),
        col("Requestor", "string", 0, "username contains the name of the user that created the CertificateSigningRequest. Populated by the API server on creation and immutable."),
        col("RequestedDuration", "string", 0, "expirationSeconds is the requested duration of validity of the issued certificate."),
        col("Condition", "string", 0, "conditions applied to the request. Known conditions are \"Approved\", \"Denied\", and \"Failed\"."),
    ]
}

pub(super) fn csr_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let signer = match at(obj, &["spec", "signerName"]).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => s,
        _ => "<none>",
    };
    let duration = at(obj, &["spec", "expirationSeconds"])
        .and_then(Value::as_i64)
        .map_or_else(|| "<none>".to_string(), human_duration);
    vec![
        name(obj),
        age(obj, now),
        json!(signer),
        text_at(obj, &["spec", "username"]),
        json!(duration),
        json!(condition(obj)),
    ]
}

/// "Pending", "Approved" or "Denied" (Denied wins), then ",Failed" and ",Issued" as they apply.
pub(crate) fn condition(obj: &Value) -> String {
    let empty = json!({});
    let status = obj.get("status").unwrap_or(&empty);
    let has = |t: &str| {
        items(status, "conditions")
            .iter()
            .any(|c| str_at(c, "type") == t)
    };
    let mut out = String::from(if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    });
    if has("Failed") {
        out.push_str(",Failed");
    }
    if !str_at(status, "certificate").is_empty() {
        out.push_str(",Issued");
    }
    out
}
