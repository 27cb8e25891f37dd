use super::*;
use serde_json::json;

struct Fake {
    body: Option<Value>,
    pods: Vec<Value>,
}

impl Lookup for Fake {
    fn body(&self) -> Option<Value> {
        self.body.clone()
    }
    fn pod(&self, ns: &str, name: &str) -> Option<Value> {
        self.pods
            .iter()
            .find(|p| p["metadata"]["namespace"] == ns && p["metadata"]["name"] == name)
            .cloned()
    }
}

fn n1() -> User {
    User {
        name: "system:node:n1".into(),
        uid: String::new(),
        groups: vec!["system:nodes".into()],
    }
}

fn req<'a>(
    verb: &'a str,
    group: &'a str,
    resource: &'a str,
    sub: &'a str,
    ns: &'a str,
    name: &'a str,
) -> Attributes<'a> {
    Attributes::on_resource(verb, group, resource, sub, ns, name)
}

fn pods() -> Fake {
    let pod = |name: &str, node: &str| json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"nodeName": node}});
    Fake {
        body: None,
        pods: vec![pod("mine", "n1"), pod("theirs", "n2")],
    }
}

#[test]
fn only_its_own_node() {
    let f = pods();
    assert_eq!(
        admit(&n1(), &req("patch", "", "nodes", "status", "", "n1"), &f),
        Ok(())
    );
    assert_eq!(
        admit(&n1(), &req("patch", "", "nodes", "", "", "n2"), &f),
        Err(r#"nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2""#.into())
    );
    let create = Fake {
        body: Some(json!({"metadata": {"name": "n2"}})),
        pods: vec![],
    };
    assert!(admit(&n1(), &req("create", "", "nodes", "", "", ""), &create).is_err());
    let lease = Fake {
        body: Some(json!({"metadata": {"name": "n2"}})),
        pods: vec![],
    };
    assert!(admit(
        &n1(),
        &req(
            "create",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-node-lease",
            ""
        ),
        &lease
    )
    .is_err());
    let admin = User {
        groups: vec!["system:masters".into()],
        ..n1()
    };
    assert_eq!(
        admit(
            &User {
                name: "alice".into(),
                ..admin
            },
            &req("patch", "", "nodes", "", "", "n2"),
            &f
        ),
        Ok(())
    );
}

#[test]
fn only_status_and_deletion_of_its_own_pods() {
    let f = pods();
    assert_eq!(
        admit(
            &n1(),
            &req("patch", "", "pods", "status", "default", "mine"),
            &f
        ),
        Ok(())
    );
    assert_eq!(
        admit(&n1(), &req("patch", "", "pods", "status", "default", "theirs"), &f),
        Err(r#"pods "theirs" is forbidden: node "n1" can only update pod status for pods with spec.nodeName set to itself"#.into())
    );
    assert!(admit(
        &n1(),
        &req("delete", "", "pods", "", "default", "theirs"),
        &f
    )
    .is_err());
    assert_eq!(
        admit(&n1(), &req("delete", "", "pods", "", "default", "mine"), &f),
        Ok(())
    );
    assert!(admit(
        &n1(),
        &req("create", "", "pods", "eviction", "default", "theirs"),
        &f
    )
    .is_err());
    assert_eq!(
        admit(&n1(), &req("delete", "", "pods", "", "default", "gone"), &f),
        Ok(()),
        "404 comes later"
    );
}

#[test]
fn only_mirror_pods_bound_to_itself() {
    let create = |body: Value| {
        admit(
            &n1(),
            &req("create", "", "pods", "", "default", ""),
            &Fake {
                body: Some(body),
                pods: vec![],
            },
        )
    };
    assert_eq!(
        create(json!({"metadata": {"name": "web"}, "spec": {"nodeName": "n1"}})),
        Err(r#"pods "web" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "n1" can only create mirror pods"#.into())
    );
    let mirror = |node: &str, extra: Value| {
        let mut p = json!({"metadata": {"name": "static-n1", "annotations": {"kubernetes.io/config.mirror": "x"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}});
        if let (Some(spec), Some(more)) = (p["spec"].as_object_mut(), extra.as_object()) {
            spec.extend(more.clone());
        }
        p
    };
    assert_eq!(create(mirror("n1", json!({}))), Ok(()));
    assert!(create(mirror("n2", json!({}))).is_err());
    let with_secret = mirror(
        "n1",
        json!({"volumes": [{"name": "s", "secret": {"secretName": "x"}}]}),
    );
    assert!(create(with_secret)
        .unwrap_err()
        .ends_with("can not create pods that reference secrets"));
}

#[test]
fn its_own_lease_and_its_speakers_only() {
    let none = Fake {
        body: None,
        pods: vec![],
    };
    let lease = |verb, ns, name| {
        admit(
            &n1(),
            &req(verb, "coordination.k8s.io", "leases", "", ns, name),
            &none,
        )
    };
    assert_eq!(lease("update", "kube-node-lease", "n1"), Ok(()));
    assert_eq!(lease("patch", "kube-system", "keelson-speaker-n1"), Ok(()));
    assert_eq!(lease("delete", "kube-system", "keelson-speaker-n1"), Ok(()));
    assert_eq!(
        lease("patch", "kube-system", "keelson-speaker-n2"),
        Err(r#"leases.coordination.k8s.io "keelson-speaker-n2" is forbidden: can only access leases in the "kube-node-lease" system namespace"#.into())
    );
    assert!(lease("update", "kube-node-lease", "n2").is_err());
    assert!(lease("update", "kube-system", "kube-controller-manager").is_err());
    let create = Fake {
        body: Some(json!({"metadata": {"name": "keelson-speaker-n1"}})),
        pods: vec![],
    };
    let attrs = req(
        "create",
        "coordination.k8s.io",
        "leases",
        "",
        "kube-system",
        "",
    );
    assert_eq!(admit(&n1(), &attrs, &create), Ok(()));
}
