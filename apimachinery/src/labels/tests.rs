use serde_json::{json, Map, Value};

use super::*;

fn labels(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("test labels must be an object"),
    }
}

fn sel(s: &str) -> LabelSelector {
    LabelSelector::parse(s).unwrap_or_else(|e| panic!("parse {s:?}: {e}"))
}

#[test]
fn empty_selector_matches_everything_including_unlabelled() {
    let s = sel("");
    assert!(s.is_everything());
    assert!(s.matches(None));
    assert!(s.matches(Some(&labels(json!({"a": "b"})))));
    assert!(sel("   ").is_everything());
}

#[test]
fn equality_operators() {
    let l = labels(json!({"app": "web", "tier": "front"}));
    assert!(sel("app=web").matches(Some(&l)));
    assert!(sel("app==web").matches(Some(&l)));
    assert!(!sel("app=db").matches(Some(&l)));
    assert!(sel("app!=db").matches(Some(&l)));
    assert!(!sel("app!=web").matches(Some(&l)));
    // != is true when the label is absent, like upstream.
    assert!(sel("missing!=x").matches(Some(&l)));
    assert!(sel("app=web,tier=front").matches(Some(&l)));
    assert!(!sel("app=web,tier=back").matches(Some(&l)));
    assert!(!sel("app=web").matches(None));
}

#[test]
fn set_and_existence_operators() {
    let l = labels(json!({"env": "prod", "team": "a"}));
    assert!(sel("env in (prod, staging)").matches(Some(&l)));
    assert!(!sel("env in (dev)").matches(Some(&l)));
    assert!(sel("env notin (dev,qa)").matches(Some(&l)));
    assert!(!sel("env notin (prod)").matches(Some(&l)));
    assert!(sel("missing notin (prod)").matches(Some(&l)));
    assert!(sel("team").matches(Some(&l)));
    assert!(!sel("owner").matches(Some(&l)));
    assert!(sel("!owner").matches(Some(&l)));
    assert!(!sel("!team").matches(Some(&l)));
    assert!(sel("a=b,c!=d,e in (x,y),f notin (z),g,!h")
        .matches(Some(&labels(json!({"a": "b", "e": "y", "g": ""})))));
}

#[test]
fn numeric_comparisons() {
    let l = labels(json!({"gen": "5"}));
    assert!(sel("gen>3").matches(Some(&l)));
    assert!(!sel("gen>5").matches(Some(&l)));
    assert!(sel("gen<10").matches(Some(&l)));
    assert!(!sel("gen<1").matches(Some(&l)));
    assert!(!sel("other>1").matches(Some(&l)));
}

#[test]
fn empty_values_and_keywords_as_values() {
    let l = labels(json!({"a": "", "b": "in"}));
    assert!(sel("a=").matches(Some(&l)));
    assert!(sel("a=,b=in").matches(Some(&l)));
    assert!(sel("b in (in,notin)").matches(Some(&l)));
    assert!(sel("a in (,x)").matches(Some(&l)));
}

#[test]
fn prefixed_keys_and_display() {
    let s = sel("app.kubernetes.io/name=web, !example.com/skip ,x in (b,a)");
    assert_eq!(
        s.to_string(),
        "app.kubernetes.io/name=web,!example.com/skip,x in (a,b)"
    );
    assert_eq!(s.exact_value("app.kubernetes.io/name"), Some("web"));
    assert_eq!(s.exact_value("x"), None);
}

