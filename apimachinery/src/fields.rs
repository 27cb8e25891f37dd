//! Field selectors (`?fieldSelector=spec.nodeName=n1,status.phase!=Failed`), as upstream
//! `k8s.io/apimachinery/pkg/fields`. Which fields a resource supports is the server's business:
//! it checks [`FieldSelector::fields`] and answers 400 for the others.

use std::fmt;

use serde_json::Value;

use crate::SelectorError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldOp {
    Equals,
    NotEquals,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub op: FieldOp,
    pub value: String,
}

/// A conjunction of `field=value` / `field!=value` terms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// Checked in this order at every position, so `a!=b` is not read as `a!` `=` `b`.
const OPERATORS: [(&str, FieldOp); 3] = [
    ("!=", FieldOp::NotEquals),
    ("==", FieldOp::Equals),
    ("=", FieldOp::Equals),
];

impl FieldSelector {
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses comma-separated terms; `\,`, `\=` and `\\` escape those characters in values.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for raw in split_terms(s) {
            if raw.is_empty() {
                continue;
            }
            let (field, op, value) =
                split_term(raw).ok_or_else(|| SelectorError::FieldTerm(raw.to_string()))?;
            terms.push(FieldTerm {
                field: field.to_string(),
                op,
                value: unescape(value)?,
            });
        }
        Ok(Self { terms })
    }

    /// Whether `obj` satisfies every term; a missing or null field compares as "".
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|t| {
            let actual = field_value(obj, &t.field);
            (actual == t.value) == (t.op == FieldOp::Equals)
        })
    }

    /// The field names used, so the server can reject the ones a resource does not support.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.field.as_str())
    }

    /// The value an `=` term pins `field` to, for index lookups (e.g. pods by `spec.nodeName`).
    pub fn exact_value(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && t.op == FieldOp::Equals)
            .map(|t| t.value.as_str())
    }

    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    pub fn is_everything(&self) -> bool {
        self.terms.is_empty()
    }
}

/// Splits on commas not preceded by an escaping backslash.
fn split_terms(s: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&s[start..]);
    terms
}

fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    term.char_indices().find_map(|(i, _)| {
        OPERATORS.iter().find_map(|(text, op)| {
            term[i..]
                .starts_with(text)
                .then(|| (&term[..i], *op, &term[i + text.len()..]))
        })
    })
}

fn unescape(v: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(other) => return Err(SelectorError::InvalidEscape(format!("\\{other}"))),
                None => return Err(SelectorError::InvalidEscape("\\".to_string())),
            },
            ',' | '=' => return Err(SelectorError::UnescapedRune(c)),
            _ => out.push(c),
        }
    }
    Ok(out)
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
}

/// Follows a dotted path (`involvedObject.name`); scalars are compared in their JSON text form
/// (`spec.unschedulable=true`), anything else as "".
fn field_value(obj: &Value, path: &str) -> String {
    let found = path.split('.').try_fold(obj, |cur, part| cur.get(part));
    match found {
        Some(Value::String(s)) => s.clone(),
        Some(v @ (Value::Bool(_) | Value::Number(_))) => v.to_string(),
        _ => String::new(),
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            let op = if t.op == FieldOp::Equals { "=" } else { "!=" };
            let sep = if i > 0 { "," } else { "" };
            write!(f, "{sep}{}{op}{}", t.field, escape(&t.value))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod() -> Value {
        json!({
            "metadata": {"name": "web-1", "namespace": "default"},
            "spec": {"nodeName": "node-a", "schedulerName": "default-scheduler", "hostNetwork": false},
            "status": {"phase": "Running", "podIP": "10.0.0.5"}
        })
    }

    fn sel(s: &str) -> FieldSelector {
        FieldSelector::parse(s).unwrap_or_else(|e| panic!("parse {s:?}: {e}"))
    }

    #[test]
    fn equality_and_inequality_on_pod_fields() {
        let p = pod();
        assert!(sel("metadata.name=web-1").matches(&p));
        assert!(sel("metadata.name==web-1").matches(&p));
        assert!(!sel("metadata.name=web-2").matches(&p));
        assert!(sel("spec.nodeName=node-a,status.phase!=Failed").matches(&p));
        assert!(!sel("spec.nodeName=node-a,status.phase!=Running").matches(&p));
        assert!(sel("status.podIP=10.0.0.5,metadata.namespace=default").matches(&p));
        assert!(sel("spec.hostNetwork=false").matches(&p));
    }

    #[test]
    fn missing_field_compares_as_empty() {
        let p = json!({"metadata": {"name": "x"}, "spec": {}});
        assert!(sel("spec.nodeName=").matches(&p));
        assert!(!sel("spec.nodeName!=").matches(&p));
        assert!(sel("spec.nodeName!=node-a").matches(&p));
        assert!(!sel("spec.nodeName=node-a").matches(&p));
    }

    #[test]
    fn event_involved_object_fields() {
        let ev = json!({"involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default", "uid": "u1"},
                        "type": "Warning", "reason": "BackOff"});
        assert!(
            sel("involvedObject.kind=Pod,involvedObject.name=web-1,involvedObject.uid=u1")
                .matches(&ev)
        );
        assert!(sel("type=Warning,reason=BackOff").matches(&ev));
        assert!(!sel("involvedObject.namespace=kube-system").matches(&ev));
    }

    #[test]
    fn empty_selector_and_empty_terms() {
        assert!(sel("").is_everything());
        assert!(sel("").matches(&pod()));
        let s = sel("a=b,,c=d");
        assert_eq!(s.fields().collect::<Vec<_>>(), ["a", "c"]);
    }

    #[test]
    fn escapes_in_values() {
        let s = sel(r"metadata.name=a\,b\=c\\d,spec.nodeName=n");
        assert_eq!(s.exact_value("metadata.name"), Some(r"a,b=c\d"));
        assert_eq!(s.exact_value("spec.nodeName"), Some("n"));
        assert!(s.matches(&json!({"metadata": {"name": r"a,b=c\d"}, "spec": {"nodeName": "n"}})));
        assert_eq!(s.to_string(), r"metadata.name=a\,b\=c\\d,spec.nodeName=n");
    }

    #[test]
    fn exact_value_ignores_inequality() {
        let s = sel("spec.nodeName!=a,status.phase=Running");
        assert_eq!(s.exact_value("spec.nodeName"), None);
        assert_eq!(s.exact_value("status.phase"), Some("Running"));
    }

    #[test]
    fn errors_use_upstream_messages() {
        let err = |s: &str| FieldSelector::parse(s).unwrap_err().to_string();
        assert_eq!(
            err("metadata.name"),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
        );
        assert_eq!(
            err(r"a=b\x"),
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            err("a=b=c"),
            "invalid field selector: unescaped character in value: ="
        );
        assert_eq!(
            err(r"a=b\"),
            r"invalid field selector: invalid escape sequence: \"
        );
    }
}
