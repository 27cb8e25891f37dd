//! JSON patch (RFC 6902): a list of `add`, `remove`, `replace`, `move`, `copy` and `test`
//! operations on JSON pointers (RFC 6901). Operations apply in order to a copy; the first
//! failure aborts the whole patch.

use serde_json::{Map, Value};

use super::{depth, encoded_len, json_eq, PatchError, MAX_DEPTH};

/// Upstream's cap on the operations of one JSON patch.
pub const MAX_OPERATIONS: usize = 10_000;

/// The bytes `copy` operations may add in all: upstream's limit is the request body limit.
pub const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// What a patch has done so far, against the limits: a dozen `copy` operations doubling a value
/// would otherwise build gigabytes, or nest thousands of levels deep.
struct Work {
    copied: usize,
    depth: usize,
}

impl Work {
    /// Records a value placed at `tokens`; fails once the limits are passed.
    fn place(&mut self, index: usize, tokens: &[String], value: &Value) -> Result<(), PatchError> {
        self.depth = self.depth.max(tokens.len().saturating_add(depth(value)));
        if self.depth > MAX_DEPTH {
            return Err(PatchError::TooDeep { index });
        }
        Ok(())
    }

    fn copy(&mut self, value: &Value) -> Result<(), PatchError> {
        self.copied = self.copied.saturating_add(encoded_len(value));
        if self.copied > MAX_COPY_BYTES {
            return Err(PatchError::TooLarge(format!(
                "Unable to complete the copy, the accumulated size increase of copy is {}, exceeding the limit {MAX_COPY_BYTES}",
                self.copied
            )));
        }
        Ok(())
    }
}

pub fn json_patch(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops = patch
        .as_array()
        .ok_or_else(|| bad("a JSON patch must be a list of operations".into()))?;
    if ops.len() > MAX_OPERATIONS {
        return Err(PatchError::TooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    let mut doc = original.clone();
    let mut work = Work {
        copied: 0,
        depth: depth(original),
    };
    for (index, op) in ops.iter().enumerate() {
        apply_op(&mut doc, index, op, &mut work)?;
    }
    Ok(doc)
}

fn bad(msg: String) -> PatchError {
    PatchError::BadPatch(msg)
}

fn str_field<'a>(
    op: &'a Map<String, Value>,
    index: usize,
    name: &str,
) -> Result<&'a str, PatchError> {
    op.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("operation {index} has no string {name:?}")))
}

fn apply_op(doc: &mut Value, index: usize, op: &Value, work: &mut Work) -> Result<(), PatchError> {
    let op = op
        .as_object()
        .ok_or_else(|| bad(format!("operation {index} is not an object")))?;
    let name = str_field(op, index, "op")?;
    let path = str_field(op, index, "path")?;
    let tokens = parse_pointer(path)?;
    let missing = || PatchError::PathNotFound {
        index,
        op: name.to_string(),
        path: path.to_string(),
    };
    // "value": null is a real value; only an absent member is an error.
    let value = || {
        op.get("value")
            .cloned()
            .ok_or_else(|| bad(format!("operation {index} ({name}) has no \"value\"")))
    };
    match name {
        "add" => {
            let v = value()?;
            work.place(index, &tokens, &v)?;
            add(doc, &tokens, v).ok_or_else(missing)
        }
        "remove" => remove(doc, &tokens).map(drop).ok_or_else(missing),
        "replace" => {
            let v = value()?;
            work.place(index, &tokens, &v)?;
            let target = get_mut(doc, &tokens).ok_or_else(missing)?;
            *target = v;
            Ok(())
        }
        "test" => {
            let actual = get_mut(doc, &tokens).ok_or_else(missing)?;
            if json_eq(actual, &value()?) {
                Ok(())
            } else {
                Err(PatchError::TestFailed {
                    index,
                    path: path.to_string(),
                })
            }
        }
        "move" | "copy" => {
            let from_path = str_field(op, index, "from")?;
            let from = parse_pointer(from_path)?;
            let from_missing = || PatchError::PathNotFound {
                index,
                op: name.to_string(),
                path: from_path.to_string(),
            };
            let moved = if name == "move" {
                if tokens.len() > from.len() && tokens.starts_with(&from) {
                    return Err(bad(format!(
                        "operation {index}: cannot move {from_path:?} into its own child {path:?}"
                    )));
                }
                remove(doc, &from).ok_or_else(from_missing)?
            } else {
                let v = get_mut(doc, &from).ok_or_else(from_missing)?;
                work.copy(v)?;
                v.clone()
            };
            work.place(index, &tokens, &moved)?;
            add(doc, &tokens, moved).ok_or_else(missing)
        }
        other => Err(bad(format!("operation {index} has unknown op {other:?}"))),
    }
}

