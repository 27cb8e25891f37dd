use super::{assert_cells, cell, meta, row, values};
use crate::tables::columns;
use serde_json::{json, Value};

#[test]
fn deployment_and_replica_set_rows() {
    let d = json!({"metadata": meta("web"), "spec": {"replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27"},
            {"name": "log", "image": "busybox"}]}}},
        "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
    let got = values("Deployment", &d);
    assert_eq!(
        got,
        vec![
            json!("web"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("5m"),
            json!("web,log"),
            json!("nginx:1.27,busybox"),
            json!("app=web")
        ]
    );
    let headers: Vec<String> = row("Deployment", &d).into_iter().map(|(c, _)| c).collect();
    assert_eq!(
        headers,
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let fresh = json!({"metadata": meta("web"), "spec": {"replicas": 3}});
    assert_eq!(cell("Deployment", &fresh, "READY"), "0/3");
    let rs = json!({"metadata": meta("web-5d9c"), "spec": {"replicas": 3,
        "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d9c"}}},
        "status": {"replicas": 3, "readyReplicas": 1}});
    let got: Vec<Value> = row("ReplicaSet", &rs)
        .into_iter()
        .take(5)
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        got,
        vec![json!("web-5d9c"), json!(3), json!(3), json!(1), json!("5m")]
    );
    assert_eq!(
        cell("ReplicaSet", &rs, "SELECTOR"),
        "app=web,pod-template-hash=5d9c"
    );
}

fn svc(spec: Value, status: Value) -> Value {
    json!({"metadata": meta("web"), "spec": spec, "status": status})
}

#[test]
fn service_rows() {
    let cluster = svc(
        json!({"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
        "selector": {"app": "web"}, "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}),
        json!({}),
    );
    let got = values("Service", &cluster);
    assert_eq!(
        got,
        vec![
            json!("web"),
            json!("ClusterIP"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("80/TCP,53/UDP"),
            json!("5m"),
            json!("app=web")
        ]
    );
    let node_port = svc(
        json!({"type": "NodePort", "clusterIP": "10.96.0.11",
        "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]}),
        json!({}),
    );
    let want = [("PORT(S)", "80:30080/TCP"), ("SELECTOR", "<none>")];
    assert_cells("Service", &node_port, &want);
    let lb = svc(
        json!({"type": "LoadBalancer", "clusterIP": "10.96.0.12", "ports": []}),
        json!({}),
    );
    let want = [("EXTERNAL-IP", "<pending>"), ("PORT(S)", "<none>")];
    assert_cells("Service", &lb, &want);
    let lb_ready = svc(
        json!({"type": "LoadBalancer", "externalIPs": ["192.0.2.9"]}),
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"hostname": "lb.example.test"}]}}),
    );
    assert_eq!(
        cell("Service", &lb_ready, "EXTERNAL-IP"),
        "192.0.2.1,lb.example.test,192.0.2.9"
    );
    let external = svc(
        json!({"type": "ExternalName", "externalName": "db.example.test"}),
        json!({}),
    );
    let want = [("EXTERNAL-IP", "db.example.test"), ("CLUSTER-IP", "<none>")];
    assert_cells("Service", &external, &want);
    let headless = svc(
        json!({"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"]}),
        json!({}),
    );
    assert_eq!(cell("Service", &headless, "CLUSTER-IP"), "None");
}

