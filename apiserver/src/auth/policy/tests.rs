use super::*;

fn stored(kind: &str, name: &str) -> Value {
    objects()
        .into_iter()
        .find(|(k, o)| *k == kind && o["metadata"]["name"] == name)
        .map(|(_, o)| o)
        .unwrap()
}

#[test]
fn every_default_object_is_valid_and_every_binding_names_a_default_role() {
    let objs = objects();
    for (kind, obj) in &objs {
        let mut o = obj.clone();
        keelson_apiserver_registry::apply_defaults(kind, &mut o);
        let causes = keelson_apiserver_registry::validate(kind, &o, None);
        assert!(
            causes.is_empty(),
            "{kind} {}: {causes:?}",
            obj["metadata"]["name"]
        );
        assert!((resources::by_kind(kind).unwrap().decode)(obj).is_ok());
        if let Some(r) = obj.get("roleRef") {
            let want_kind = r["kind"].as_str().unwrap();
            assert!(
                objs.iter()
                    .any(|(k, o)| *k == want_kind && o["metadata"]["name"] == r["name"]),
                "{}",
                obj["metadata"]["name"]
            );
        }
    }
}

#[test]
fn reconcile_adds_what_is_missing_and_keeps_edits() {
    let default = stored("ClusterRole", "view");
    assert_eq!(reconciled(&default, &default), None);
    let mut edited = default.clone();
    edited["rules"].as_array_mut().unwrap().remove(0);
    edited["rules"]
        .as_array_mut()
        .unwrap()
        .push(json!({"apiGroups": ["x.io"], "resources": ["w"], "verbs": ["get"]}));
    let fixed = reconciled(&edited, &default).unwrap();
    let rules = fixed["rules"].as_array().unwrap();
    assert_eq!(
        rules.len(),
        default["rules"].as_array().unwrap().len() + 1,
        "the user's rule stays"
    );
    let mut kept = edited.clone();
    kept["metadata"]["annotations"][RBAC_AUTOUPDATE_ANNOTATION] = json!("false");
    assert_eq!(reconciled(&kept, &default), None);
    let b = stored("ClusterRoleBinding", "system:node-proxier");
    let mut fewer = b.clone();
    fewer["subjects"] = json!([]);
    assert_eq!(reconciled(&fewer, &b).unwrap()["subjects"], b["subjects"]);
}
