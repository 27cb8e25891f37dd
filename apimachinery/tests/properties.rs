//! Properties over generated inputs (proptest): label selectors, quantities, patches and object
//! decoding. Each property states what a client relies on; a failure prints the shrunk input.

use std::collections::BTreeMap;

use keelson_apimachinery::{
    json_patch, merge_patch, quantity, strategic_merge_patch, LabelSelector,
};
use proptest::prelude::*;
use serde_json::{json, Value};

/// One requirement as text, and the oracle that says whether it holds for a label map.
#[derive(Clone, Debug)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

impl Req {
    fn text(&self) -> String {
        match self {
            Req::Eq(k, v) => format!("{k}={v}"),
            Req::NotEq(k, v) => format!("{k}!={v}"),
            Req::In(k, vs) => format!("{k} in ({})", vs.join(",")),
            Req::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            Req::Exists(k) => k.clone(),
            Req::Absent(k) => format!("!{k}"),
        }
    }

    fn holds(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Req::Eq(k, v) => labels.get(k) == Some(v),
            Req::NotEq(k, v) => labels.get(k) != Some(v),
            Req::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Req::Exists(k) => labels.contains_key(k),
            Req::Absent(k) => !labels.contains_key(k),
        }
    }
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![Just("app"), Just("tier"), Just("x.io/role"), Just("env")].prop_map(String::from)
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![Just("web"), Just("db"), Just("a-1"), Just("v.2")].prop_map(String::from)
}

fn req() -> impl Strategy<Value = Req> {
    let values = || prop::collection::vec(value(), 1..4);
    prop_oneof![
        (key(), value()).prop_map(|(k, v)| Req::Eq(k, v)),
        (key(), value()).prop_map(|(k, v)| Req::NotEq(k, v)),
        (key(), values()).prop_map(|(k, v)| Req::In(k, v)),
        (key(), values()).prop_map(|(k, v)| Req::NotIn(k, v)),
        key().prop_map(Req::Exists),
        key().prop_map(Req::Absent),
    ]
}

/// A JSON value up to a few levels deep, with the shapes objects have.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-e]{1,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-e]{1,2}", json_value(), 0..5)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// `value` with every null member removed (what a merge patch leaves of a null).
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

proptest! {
    #[test]
    fn a_selector_matches_exactly_when_every_requirement_holds(
        reqs in prop::collection::vec(req(), 0..5),
        labels in prop::collection::btree_map(key(), value(), 0..4),
    ) {
        let text: Vec<String> = reqs.iter().map(Req::text).collect();
        let sel = LabelSelector::parse(&text.join(",")).expect("generated selectors are valid");
        prop_assert_eq!(sel.matches_map(&labels), reqs.iter().all(|r| r.holds(&labels)));
    }

    #[test]
    fn a_printed_selector_parses_back_to_itself(reqs in prop::collection::vec(req(), 0..5)) {
        let text: Vec<String> = reqs.iter().map(Req::text).collect();
        let sel = LabelSelector::parse(&text.join(",")).expect("valid");
        let printed = sel.to_string();
        prop_assert_eq!(LabelSelector::parse(&printed).expect("printed text parses"), sel);
    }

    #[test]
    fn quantities_scale_by_their_suffix(n in 0i64..1_000_000, suffix in prop::sample::select(
        vec![("", 1_000i128), ("k", 1_000_000), ("M", 1_000_000_000), ("Ki", 1_024_000), ("Mi", 1_048_576_000), ("m", 1)],
    )) {
        let (s, milli_per_unit) = suffix;
        let text = format!("{n}{s}");
        prop_assert_eq!(quantity::parse_milli(&text), Some(i128::from(n) * milli_per_unit));
        let float = quantity::parse(&text).expect("parses");
        let want = n as f64 * milli_per_unit as f64 / 1000.0;
        prop_assert!((float - want).abs() <= want * 1e-9, "{} -> {} want {}", text, float, want);
    }

    #[test]
    fn quantity_parsers_never_panic(text in "[-+]?[0-9]{0,45}(\\.[0-9]{0,5})?(m|k|M|G|T|Ki|Mi|Gi|Ti|e[0-9]{1,3}|E[0-9]{0,2})?") {
        let _ = quantity::parse(&text);
        let _ = quantity::parse_milli(&text);
        let _ = quantity::cpu_millis(&text);
        let _ = quantity::bytes(&text);
    }

    #[test]
    fn a_merge_patch_applied_twice_changes_nothing_more(obj in json_object(), patch in json_object()) {
        let once = merge_patch(&obj, &patch);
        prop_assert_eq!(merge_patch(&once, &patch), once);
    }

    #[test]
    fn an_object_merged_onto_nothing_is_itself_without_nulls(obj in json_object()) {
        prop_assert_eq!(merge_patch(&json!({}), &obj), without_nulls(&obj));
    }

    #[test]
    fn json_patch_add_then_remove_restores_the_object(obj in json_object(), v in json_value()) {
        let patch = json!([{"op": "add", "path": "/zz", "value": v}, {"op": "remove", "path": "/zz"}]);
        prop_assert_eq!(json_patch(&obj, &patch).expect("applies"), obj);
    }

    #[test]
    fn an_empty_strategic_patch_changes_nothing(obj in json_object()) {
        for kind in ["Pod", "Deployment", "ConfigMap"] {
            prop_assert_eq!(strategic_merge_patch(&obj, &json!({}), kind).expect("applies"), obj.clone());
        }
    }

    #[test]
    fn any_json_patch_or_strategic_patch_answers_without_panicking(obj in json_object(), patch in json_value()) {
        let _ = json_patch(&obj, &patch);
        let _ = strategic_merge_patch(&obj, &patch, "Pod");
    }

    #[test]
    fn any_protobuf_body_is_decoded_or_refused_without_panicking(
        body in prop::collection::vec(any::<u8>(), 0..256),
        with_magic in any::<bool>(),
    ) {
        // The envelope kubectl sends starts with "k8s\0"; most of the decoder is past it.
        let mut input = if with_magic { b"k8s\0".to_vec() } else { Vec::new() };
        input.extend(body);
        let _ = keelson_apimachinery::protobuf::decode(&input);
    }
}