#[test]
fn endpoint_rows() {
    let slice = json!({"metadata": meta("web-abcde"), "addressType": "IPv4",
        "ports": [{"name": "http", "port": 80}, {"name": "any"}],
        "endpoints": [{"addresses": ["10.244.0.5"]}, {"addresses": ["10.244.0.6"]},
            {"addresses": ["10.244.1.7"]}, {"addresses": ["10.244.1.8"]}, {"addresses": ["10.244.2.9"]}]});
    let got = values("EndpointSlice", &slice);
    assert_eq!(
        got,
        vec![
            json!("web-abcde"),
            json!("IPv4"),
            json!("80,any"),
            json!("10.244.0.5,10.244.0.6,10.244.1.7 + 2 more..."),
            json!("5m")
        ]
    );
    let empty = json!({"metadata": meta("web-x"), "addressType": "IPv4", "endpoints": []});
    let want = [("ENDPOINTS", "<unset>"), ("PORTS", "<unset>")];
    assert_cells("EndpointSlice", &empty, &want);
    let eps = json!({"metadata": meta("web"), "subsets": [{"addresses": [{"ip": "10.244.0.5"}, {"ip": "10.244.0.6"}],
        "notReadyAddresses": [{"ip": "10.244.0.7"}], "ports": [{"port": 80}]}]});
    assert_eq!(
        cell("Endpoints", &eps, "ENDPOINTS"),
        "10.244.0.5:80,10.244.0.6:80"
    );
    let none = json!({"metadata": meta("web")});
    assert_eq!(cell("Endpoints", &none, "ENDPOINTS"), "<none>");
}

