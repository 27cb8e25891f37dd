//! Defaults of the kinds that bound what pods may ask for: LimitRange (upstream's
//! SetDefaults_LimitRangeItem) and PriorityClass.

use crate::json::{default, each_object_mut, object_mut};
use serde_json::{json, Map, Value};

/// A Container item's default limit falls back to its max, its default request to the default
/// limit and then to its min: a LimitRange with only `max` still gives pods a limit.
pub(crate) fn limit_range(obj: &mut Map<String, Value>) {
    let Some(spec) = object_mut(obj, "spec") else {
        return;
    };
    each_object_mut(spec, "limits", |item| {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            return;
        }
        fill_from(item, "default", "max");
        fill_from(item, "defaultRequest", "default");
        fill_from(item, "defaultRequest", "min");
    });
}

/// Copies into `item[to]` every resource of `item[from]` it does not name yet.
fn fill_from(item: &mut Map<String, Value>, to: &str, from: &str) {
    let Some(source) = item.get(from).and_then(Value::as_object).cloned() else {
        return;
    };
    if source.is_empty() {
        return;
    }
    if let Some(target) = object_mut(item, to) {
        for (k, v) in source {
            target.entry(k).or_insert(v);
        }
    }
}

pub(crate) fn priority_class(obj: &mut Map<String, Value>) {
    default(obj, "preemptionPolicy", json!("PreemptLowerPriority"));
}
