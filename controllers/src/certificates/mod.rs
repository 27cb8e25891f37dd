//! CertificateSigningRequests: csrapproving (auto-approves node client certificates, see
//! approve.rs, and nodes' serving certificates for their own addresses, see serving.rs) and
//! csrsigning (issues approved certificates from the cluster CA, see sign.rs), one kube-runtime
//! Controller over CSRs. Signing runs only with the CA's files. csrcleaner (cleaner.rs) deletes
//! the CSRs that have served their purpose.

pub mod approve;
pub mod cleaner;
pub mod request;
pub mod serving;
pub mod sign;
pub mod usages;

use futures::StreamExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest as Csr;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::ResourceExt;
use request::Request;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub use sign::{SignError, Signer};

pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// Where a CSR stands, from its conditions and certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Pending,
    Approved,
    Denied,
    Failed,
    Issued,
}

pub fn csr_state(csr: &Csr) -> State {
    let status = csr.status.as_ref();
    let has = |t: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == t && c.status != "False"))
    };
    if has("Denied") {
        State::Denied
    } else if has("Failed") {
        State::Failed
    } else if status
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty())
    {
        State::Issued
    } else if has("Approved") {
        State::Approved
    } else {
        State::Pending
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignDecision {
    Sign(Request),
    /// Mark the CSR Failed (reason SignerValidationFailure) with this message.
    Fail(String),
    Leave,
}

/// csrsigning's decision, pure: approved CSRs of the client and kubelet-serving signers that
/// pass their checks.
pub fn plan_signing(csr: &Csr) -> SignDecision {
    let spec = &csr.spec;
    if csr_state(csr) != State::Approved {
        return SignDecision::Leave;
    }
    let check: fn(&Request, &[String]) -> Result<(), String> = match spec.signer_name.as_str() {
        KUBELET_CLIENT_SIGNER => |r, u| approve::check_kubelet_client(r, u).map(|_| ()),
        APISERVER_CLIENT_SIGNER => |_, u| usages::check_apiserver_client(u),
        KUBELET_SERVING_SIGNER => |r, u| serving::check(r, u).map(|_| ()),
        _ => return SignDecision::Leave,
    };
    let req = match request::parse(&spec.request.0) {
        Ok(r) => r,
        Err(e) => return SignDecision::Fail(e.to_string()),
    };
    match check(&req, spec.usages.as_deref().unwrap_or_default()) {
        Ok(()) => SignDecision::Sign(req),
        Err(e) => SignDecision::Fail(e),
    }
}

/// A condition in the form upstream writes them.
fn condition(type_: &str, reason: &str, message: &str) -> Value {
    let now = Timestamp::now().to_string();
    json!({"type": type_, "status": "True", "reason": reason, "message": message,
           "lastUpdateTime": now, "lastTransitionTime": now})
}

/// The CSR's conditions plus `new`, pinned to the resourceVersion seen (a `kubectl certificate
/// deny` meanwhile makes this a conflict, and the next reconcile sees the denial).
fn with_condition(csr: &Csr, new: Value) -> Value {
    let mut conditions: Vec<Value> = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .filter_map(|c| serde_json::to_value(c).ok())
                .collect()
        })
        .unwrap_or_default();
    conditions.push(new);
    json!({"metadata": {"resourceVersion": csr.resource_version()},
           "status": {"conditions": conditions}})
}

struct Ctx {
    api: Api<Csr>,
    signer: Option<Signer>,
    manager: Arc<crate::Ctx>,
}

/// The approver's decision; a serving request is judged against its Node (read fresh: an
/// address must be the node's now, not in a cache).
async fn decide(csr: &Csr, ctx: &Ctx) -> Result<approve::Decision, kube::Error> {
    let Some(node) = serving::node_of(csr) else {
        return Ok(approve::decide(csr));
    };
    let nodes: Api<Node> = Api::all(ctx.manager.client.clone());
    let node = nodes.get_opt(&node).await?;
    Ok(serving::decide(csr, node.as_ref()))
}

async fn reconcile(csr: Arc<Csr>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let (name, pp) = (csr.name_any(), PatchParams::default());
    match decide(&csr, &ctx).await? {
        approve::Decision::Approve(message) => {
            let patch = with_condition(&csr, condition("Approved", "AutoApproved", &message));
            ctx.api
                .patch_approval(&name, &pp, &Patch::Merge(&patch))
                .await?;
            tracing::info!(csr = %name, "{message}");
            ctx.manager.metrics.csr_approvals.inc();
            // The approval is a change: the next reconcile signs.
            return Ok(Action::await_change());
        }
        approve::Decision::Leave(why) => tracing::debug!(csr = %name, "not approving: {why}"),
    }
    let Some(signer) = &ctx.signer else {
        return Ok(Action::await_change());
    };
    let spec = &csr.spec;
    let issued = match plan_signing(&csr) {
        SignDecision::Leave => return Ok(Action::await_change()),
        SignDecision::Fail(why) => Err(why),
        SignDecision::Sign(req) => {
            let usages = spec.usages.as_deref().unwrap_or_default();
            let now = time::OffsetDateTime::now_utc();
            match signer.sign(&req, usages, spec.expiration_seconds, now) {
                // Not the request's fault: it waits (a restart with a new CA signs it).
                Err(e @ SignError::CaExpired(_)) => {
                    tracing::error!(csr = %name, "not signing: {e}");
                    return Ok(Action::requeue(Duration::from_secs(300)));
                }
                other => other.map_err(|e| e.to_string()),
            }
        }
    };
    match issued {
        Ok(pem) => {
            let cert = keelson_apimachinery::base64::encode(pem.as_bytes());
            let patch = json!({"metadata": {"resourceVersion": csr.resource_version()},
                               "status": {"certificate": cert}});
            ctx.api
                .patch_status(&name, &pp, &Patch::Merge(&patch))
                .await?;
            tracing::info!(csr = %name, signer = %spec.signer_name, "certificate issued");
            ctx.manager.metrics.csr_issued.inc();
        }
        Err(why) => {
            let failed = condition("Failed", "SignerValidationFailure", &why);
            let patch = with_condition(&csr, failed);
            ctx.api
                .patch_status(&name, &pp, &Patch::Merge(&patch))
                .await?;
            tracing::warn!(csr = %name, "not signed: {why}");
        }
    }
    Ok(Action::await_change())
}

fn error_policy(csr: Arc<Csr>, e: &kube::Error, _: Arc<Ctx>) -> Action {
    tracing::warn!(csr = %csr.name_any(), error = %e, "CSR reconcile failed; retrying in 2 s");
    Action::requeue(Duration::from_secs(2))
}

/// csrapproving, and csrsigning when `signer` is given, until SIGTERM or Ctrl-C.
pub async fn run(manager: Arc<crate::Ctx>, signer: Option<Signer>) {
    let api: Api<Csr> = Api::all(manager.client.clone());
    tokio::spawn(cleaner::run(api.clone()));
    let ctx = Arc::new(Ctx {
        api: api.clone(),
        signer,
        manager,
    });
    Controller::new(api, watcher::Config::default())
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
