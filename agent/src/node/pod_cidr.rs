//! This node's pod CIDR: the Node's spec.podCIDR (set by the controller manager's node IPAM, or
//! by the agent from `--pod-cidr` when the Node had none). Until there is one, the node waits,
//! Ready=False with the reason in its message, and writes no CNI configuration.

use std::time::{Duration, Instant};

use ipnetwork::Ipv4Network;
use k8s_openapi::api::core::v1::Node;

use super::network::check_pod_cidr;

/// What the agent does with the pod CIDR it knows of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Write the CNI configuration for it.
    Use(Ipv4Network),
    /// Keep waiting; the text says why (the node's Ready message and the log).
    Wait(String),
}

/// The message while no pod CIDR is known: the Ready condition's and the log's.
pub const WAITING: &str =
    "waiting for spec.podCIDR (node IPAM in the controller manager assigns it; or pass --pod-cidr)";

/// Decides from the Node's spec.podCIDR, else `--pod-cidr`. A spec value that is not an IPv4
/// CIDR inside the cluster CIDR is not used (node IPAM or an admin may still correct it). Pure.
pub fn decide(spec: Option<&str>, flag: Option<&str>, cluster: Ipv4Network) -> Decision {
    let Some(cidr) = spec.or(flag) else {
        return Decision::Wait(WAITING.to_string());
    };
    let source = if spec.is_some() {
        "spec.podCIDR"
    } else {
        "--pod-cidr"
    };
    let parsed: Ipv4Network = match cidr.parse() {
        Ok(p) => p,
        Err(e) => return Decision::Wait(format!("{source} {cidr:?} is not an IPv4 CIDR: {e}")),
    };
    match check_pod_cidr(parsed, cluster) {
        Ok(()) => Decision::Use(parsed),
        Err(why) => Decision::Wait(format!("not using {source}: {why}")),
    }
}

/// spec.podCIDR of a Node.
pub fn of(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.pod_cidr.as_deref())
}

/// Polls the Node every second until [`decide`] says Use, logging why it waits every few
/// seconds; each new reason is also sent to `not_ready` (the status loop's Ready message).
pub async fn wait(
    client: &kube::Client,
    node_name: &str,
    flag: Option<&str>,
    cluster: Ipv4Network,
    mut node: Node,
    not_ready: &tokio::sync::watch::Sender<Option<String>>,
) -> Ipv4Network {
    const LOG_EVERY: Duration = Duration::from_secs(5);
    let api = kube::Api::<Node>::all(client.clone());
    let mut logged: Option<(String, Instant)> = None;
    loop {
        match decide(of(&node), flag, cluster) {
            Decision::Use(cidr) => return cidr,
            Decision::Wait(why) => {
                let due = logged
                    .as_ref()
                    .is_none_or(|(last, at)| *last != why || at.elapsed() >= LOG_EVERY);
                if due {
                    tracing::warn!(node = %node_name, "{why}");
                    not_ready.send_replace(Some(why.clone()));
                    logged = Some((why, Instant::now()));
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        match api.get(node_name).await {
            Ok(n) => node = n,
            Err(e) => tracing::debug!(error = %e, "reading the Node for its pod CIDR"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Ipv4Network {
        "10.244.0.0/16".parse().unwrap()
    }

    #[test]
    fn the_spec_wins_over_the_flag() {
        assert_eq!(
            decide(Some("10.244.3.0/24"), Some("10.244.9.0/24"), cluster()),
            Decision::Use("10.244.3.0/24".parse().unwrap())
        );
    }

    #[test]
    fn the_flag_serves_a_node_without_spec_pod_cidr() {
        assert_eq!(
            decide(None, Some("10.244.9.0/24"), cluster()),
            Decision::Use("10.244.9.0/24".parse().unwrap())
        );
    }

    #[test]
    fn neither_means_waiting_for_node_ipam() {
        assert_eq!(
            decide(None, None, cluster()),
            Decision::Wait(WAITING.into())
        );
    }

    #[test]
    fn a_pod_cidr_outside_the_cluster_cidr_or_malformed_is_not_used() {
        let Decision::Wait(why) = decide(Some("192.168.0.0/24"), None, cluster()) else {
            panic!("used a pod CIDR outside the cluster CIDR");
        };
        assert!(
            why.contains("spec.podCIDR") && why.contains("10.244.0.0/16"),
            "{why}"
        );
        let Decision::Wait(why) = decide(None, Some("10.244.1.0/33"), cluster()) else {
            panic!("used a malformed --pod-cidr");
        };
        assert!(
            why.contains("--pod-cidr") && why.contains("10.244.1.0/33"),
            "{why}"
        );
        // A wrong spec is not replaced by the flag: the Node says what the node uses.
        assert!(matches!(
            decide(Some("0.0.0.0/0"), Some("10.244.9.0/24"), cluster()),
            Decision::Wait(_)
        ));
    }
}
