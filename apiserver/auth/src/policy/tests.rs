use super::*;
use keelson_apiserver_registry::resources;

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

/// The API calls Keelson's components make (read from controllers/, scheduler/, ingress/,
/// proxy/ and agent/), each allowed by the default policy to the identity it runs as.
#[test]
fn every_component_may_make_the_calls_it_makes() {
    use crate::attributes::{Attributes, ResourceAttributes};
    use crate::rbac::Index;
    use crate::User;
    let objs = objects();
    let index = Index::build(objs.iter().map(|(k, v)| (*k, v)));
    let user = |name: &str, groups: &[&str]| User {
        name: name.into(),
        uid: String::new(),
        groups: groups
            .iter()
            .map(|g| g.to_string())
            .chain(["system:authenticated".into()])
            .collect(),
    };
    let kcm = user("system:kube-controller-manager", &[]);
    let scheduler = user("system:kube-scheduler", &[]);
    let ingress = user("keelson:ingress-controller", &[]);
    let proxy = user("system:kube-proxy", &[]);
    let dns = user("system:kube-dns", &[]);
    let node_proxy = user("system:node:n1", &["system:nodes"]);
    let bootstrap = user("system:bootstrap:abcdef", &["system:bootstrappers"]);
    let apiserver = user("kube-apiserver-kubelet-client", &[]);
    // The kcm's own identity also holds the garbage collector's patch on everything: upstream's
    // per-controller account shows what the service-controller role itself grants.
    let service_controller = user(
        "system:serviceaccount:kube-system:service-controller",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
        ],
    );
    let calls: &[(&User, &str, &str, &str, &str, &str)] = &[
        (&kcm, "watch", "apps", "deployments", "", ""),
        (&kcm, "patch", "apps", "deployments", "status", "d"),
        (&kcm, "create", "apps", "replicasets", "", "d"),
        (&kcm, "patch", "apps", "replicasets", "status", "d"),
        // The deployment controller's scaling, revision annotations and history pruning,
        // the replicaset controller's sibling lookup, the garbage collector's new kinds.
        (&kcm, "patch", "apps", "replicasets", "", "d"),
        (&kcm, "delete", "apps", "replicasets", "", "d"),
        (&kcm, "list", "apps", "replicasets", "", "d"),
        (&kcm, "patch", "apps", "deployments", "", "d"),
        (&kcm, "list", "apps", "statefulsets", "", ""),
        (&kcm, "list", "apps", "controllerrevisions", "", ""),
        (&kcm, "delete", "apps", "controllerrevisions", "", "d"),
        (&kcm, "list", "", "persistentvolumeclaims", "", ""),
        (&kcm, "delete", "", "persistentvolumeclaims", "", "d"),
        (&kcm, "create", "", "pods", "", "d"),
        (&kcm, "delete", "", "pods", "", "d"),
        (&kcm, "create", "", "pods", "eviction", "d"),
        (&kcm, "patch", "", "pods", "status", "d"),
        (&kcm, "patch", "", "nodes", "", ""),
        (&kcm, "patch", "", "nodes", "status", ""),
        (
            &kcm,
            "list",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-node-lease",
        ),
        (
            &kcm,
            "create",
            "discovery.k8s.io",
            "endpointslices",
            "",
            "d",
        ),
        (&kcm, "patch", "discovery.k8s.io", "endpointslices", "", "d"),
        (&kcm, "patch", "apps", "daemonsets", "status", "d"),
        // The Job, CronJob and ttl-after-finished controllers.
        (&kcm, "watch", "batch", "jobs", "", ""),
        (&kcm, "patch", "batch", "jobs", "status", "d"),
        (&kcm, "list", "", "pods", "", "d"),
        (&kcm, "patch", "", "pods", "", "d"),
        (&kcm, "watch", "batch", "cronjobs", "", ""),
        (&kcm, "patch", "batch", "cronjobs", "status", "d"),
        (&kcm, "list", "batch", "jobs", "", "d"),
        (&kcm, "create", "batch", "jobs", "", "d"),
        (&kcm, "get", "batch", "jobs", "", "d"),
        (&kcm, "delete", "batch", "jobs", "", "d"),
        (&kcm, "patch", "apps", "statefulsets", "status", "d"),
        (&kcm, "create", "apps", "controllerrevisions", "", "d"),
        (&kcm, "patch", "apps", "controllerrevisions", "", "d"),
        (&kcm, "delete", "apps", "controllerrevisions", "", "d"),
        (&kcm, "create", "", "persistentvolumeclaims", "", "d"),
        (&kcm, "list", "", "persistentvolumeclaims", "", "d"),
        (
            &kcm,
            "patch",
            "certificates.k8s.io",
            "certificatesigningrequests",
            "approval",
            "",
        ),
        (
            &kcm,
            "patch",
            "certificates.k8s.io",
            "certificatesigningrequests",
            "status",
            "",
        ),
        (&kcm, "delete", "", "namespaces", "", ""),
        (&kcm, "delete", "", "configmaps", "", "d"),
        (&kcm, "get", "", "configmaps", "", "d"),
        (&kcm, "update", "", "configmaps", "", "d"),
        (&kcm, "create", "", "serviceaccounts", "", "d"),
        (&kcm, "create", "", "events", "", "d"),
        // The shared recorder counts a repeated Event by patching it.
        (&kcm, "patch", "", "events", "", "d"),
        (&kcm, "create", "", "persistentvolumes", "", ""),
        (&kcm, "delete", "", "persistentvolumes", "", ""),
        (&kcm, "patch", "", "persistentvolumes", "", ""),
        (&kcm, "patch", "", "persistentvolumes", "status", ""),
        (&kcm, "get", "", "persistentvolumeclaims", "", "d"),
        (&kcm, "patch", "", "persistentvolumeclaims", "", "d"),
        (&kcm, "patch", "", "persistentvolumeclaims", "status", "d"),
        // The HorizontalPodAutoscaler controller: usage from metrics.k8s.io, the target's scale.
        (&kcm, "get", "metrics.k8s.io", "pods", "", "d"),
        (&kcm, "list", "metrics.k8s.io", "pods", "", "d"),
        (&kcm, "get", "apps", "deployments", "scale", "d"),
        (&kcm, "update", "apps", "statefulsets", "scale", "d"),
        (
            &kcm,
            "update",
            "autoscaling",
            "horizontalpodautoscalers",
            "status",
            "d",
        ),
        (
            &kcm,
            "patch",
            "autoscaling",
            "horizontalpodautoscalers",
            "status",
            "d",
        ),
        (&kcm, "get", "storage.k8s.io", "storageclasses", "", ""),
        (&kcm, "get", "", "nodes", "", ""),
        // Load-balancer IP allocation.
        (&kcm, "list", "", "services", "", ""),
        (&kcm, "watch", "", "services", "", ""),
        (&kcm, "patch", "", "services", "status", "d"),
        (&service_controller, "watch", "", "services", "", ""),
        (&service_controller, "patch", "", "services", "status", "d"),
        (&service_controller, "create", "", "events", "", "d"),
        (&scheduler, "watch", "", "persistentvolumeclaims", "", ""),
        (&scheduler, "watch", "", "persistentvolumes", "", ""),
        (
            &scheduler,
            "watch",
            "storage.k8s.io",
            "storageclasses",
            "",
            "",
        ),
        (&scheduler, "patch", "", "persistentvolumeclaims", "", "d"),
        (&scheduler, "create", "", "events", "", "d"),
        (&scheduler, "patch", "", "events", "", "d"),
        (&ingress, "patch", "", "events", "", "d"),
        (&scheduler, "watch", "", "pods", "", ""),
        (&scheduler, "watch", "", "nodes", "", ""),
        (&scheduler, "create", "", "pods", "binding", "d"),
        (&scheduler, "patch", "", "pods", "status", "d"),
        (&ingress, "watch", "networking.k8s.io", "ingresses", "", ""),
        (&ingress, "watch", "", "secrets", "", ""),
        (
            &ingress,
            "watch",
            "discovery.k8s.io",
            "endpointslices",
            "",
            "",
        ),
        (
            &ingress,
            "patch",
            "networking.k8s.io",
            "ingresses",
            "status",
            "d",
        ),
        (&ingress, "create", "", "events", "", "d"),
        (&proxy, "watch", "", "services", "", ""),
        (
            &proxy,
            "watch",
            "discovery.k8s.io",
            "endpointslices",
            "",
            "",
        ),
        (&proxy, "watch", "", "nodes", "", ""),
        (
            &node_proxy,
            "watch",
            "discovery.k8s.io",
            "endpointslices",
            "",
            "",
        ),
        (
            &bootstrap,
            "create",
            "certificates.k8s.io",
            "certificatesigningrequests",
            "",
            "",
        ),
        (
            &bootstrap,
            "watch",
            "certificates.k8s.io",
            "certificatesigningrequests",
            "",
            "",
        ),
        (&apiserver, "get", "", "nodes", "proxy", "n1"),
        (&dns, "watch", "", "services", "", ""),
        (&dns, "list", "", "services", "", ""),
        (&dns, "watch", "discovery.k8s.io", "endpointslices", "", ""),
        (&dns, "list", "discovery.k8s.io", "endpointslices", "", ""),
        (&apiserver, "get", "", "nodes", "log", "n1"),
        // The LoadBalancer speakers' Leases, as the proxy and as a joined node's proxy.
        (
            &proxy,
            "watch",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
        ),
        (
            &proxy,
            "patch",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
        ),
        (
            &proxy,
            "create",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
        ),
        (
            &node_proxy,
            "watch",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
        ),
        (
            &node_proxy,
            "patch",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
        ),
        (
            &node_proxy,
            "delete",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
        ),
    ];
    // The speakers' grant is kube-system's Leases only.
    let elsewhere =
        Attributes::on_resource("patch", "coordination.k8s.io", "leases", "", "default", "x");
    assert!(index.allows(&proxy, &elsewhere).is_none());
    for (who, verb, group, resource, sub, ns) in calls {
        let a = Attributes::on_resource(verb, group, resource, sub, ns, "x");
        assert!(
            index.allows(who, &a).is_some(),
            "{} {verb} {group}/{resource}/{sub} in {ns:?}",
            who.name
        );
    }
    // Leader election (--leader-elect): each candidate creates its Lease in kube-system, then
    // reads and renews (or releases) it by name; a create carries no name.
    let leases = [
        (&kcm, "kube-controller-manager"),
        (&scheduler, "kube-scheduler"),
        (&ingress, "keelson-ingress"),
    ];
    for (who, lease) in leases {
        for (verb, name) in [("create", ""), ("get", lease), ("update", lease)] {
            let a = Attributes::on_resource(
                verb,
                "coordination.k8s.io",
                "leases",
                "",
                "kube-system",
                name,
            );
            assert!(
                index.allows(who, &a).is_some(),
                "{} {verb} lease {lease}",
                who.name
            );
        }
    }
    // Nor more than that: the scheduler and the proxy read no Secrets, a bootstrap token no pods.
    let secrets = Attributes {
        verb: "get",
        resource: Some(ResourceAttributes {
            group: "",
            resource: "secrets",
            subresource: "",
            namespace: "d",
            name: "x".into(),
            field_selector: std::borrow::Cow::Borrowed(""),
        }),
        path: "",
    };
    for who in [&scheduler, &proxy, &dns, &bootstrap, &node_proxy] {
        assert!(index.allows(who, &secrets).is_none(), "{}", who.name);
    }
}

