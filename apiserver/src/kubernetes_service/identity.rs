//! Each API server's identity Lease in kube-system (`apiserver-<hash>` of its hostname and the
//! data directory's id, labelled apiserver.kubernetes.io/identity=kube-apiserver, as upstream's),
//! renewed every few seconds and holding the address clients reach the server at. The `kubernetes` endpoints list the
//! servers whose leases are fresh (upstream's lease endpoint reconciler), so several servers
//! agree on them instead of each writing its own address over the others'.

use crate::certs::{self, CertError};
use crate::object;
use crate::resources::{self, Resource};
use crate::rest::{self, Api, DeleteOptions, Sub, Target};
use crate::status::ApiResult;
use chrono::{DateTime, Utc};
use keelson_apimachinery::well_known::{
    APISERVER_ADVERTISE_ANNOTATION, APISERVER_IDENTITY_LABEL, HOSTNAME_LABEL,
};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// How often a server renews its lease and reconciles the endpoints.
pub const RENEW: Duration = Duration::from_secs(5);
/// How long a lease stays fresh without renewal: a server gone this long leaves the endpoints.
pub const LEASE_SECONDS: i64 = 15;
/// Leases expired this long are deleted (a server removed for good), as upstream's lease GC.
const GC_AFTER: chrono::Duration = chrono::Duration::hours(1);
const NAMESPACE: &str = "kube-system";
/// The identity label's value for API servers.
const KUBE_APISERVER: &str = "kube-apiserver";
/// The data directory's file holding this server's id (kept across restarts).
const ID_FILE: &str = "apiserver.id";

/// This server: its lease's name and, per process, its holder identity.
#[derive(Debug, Clone)]
pub struct Identity {
    pub lease: String,
    pub holder: String,
    pub hostname: String,
}

impl Identity {
    /// The data directory's id (made on the first start), and a holder identity for this run.
    pub fn load(data_dir: &Path) -> Result<Identity, CertError> {
        let path = data_dir.join(ID_FILE);
        let id = match std::fs::read_to_string(&path) {
            Ok(s) if !s.trim().is_empty() => s.trim().to_string(),
            _ => {
                let id = object::random_suffix() + &object::random_suffix();
                certs::write_private(&path, &id)?;
                id
            }
        };
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default();
        // The hostname too, as upstream names the lease after it: a data directory copied
        // whole to another machine (its id file with it) still makes another lease.
        let digest =
            ring::digest::digest(&ring::digest::SHA256, format!("{hostname}/{id}").as_bytes());
        let hex: String = digest
            .as_ref()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        let lease = format!("apiserver-{hex}");
        let holder = format!("{lease}_{}", object::random_suffix());
        Ok(Identity {
            lease,
            holder,
            hostname,
        })
    }
}

fn leases() -> Option<&'static Resource> {
    resources::lookup("coordination.k8s.io", "v1", "leases")
}

fn micro_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Creates or renews this server's lease, naming where clients reach it.
pub async fn renew(api: &Api, id: &Identity, at: SocketAddr) -> ApiResult<()> {
    let Some(res) = leases() else { return Ok(()) };
    let target = Target {
        res,
        namespace: NAMESPACE.into(),
        name: id.lease.clone(),
    };
    let labels = json!({ APISERVER_IDENTITY_LABEL: KUBE_APISERVER, HOSTNAME_LABEL: id.hostname });
    let annotations = json!({ APISERVER_ADVERTISE_ANNOTATION: at.to_string() });
    let spec = json!({
        "holderIdentity": id.holder,
        "leaseDurationSeconds": LEASE_SECONDS,
        "renewTime": micro_time(Utc::now()),
    });
    let Some(current) = api.store.get(&target.key()) else {
        let mut spec = spec;
        object::set_path(&mut spec, &["acquireTime"], json!(micro_time(Utc::now())));
        let lease = json!({
            "metadata": { "name": id.lease, "namespace": NAMESPACE,
                "labels": labels, "annotations": annotations },
            "spec": spec,
        });
        return rest::create(api, res, NAMESPACE, lease, false)
            .await
            .map(drop);
    };
    let mut obj = (*current.obj).clone();
    object::set_path(&mut obj, &["metadata", "labels"], labels);
    object::set_path(&mut obj, &["metadata", "annotations"], annotations);
    for (k, v) in spec.as_object().into_iter().flatten() {
        object::set_path(&mut obj, &["spec", k], v.clone());
    }
    rest::update(api, &target, obj, Sub::Main, false)
        .await
        .map(drop)
}

/// Deletes this server's lease (clean shutdown: it leaves the endpoints at once).
pub async fn release(api: &Api, id: &Identity) {
    let Some(res) = leases() else { return };
    let target = Target {
        res,
        namespace: NAMESPACE.into(),
        name: id.lease.clone(),
    };
    if let Err(e) = rest::delete(api, &target, &DeleteOptions::default()).await {
        tracing::warn!(lease = id.lease, error = %e.message, "deleting the identity lease failed");
    }
}

/// What one API server lease says: where the server is, and until when it is fresh.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub name: String,
    pub address: Option<SocketAddr>,
    pub expires: Option<DateTime<Utc>>,
}

/// The API server leases in kube-system.
pub fn seen(api: &Api) -> Vec<Seen> {
    let Some(res) = leases() else {
        return Vec::new();
    };
    let (items, _) = api.store.list(&format!("{}{NAMESPACE}/", res.key_prefix()));
    items.iter().filter_map(|e| read_lease(&e.obj)).collect()
}

fn read_lease(obj: &Value) -> Option<Seen> {
    let is_apiserver = object::labels(obj)
        .and_then(|l| l.get(APISERVER_IDENTITY_LABEL)?.as_str())
        .is_some_and(|v| v == KUBE_APISERVER);
    if !is_apiserver {
        return None;
    }
    let address = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(APISERVER_ADVERTISE_ANNOTATION)?.as_str())
        .and_then(|a| a.parse().ok());
    let renewed = obj.pointer("/spec/renewTime").and_then(object::timestamp);
    let seconds = obj
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    Some(Seen {
        name: object::name(obj).to_string(),
        address,
        expires: renewed.map(|t| t + chrono::Duration::seconds(seconds)),
    })
}

/// The addresses of the servers whose leases are fresh at `now`, sorted.
pub fn fresh(seen: &[Seen], now: DateTime<Utc>) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = seen
        .iter()
        .filter(|s| s.expires.is_some_and(|e| e > now))
        .filter_map(|s| s.address)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Leases expired for over an hour: servers removed for good.
pub fn stale(seen: &[Seen], now: DateTime<Utc>) -> Vec<String> {
    seen.iter()
        .filter(|s| s.expires.is_none_or(|e| e + GC_AFTER < now))
        .map(|s| s.name.clone())
        .collect()
}

/// Deletes the leases of servers removed for good.
pub async fn collect_garbage(api: &Api, names: &[String]) {
    let Some(res) = leases() else { return };
    for name in names {
        let target = Target {
            res,
            namespace: NAMESPACE.into(),
            name: name.clone(),
        };
        match rest::delete(api, &target, &DeleteOptions::default()).await {
            Ok(_) => {
                tracing::info!(lease = %name, "deleted the identity lease of an API server gone for over an hour")
            }
            Err(e) => {
                tracing::debug!(lease = %name, error = %e.message, "deleting a stale identity lease")
            }
        }
    }
}

#[cfg(test)]
mod tests;
