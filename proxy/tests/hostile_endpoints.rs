//! EndpointSlices the API server should never have accepted: addresses that are no pod's
//! (the node's loopback, the metadata service) and slices past the endpoint limit. The proxy
//! programs none of them; the rest of the Service keeps working.

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keelson_proxy::from_k8s::{build_model, is_endpoint_address, slice_info};
use serde_json::{json, Value};

fn service() -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 80, "protocol": "TCP"}]}
    }))
    .unwrap()
}

fn slice(name: &str, addresses: &[Value]) -> EndpointSlice {
    let endpoints: Vec<Value> = addresses
        .iter()
        .map(|a| json!({"addresses": [a], "conditions": {"ready": true}}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    }))
    .unwrap()
}

fn programmed(slices: &[&EndpointSlice]) -> Vec<String> {
    let svc = service();
    let model = build_model("node-a", None, &[&svc], slices);
    let port = model.services.values().next().expect("the web port");
    port.endpoints.iter().map(|e| e.addr()).collect()
}

#[test]
fn node_local_and_special_addresses_are_not_programmed() {
    let hostile = [
        "127.0.0.1",
        "127.1.2.3",
        "169.254.169.254",
        "169.254.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "239.255.255.250",
        "255.255.255.255",
    ];
    let mut addresses: Vec<Value> = hostile.iter().map(|a| json!(a)).collect();
    addresses.push(json!("10.244.1.2"));
    let s = slice("web-1", &addresses);
    assert_eq!(programmed(&[&s]), ["10.244.1.2:8080"]);
    for a in hostile {
        assert!(!is_endpoint_address(a.parse().unwrap()), "{a}");
    }
    for a in [
        "10.244.1.2",
        "192.168.1.1",
        "172.16.0.1",
        "100.64.0.1",
        "8.8.8.8",
    ] {
        assert!(is_endpoint_address(a.parse().unwrap()), "{a}");
    }
}

#[test]
fn a_slice_over_the_api_limit_is_ignored_whole() {
    let big: Vec<Value> = (0..1001)
        .map(|i| json!(format!("10.245.{}.{}", i / 250, i % 250 + 1)))
        .collect();
    let over = slice("web-big", &big);
    assert!(slice_info(&over).is_none());
    let at_limit = slice("web-1000", &big[..1000]);
    assert_eq!(slice_info(&at_limit).unwrap().endpoints.len(), 1000);

    // The Service keeps its other, valid slice.
    let good = slice("web-1", &[json!("10.244.1.2")]);
    assert_eq!(programmed(&[&over, &good]), ["10.244.1.2:8080"]);
}