/// NetworkPolicies: written by namespace admins and editors, read by viewers, and read with
/// every pod and namespace by the enforcer as the proxy's identity; a node's own identity keeps
/// reading only its own pods.
#[test]
fn network_policies_are_written_by_editors_and_read_by_the_enforcer() {
    use crate::attributes::Attributes;
    use crate::node::{self, Graph};
    use crate::rbac::Index;
    use crate::User;
    let objs = objects();
    let index = Index::build(objs.iter().map(|(k, v)| (*k, v)));
    let role_allows = |role: &str, verb: &str| {
        let rules = cluster_roles()
            .into_iter()
            .find(|(n, _)| n == role)
            .map(|(_, r)| r)
            .unwrap();
        let a = Attributes::on_resource(verb, "networking.k8s.io", "networkpolicies", "", "d", "");
        rules.iter().any(|r| r.allows(&a))
    };
    for verb in [
        "create",
        "delete",
        "deletecollection",
        "patch",
        "update",
        "get",
        "list",
        "watch",
    ] {
        assert!(
            role_allows("admin", verb) && role_allows("edit", verb),
            "{verb}"
        );
    }
    for verb in ["get", "list", "watch"] {
        assert!(role_allows("view", verb), "{verb}");
    }
    for verb in ["create", "delete", "patch", "update"] {
        assert!(!role_allows("view", verb), "{verb}");
    }

    let who = |name: &str, groups: &[&str]| User {
        name: name.into(),
        uid: String::new(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    };
    let proxy = who("system:kube-proxy", &["system:authenticated"]);
    let node_user = who("system:node:n1", &["system:nodes", "system:authenticated"]);
    let graph = Graph::default();
    let node_rules = roles::node();
    // Authorizer::decide with --authorization-mode=Node,RBAC: the Node authorizer first (for
    // nodes only), RBAC when it has no opinion.
    let decide = |u: &User, a: &Attributes| match node::authorize(&graph, &node_rules, u, a) {
        Ok(_) => true,
        Err(_) => index.allows(u, a).is_some(),
    };
    let reads = [
        ("", "pods"),
        ("", "namespaces"),
        ("networking.k8s.io", "networkpolicies"),
    ];
    for (group, resource) in reads {
        for verb in ["list", "watch"] {
            // All namespaces, no spec.nodeName field selector.
            let a = Attributes::on_resource(verb, group, resource, "", "", "");
            assert!(decide(&proxy, &a), "{verb} {resource}");
        }
    }
    for group in ["", "events.k8s.io"] {
        let a = Attributes::on_resource("create", group, "events", "", "d", "");
        assert!(decide(&proxy, &a), "create {group} events");
    }
    let write = Attributes::on_resource(
        "create",
        "networking.k8s.io",
        "networkpolicies",
        "",
        "d",
        "",
    );
    assert!(!decide(&proxy, &write));
    let all_pods = Attributes::on_resource("list", "", "pods", "", "", "");
    assert!(
        decide(&node_user, &all_pods),
        "keelson-netpol on a joined node"
    );
    let binding = stored("ClusterRoleBinding", "keelson:network-policy");
    assert_eq!(binding["roleRef"]["name"], "keelson:network-policy");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "system:kube-proxy"},
               {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:nodes"}])
    );
}

