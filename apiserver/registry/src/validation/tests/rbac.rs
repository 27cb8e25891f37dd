use super::{assert_has, causes, fields};
use crate::{apply_defaults, validate};
use serde_json::json;

#[test]
fn roles_need_verbs_and_resources_or_cluster_wide_urls() {
    let ok = json!({"metadata": {"name": "system:pod-reader", "namespace": "default"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
    assert_eq!(causes("Role", ok), vec![]);
    let bad = json!({"metadata": {"name": "r", "namespace": "default"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"]},
        {"verbs": ["get"]},
        {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
    ]});
    let got = fields("Role", bad);
    assert_has(
        &got,
        &[
            ("FieldValueRequired", "rules[0].verbs"),
            ("FieldValueRequired", "rules[1].apiGroups"),
            ("FieldValueRequired", "rules[1].resources"),
            ("FieldValueInvalid", "rules[2].nonResourceURLs"),
        ],
    );
    let urls = json!({"metadata": {"name": "system:discovery"},
        "rules": [{"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*"]}]});
    assert_eq!(causes("ClusterRole", urls), vec![]);
    let both = json!({"metadata": {"name": "x"}, "rules": [{"verbs": ["get"],
        "nonResourceURLs": ["/api"], "resources": ["pods"], "apiGroups": [""]}]});
    let c = causes("ClusterRole", both);
    assert_eq!(c.len(), 1);
    assert!(c[0]
        .message
        .contains("both regular resources and non-resource URLs"));
    let slash = json!({"metadata": {"name": "a/b"}, "rules": []});
    assert_has(
        &fields("ClusterRole", slash),
        &[("FieldValueInvalid", "metadata.name")],
    );
}

#[test]
fn bindings_name_a_role_and_known_subjects() {
    let mut ok = json!({"metadata": {"name": "alice-view", "namespace": "dev"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "default"}]});
    assert_eq!(causes("RoleBinding", ok.clone()), vec![]);
    apply_defaults("RoleBinding", &mut ok);
    assert_eq!(ok["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(ok["subjects"][1].get("apiGroup"), None);
    let bad = json!({"metadata": {"name": "b"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ""},
        "subjects": [{"kind": "Robot", "name": "r2"}, {"kind": "ServiceAccount", "name": "sa"}]});
    assert_has(
        &fields("ClusterRoleBinding", bad),
        &[
            ("FieldValueNotSupported", "roleRef.kind"),
            ("FieldValueRequired", "roleRef.name"),
            ("FieldValueNotSupported", "subjects[0].kind"),
            ("FieldValueRequired", "subjects[1].namespace"),
        ],
    );
    let mut changed = ok.clone();
    changed["roleRef"]["name"] = json!("edit");
    let c = validate("RoleBinding", &changed, Some(&ok));
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].field, "roleRef");
    assert!(c[0].message.ends_with("cannot change roleRef"));
}
