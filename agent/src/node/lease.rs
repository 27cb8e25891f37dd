//! The node's Lease in kube-node-lease, renewed every 10 s (the kubelet's heartbeat); a
//! restarted agent takes its existing Lease over.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};

pub const NAMESPACE: &str = "kube-node-lease";
pub const DURATION_SECONDS: i32 = 40;

/// Creates or renews the lease once.
pub async fn renew(
    client: &kube::Client,
    node: &str,
    node_uid: Option<&str>,
) -> Result<Lease, kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let now = MicroTime(Timestamp::now());
    match keelson_daemon::get_opt(&api, node).await? {
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = Some(node.to_string());
            spec.lease_duration_seconds = Some(DURATION_SECONDS);
            spec.renew_time = Some(now);
            api.replace(node, &PostParams::default(), &lease).await
        }
        None => {
            let lease = Lease {
                metadata: kube::api::ObjectMeta {
                    name: Some(node.to_string()),
                    namespace: Some(NAMESPACE.to_string()),
                    owner_references: node_uid.map(|uid| {
                        vec![OwnerReference {
                            api_version: "v1".into(),
                            kind: "Node".into(),
                            name: node.to_string(),
                            uid: uid.to_string(),
                            ..Default::default()
                        }]
                    }),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(node.to_string()),
                    lease_duration_seconds: Some(DURATION_SECONDS),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    ..Default::default()
                }),
            };
            api.create(&PostParams::default(), &lease).await
        }
    }
}

pub async fn renew_loop(
    client: kube::Client,
    node: String,
    node_uid: Option<String>,
    period: Duration,
) {
    loop {
        if let Err(e) = renew(&client, &node, node_uid.as_deref()).await {
            tracing::warn!(error = %e, node = %node, "lease renewal failed");
        }
        tokio::time::sleep(period).await;
    }
}
