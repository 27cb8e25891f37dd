use super::*;
use crate::attributes::{Attributes, ResourceAttributes};
use crate::node::Kind;
use crate::User;
use keelson_apiserver_store::{Precondition, SqliteBackend, Write};
use serde_json::{json, Value};
use std::time::Duration;

fn store(dir: &std::path::Path) -> Store {
    let backend = SqliteBackend::open(&dir.join("store.db")).unwrap();
    Store::open(backend, Duration::from_secs(300), 1000, |_, _| Ok(())).unwrap()
}

async fn put(s: &Store, key: &str, value: Option<Value>) {
    let precondition = match value {
        Some(_) => Precondition::MustNotExist,
        None => Precondition::MustExist,
    };
    let w = Write {
        key: key.into(),
        value,
        precondition,
    };
    s.write(w).await.unwrap();
}

fn alice() -> User {
    User {
        name: "alice".into(),
        uid: String::new(),
        groups: vec![],
    }
}

fn list_pods() -> Attributes<'static> {
    Attributes {
        verb: "list",
        resource: Some(ResourceAttributes {
            group: "",
            resource: "pods",
            subresource: "",
            namespace: "dev",
            name: "".into(),
            field_selector: std::borrow::Cow::Borrowed(""),
        }),
        path: "",
    }
}

#[tokio::test]
async fn writes_are_seen_by_the_next_check_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let role = json!({"metadata": {"name": "r", "namespace": "dev"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]});
    put(&s, "/rbac.authorization.k8s.io/roles/dev/r", Some(role)).await;
    let w = Watched::new(s.clone(), true);
    assert!(w.rbac().allows(&alice(), &list_pods()).is_none());
    let binding = json!({"metadata": {"name": "b", "namespace": "dev"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "User", "name": "alice"}]});
    put(
        &s,
        "/rbac.authorization.k8s.io/rolebindings/dev/b",
        Some(binding),
    )
    .await;
    assert!(w.rbac().allows(&alice(), &list_pods()).is_some());
    put(&s, "/rbac.authorization.k8s.io/rolebindings/dev/b", None).await;
    assert!(w.rbac().allows(&alice(), &list_pods()).is_none());

    let pod = json!({"metadata": {"name": "p", "namespace": "dev"},
        "spec": {"nodeName": "n1", "volumes": [{"name": "s", "secret": {"secretName": "tls"}}]}});
    put(&s, "/core/pods/dev/p", Some(pod)).await;
    assert!(w.with_graph(|g| g.has_edge("n1", Kind::Secret, "dev", "tls")));
    put(&s, "/core/pods/dev/p", None).await;
    assert!(!w.with_graph(|g| g.has_edge("n1", Kind::Secret, "dev", "tls")));
}

#[tokio::test]
async fn a_watch_outrun_by_many_writes_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let w = Watched::new(s.clone(), true);
    // More events than the broadcast channel holds, none read in between (written at once,
    // so the store commits them in a few batches).
    let writes = (0..9000).map(|i| {
        let pod = json!({"metadata": {"name": format!("p{i}"), "namespace": "dev"},
            "spec": {"nodeName": "n1", "serviceAccountName": format!("sa{i}")}});
        let key = format!("/core/pods/dev/p{i}");
        let s = s.clone();
        async move { put(&s, &key, Some(pod)).await }
    });
    futures::future::join_all(writes).await;
    assert!(w.with_graph(|g| g.has_edge("n1", Kind::ServiceAccount, "dev", "sa0")));
    assert!(w.with_graph(|g| g.has_edge("n1", Kind::ServiceAccount, "dev", "sa8999")));
}
