//! A custom resource's Table: Name, then its version's additionalPrinterColumns (each a
//! JSONPath into the object), or Name and Age when it declares none, as upstream.

use crate::tables::{cells as builtin_cells, columns as builtin_columns, Column};
use chrono::{DateTime, Utc};
use serde_json::Value;

fn leak(s: &str) -> &'static str {
    // Column definitions are few and fixed per definition version; see custom::leak.
    super::leak(s)
}

fn column_defs(columns: &[Value]) -> Vec<Column> {
    columns
        .iter()
        .map(|c| Column {
            name: leak(c.get("name").and_then(Value::as_str).unwrap_or("")),
            type_: leak(c.get("type").and_then(Value::as_str).unwrap_or("string")),
            format: leak(c.get("format").and_then(Value::as_str).unwrap_or("")),
            description: leak(c.get("description").and_then(Value::as_str).unwrap_or("")),
            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0) as i32,
        })
        .collect()
}

/// The Table columns of a custom version with these printer columns.
pub fn columns(printer_columns: &[Value]) -> Vec<Column> {
    let mut out = builtin_columns("");
    if !printer_columns.is_empty() {
        out.truncate(1);
        out.extend(column_defs(printer_columns));
    }
    out
}

pub fn cells(printer_columns: &[Value], obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut out = builtin_cells("", obj, now);
    if !printer_columns.is_empty() {
        out.truncate(1);
        for c in printer_columns {
            let path = c.get("jsonPath").and_then(Value::as_str).unwrap_or("");
            out.push(eval(obj, path).cloned().unwrap_or(Value::Null));
        }
    }
    out
}

/// The subset of JSONPath printer columns use: `.a.b`, `[n]`, `['key']` and filters
/// `[?(@.type=="Ready")]` (first match).
pub fn eval<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let mut rest = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end])?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inside = &r[..end];
            rest = &r[end + 1..];
            cur = if let Some(filter) = inside
                .strip_prefix("?(@.")
                .and_then(|f| f.strip_suffix(')'))
            {
                let (key, want) = filter.split_once("==")?;
                let want = want.trim().trim_matches(['"', '\'']);
                cur.as_array()?.iter().find(|item| {
                    item.get(key.trim())
                        .is_some_and(|v| v.as_str().map_or(v.to_string(), str::to_string) == want)
                })?
            } else if let Ok(i) = inside.parse::<usize>() {
                cur.get(i)?
            } else {
                cur.get(inside.trim_matches(['"', '\'']))?
            };
        } else {
            return None;
        }
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn printer_column_paths() {
        let obj = json!({"spec": {"replicas": 3, "a.b": "x"},
            "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(eval(&obj, ".spec.replicas"), Some(&json!(3)));
        assert_eq!(eval(&obj, ".spec['a.b']"), Some(&json!("x")));
        assert_eq!(
            eval(&obj, ".status.conditions[1].type"),
            Some(&json!("Ready"))
        );
        assert_eq!(
            eval(&obj, r#".status.conditions[?(@.type=="Ready")].status"#),
            Some(&json!("True"))
        );
        assert_eq!(eval(&obj, ".spec.missing"), None);
    }

    #[test]
    fn name_then_the_declared_columns() {
        let cols = json!([{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}]);
        let cols = cols.as_array().unwrap();
        let names: Vec<&str> = columns(cols).iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Replicas"]);
        let obj = json!({"metadata": {"name": "w"}, "spec": {"replicas": 2}});
        assert_eq!(cells(cols, &obj, Utc::now()), vec![json!("w"), json!(2)]);
        let plain: Vec<&str> = columns(&[]).iter().map(|c| c.name).collect();
        assert_eq!(plain, ["Name", "Age"]);
    }
}
