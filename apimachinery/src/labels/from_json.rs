//! `metav1.LabelSelector` (`matchLabels` + `matchExpressions`) to [`LabelSelector`], as upstream
//! `LabelSelectorAsSelector`.

use serde_json::Value;

use super::{LabelSelector, Operator, Requirement};
use crate::SelectorError;

pub(super) fn convert(sel: &Value) -> Result<LabelSelector, SelectorError> {
    let obj = match sel {
        Value::Null => return Ok(LabelSelector::nothing()),
        Value::Object(o) => o,
        other => return Err(bad(format!("expected an object, got {other}"))),
    };
    let mut reqs = Vec::new();
    match obj.get("matchLabels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(labels)) => {
            for (k, v) in labels {
                let v = v
                    .as_str()
                    .ok_or_else(|| bad(format!("matchLabels[{k}] must be a string")))?;
                reqs.push(Requirement::new(k, Operator::Equals, vec![v.to_string()])?);
            }
        }
        Some(_) => return Err(bad("matchLabels must be an object".into())),
    }
    match obj.get("matchExpressions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(exprs)) => {
            for e in exprs {
                reqs.push(expression(e)?);
            }
        }
        Some(_) => return Err(bad("matchExpressions must be a list".into())),
    }
    Ok(LabelSelector::from_requirements(reqs))
}

fn expression(e: &Value) -> Result<Requirement, SelectorError> {
    let key = e
        .get("key")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("matchExpressions[].key must be a string".into()))?;
    let op_name = e
        .get("operator")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let op = match op_name {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        other => {
            return Err(bad(format!(
                "{other:?} is not a valid label selector operator"
            )))
        }
    };
    let values = match e.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(vs)) => vs
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("matchExpressions[].values must be strings".into()))?,
        Some(_) => return Err(bad("matchExpressions[].values must be a list".into())),
    };
    if matches!(op, Operator::Exists | Operator::DoesNotExist) && !values.is_empty() {
        return Err(bad(
            "for 'Exists', 'DoesNotExist' operators, values set must be empty".into(),
        ));
    }
    Requirement::new(key, op, values)
}

fn bad(msg: String) -> SelectorError {
    SelectorError::InvalidObject(msg)
}
