use super::{meta, row};
use serde_json::json;

#[test]
fn roles_show_when_they_were_created() {
    let role = json!({"metadata": meta("view"), "rules": []});
    let r = row("ClusterRole", &role);
    assert_eq!(
        r,
        vec![
            ("NAME".into(), json!("view")),
            ("CREATED AT".into(), json!("2026-12-02T11:55:00Z"))
        ]
    );
}

#[test]
fn bindings_show_the_role_and_subjects_by_kind() {
    let b = json!({"metadata": meta("dev-view"),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [
            {"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "ci", "namespace": "tools"}]});
    let cells: Vec<_> = row("RoleBinding", &b).into_iter().collect();
    assert_eq!(
        cells,
        vec![
            ("NAME".into(), json!("dev-view")),
            ("ROLE".into(), json!("ClusterRole/view")),
            ("AGE".into(), json!("5m")),
            ("USERS".into(), json!("alice, bob")),
            ("GROUPS".into(), json!("devs")),
            ("SERVICEACCOUNTS".into(), json!("tools/ci")),
        ]
    );
}
