//! The `fieldValidation` parameter of POST, PUT and PATCH: what happens to unknown and
//! duplicate fields. Strict refuses them (400, upstream's "strict decoding error"), Warn
//! (upstream's default) sends a warning for each, Ignore says nothing.

use super::{duplicates, strict};
use crate::resources::Resource;
use crate::status::{ApiError, ApiResult};
use keelson_apiserver_registry::Cause;
use serde_json::{json, Value};
use std::sync::Mutex;

/// Warn and Ignore drop unknown fields before the object is stored, as upstream's typed
/// decoding does: a field kept would come back on every read, and the next `kubectl apply`
/// would try to remove it (an immutable Pod spec then refuses the update).
const PRUNE: bool = true;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    Strict,
    Warn,
    Ignore,
}

impl Directive {
    /// The directive a request's query asks for; Warn when it names none.
    pub fn from_query(query: &str) -> ApiResult<Directive> {
        let asked = serde_urlencoded::from_str::<Vec<(String, String)>>(query)
            .unwrap_or_default()
            .into_iter()
            .find(|(k, _)| k == "fieldValidation")
            .map(|(_, v)| v);
        match asked.as_deref() {
            None | Some("") | Some("Warn") => Ok(Directive::Warn),
            Some("Strict") => Ok(Directive::Strict),
            Some("Ignore") => Ok(Directive::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Warn\", \"Strict\""
            ))),
        }
    }
}

/// One write's field check; collects the warnings to send with its response.
pub struct FieldCheck {
    res: &'static Resource,
    directive: Directive,
    warnings: Mutex<Vec<String>>,
}

impl FieldCheck {
    pub fn new(res: &'static Resource, directive: Directive) -> FieldCheck {
        FieldCheck {
            res,
            directive,
            warnings: Mutex::new(Vec::new()),
        }
    }

    /// Checks a POST or PUT body: `raw` as sent (for duplicate keys, when JSON) and `obj`, its
    /// decoded form (unknown fields removed if `PRUNE`). Strict: 400 as upstream's decoder.
    pub fn body(&self, raw: &[u8], content_type: Option<&str>, obj: &mut Value) -> ApiResult<()> {
        let json = content_type.is_none_or(|t| t.contains("json"));
        let mut problems: Vec<String> = match (self.directive, json) {
            (Directive::Ignore, _) | (_, false) => Vec::new(),
            _ => duplicates::duplicate_fields(raw)
                .into_iter()
                .map(|f| format!("duplicate field \"{f}\""))
                .collect(),
        };
        problems.extend(self.unknown(obj));
        if self.directive == Directive::Strict && !problems.is_empty() {
            let kind = self.res.kind;
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"{}\" cannot be handled as a {kind}: strict decoding error: {}",
                self.res.version,
                problems.join(", ")
            )));
        }
        self.warn(problems);
        Ok(())
    }

    /// Checks a patched object; Strict: 422 on `patch`, as upstream's patch handler.
    pub fn patched(&self, obj: &mut Value) -> ApiResult<()> {
        // Upstream shows the patched object as the invalid value.
        let shown = match self.directive {
            Directive::Strict => serde_json::to_string(obj).unwrap_or_default(),
            _ => String::new(),
        };
        let problems = self.unknown(obj);
        if self.directive == Directive::Strict && !problems.is_empty() {
            let detail = format!("strict decoding error: {}", problems.join(", "));
            let cause = Cause::invalid("patch", &json!(shown), &detail);
            let (res, name) = (self.res, crate::object::name(obj));
            return Err(ApiError::invalid(res.kind, res.group, name, &[cause]));
        }
        self.warn(problems);
        Ok(())
    }

    /// What to send as `Warning` headers: one per unknown or duplicate field (Warn only).
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().map(|w| w.clone()).unwrap_or_default()
    }

    fn unknown(&self, obj: &mut Value) -> Vec<String> {
        let res = self.res;
        let Some(schemas) = super::schemas_of(res.group, res.version, res.kind) else {
            return Vec::new();
        };
        let (all, root) = schemas;
        strict::unknown_fields(all, &root, obj, PRUNE)
            .into_iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect()
    }

    fn warn(&self, problems: Vec<String>) {
        if self.directive != Directive::Warn {
            return;
        }
        if let Ok(mut w) = self.warnings.lock() {
            // A patch retried on a conflict checks again: keep the last attempt's.
            *w = problems;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods() -> &'static Resource {
        crate::resources::lookup("", "v1", "pods").unwrap()
    }

    #[test]
    fn directive_defaults_to_warn_and_refuses_others() {
        assert_eq!(Directive::from_query("").unwrap(), Directive::Warn);
        assert_eq!(
            Directive::from_query("dryRun=All&fieldValidation=Strict").unwrap(),
            Directive::Strict
        );
        assert_eq!(
            Directive::from_query("fieldValidation=Ignore").unwrap(),
            Directive::Ignore
        );
        assert_eq!(
            Directive::from_query("fieldValidation=strict")
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn strict_refuses_with_upstreams_message() {
        let raw = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","name":"p"},"spec":{"containers":[{"name":"c","image":"i","imagePullPolcy":"x"}],"foo":1}}"#;
        let mut obj: Value = serde_json::from_slice(raw).unwrap();
        let e = FieldCheck::new(pods(), Directive::Strict)
            .body(raw, Some("application/json"), &mut obj)
            .unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: \
             duplicate field \"metadata.name\", unknown field \"spec.containers[0].imagePullPolcy\", \
             unknown field \"spec.foo\""
        );
    }

    #[test]
    fn warn_warns_and_ignore_is_silent() {
        let raw = br#"{"metadata":{"name":"p"},"spec":{"containers":[],"foo":1}}"#;
        for (directive, warned) in [(Directive::Warn, 1), (Directive::Ignore, 0)] {
            let mut obj: Value = serde_json::from_slice(raw).unwrap();
            let check = FieldCheck::new(pods(), directive);
            check.body(raw, None, &mut obj).unwrap();
            assert_eq!(obj["spec"].get("foo").is_none(), PRUNE);
            assert_eq!(check.warnings().len(), warned, "{directive:?}");
        }
    }

    #[test]
    fn a_strict_patch_result_is_invalid() {
        let mut obj = serde_json::json!({ "metadata": { "name": "p" }, "spec": { "foo": 1 } });
        let e = FieldCheck::new(pods(), Directive::Strict)
            .patched(&mut obj)
            .unwrap_err();
        assert_eq!(e.code, 422);
        let want = "strict decoding error: unknown field \"spec.foo\"";
        assert!(e.message.contains(want), "{}", e.message);
        assert!(e
            .message
            .starts_with("Pod \"p\" is invalid: patch: Invalid value: "));
    }
}