#[test]
fn syntax_errors_use_upstream_messages() {
    let err = |s: &str| LabelSelector::parse(s).unwrap_err().to_string();
    assert_eq!(
        err("a b"),
        "found 'b', expected: in, notin, =, ==, !=, gt, lt"
    );
    assert_eq!(err("a=b,"), "found '', expected: identifier after ','");
    assert_eq!(err("a=b c"), "found 'c', expected: ',' or 'end of string'");
    assert_eq!(err("a in x"), "found 'x', expected: '('");
    assert_eq!(err("a in (x"), "found '', expected: ',', ')' or identifier");
    assert_eq!(
        err("a in (x y)"),
        "found 'y', expected: ',', ')' or identifier"
    );
    assert_eq!(
        err("a in (x,=)"),
        "found '=', expected: ',', ')' or identifier"
    );
    assert_eq!(
        err(",a"),
        "found ',', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        err("!=a"),
        "found '!=', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(err("!"), "found '', expected: identifier");
    assert_eq!(err("a=("), "found '(', expected: identifier");
}

#[test]
fn validation_errors_are_unable_to_parse_requirement() {
    let err = |s: &str| LabelSelector::parse(s).unwrap_err();
    let e = err("a in ()");
    assert!(matches!(e, SelectorError::Requirement(_)), "{e:?}");
    assert!(e.to_string().contains("values set can't be empty"), "{e}");
    let e = err("-a=b").to_string();
    assert!(
        e.starts_with(
            "unable to parse requirement: key: Invalid value: \"-a\": name part must consist of"
        ),
        "{e}"
    );
    let e = err("a=b-").to_string();
    assert!(
        e.starts_with("unable to parse requirement: values[0]: Invalid value: \"b-\""),
        "{e}"
    );
    let e = err("a>x").to_string();
    assert!(e.contains("the value must be an integer"), "{e}");
    assert!(err("a/b/c")
        .to_string()
        .contains("a qualified name must consist of"));
}

#[test]
fn from_json_nil_is_nothing_and_empty_is_everything() {
    let nothing = LabelSelector::from_json(&Value::Null).unwrap();
    assert!(nothing.is_nothing());
    assert!(!nothing.matches(None));
    assert!(!nothing.matches(Some(&labels(json!({"a": "b"})))));
    let all = LabelSelector::from_json(&json!({})).unwrap();
    assert!(all.is_everything());
    assert!(all.matches(None));
}

#[test]
fn from_json_match_labels_and_expressions() {
    let s = LabelSelector::from_json(&json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "qa"]},
            {"key": "legacy", "operator": "DoesNotExist"},
            {"key": "team", "operator": "Exists"},
            {"key": "zone", "operator": "NotIn", "values": ["z1"]}
        ]
    }))
    .unwrap();
    assert!(s.matches(Some(&labels(
        json!({"app": "web", "env": "qa", "team": "x"})
    ))));
    assert!(!s.matches(Some(&labels(
        json!({"app": "web", "env": "dev", "team": "x"})
    ))));
    assert!(!s.matches(Some(&labels(
        json!({"app": "web", "env": "qa", "team": "x", "legacy": "1"})
    ))));
    assert!(!s.matches(Some(&labels(
        json!({"app": "web", "env": "qa", "team": "x", "zone": "z1"})
    ))));
    assert!(!s.matches(Some(&labels(
        json!({"app": "db", "env": "qa", "team": "x"})
    ))));
}

#[test]
fn from_json_rejects_bad_operators_and_values() {
    let e =
        LabelSelector::from_json(&json!({"matchExpressions": [{"key": "a", "operator": "Foo"}]}))
            .unwrap_err();
    assert!(
        e.to_string()
            .contains("\"Foo\" is not a valid label selector operator"),
        "{e}"
    );
    let e = LabelSelector::from_json(
        &json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("values set can't be empty"), "{e}");
    let e = LabelSelector::from_json(
        &json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("values set must be empty"), "{e}");
    assert!(LabelSelector::from_json(&json!({"matchLabels": {"a": 1}})).is_err());
    assert!(LabelSelector::from_json(&json!("a=b")).is_err());
}

#[test]
fn printing_is_canonical_sorted_by_key() {
    assert_eq!(sel("z=1,a in (y,x),!m").to_string(), "a in (x,y),!m,z=1");
    let s = LabelSelector::from_json(&json!({
        "matchLabels": {"tier": "fe", "app": "web"},
        "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["b", "a"]},
                             {"key": "x", "operator": "Exists"}]
    }))
    .unwrap();
    assert_eq!(s.to_string(), "app=web,env notin (a,b),tier=fe,x");
    assert_eq!(
        LabelSelector::from_json(&json!({})).unwrap().to_string(),
        ""
    );
}

#[test]
fn typed_maps_match_like_json_objects() {
    let map = std::collections::BTreeMap::from([
        ("app".to_string(), "web".to_string()),
        ("gen".to_string(), "5".to_string()),
    ]);
    assert!(sel("app=web,gen>3,!legacy").matches_map(&map));
    assert!(!sel("app in (db)").matches_map(&map));
    assert!(!LabelSelector::nothing().matches_map(&map));
}

#[test]
fn label_maps_print_sorted() {
    assert_eq!(
        format_labels(json!({"b": "2", "a": "1"}).as_object()),
        "a=1,b=2"
    );
    assert_eq!(format_labels(None), "<none>");
    assert_eq!(format_labels(json!({}).as_object()), "<none>");
}

#[test]
fn a_set_of_only_the_empty_value_prints_text_that_parses_back() {
    // Found by fuzzing: "k in (,)" printed as "k in ()", which is refused.
    let sel = LabelSelector::parse("k in (,),j notin (,)").unwrap();
    let printed = sel.to_string();
    assert_eq!(LabelSelector::parse(&printed).unwrap(), sel, "{printed}");
}
