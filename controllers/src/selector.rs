//! metav1.LabelSelector to the string form a LIST's labelSelector takes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

pub fn to_query(sel: &LabelSelector) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        parts.push(format!("{k}={v}"));
    }
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_expressions() {
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": { "app": "web" },
            "matchExpressions": [
                { "key": "tier", "operator": "In", "values": ["a", "b"] },
                { "key": "gone", "operator": "DoesNotExist" },
            ],
        }))
        .unwrap();
        assert_eq!(to_query(&sel), "app=web,tier in (a,b),!gone");
    }
}
