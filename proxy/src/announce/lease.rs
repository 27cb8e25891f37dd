//! Each speaker's Lease (kube-system/keelson-speaker-<node>): renewed every RENEW_EVERY (1.5 s) while
//! the speaker runs, read by every other speaker to know who is alive. The annotation carries
//! the networks the speaker can announce on.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};

use super::elect::Speaker;
use crate::cidr::Ipv4Cidr;

pub use keelson_apimachinery::well_known::{
    SPEAKER_LEASE_NAMESPACE as NAMESPACE, SPEAKER_LEASE_PREFIX as PREFIX,
};
/// The label every speaker Lease carries, and the watch selects on.
pub const LABEL: &str = "keelson.dev/component";
pub const LABEL_VALUE: &str = "load-balancer-speaker";
pub const NETWORKS: &str = "keelson.dev/announce-networks";
/// How long a Lease stays valid unrenewed: what a failover takes at most, beside one renewal.
/// Two renewals may fail (an API server restarting, a slow write) before the others take over.
pub const DURATION: Duration = Duration::from_secs(5);
pub const RENEW_EVERY: Duration = Duration::from_millis(1500);

/// The speaker a Lease describes, if it is one.
pub fn speaker(lease: &Lease) -> Option<Speaker> {
    let spec = lease.spec.as_ref()?;
    let node = spec.holder_identity.clone().filter(|n| !n.is_empty())?;
    let networks = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NETWORKS))
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_default();
    Some(Speaker {
        node,
        networks,
        renewed: spec
            .renew_time
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        duration: Duration::from_secs(
            spec.lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .unwrap_or(0),
        ),
    })
}

/// The Lease this node's speaker writes.
pub fn own(node: &str, networks: &[Ipv4Cidr], now: Timestamp) -> Lease {
    let nets: Vec<String> = networks.iter().map(|n| n.to_string()).collect();
    let mut lease = Lease::default();
    lease.metadata.name = Some(format!("{PREFIX}{node}"));
    lease.metadata.namespace = Some(NAMESPACE.into());
    lease.metadata.labels = Some([(LABEL.to_string(), LABEL_VALUE.to_string())].into());
    lease.metadata.annotations = Some([(NETWORKS.to_string(), nets.join(","))].into());
    lease.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
        holder_identity: Some(node.into()),
        lease_duration_seconds: i32::try_from(DURATION.as_secs()).ok(),
        renew_time: Some(MicroTime(now)),
        ..Default::default()
    });
    lease
}

/// Renews (or creates) this node's Lease.
pub async fn renew(api: &Api<Lease>, node: &str, networks: &[Ipv4Cidr]) -> kube::Result<()> {
    let lease = own(node, networks, Timestamp::now());
    let name = format!("{PREFIX}{node}");
    // Only this node writes its Lease: a merge patch of what it says needs no read first.
    let patch = serde_json::json!({
        "metadata": {
            "labels": lease.metadata.labels,
            "annotations": lease.metadata.annotations,
        },
        "spec": lease.spec,
    });
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Err(e) if keelson_daemon::is_not_found(&e) => {
            api.create(&PostParams::default(), &lease).await.map(|_| ())
        }
        other => other.map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_speakers_lease_reads_back_as_the_speaker() {
        let nets: Vec<Ipv4Cidr> = vec!["172.30.0.0/24".parse().unwrap()];
        let lease = own("node-a", &nets, Timestamp::UNIX_EPOCH);
        assert_eq!(
            lease.metadata.name.as_deref(),
            Some("keelson-speaker-node-a")
        );
        let s = speaker(&lease).unwrap();
        assert_eq!(s.node, "node-a");
        assert_eq!(s.networks, nets);
        assert_eq!(s.duration, DURATION);
        assert!(!s.renewed.is_empty());
        let mut released = lease;
        released.spec.as_mut().unwrap().holder_identity = Some(String::new());
        assert_eq!(speaker(&released), None);
    }
}
