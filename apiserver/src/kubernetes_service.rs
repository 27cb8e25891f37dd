//! The `kubernetes` Service in `default` and its Endpoints and EndpointSlice, as upstream's API
//! server keeps them: the first address of the service range, port 443 named https, pointing
//! at the advertised address and the secure port, so in-cluster clients find the API server.

use crate::object::set_path;
use crate::resources;
use crate::rest::{self, Api, Sub, Target};
use crate::status::ApiResult;
use keelson_apimachinery::well_known::SERVICE_NAME_LABEL;
use serde_json::{json, Value};
use std::net::IpAddr;

const NAME: &str = "kubernetes";
const NAMESPACE: &str = "default";

/// What the three objects point at.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The first address of --service-cluster-ip-range.
    pub cluster_ip: std::net::Ipv4Addr,
    /// Where clients reach this server: the advertised address and the port served.
    pub address: IpAddr,
    pub port: u16,
}

/// Creates the three objects, or brings them back to what they should be. Failures are logged:
/// the server still serves, only in-cluster clients are left without the Service.
pub async fn reconcile(api: &Api, at: &Endpoint) {
    let mut kinds = vec![("", "services", service(at))];
    // Pods cannot reach a loopback address (and validation refuses it as an endpoint, as
    // upstream's): the Service then has no endpoints until the server advertises another one.
    if at.address.is_loopback() {
        tracing::info!(address = %at.address, "the kubernetes Service gets no endpoints: the advertised address is loopback (set --advertise-address for in-cluster clients)");
    } else {
        kinds.push(("", "endpoints", endpoints(at)));
        kinds.push(("discovery.k8s.io", "endpointslices", endpoint_slice(at)));
    }
    for (group, plural, want) in kinds {
        let Some(res) = resources::lookup(group, "v1", plural) else {
            continue;
        };
        if let Err(e) = put(api, res, want).await {
            tracing::warn!(resource = plural, error = %e.message, "reconciling default/kubernetes failed");
        }
    }
}

/// Creates `want`, or copies its fields (other than a Service's allocated spec) over the
/// stored object when they differ.
async fn put(api: &Api, res: &'static resources::Resource, want: Value) -> ApiResult<()> {
    let target = Target {
        res,
        namespace: NAMESPACE.into(),
        name: NAME.into(),
    };
    let Some(current) = api.store.get(&target.key()) else {
        return rest::create(api, res, NAMESPACE, want, false)
            .await
            .map(drop);
    };
    let mut obj = (*current.obj).clone();
    let fields: &[&str] = match res.kind {
        "Service" => &["ports"],
        "Endpoints" => &["subsets"],
        _ => &["addressType", "endpoints", "ports"],
    };
    for f in fields {
        let (path, value) = match res.kind {
            "Service" => (vec!["spec", *f], want.pointer(&format!("/spec/{f}"))),
            _ => (vec![*f], want.get(*f)),
        };
        set_path(&mut obj, &path, value.cloned().unwrap_or(Value::Null));
    }
    if let Some(labels) = want.pointer("/metadata/labels") {
        set_path(&mut obj, &["metadata", "labels"], labels.clone());
    }
    if obj == *current.obj {
        return Ok(());
    }
    rest::update(api, &target, obj, Sub::Main, false)
        .await
        .map(drop)
}

fn service(at: &Endpoint) -> Value {
    json!({
        "metadata": { "name": NAME, "namespace": NAMESPACE,
            "labels": { "component": "apiserver", "provider": "kubernetes" } },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": at.cluster_ip.to_string(),
            "clusterIPs": [at.cluster_ip.to_string()],
            "sessionAffinity": "None",
            "ports": [{ "name": "https", "port": 443, "protocol": "TCP", "targetPort": at.port }],
        },
    })
}

fn endpoints(at: &Endpoint) -> Value {
    json!({
        "metadata": { "name": NAME, "namespace": NAMESPACE,
            "labels": { "endpointslice.kubernetes.io/skip-mirror": "true" } },
        "subsets": [{
            "addresses": [{ "ip": at.address.to_string() }],
            "ports": [{ "name": "https", "port": at.port, "protocol": "TCP" }],
        }],
    })
}

fn endpoint_slice(at: &Endpoint) -> Value {
    let family = match at.address {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(_) => "IPv6",
    };
    json!({
        "metadata": { "name": NAME, "namespace": NAMESPACE,
            "labels": { SERVICE_NAME_LABEL: NAME } },
        "addressType": family,
        "endpoints": [{ "addresses": [at.address.to_string()], "conditions": { "ready": true } }],
        "ports": [{ "name": "https", "port": at.port, "protocol": "TCP" }],
    })
}