/// `kubectl top` for whoever may view a namespace: upstream's aggregated metrics reader is part
/// of view, edit and admin (read only: metrics.k8s.io has no writes).
#[test]
fn viewers_read_resource_metrics() {
    use crate::attributes::Attributes;
    let rules_of = |role: &str| {
        cluster_roles()
            .into_iter()
            .find(|(n, _)| n == role)
            .map(|(_, r)| r)
            .unwrap()
    };
    for role in ["view", "edit", "admin", "system:aggregated-metrics-reader"] {
        let rules = rules_of(role);
        for (verb, resource, ns) in [
            ("list", "pods", "d"),
            ("get", "nodes", ""),
            ("watch", "pods", "d"),
        ] {
            let a = Attributes::on_resource(verb, "metrics.k8s.io", resource, "", ns, "");
            assert!(
                rules.iter().any(|r| r.allows(&a)),
                "{role} {verb} {resource}"
            );
        }
    }
    let basic = rules_of("system:basic-user");
    let a = Attributes::on_resource("list", "metrics.k8s.io", "pods", "", "d", "");
    assert!(!basic.iter().any(|r| r.allows(&a)));
}

/// pods/ephemeralcontainers (`kubectl debug`): upstream deliberately leaves it out of admin,
/// edit and view (an ephemeral container bypasses admission written before it existed), so
/// only cluster-admin or a role granting it may write it; a node never may.
#[test]
fn ephemeral_containers_are_granted_by_no_namespace_role_nor_to_nodes() {
    use crate::attributes::Attributes;
    use crate::node::{self, Graph};
    use crate::User;
    let rules_of = |role: &str| {
        cluster_roles()
            .into_iter()
            .find(|(n, _)| n == role)
            .map(|(_, r)| r)
            .unwrap()
    };
    let write = |verb| Attributes::on_resource(verb, "", "pods", "ephemeralcontainers", "d", "p");
    for role in ["view", "edit", "admin"] {
        let rules = rules_of(role);
        for verb in ["patch", "update"] {
            assert!(
                !rules.iter().any(|r| r.allows(&write(verb))),
                "{role} {verb}"
            );
        }
    }
    let admin = rules_of("cluster-admin");
    assert!(admin.iter().any(|r| r.allows(&write("patch"))));
    let n1 = User {
        name: "system:node:n1".into(),
        uid: String::new(),
        groups: vec!["system:nodes".into(), "system:authenticated".into()],
    };
    let mut graph = Graph::default();
    let pod = json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"nodeName": "n1"}});
    graph.set_pod("/core/pods/d/p", Some(&pod));
    for verb in ["patch", "update"] {
        assert!(node::authorize(&graph, &roles::node(), &n1, &write(verb)).is_err());
    }
}
