//! Label selectors: the string form (`?labelSelector=`) and the `metav1.LabelSelector` object form
//! used in Deployment, ReplicaSet, Service-like specs.

mod from_json;
mod parser;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::validation::{label_value, qualified_name};
use crate::SelectorError;

/// How one requirement compares a label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    /// `key=value` or `key==value`
    Equals,
    /// `key!=value`: also true when the label is absent.
    NotEquals,
    /// `key in (a,b)`
    In,
    /// `key notin (a,b)`: also true when the label is absent.
    NotIn,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>5` (integer comparison)
    GreaterThan,
    /// `key<5` (integer comparison)
    LessThan,
}

/// One comma-separated term of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    op: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Builds a requirement, validating key and values like upstream `labels.NewRequirement`.
    pub fn new(key: &str, op: Operator, values: Vec<String>) -> Result<Self, SelectorError> {
        if let Some(e) = qualified_name(key).into_iter().next() {
            return Err(invalid("key", key, &e));
        }
        match op {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return Err(invalid(
                    "values",
                    "",
                    "for 'in', 'notin' operators, values set can't be empty",
                ))
            }
            Operator::Equals | Operator::NotEquals if values.len() != 1 => {
                return Err(invalid(
                    "values",
                    &values.join(","),
                    "exact-match compatibility requires one single value",
                ))
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                return Err(invalid(
                    "values",
                    &values.join(","),
                    "values set must be empty for exists and does not exist",
                ))
            }
            Operator::GreaterThan | Operator::LessThan => {
                if !matches!(values.as_slice(), [v] if v.parse::<i64>().is_ok()) {
                    return Err(invalid(
                        "values",
                        &values.join(","),
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ));
                }
                // Integers like "-5" are not valid label values but are valid here.
                return Ok(Self {
                    key: key.to_string(),
                    op,
                    values,
                });
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            if let Some(e) = label_value(v).into_iter().next() {
                return Err(invalid(&format!("values[{i}]"), v, &e));
            }
        }
        let mut values = values;
        values.sort();
        values.dedup();
        Ok(Self {
            key: key.to_string(),
            op,
            values,
        })
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.op
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether the labels satisfy this requirement. Non-string label values never match.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.matches_lookup(|key| labels?.get(key).map(Value::as_str))
    }

    /// `label(key)` is None when the key is absent, Some(None) when its value is not a string.
    fn matches_lookup<'a>(&self, label: impl Fn(&str) -> Option<Option<&'a str>>) -> bool {
        let value = label(&self.key);
        let text = value.flatten();
        let has = |t: &str| self.values.iter().any(|v| v == t);
        match self.op {
            Operator::Equals | Operator::In => text.is_some_and(has),
            Operator::NotEquals | Operator::NotIn => !text.is_some_and(has),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(label), Some(bound)) = (
                    text.and_then(|t| t.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.op == Operator::GreaterThan {
                    label > bound
                } else {
                    label < bound
                }
            }
        }
    }
}

fn invalid(path: &str, value: &str, detail: &str) -> SelectorError {
    SelectorError::Requirement(format!("{path}: Invalid value: \"{value}\": {detail}"))
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = &self.key;
        // A set holding only the empty value would print as "()", which no parser (upstream's
        // included) reads back; "(,)" parses to that same set.
        let vals = match self.values.as_slice() {
            [only] if only.is_empty() && matches!(self.op, Operator::In | Operator::NotIn) => {
                ",".to_string()
            }
            values => values.join(","),
        };
        match self.op {
            Operator::Equals => write!(f, "{k}={vals}"),
            Operator::NotEquals => write!(f, "{k}!={vals}"),
            Operator::In => write!(f, "{k} in ({vals})"),
            Operator::NotIn => write!(f, "{k} notin ({vals})"),
            Operator::Exists => write!(f, "{k}"),
            Operator::DoesNotExist => write!(f, "!{k}"),
            Operator::GreaterThan => write!(f, "{k}>{vals}"),
            Operator::LessThan => write!(f, "{k}<{vals}"),
        }
    }
}

/// A parsed label selector: all requirements must hold (logical AND).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    /// Set only by [`LabelSelector::nothing`]: a null `metav1.LabelSelector` selects no object.
    nothing: bool,
}

impl LabelSelector {
    /// Matches every object (the empty selector).
    pub fn everything() -> Self {
        Self {
            requirements: Vec::new(),
            nothing: false,
        }
    }

    /// Matches no object.
    pub fn nothing() -> Self {
        Self {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parses `a=b,c!=d,e in (x,y),f notin (z),g,!h`; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        Ok(Self::from_requirements(parser::parse(s)?))
    }

    /// Converts a `metav1.LabelSelector` object (`matchLabels` + `matchExpressions`): `null`
    /// selects nothing, `{}` everything. A typed selector (k8s-openapi's `LabelSelector`) comes
    /// here through `serde_json::to_value`.
    pub fn from_json(sel: &Value) -> Result<Self, SelectorError> {
        from_json::convert(sel)
    }

    /// Builds a selector from already-validated requirements, sorted by key as upstream keeps
    /// them, so that printing is canonical.
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Self {
            requirements,
            nothing: false,
        }
    }

    /// Whether an object's `metadata.labels` (absent: None) satisfy every requirement.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// `matches` for a typed label map (k8s-openapi's `ObjectMeta::labels`).
    pub fn matches_map(&self, labels: &BTreeMap<String, String>) -> bool {
        let label = |key: &str| labels.get(key).map(|v| Some(v.as_str()));
        !self.nothing && self.requirements.iter().all(|r| r.matches_lookup(label))
    }

    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// The value a selector pins `key` to with `=`/`==`/single-valued `in`, for index lookups.
    pub fn exact_value(&self, key: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find_map(|r| match (r.op, r.values.as_slice()) {
                (Operator::Equals | Operator::In, [v]) if r.key == key => Some(v.as_str()),
                _ => None,
            })
    }
}

/// Upstream's `labels.FormatLabels`: `a=1,b=2` sorted by key, or `<none>` when there are none.
pub fn format_labels(labels: Option<&Map<String, Value>>) -> String {
    let mut pairs: Vec<String> = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    if pairs.is_empty() {
        return "<none>".to_string();
    }
    pairs.sort();
    pairs.join(",")
}

/// The canonical text: requirements sorted by key, values sorted, as upstream's `String()`.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}
