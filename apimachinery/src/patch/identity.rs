//! Finding list elements by JSON equality in near-constant time, so that merging lists of
//! n elements is not n² work: values are bucketed by a canonical text in which equal values (as
//! `json_eq` compares them: numbers by value, objects whatever their key order) always agree,
//! and each candidate is confirmed with `json_eq`.

use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write;

use super::json_eq;

/// Positions of values in a list, earliest first.
pub(crate) struct Positions<'a> {
    values: &'a [&'a Value],
    buckets: HashMap<String, Vec<usize>>,
}

impl<'a> Positions<'a> {
    pub(crate) fn new(values: &'a [&'a Value]) -> Positions<'a> {
        let mut buckets: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, v) in values.iter().enumerate() {
            buckets.entry(canonical(v)).or_default().push(i);
        }
        Positions { values, buckets }
    }

    /// The first position of a value equal to `v`, as `iter().position(json_eq)` finds it.
    pub(crate) fn of(&self, v: &Value) -> Option<usize> {
        let candidates = self.buckets.get(&canonical(v))?;
        let values = self.values;
        candidates
            .iter()
            .copied()
            .find(|i| values.get(*i).is_some_and(|x| json_eq(x, v)))
    }
}

/// A growing set of values compared with `json_eq`.
#[derive(Default)]
pub(crate) struct Seen(HashMap<String, Vec<Value>>);

impl Seen {
    /// Adds `v`; false when an equal value was there already.
    pub(crate) fn insert(&mut self, v: &Value) -> bool {
        let bucket = self.0.entry(canonical(v)).or_default();
        if bucket.iter().any(|x| json_eq(x, v)) {
            return false;
        }
        bucket.push(v.clone());
        true
    }

    pub(crate) fn contains(&self, v: &Value) -> bool {
        self.0
            .get(&canonical(v))
            .is_some_and(|b| b.iter().any(|x| json_eq(x, v)))
    }
}

/// Equal values (by `json_eq`) get equal text; unequal ones usually differ.
pub(crate) fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

/// Recursive: list identities come from decoded JSON, at most 128 levels deep.
fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push('n'),
        Value::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Value::Number(n) => {
            // json_eq compares numbers that are not both i64 as f64; i64s equal as integers
            // are equal as f64 too. 0.0 and -0.0 are equal.
            let f = n.as_f64().unwrap_or(0.0);
            let f = if f == 0.0 { 0.0 } else { f };
            let _ = write!(out, "#{:x}", f.to_bits());
        }
        Value::String(s) => {
            let _ = write!(out, "s{}:{s}", s.len());
        }
        Value::Array(a) => {
            out.push('[');
            for x in a {
                write_canonical(x, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                let _ = write!(out, "{}:{k}=", k.len());
                if let Some(x) = m.get(k) {
                    write_canonical(x, out);
                }
                out.push(',');
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_values_are_found_whatever_their_form() {
        let vals = [
            json!(1),
            json!("a"),
            json!({"b": 1, "a": [2.0]}),
            json!(1.0),
            json!(-0.0),
        ];
        let refs: Vec<&Value> = vals.iter().collect();
        let p = Positions::new(&refs);
        assert_eq!(p.of(&json!(1.0)), Some(0));
        assert_eq!(p.of(&json!({"a": [2], "b": 1.0})), Some(2));
        assert_eq!(p.of(&json!(0)), Some(4));
        assert_eq!(p.of(&json!("b")), None);
        let mut seen = Seen::default();
        assert!(seen.insert(&json!(9_007_199_254_740_993i64)));
        assert!(seen.insert(&json!(9_007_199_254_740_992i64)));
        assert!(!seen.insert(&json!(9_007_199_254_740_993i64)));
        assert!(seen.contains(&json!(9_007_199_254_740_992i64)) && !seen.contains(&json!(3)));
    }
}