/// Splits `/a/b~1c/~0d` into `["a", "b/c", "~d"]`; "" is the whole document.
fn parse_pointer(path: &str) -> Result<Vec<String>, PatchError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(bad(format!("JSON pointer {path:?} must start with '/'")));
    };
    rest.split('/')
        .map(|tok| {
            let mut out = String::with_capacity(tok.len());
            let mut chars = tok.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => out.push('~'),
                    Some('1') => out.push('/'),
                    _ => return Err(bad(format!("JSON pointer {path:?} has a bad '~' escape"))),
                }
            }
            Ok(out)
        })
        .collect()
}

/// An array index: decimal digits without leading zeros, below `len` (or equal when inserting).
fn index(token: &str, len: usize, inserting: bool) -> Option<usize> {
    if token.is_empty()
        || !token.bytes().all(|b| b.is_ascii_digit())
        || (token.len() > 1 && token.starts_with('0'))
    {
        return None;
    }
    let i: usize = token.parse().ok()?;
    (i < len || (inserting && i == len)).then_some(i)
}

fn get_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    tokens.iter().try_fold(doc, |cur, tok| match cur {
        Value::Object(m) => m.get_mut(tok),
        Value::Array(a) => {
            let i = index(tok, a.len(), false)?;
            a.get_mut(i)
        }
        _ => None,
    })
}

fn add(doc: &mut Value, tokens: &[String], value: Value) -> Option<()> {
    let Some((last, parent)) = tokens.split_last() else {
        *doc = value;
        return Some(());
    };
    match get_mut(doc, parent)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        Value::Array(a) => {
            let i = if last == "-" {
                a.len()
            } else {
                index(last, a.len(), true)?
            };
            a.insert(i, value);
        }
        _ => return None,
    }
    Some(())
}

