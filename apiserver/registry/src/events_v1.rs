//! events.k8s.io/v1 Events, stored as core/v1 Events: one storage for both groups, as upstream
//! keeps them, so an event written through either is read through both (kube-rs's Recorder
//! writes events.k8s.io; kubectl describe reads core). The two forms differ by field names
//! alone, so a partial object (a merge patch) converts as well as a whole one.

use serde_json::{json, Value};

type Pair = (&'static str, &'static str);

/// (events.k8s.io/v1 name, core/v1 name); the other fields have the same name in both.
const RENAMES: &[Pair] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// An events.k8s.io/v1 object (or part of one) as the core/v1 object to store.
pub fn to_core(v: &Value, api_version: &str) -> Value {
    rename(v, api_version, |(events, core)| (events, core))
}

/// A stored core/v1 object as its events.k8s.io/v1 form.
pub fn to_events(v: &Value, api_version: &str) -> Value {
    rename(v, api_version, |(events, core)| (core, events))
}

/// An events.k8s.io field selector (`regarding.name=web,type!=Normal`) on the core/v1 names.
pub fn core_field_selector(selector: &str) -> String {
    selector
        .split(',')
        .map(|term| {
            let at = term.find(['=', '!']).unwrap_or(term.len());
            let (field, rest) = term.split_at(at);
            let core = RENAMES.iter().find_map(|(events, core)| {
                let tail = field.strip_prefix(events)?;
                (tail.is_empty() || tail.starts_with('.')).then(|| format!("{core}{tail}"))
            });
            format!("{}{rest}", core.as_deref().unwrap_or(field))
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn rename(v: &Value, api_version: &str, way: fn(Pair) -> Pair) -> Value {
    let mut out = v.clone();
    let Some(o) = out.as_object_mut() else {
        return out;
    };
    // A target name is not a field of the source version: dropped, as unknown fields are,
    // rather than let it overwrite the converted one.
    let moved: Vec<(&str, Option<Value>)> = RENAMES
        .iter()
        .map(|pair| {
            let (from, to) = way(*pair);
            o.remove(to);
            (to, o.remove(from))
        })
        .collect();
    for (to, value) in moved {
        if let Some(value) = value {
            o.insert(to.into(), value);
        }
    }
    if o.contains_key("apiVersion") {
        o.insert("apiVersion".into(), json!(api_version));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_name_the_same_fields_and_round_trip() {
        let events = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-12-07T00:00:00.000000Z", "action": "Check", "reason": "Checked",
            "regarding": {"kind": "ConfigMap", "name": "c"}, "note": "looked",
            "reportingController": "ctl", "reportingInstance": "ctl-1", "type": "Normal",
            "series": {"count": 2, "lastObservedTime": "2026-12-07T00:00:01.000000Z"},
            "deprecatedCount": 3, "deprecatedSource": {"component": "ctl"}
        });
        let core = to_core(&events, "v1");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "c");
        assert_eq!(core["message"], "looked");
        assert_eq!(core["reportingComponent"], "ctl");
        assert_eq!(core["reportingInstance"], "ctl-1");
        assert_eq!(core["count"], 3);
        assert_eq!(core["source"]["component"], "ctl");
        assert_eq!(core["series"]["count"], 2);
        assert!(core.get("note").is_none() && core.get("regarding").is_none());
        assert_eq!(to_events(&core, "events.k8s.io/v1"), events);
    }

    #[test]
    fn field_selectors_name_the_core_fields() {
        assert_eq!(
            core_field_selector("regarding.name=web,type!=Normal,reportingController==ctl"),
            "involvedObject.name=web,type!=Normal,reportingComponent==ctl"
        );
        assert_eq!(core_field_selector("notes=x"), "notes=x");
    }

    #[test]
    fn a_merge_patch_converts_without_gaining_fields() {
        let patch = json!({"series": {"count": 3}, "note": "again"});
        assert_eq!(
            to_core(&patch, "v1"),
            json!({"series": {"count": 3}, "message": "again"})
        );
    }

    #[test]
    fn a_field_of_the_other_form_does_not_overwrite_the_converted_one() {
        let odd = json!({"note": "kept", "message": "unknown in events.k8s.io"});
        assert_eq!(to_core(&odd, "v1"), json!({"message": "kept"}));
    }
}
