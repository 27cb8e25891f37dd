use super::apply_defaults;
use serde_json::{json, Value};

fn defaulted(kind: &str, mut obj: Value) -> Value {
    apply_defaults(kind, &mut obj);
    let once = obj.clone();
    apply_defaults(kind, &mut obj);
    assert_eq!(obj, once, "defaulting {kind} twice changed it");
    obj
}

#[test]
fn pod_gets_spec_and_container_defaults() {
    let pod = defaulted(
        "Pod",
        json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
             "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}},
             "livenessProbe": {"httpGet": {"port": 80}},
             "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]},
            {"name": "side", "image": "busybox"}]}}),
    );
    let spec = &pod["spec"];
    assert_eq!(spec["restartPolicy"], "Always");
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["schedulerName"], "default-scheduler");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    assert_eq!(spec["securityContext"], json!({}));
    assert_eq!(spec["enableServiceLinks"], true);
    assert!(
        spec.get("priority").is_none(),
        "the Priority admission sets it"
    );
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    let web = &spec["containers"][0];
    assert_eq!(web["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(web["terminationMessagePolicy"], "File");
    assert_eq!(web["imagePullPolicy"], "IfNotPresent");
    assert_eq!(web["ports"][0]["protocol"], "TCP");
    assert_eq!(
        web["resources"]["requests"],
        json!({"cpu": "500m", "memory": "64Mi"})
    );
    let probe = &web["livenessProbe"];
    assert_eq!(
        (&probe["timeoutSeconds"], &probe["periodSeconds"]),
        (&json!(1), &json!(10))
    );
    assert_eq!(
        (&probe["successThreshold"], &probe["failureThreshold"]),
        (&json!(1), &json!(3))
    );
    assert_eq!(probe["httpGet"]["scheme"], "HTTP");
    assert_eq!(probe["httpGet"]["path"], "/");
    assert_eq!(web["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    let side = &spec["containers"][1];
    assert_eq!(side["imagePullPolicy"], "Always");
    assert_eq!(side["resources"], json!({}));
    assert_eq!(pod["status"]["phase"], "Pending");
    assert_eq!(pod["status"]["qosClass"], "Burstable");
}

#[test]
fn pod_keeps_what_the_client_set() {
    let pod = defaulted(
        "Pod",
        json!({"spec": {"restartPolicy": "Never", "serviceAccountName": "robot",
            "containers": [{"name": "c", "image": "x:latest", "imagePullPolicy": "Never"}]}}),
    );
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    assert_eq!(pod["spec"]["serviceAccountName"], "robot");
    assert_eq!(pod["spec"]["serviceAccount"], "robot");
    assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Never");
    assert_eq!(pod["status"]["qosClass"], "BestEffort");
}

#[test]
fn image_pull_policy_follows_the_tag() {
    for (image, policy) in [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("localhost:5000/nginx", "Always"),
        ("localhost:5000/nginx:1.2", "IfNotPresent"),
        ("nginx@sha256:abcd", "IfNotPresent"),
    ] {
        let pod = defaulted(
            "Pod",
            json!({"spec": {"containers": [{"name": "c", "image": image}]}}),
        );
        assert_eq!(
            pod["spec"]["containers"][0]["imagePullPolicy"], policy,
            "{image}"
        );
    }
}

#[test]
fn guaranteed_pod_and_volume_defaults() {
    let pod = defaulted(
        "Pod",
        json!({"spec": {"hostNetwork": true,
            "containers": [{"name": "c", "image": "x:1", "ports": [{"containerPort": 8080}],
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
            "volumes": [{"name": "scratch"}, {"name": "cfg", "configMap": {"name": "c"}}]}}),
    );
    assert_eq!(pod["status"]["qosClass"], "Guaranteed");
    assert_eq!(pod["spec"]["containers"][0]["ports"][0]["hostPort"], 8080);
    assert_eq!(pod["spec"]["volumes"][0]["emptyDir"], json!({}));
    assert_eq!(pod["spec"]["volumes"][1]["configMap"]["defaultMode"], 420);
}

#[test]
fn deployment_defaults_include_template() {
    let d = defaulted(
        "Deployment",
        json!({"spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                    "resources": {"limits": {"cpu": "1"}}}]}}}}),
    );
    let spec = &d["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["containers"][0]["terminationMessagePolicy"], "File");
    // Templates get no admission defaults and no requests copied from limits.
    assert!(pod.get("priority").is_none());
    assert!(pod.get("serviceAccountName").is_none());
    assert!(pod["containers"][0]["resources"].get("requests").is_none());
    assert!(d.get("status").is_none());
}

#[test]
fn recreate_strategy_gets_no_rolling_update() {
    let d = defaulted(
        "Deployment",
        json!({"spec": {"replicas": 3, "strategy": {"type": "Recreate"}}}),
    );
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn replica_set_defaults() {
    let rs = defaulted(
        "ReplicaSet",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
    );
    assert_eq!(rs["spec"]["replicas"], 1);
    assert_eq!(rs["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
}

#[test]
fn service_defaults() {
    let svc = defaulted(
        "Service",
        json!({"spec": {"selector": {"app": "web"}, "clusterIP": "10.96.0.10",
            "ports": [{"port": 80}, {"name": "x", "port": 81, "targetPort": "http", "protocol": "UDP"}]}}),
    );
    let spec = &svc["spec"];
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(
        spec["ports"][0],
        json!({"port": 80, "protocol": "TCP", "targetPort": 80})
    );
    assert_eq!(spec["ports"][1]["targetPort"], "http");
    assert_eq!(spec["ports"][1]["protocol"], "UDP");
    assert_eq!(spec["clusterIPs"], json!(["10.96.0.10"]));
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");
    assert!(spec.get("externalTrafficPolicy").is_none());
}

#[test]
fn node_port_and_external_name_services() {
    let svc = defaulted(
        "Service",
        json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
    );
    assert_eq!(svc["spec"]["externalTrafficPolicy"], "Cluster");
    let svc = defaulted(
        "Service",
        json!({"spec": {"type": "LoadBalancer", "clusterIPs": ["fd00::5"], "ports": [{"port": 80}]}}),
    );
    assert_eq!(svc["spec"]["clusterIP"], "fd00::5");
    assert_eq!(svc["spec"]["ipFamilies"], json!(["IPv6"]));
    assert_eq!(svc["spec"]["allocateLoadBalancerNodePorts"], true);
    let svc = defaulted(
        "Service",
        json!({"spec": {"type": "ExternalName", "externalName": "db.example.com"}}),
    );
    assert!(svc["spec"].get("internalTrafficPolicy").is_none());
    assert!(svc["spec"].get("ipFamilies").is_none());
}

#[test]
fn namespace_secret_and_small_kinds() {
    let ns = defaulted("Namespace", json!({"metadata": {"name": "team-a"}}));
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team-a"
    );
    let s = defaulted("Secret", json!({"metadata": {"name": "s"}}));
    assert_eq!(s["type"], "Opaque");
    let s = defaulted("Secret", json!({"type": "kubernetes.io/tls"}));
    assert_eq!(s["type"], "kubernetes.io/tls");
    let es = defaulted(
        "EndpointSlice",
        json!({"addressType": "IPv4", "ports": [{"port": 80}]}),
    );
    assert_eq!(es["ports"][0]["protocol"], "TCP");
    let ep = defaulted("Endpoints", json!({"subsets": [{"ports": [{"port": 80}]}]}));
    assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], "TCP");
    let node = defaulted("Node", json!({"status": {"capacity": {"cpu": "2"}}}));
    assert_eq!(node["status"]["allocatable"], json!({"cpu": "2"}));
    let lease = json!({"spec": {"holderIdentity": "a"}});
    assert_eq!(defaulted("Lease", lease.clone()), lease);
    let ing = json!({"spec": {"rules": []}});
    assert_eq!(defaulted("IngressClass", ing.clone()), ing);
}

#[test]
fn network_policy_gets_protocols_and_policy_types() {
    let np = defaulted(
        "NetworkPolicy",
        json!({"spec": {"ingress": [{"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}]}}),
    );
    assert_eq!(np["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(np["spec"]["ingress"][0]["ports"][1]["protocol"], "UDP");
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(np["spec"]["podSelector"], json!({}));
    let both = defaulted(
        "NetworkPolicy",
        json!({"spec": {"podSelector": {"matchLabels": {"a": "b"}}, "egress": [{"ports": [{}]}]}}),
    );
    assert_eq!(both["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(both["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(both["spec"]["podSelector"]["matchLabels"]["a"], "b");
    let egress_only = json!({"spec": {"podSelector": {}, "policyTypes": ["Egress"]}});
    assert_eq!(defaulted("NetworkPolicy", egress_only.clone()), egress_only);
}

#[test]
fn garbage_is_left_alone() {
    assert_eq!(defaulted("Pod", json!("x")), json!("x"));
    let odd = json!({"spec": {"containers": "nope"}});
    let out = defaulted("Pod", odd);
    assert_eq!(out["spec"]["containers"], "nope");
}
