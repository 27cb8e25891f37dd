//! CertificateSigningRequest rules (certificates/validation): a signed PKCS#10 request in a
//! CERTIFICATE REQUEST PEM block, known usages, a qualified signer name, and the approval
//! conditions' rules (Approved and Denied exclusive, never removed once set).

use super::field_checks::{name_check, one_of};
use crate::cause::Cause;
use crate::json::{at, int_at, items, str_at};
use crate::path::Path;
use keelson_apimachinery::validation as names;
use serde_json::{json, Value};

/// certificates/v1 KeyUsage values.
pub const KEY_USAGES: &[&str] = &[
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// Request bytes are not echoed back in messages, as upstream.
const OMITTED: &str = "<omitted>";

pub(crate) fn csr(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let spec_path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    if let Err(msg) = crate::pki::parse_request(str_at(spec, "request")) {
        out.push(Cause::invalid(
            spec_path.child("request"),
            &json!(OMITTED),
            &msg,
        ));
    }
    usages(spec, &spec_path.child("usages"), out);
    signer_name(
        str_at(spec, "signerName"),
        &spec_path.child("signerName"),
        out,
    );
    if let Some(secs) = int_at(spec, "expirationSeconds") {
        if secs < 600 {
            let msg = "may not specify a duration less than 600 seconds (10 minutes)";
            out.push(Cause::invalid(
                spec_path.child("expirationSeconds"),
                &json!(secs),
                msg,
            ));
        }
    }
    let status = obj.get("status").unwrap_or(&empty);
    let status_path = Path::root().child("status");
    conditions(status, &status_path.child("conditions"), out);
    certificate(status, old, &status_path.child("certificate"), out);
    if let Some(old) = old {
        kept_conditions(status, old, &status_path.child("conditions"), out);
    }
}

fn usages(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    let list = items(spec, "usages");
    if list.is_empty() {
        out.push(Cause::required(path, "usages must be provided"));
    }
    let mut seen = Vec::new();
    for (i, u) in list.iter().enumerate() {
        let s = u.as_str().unwrap_or("");
        if !KEY_USAGES.contains(&s) {
            out.push(Cause::not_supported(path.index(i), u, KEY_USAGES));
        } else if seen.contains(&s) {
            out.push(Cause::duplicate(path.index(i), u));
        }
        seen.push(s);
    }
}

/// ValidateSignerName: "example.com/signer-name", a DNS subdomain and a path.
fn signer_name(name: &str, path: &Path, out: &mut Vec<Cause>) {
    if name.is_empty() {
        out.push(Cause::required(path, ""));
        return;
    }
    let Some((domain, rest)) = name.split_once('/') else {
        let msg = "must be a fully qualified domain and path of the form 'example.com/signer-name'";
        out.push(Cause::invalid(path, &json!(name), msg));
        return;
    };
    name_check(names::dns1123_subdomain(domain), path, name, out);
    if rest.is_empty() || rest.len() > 571 {
        let msg = "validating path: must be non-empty and at most 571 characters";
        out.push(Cause::invalid(path, &json!(name), msg));
    }
}

fn conditions(status: &Value, path: &Path, out: &mut Vec<Cause>) {
    let list = items(status, "conditions");
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let p = path.index(i);
        let t = str_at(c, "type");
        if t.is_empty() {
            out.push(Cause::required(p.child("type"), ""));
        }
        one_of(c, "status", &["False", "True", "Unknown"], true, &p, out);
        let unique = ["Approved", "Denied", "Failed"].contains(&t);
        if unique && seen.contains(&t) {
            out.push(Cause::duplicate(p.child("type"), &json!(t)));
        }
        if (t == "Approved" || t == "Denied") && !str_at(c, "status").is_empty() {
            one_of(c, "status", &["True"], true, &p, out);
        }
        seen.push(t);
    }
    if seen.contains(&"Approved") && seen.contains(&"Denied") {
        let msg = "Approved and Denied conditions are mutually exclusive";
        out.push(Cause::invalid(path, &json!(["Approved", "Denied"]), msg));
    }
}

/// An Approved or Denied condition, once set, stays.
fn kept_conditions(status: &Value, old: &Value, path: &Path, out: &mut Vec<Cause>) {
    let has = |s: &Value, t: &str| {
        items(s, "conditions")
            .iter()
            .any(|c| str_at(c, "type") == t)
    };
    let empty = json!({});
    let old_status = old.get("status").unwrap_or(&empty);
    for t in ["Approved", "Denied"] {
        if has(old_status, t) && !has(status, t) {
            let msg = format!("updates may not remove a condition of type {t:?}");
            out.push(Cause::forbidden(path, &msg));
        }
    }
}

/// status.certificate: PEM CERTIFICATE blocks, set once.
fn certificate(status: &Value, old: Option<&Value>, path: &Path, out: &mut Vec<Cause>) {
    let cert = str_at(status, "certificate");
    if cert.is_empty() {
        return;
    }
    if let Err(msg) = crate::pki::check_certificates(cert) {
        out.push(Cause::invalid(path, &json!(OMITTED), &msg));
    }
    let old_cert = old
        .and_then(|o| at(o, &["status", "certificate"]))
        .and_then(Value::as_str)
        .unwrap_or("");
    if !old_cert.is_empty() && old_cert != cert {
        let msg = "updates may not modify existing certificate content";
        out.push(Cause::forbidden(path, msg));
    }
}
