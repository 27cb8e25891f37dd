//! Kubelet serving certificates (signer kubernetes.io/kubelet-serving), pure: what such a
//! request must look like (upstream's ValidateKubeletServingCSR), and csrapproving's rule for
//! them: approved only when the node itself asks (system:node:<name> in system:nodes) and every
//! DNS name and IP address it asks for is one of that Node's status.addresses. Anything else is
//! left for a person (`kubectl certificate approve|deny`).

use std::net::IpAddr;

use super::approve::{Decision, NODES_GROUP, NODE_PREFIX};
use super::request::{self, Request};
use super::{csr_state, usages, State, KUBELET_SERVING_SIGNER};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;

/// The node a serving request is for, when it looks like one: the Node the approver reads.
pub fn node_of(csr: &CertificateSigningRequest) -> Option<String> {
    if csr.spec.signer_name != KUBELET_SERVING_SIGNER || csr_state(csr) != State::Pending {
        return None;
    }
    let req = request::parse(&csr.spec.request.0).ok()?;
    match req.common_names.as_slice() {
        [cn] => cn.strip_prefix(NODE_PREFIX).map(str::to_string),
        _ => None,
    }
}

/// Upstream's ValidateKubeletServingCSR; the node's name when the request is sound.
pub fn check(req: &Request, spec_usages: &[String]) -> Result<String, String> {
    let node = super::approve::node_subject(req)?;
    if req.other_sans {
        return Err("email, URI and other subject alternative names are not allowed".into());
    }
    if req.dns_names.is_empty() && req.ip_addresses.is_empty() {
        return Err("at least one DNS name or IP address is required".into());
    }
    usages::check_kubelet_serving(spec_usages)?;
    Ok(node.to_string())
}

/// The names in the Node's status.addresses, and its addresses that are IPs.
fn node_addresses(node: &Node) -> (Vec<String>, Vec<IpAddr>) {
    let addresses = node.status.as_ref().and_then(|s| s.addresses.as_ref());
    let mut names = Vec::new();
    let mut ips = Vec::new();
    for a in addresses.into_iter().flatten() {
        match a.address.parse::<IpAddr>() {
            Ok(ip) => ips.push(ip),
            Err(_) => names.push(a.address.clone()),
        }
    }
    (names, ips)
}

/// Approve, or leave with the reason. `node` is the Node named by the request, if it exists.
pub fn decide(csr: &CertificateSigningRequest, node: Option<&Node>) -> Decision {
    let spec = &csr.spec;
    if csr_state(csr) != State::Pending {
        return Decision::Leave("already approved, denied, failed or issued".into());
    }
    let req = match request::parse(&spec.request.0) {
        Ok(r) => r,
        Err(e) => return Decision::Leave(e.to_string()),
    };
    let name = match check(&req, spec.usages.as_deref().unwrap_or_default()) {
        Ok(n) => n,
        Err(e) => {
            return Decision::Leave(format!("not a kubelet serving certificate request: {e}"))
        }
    };
    let user = spec.username.as_deref().unwrap_or_default();
    let groups = spec.groups.as_deref().unwrap_or_default();
    if user != format!("{NODE_PREFIX}{name}") || !groups.iter().any(|g| g == NODES_GROUP) {
        return Decision::Leave(format!(
            "requester {user} is not node {name} itself (in group {NODES_GROUP})"
        ));
    }
    let Some(node) = node else {
        return Decision::Leave(format!("node {name} does not exist"));
    };
    let (names, ips) = node_addresses(node);
    if let Some(d) = req.dns_names.iter().find(|d| !names.contains(d)) {
        return Decision::Leave(format!(
            "DNS name {d} is not among node {name}'s addresses {names:?}"
        ));
    }
    if let Some(ip) = req.ip_addresses.iter().find(|ip| !ips.contains(ip)) {
        return Decision::Leave(format!(
            "IP address {ip} is not among node {name}'s addresses {ips:?}"
        ));
    }
    Decision::Approve(format!(
        "Auto approving kubelet serving certificate for node {name}: its own names and addresses"
    ))
}

#[cfg(test)]
#[path = "serving_tests.rs"]
mod tests;
