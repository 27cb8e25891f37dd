//! From Kubernetes objects to the proxy model: endpoint selection and the features that
//! depend on it, checked on the golden corpus.

mod corpus;

use std::net::Ipv4Addr;

use keelson_proxy::model::{Protocol, ServicePort, ServicePortName};

fn port<'a>(m: &'a keelson_proxy::model::ProxyModel, name: &str, port: &str) -> &'a ServicePort {
    m.services
        .values()
        .find(|s| s.name.name == name && s.name.port_name == port)
        .unwrap_or_else(|| panic!("no service port {name}:{port}"))
}

fn addrs(eps: Vec<&keelson_proxy::model::Endpoint>) -> Vec<String> {
    eps.iter().map(|e| e.addr()).collect()
}

#[test]
fn named_target_port_resolves_per_slice() {
    let m = corpus::model();
    let web = port(&m, "web", "http");
    assert_eq!(
        addrs(web.cluster_endpoints()),
        ["10.244.1.2:8080", "10.244.2.4:8081"]
    );
    let metrics = port(&m, "web", "metrics");
    assert_eq!(
        addrs(metrics.cluster_endpoints()),
        ["10.244.1.2:9100", "10.244.2.4:9100"]
    );
}

#[test]
fn only_ready_endpoints_then_serving_terminating() {
    let m = corpus::model();
    // 10.244.2.3 is not ready: left out while ready ones exist.
    assert!(!addrs(port(&m, "web", "http").cluster_endpoints())
        .contains(&"10.244.2.3:8080".to_string()));
    // No ready endpoint: the serving-terminating one is used, the unready one never.
    let draining = port(&m, "draining", "");
    assert_eq!(addrs(draining.cluster_endpoints()), ["10.244.1.9:8080"]);
    assert!(draining.has_endpoints());
}

#[test]
fn traffic_policies_and_reject() {
    let m = corpus::model();
    let local = port(&m, "local", "");
    assert_eq!(addrs(local.internal_endpoints()), ["10.244.1.7:8080"]);
    assert_eq!(addrs(local.external_endpoints()), ["10.244.1.7:8080"]);
    assert_eq!(local.cluster_endpoints().len(), 2);
    let elsewhere = port(&m, "elsewhere", "");
    assert!(elsewhere.internal_endpoints().is_empty() && elsewhere.has_endpoints());
    let empty = port(&m, "empty", "");
    assert!(!empty.has_endpoints());
    assert_eq!(empty.node_port, Some(30100));
}

#[test]
fn protocols_affinity_external_ips_and_skips() {
    let m = corpus::model();
    let udp = m
        .services
        .keys()
        .find(|k| k.name == "dns" && k.protocol == Protocol::Udp);
    let tcp = m
        .services
        .keys()
        .find(|k| k.name == "dns" && k.protocol == Protocol::Tcp);
    assert!(udp.is_some() && tcp.is_some());
    assert_eq!(port(&m, "sticky", "").affinity_timeout, Some(600));
    assert_eq!(port(&m, "web", "http").affinity_timeout, None);
    assert_eq!(
        port(&m, "ext", "").external_ips,
        vec![Ipv4Addr::new(192, 168, 99, 10)]
    );
    assert!(!m
        .services
        .keys()
        .any(|k: &ServicePortName| k.name == "headless" || k.name == "alias"));
    assert_eq!(m.node_ips, vec![Ipv4Addr::new(192, 168, 50, 10)]);
}

#[test]
fn affinity_without_timeout_uses_the_api_default() {
    let mut services = corpus::services();
    let sticky = services
        .iter_mut()
        .find(|s| s.metadata.name.as_deref() == Some("sticky"))
        .expect("sticky");
    if let Some(spec) = sticky.spec.as_mut() {
        spec.session_affinity_config = None;
    }
    let m = corpus::model_of(&services, &corpus::slices());
    assert_eq!(port(&m, "sticky", "").affinity_timeout, Some(10800));
}

#[test]
fn changed_services_lists_only_what_differs() {
    let a = corpus::model();
    assert!(a.changed_services(&a.clone()).is_empty());
    let mut b = a.clone();
    let removed = b.services.keys().next().cloned().expect("a service");
    b.services.remove(&removed);
    assert_eq!(a.changed_services(&b), vec![removed]);
}

#[test]
fn load_balancer_ingress_ips_are_served_like_external_ips() {
    let mut services = corpus::services();
    let ext = services
        .iter_mut()
        .find(|s| s.metadata.name.as_deref() == Some("ext"))
        .expect("ext");
    *ext = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "ext", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.40", "externalIPs": ["192.168.99.10"],
                 "ports": [{"port": 443, "targetPort": 8443, "nodePort": 30443}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.168.99.20"}, {"hostname": "lb.example.invalid"}]}}
    }))
    .expect("service");
    let m = corpus::model_of(&services, &corpus::slices());
    let ext = port(&m, "ext", "");
    assert_eq!(
        ext.external_ips,
        vec![
            Ipv4Addr::new(192, 168, 99, 10),
            Ipv4Addr::new(192, 168, 99, 20)
        ]
    );
    assert_eq!(ext.node_port, Some(30443));
}

/// Conditions left unset in a slice read as the API documents (and kube-proxy reads them):
/// ready and serving true, terminating false.
#[test]
fn unset_conditions_read_as_the_api_says() {
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}
    }))
    .expect("service");
    let slice = |endpoints: serde_json::Value| -> EndpointSlice {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
            "endpoints": endpoints
        }))
        .expect("slice")
    };
    let selected = |s: &EndpointSlice| {
        let m = keelson_proxy::from_k8s::build_model("node", None, &[&svc], &[s]);
        addrs(port(&m, "web", "").cluster_endpoints())
    };
    // No conditions at all: ready. A terminating endpoint with serving unset is serving, so it
    // answers once no ready one is left; an unready, not terminating one never does.
    let terminating = json_ep(
        "10.244.1.2",
        serde_json::json!({"ready": false, "terminating": true}),
    );
    let unready = json_ep("10.244.1.3", serde_json::json!({"ready": false}));
    let plain = serde_json::json!({"addresses": ["10.244.1.4"]});
    let all = slice(serde_json::json!([terminating, unready, plain]));
    assert_eq!(selected(&all), ["10.244.1.4:8080"]);
    let draining = slice(serde_json::json!([terminating, unready]));
    assert_eq!(selected(&draining), ["10.244.1.2:8080"]);
}

fn json_ep(ip: &str, conditions: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"addresses": [ip], "conditions": conditions})
}
