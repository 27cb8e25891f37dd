//! csrapproving's decision, pure: a kubelet client CSR is approved when it asks for exactly a
//! node's client certificate (CN system:node:<name>, O system:nodes, no SANs, client usages) and
//! its requester is a bootstrapper (a new node joining) or that same node (renewal). Nothing else
//! is ever approved; it is left for a person (`kubectl certificate approve|deny`).

use super::request::{self, Request};
use super::{csr_state, usages, State, KUBELET_CLIENT_SIGNER};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

pub const NODE_PREFIX: &str = "system:node:";
pub const NODES_GROUP: &str = "system:nodes";
pub const BOOTSTRAPPERS_GROUP: &str = "system:bootstrappers";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Add the Approved condition (reason AutoApproved) with this message.
    Approve(String),
    /// Not for this controller to approve; why, for the log.
    Leave(String),
}

/// The node a request's subject names: organization exactly system:nodes, one common name
/// system:node:NAME (as both kubelet signers' validations require).
pub fn node_subject(req: &Request) -> Result<&str, String> {
    if req.organizations != [NODES_GROUP] {
        return Err(format!(
            "subject organization must be exactly [{NODES_GROUP}], not {:?}",
            req.organizations
        ));
    }
    let node = match req.common_names.as_slice() {
        [cn] => cn.strip_prefix(NODE_PREFIX).filter(|n| !n.is_empty()),
        _ => None,
    };
    node.ok_or_else(|| {
        format!(
            "subject common name must be one {NODE_PREFIX}<nodeName>, not {:?}",
            req.common_names
        )
    })
}

/// Upstream's ValidateKubeletClientCSR: what a node client certificate request must look like.
pub fn check_kubelet_client(req: &Request, spec_usages: &[String]) -> Result<String, String> {
    let node = node_subject(req)?;
    if req.has_sans {
        return Err("subject alternative names are not allowed".into());
    }
    usages::check_kubelet_client(spec_usages)?;
    Ok(node.to_string())
}

pub fn decide(csr: &CertificateSigningRequest) -> Decision {
    let spec = &csr.spec;
    if csr_state(csr) != State::Pending {
        return Decision::Leave("already approved, denied, failed or issued".into());
    }
    if spec.signer_name != KUBELET_CLIENT_SIGNER {
        return Decision::Leave(format!("signer {} is not auto-approved", spec.signer_name));
    }
    let req = match request::parse(&spec.request.0) {
        Ok(r) => r,
        Err(e) => return Decision::Leave(e.to_string()),
    };
    let node = match check_kubelet_client(&req, spec.usages.as_deref().unwrap_or_default()) {
        Ok(n) => n,
        Err(e) => return Decision::Leave(format!("not a node client certificate request: {e}")),
    };
    let user = spec.username.as_deref().unwrap_or_default();
    let groups = spec.groups.as_deref().unwrap_or_default();
    if groups.iter().any(|g| g == BOOTSTRAPPERS_GROUP) {
        return Decision::Approve(format!(
            "Auto approving kubelet client certificate for node {node}: requester {user} is in group {BOOTSTRAPPERS_GROUP}"
        ));
    }
    if user == format!("{NODE_PREFIX}{node}") {
        return Decision::Approve(format!(
            "Auto approving self kubelet client certificate renewal for node {node}"
        ));
    }
    Decision::Leave(format!(
        "requester {user} is neither in group {BOOTSTRAPPERS_GROUP} nor node {node} itself"
    ))
}

#[cfg(test)]
#[path = "approve_tests.rs"]
mod tests;
