//! x-kubernetes-validations: the CEL rules a CustomResourceDefinition's schema attaches to its
//! nodes, evaluated as upstream does with `self` bound to the node's value and, for transition
//! rules (those naming `oldSelf`), `oldSelf` to the stored object's value at the same place;
//! transition rules are skipped on create and where the old object has no such value.

use crate::cause::Cause;
use crate::path::Path;
use cel_interpreter::{Context, Program};
use serde_json::Value;

fn rules(s: &Value) -> &[Value] {
    s.get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The schema type shown as the bad value, as upstream's messages show it.
fn shown_type(s: &Value) -> Value {
    Value::String(
        s.get("type")
            .and_then(Value::as_str)
            .unwrap_or("object")
            .to_string(),
    )
}

/// Every rule the object breaks, walking the schema beside it (and beside the old object).
pub fn validate(obj: &Value, old: Option<&Value>, s: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    walk(obj, old, s, &Path::root(), &mut out);
    out
}

fn walk(v: &Value, old: Option<&Value>, s: &Value, at: &Path, out: &mut Vec<Cause>) {
    for rule in rules(s) {
        if let Some(why) = broken(rule, v, old) {
            out.push(Cause::invalid(at, &shown_type(s), &why));
        }
    }
    match v {
        Value::Object(m) => {
            let props = s.get("properties").and_then(Value::as_object);
            let extra = s.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in m {
                let child_schema = props.and_then(|p| p.get(k)).or(extra);
                if let Some(cs) = child_schema {
                    let at = if props.is_some_and(|p| p.contains_key(k)) {
                        at.child(k)
                    } else {
                        at.key(k)
                    };
                    walk(child, old.and_then(|o| o.get(k)), cs, &at, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(item, None, is, &at.index(i), out);
                }
            }
        }
        _ => {}
    }
}

/// Compiles a rule. The parser (ANTLR-generated) panics on some malformed input instead of
/// failing: caught here, since a request must never take the server's worker down.
fn compile(text: &str) -> Result<Program, String> {
    match std::panic::catch_unwind(|| Program::compile(text)) {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("syntax error in {text:?}")),
    }
}

/// Why one rule fails for `v`, or None when it holds (or does not apply).
fn broken(rule: &Value, v: &Value, old: Option<&Value>) -> Option<String> {
    let text = rule.get("rule").and_then(Value::as_str)?;
    let program = match compile(text) {
        Ok(p) => p,
        Err(e) => return Some(format!("compilation failed: {e}")),
    };
    let transition = program.references().has_variable("oldSelf");
    if transition && old.is_none() {
        return None;
    }
    let mut ctx = Context::default();
    if ctx.add_variable("self", v.clone()).is_err() {
        return Some("the value cannot be evaluated".into());
    }
    if let Some(o) = old.filter(|_| transition) {
        if ctx.add_variable("oldSelf", o.clone()).is_err() {
            return Some("the old value cannot be evaluated".into());
        }
    }
    let message = || {
        rule.get("message")
            .and_then(Value::as_str)
            .map_or_else(|| format!("failed rule: {text}"), str::to_string)
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program.execute(&ctx)));
    match result {
        Ok(Ok(cel_interpreter::Value::Bool(true))) => None,
        Ok(Ok(cel_interpreter::Value::Bool(false))) => Some(message()),
        Ok(Ok(other)) => Some(format!("rule {text} evaluated to {other:?}, not a bool")),
        Ok(Err(e)) => Some(format!("{}: {e}", message())),
        Err(_) => Some(format!("{}: the rule could not be evaluated", message())),
    }
}

/// The rules of a definition's schema that do not compile.
pub(crate) fn check_rules(s: &Value, at: &Path, out: &mut Vec<Cause>) {
    for (i, rule) in rules(s).iter().enumerate() {
        let text = rule.get("rule").and_then(Value::as_str).unwrap_or("");
        if let Err(e) = compile(text) {
            let field = at.child("x-kubernetes-validations").index(i).child("rule");
            out.push(Cause::invalid(
                field,
                &Value::String(text.into()),
                &format!("compilation failed: {e}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.replicas <= self.maxReplicas", "message": "replicas must not exceed maxReplicas"},
                {"rule": "!has(self.name) || size(self.name) <= 5"},
                {"rule": "self.maxReplicas >= oldSelf.maxReplicas", "message": "maxReplicas may not shrink"},
            ],
            "properties": {"replicas": {"type": "integer"}, "maxReplicas": {"type": "integer"}, "name": {"type": "string"}}}}})
    }

    #[test]
    fn rules_hold_or_say_why() {
        let ok = json!({"spec": {"replicas": 2, "maxReplicas": 3}});
        assert!(validate(&ok, None, &schema()).is_empty());
        let bad = json!({"spec": {"replicas": 4, "maxReplicas": 3, "name": "toolong"}});
        let msgs: Vec<String> = validate(&bad, None, &schema())
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            msgs,
            vec![
            "spec: Invalid value: \"object\": replicas must not exceed maxReplicas",
            "spec: Invalid value: \"object\": failed rule: !has(self.name) || size(self.name) <= 5",
        ]
        );
    }

    #[test]
    fn transition_rules_compare_with_the_stored_object() {
        let old = json!({"spec": {"replicas": 1, "maxReplicas": 5}});
        let new = json!({"spec": {"replicas": 1, "maxReplicas": 4}});
        let msgs: Vec<String> = validate(&new, Some(&old), &schema())
            .iter()
            .map(|c| c.message.clone())
            .collect();
        assert_eq!(
            msgs,
            vec!["Invalid value: \"object\": maxReplicas may not shrink"]
        );
        assert!(
            validate(&new, None, &schema()).is_empty(),
            "skipped on create"
        );
    }

    #[test]
    fn rules_that_do_not_compile_are_refused() {
        let mut out = Vec::new();
        check_rules(
            &json!({"x-kubernetes-validations": [{"rule": "self.a >"}]}),
            &Path::root(),
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert!(
            out[0].message.contains("compilation failed"),
            "{}",
            out[0].message
        );
    }
}