#[test]
fn node_rows() {
    let node = json!({"metadata": {"name": "node-1", "creationTimestamp": "2026-11-30T09:00:00Z",
            "labels": {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": ""}},
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": "node-1"}],
            "nodeInfo": {"kubeletVersion": "v1.32.0-keelson", "osImage": "Debian GNU/Linux 13 (trixie)",
                "kernelVersion": "6.12.0", "containerRuntimeVersion": "containerd://1.6.20"}}});
    let got = values("Node", &node);
    assert_eq!(
        got,
        vec![
            json!("node-1"),
            json!("Ready,SchedulingDisabled"),
            json!("control-plane,worker"),
            json!("2d3h"),
            json!("v1.32.0-keelson"),
            json!("10.0.0.2"),
            json!("<none>"),
            json!("Debian GNU/Linux 13 (trixie)"),
            json!("6.12.0"),
            json!("containerd://1.6.20")
        ]
    );
    let bare = json!({"metadata": {"name": "n2"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
    assert_eq!(cell("Node", &bare, "STATUS"), "NotReady");
    assert_eq!(cell("Node", &bare, "ROLES"), "<none>");
    assert_eq!(cell("Node", &bare, "AGE"), "<unknown>");
    assert_eq!(cell("Node", &bare, "OS-IMAGE"), "<unknown>");
    let new = json!({"metadata": {"name": "n3"}});
    assert_eq!(cell("Node", &new, "STATUS"), "Unknown");
}

#[test]
fn core_kind_rows() {
    let ns = json!({"metadata": meta("team-a"), "status": {"phase": "Terminating"}});
    assert_eq!(
        values("Namespace", &ns),
        vec![json!("team-a"), json!("Terminating"), json!("5m")]
    );
    let cm =
        json!({"metadata": meta("cfg"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
    assert_eq!(cell("ConfigMap", &cm, "DATA"), 3);
    let secret = json!({"metadata": meta("tls"), "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
    assert_eq!(
        values("Secret", &secret),
        vec![
            json!("tls"),
            json!("kubernetes.io/tls"),
            json!(2),
            json!("5m")
        ]
    );
    let sa = json!({"metadata": meta("default")});
    assert_eq!(cell("ServiceAccount", &sa, "SECRETS"), 0);
    let lease = json!({"metadata": meta("node-1"), "spec": {"holderIdentity": "node-1"}});
    assert_eq!(cell("Lease", &lease, "HOLDER"), "node-1");
}

#[test]
fn event_rows() {
    let ev = json!({"metadata": meta("web-0.181"), "type": "Warning", "reason": "BackOff",
        "message": "Back-off restarting failed container web\n",
        "involvedObject": {"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{web}"},
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-12-02T11:50:00Z", "lastTimestamp": "2026-12-02T11:59:00Z", "count": 7});
    let got = row("Event", &ev);
    let shown: Vec<(String, Value)> = got
        .into_iter()
        .filter(|(c, _)| {
            columns("Event")
                .iter()
                .any(|col| col.name.to_uppercase() == *c && col.priority == 0)
        })
        .collect();
    let headers: Vec<&str> = shown.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(
        headers,
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    let values: Vec<Value> = shown.into_iter().map(|(_, v)| v).collect();
    assert_eq!(
        values,
        vec![
            json!("60s"),
            json!("Warning"),
            json!("BackOff"),
            json!("pod/web-0"),
            json!("Back-off restarting failed container web")
        ]
    );
    assert_eq!(cell("Event", &ev, "SOURCE"), "kubelet, node-1");
    assert_eq!(cell("Event", &ev, "FIRST SEEN"), "10m");
    assert_eq!(cell("Event", &ev, "COUNT"), 7);
    let new_api = json!({"metadata": meta("n.1"), "eventTime": "2026-12-02T11:59:58.123456Z",
        "reportingComponent": "keelson-scheduler", "involvedObject": {"kind": "Node"},
        "series": {"count": 4, "lastObservedTime": "2026-12-02T11:59:59.000000Z"}});
    assert_eq!(cell("Event", &new_api, "LAST SEEN"), "1s");
    assert_eq!(cell("Event", &new_api, "FIRST SEEN"), "1s");
    assert_eq!(cell("Event", &new_api, "COUNT"), 4);
    assert_eq!(cell("Event", &new_api, "OBJECT"), "node");
    assert_eq!(cell("Event", &new_api, "SOURCE"), "keelson-scheduler");
}

#[test]
fn ingress_rows() {
    let ing = json!({"metadata": meta("web"), "spec": {"ingressClassName": "keelson",
        "rules": [{"host": "a.test"}, {"host": "b.test"}, {}, {"host": "c.test"}, {"host": "d.test"}],
        "tls": [{"hosts": ["a.test"]}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}]}}});
    let got = values("Ingress", &ing);
    assert_eq!(
        got,
        vec![
            json!("web"),
            json!("keelson"),
            json!("a.test,b.test,c.test + 2 more..."),
            json!("10.0.0.2"),
            json!("80, 443"),
            json!("5m")
        ]
    );
    let bare = json!({"metadata": meta("web"), "spec": {"defaultBackend": {}}});
    assert_eq!(
        values("Ingress", &bare),
        vec![
            json!("web"),
            json!("<none>"),
            json!("*"),
            json!(""),
            json!("80"),
            json!("5m")
        ]
    );
    let class = json!({"metadata": meta("keelson"), "spec": {"controller": "keelson.dev/ingress",
        "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "p"}}});
    let want = [
        ("CONTROLLER", "keelson.dev/ingress"),
        ("PARAMETERS", "IngressParameters.k8s.example.com/p"),
    ];
    assert_cells("IngressClass", &class, &want);
    let plain = json!({"metadata": meta("x"), "spec": {"controller": "a.b/c"}});
    assert_eq!(cell("IngressClass", &plain, "PARAMETERS"), "<none>");
}

#[test]
fn network_policy_rows() {
    let np = |selector: Value| json!({"metadata": meta("db"), "spec": {"podSelector": selector}});
    let headers: Vec<String> = row("NetworkPolicy", &np(json!({})))
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(headers, ["NAME", "POD-SELECTOR", "AGE"]);
    // Upstream's FormatLabelSelector: requirements sorted by key, sets in parentheses.
    let mixed = np(json!({"matchLabels": {"tier": "db", "app": "web"},
        "matchExpressions": [{"key": "env", "operator": "In", "values": ["b", "a"]},
            {"key": "zone", "operator": "DoesNotExist"}]}));
    assert_eq!(
        values("NetworkPolicy", &mixed),
        vec![
            json!("db"),
            json!("app=web,env in (a,b),tier=db,!zone"),
            json!("5m")
        ]
    );
    assert_eq!(
        cell("NetworkPolicy", &np(json!({})), "POD-SELECTOR"),
        "<none>"
    );
    let absent = json!({"metadata": meta("db"), "spec": {}});
    assert_eq!(cell("NetworkPolicy", &absent, "POD-SELECTOR"), "<none>");
}

#[test]
fn daemon_set_and_csr_rows() {
    let ds = json!({"metadata": meta("agent"), "spec": {
        "selector": {"matchLabels": {"app": "agent"}},
        "template": {"spec": {"nodeSelector": {"b": "2", "a": "1"},
            "containers": [{"name": "agent", "image": "keelson/agent"}]}}},
        "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
            "updatedNumberScheduled": 1, "numberAvailable": 2}});
    let headers: Vec<String> = row("DaemonSet", &ds).into_iter().map(|(c, _)| c).collect();
    assert_eq!(
        headers,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE SELECTOR",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert_eq!(
        values("DaemonSet", &ds),
        vec![
            json!("agent"),
            json!(3),
            json!(3),
            json!(2),
            json!(1),
            json!(2),
            json!("a=1,b=2"),
            json!("5m"),
            json!("agent"),
            json!("keelson/agent"),
            json!("app=agent")
        ]
    );
    let bare = json!({"metadata": meta("agent"), "spec": {}});
    assert_eq!(cell("DaemonSet", &bare, "NODE SELECTOR"), "<none>");

    let csr = json!({"metadata": meta("node-csr-1"), "spec": {
        "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
        "username": "system:bootstrap:abcdef", "expirationSeconds": 3600},
        "status": {"conditions": [{"type": "Approved", "status": "True"}],
            "certificate": "QUJD"}});
    assert_eq!(
        values("CertificateSigningRequest", &csr),
        vec![
            json!("node-csr-1"),
            json!("5m"),
            json!("kubernetes.io/kube-apiserver-client-kubelet"),
            json!("system:bootstrap:abcdef"),
            json!("60m"),
            json!("Approved,Issued")
        ]
    );
    let pending = json!({"metadata": meta("x"), "spec": {}});
    let want = [("CONDITION", "Pending"), ("REQUESTEDDURATION", "<none>")];
    assert_cells("CertificateSigningRequest", &pending, &want);
    let denied = json!({"metadata": meta("x"), "status": {"conditions": [
        {"type": "Denied"}, {"type": "Failed"}]}});
    assert_eq!(
        cell("CertificateSigningRequest", &denied, "CONDITION"),
        "Denied,Failed"
    );
}

#[test]
fn horizontal_pod_autoscaler_rows() {
    let hpa = |status: Value| {
        json!({"metadata": meta("web"), "spec": {"scaleTargetRef": {"kind": "Deployment",
            "name": "web"}, "minReplicas": 1, "maxReplicas": 5, "metrics": [{"type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]},
            "status": status})
    };
    let headers: Vec<String> = row("HorizontalPodAutoscaler", &hpa(json!({})))
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(
        headers,
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ]
    );
    assert_eq!(
        values("HorizontalPodAutoscaler", &hpa(json!({}))),
        vec![
            json!("web"),
            json!("Deployment/web"),
            json!("cpu: <unknown>/50%"),
            json!("1"),
            json!(5),
            json!(0),
            json!("5m")
        ]
    );
    let measured = hpa(
        json!({"currentReplicas": 2, "currentMetrics": [{"type": "Resource",
        "resource": {"name": "cpu", "current": {"averageUtilization": 20, "averageValue": "100m"}}}]}),
    );
    assert_eq!(
        cell("HorizontalPodAutoscaler", &measured, "TARGETS"),
        "cpu: 20%/50%"
    );
    assert_eq!(cell("HorizontalPodAutoscaler", &measured, "REPLICAS"), 2);
}