fn remove(doc: &mut Value, tokens: &[String]) -> Option<Value> {
    let (last, parent) = tokens.split_last()?;
    match get_mut(doc, parent)? {
        Value::Object(m) => m.remove(last),
        Value::Array(a) => {
            let i = index(last, a.len(), false)?;
            Some(a.remove(i))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn apply(doc: Value, patch: Value) -> Result<Value, PatchError> {
        json_patch(&doc, &patch)
    }

    #[test]
    fn add_to_objects_and_arrays() {
        let got = apply(
            json!({"a": [1, 3]}),
            json!([
                {"op": "add", "path": "/a/1", "value": 2},
                {"op": "add", "path": "/a/-", "value": 4},
                {"op": "add", "path": "/b", "value": {"c": null}},
                {"op": "add", "path": "/a/4", "value": 5}
            ]),
        )
        .unwrap();
        assert_eq!(got, json!({"a": [1, 2, 3, 4, 5], "b": {"c": null}}));
        let err = apply(
            json!({"a": [1]}),
            json!([{"op": "add", "path": "/a/3", "value": 2}]),
        )
        .unwrap_err();
        assert!(
            matches!(err, PatchError::PathNotFound { index: 0, .. }),
            "{err:?}"
        );
        assert!(apply(
            json!({}),
            json!([{"op": "add", "path": "/x/y", "value": 1}])
        )
        .is_err());
    }

    #[test]
    fn add_to_root_replaces_the_document() {
        assert_eq!(
            apply(
                json!({"a": 1}),
                json!([{"op": "add", "path": "", "value": [1]}])
            )
            .unwrap(),
            json!([1])
        );
    }

    #[test]
    fn remove_and_replace() {
        let doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "list": ["x", "y", "z"]});
        let got = apply(
            doc,
            json!([
                {"op": "remove", "path": "/metadata/labels/a"},
                {"op": "remove", "path": "/list/1"},
                {"op": "replace", "path": "/list/0", "value": "X"}
            ]),
        )
        .unwrap();
        assert_eq!(
            got,
            json!({"metadata": {"labels": {"b": "2"}}, "list": ["X", "z"]})
        );
        assert!(apply(json!({}), json!([{"op": "remove", "path": "/a"}])).is_err());
        assert!(apply(
            json!({}),
            json!([{"op": "replace", "path": "/a", "value": 1}])
        )
        .is_err());
        assert!(apply(
            json!({"l": [1]}),
            json!([{"op": "remove", "path": "/l/01"}])
        )
        .is_err());
    }

    #[test]
    fn escaped_pointer_tokens_for_annotation_keys() {
        let doc = json!({"metadata": {"annotations": {"example.com/a~b": "1"}}});
        let got = apply(
            doc,
            json!([
                {"op": "test", "path": "/metadata/annotations/example.com~1a~0b", "value": "1"},
                {"op": "replace", "path": "/metadata/annotations/example.com~1a~0b", "value": "2"}
            ]),
        )
        .unwrap();
        assert_eq!(got["metadata"]["annotations"]["example.com/a~b"], "2");
        assert!(apply(
            json!({}),
            json!([{"op": "add", "path": "/a~2", "value": 1}])
        )
        .is_err());
        assert!(apply(json!({}), json!([{"op": "add", "path": "a", "value": 1}])).is_err());
    }

    #[test]
    fn move_and_copy() {
        let got = apply(
            json!({"a": {"b": 1}, "l": [1, 2]}),
            json!([
                {"op": "copy", "from": "/a/b", "path": "/c"},
                {"op": "move", "from": "/a", "path": "/d"},
                {"op": "move", "from": "/l/0", "path": "/l/-"}
            ]),
        )
        .unwrap();
        assert_eq!(got, json!({"c": 1, "d": {"b": 1}, "l": [2, 1]}));
        assert!(apply(
            json!({"a": {}}),
            json!([{"op": "move", "from": "/a", "path": "/a/b"}])
        )
        .is_err());
        assert!(apply(
            json!({}),
            json!([{"op": "copy", "from": "/nope", "path": "/x"}])
        )
        .is_err());
    }

    #[test]
    fn test_op_aborts_the_whole_patch() {
        let doc = json!({"metadata": {"resourceVersion": "5"}, "spec": {"replicas": 1}});
        let ok = apply(
            doc.clone(),
            json!([
                {"op": "test", "path": "/spec/replicas", "value": 1.0},
                {"op": "replace", "path": "/spec/replicas", "value": 2}
            ]),
        )
        .unwrap();
        assert_eq!(ok["spec"]["replicas"], 2);
        let err = apply(
            doc,
            json!([
                {"op": "replace", "path": "/spec/replicas", "value": 3},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "4"}
            ]),
        )
        .unwrap_err();
        assert_eq!(
            err,
            PatchError::TestFailed {
                index: 1,
                path: "/metadata/resourceVersion".into()
            }
        );
        assert_eq!(err.status_code(), 422);
    }

    #[test]
    fn malformed_patches_are_bad_requests() {
        for p in [
            json!({"op": "add"}),
            json!([{"path": "/a"}]),
            json!([{"op": "jump", "path": "/a"}]),
            json!([{"op": "add", "path": "/a"}]),
            json!([{"op": "move", "path": "/a"}]),
        ] {
            let err = apply(json!({"a": 1}), p.clone()).unwrap_err();
            assert_eq!(err.status_code(), 400, "{p}: {err}");
        }
        // An explicit null value is allowed.
        assert_eq!(
            apply(
                json!({"a": 1}),
                json!([{"op": "replace", "path": "/a", "value": null}])
            )
            .unwrap(),
            json!({"a": null})
        );
    }

    #[test]
    fn copies_cannot_amplify_an_object() {
        let doc = json!({"a": "x".repeat(200_000)});
        let ops: Vec<Value> = (0..16)
            .map(|i| json!({"op": "copy", "from": "/a", "path": format!("/c{i}")}))
            .collect();
        let err = apply(doc.clone(), json!(ops)).unwrap_err();
        assert_eq!(err.status_code(), 413);
        assert!(
            err.to_string().starts_with("Unable to complete the copy"),
            "{err}"
        );
        let few = json!([{"op": "copy", "from": "/a", "path": "/b"}]);
        assert!(apply(doc, few).is_ok());
    }

    #[test]
    fn copies_cannot_nest_an_object_deeply() {
        // Each copy of the whole object into itself nests it one level deeper.
        let ops: Vec<Value> = (0..120)
            .map(|_| json!({"op": "copy", "from": "", "path": "/a"}))
            .collect();
        let err = apply(json!({"a": {"a": 1}}), json!(ops)).unwrap_err();
        assert_eq!(err, PatchError::TooDeep { index: 98 });
        assert_eq!(err.status_code(), 422);
    }

    #[test]
    fn operations_are_capped_as_upstream() {
        let ops = vec![json!({"op": "test", "path": "/a", "value": 1}); MAX_OPERATIONS + 1];
        let err = apply(json!({"a": 1}), json!(ops)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
        assert_eq!(err.status_code(), 413);
        let ops = vec![json!({"op": "test", "path": "/a", "value": 1}); MAX_OPERATIONS];
        assert!(apply(json!({"a": 1}), json!(ops)).is_ok());
    }
}
