//! Node registration and status: creates the Node or takes over the existing one, keeps its
//! Ready condition (with the runtime's readiness) and posts a heartbeat.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerImage, DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints,
    NodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};

use super::machine;
use crate::conditions;
use crate::cri::Cri;

#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub name: String,
    pub internal_ip: String,
    pub pod_cidr: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub max_pods: u32,
    pub root: PathBuf,
    pub port: u16,
    pub runtime_version: String,
    /// `--kube-reserved` and `--system-reserved` together.
    pub reserved: super::allocatable::Reserved,
    /// The hard eviction thresholds (taken from allocatable).
    pub hard_eviction: Vec<crate::eviction::Threshold>,
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("registering node {node}: {source}")]
    Api {
        node: String,
        #[source]
        source: kube::Error,
    },
}

pub const AGENT_VERSION: &str = "v1.32.0-keelson";

/// Creates the Node, or takes over an existing one (a restarted agent); `--pod-cidr` is written
/// to a spec without one. Its status comes from [`status_loop`], which posts at once.
pub async fn register(client: &kube::Client, cfg: &NodeConfig) -> Result<Node, NodeError> {
    let api: Api<Node> = Api::all(client.clone());
    let err = |source| NodeError::Api {
        node: cfg.name.clone(),
        source,
    };
    let node = match keelson_daemon::get_opt(&api, &cfg.name)
        .await
        .map_err(err)?
    {
        Some(existing) => {
            let has_cidr = existing
                .spec
                .as_ref()
                .and_then(|s| s.pod_cidr.as_ref())
                .is_some();
            let mut patch = serde_json::json!({ "metadata": { "labels": cfg.labels } });
            if let (false, Some(cidr), Some(fields)) =
                (has_cidr, cfg.pod_cidr.as_ref(), patch.as_object_mut())
            {
                let spec = serde_json::json!({ "podCIDR": cidr, "podCIDRs": [cidr] });
                fields.insert("spec".into(), spec);
            }
            api.patch(&cfg.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(err)?
        }
        None => {
            let node = Node {
                metadata: kube::api::ObjectMeta {
                    name: Some(cfg.name.clone()),
                    labels: Some(cfg.labels.clone()),
                    ..Default::default()
                },
                spec: Some(NodeSpec {
                    pod_cidr: cfg.pod_cidr.clone(),
                    pod_cidrs: cfg.pod_cidr.clone().map(|c| vec![c]),
                    ..Default::default()
                }),
                status: None,
            };
            match api.create(&PostParams::default(), &node).await {
                Ok(n) => n,
                // Another start of this agent won the race: take that one over.
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    api.get(&cfg.name).await.map_err(err)?
                }
                Err(e) => return Err(err(e)),
            }
        }
    };
    Ok(node)
}

/// What the node reports besides its static facts: readiness, pressure and images.
pub struct Health<'a> {
    pub ready: bool,
    pub message: &'a str,
    pub pressure: &'a BTreeSet<&'static str>,
    pub images: &'a [ContainerImage],
}

pub fn status(cfg: &NodeConfig, health: &Health<'_>, previous: Option<&NodeStatus>) -> NodeStatus {
    let capacity = machine::capacity(&cfg.root, cfg.max_pods);
    let allocatable = super::allocatable::allocatable(&capacity, &cfg.reserved, &cfg.hard_eviction);
    let images = health.images;
    NodeStatus {
        capacity: Some(capacity),
        allocatable: Some(allocatable),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: cfg.internal_ip.clone(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: cfg.name.clone(),
            },
        ]),
        conditions: Some(conditions(health, previous)),
        images: (!images.is_empty()).then(|| images.to_vec()),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: i32::from(cfg.port),
            }),
        }),
        node_info: Some(node_info(cfg)),
        ..Default::default()
    }
}

/// The pressure conditions, from the eviction manager, and Ready, with the runtime's readiness.
fn conditions(health: &Health<'_>, previous: Option<&NodeStatus>) -> Vec<NodeCondition> {
    let (ready, message) = (health.ready, health.message);
    let under = |c: &str| health.pressure.contains(c);
    let now =
        Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH));
    let condition = |kind: &str, ok: bool, reason: &str, msg: &str| {
        let status = if ok { "True" } else { "False" };
        let prev = previous
            .and_then(|p| p.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == kind));
        NodeCondition {
            type_: kind.to_string(),
            status: status.to_string(),
            reason: Some(reason.to_string()),
            message: Some(msg.to_string()),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: match prev {
                Some(p) if p.status == status => p.last_transition_time.clone(),
                _ => Some(now.clone()),
            },
        }
    };
    let (ready_reason, ready_message) = if ready {
        ("KubeletReady", "keelson-agent is posting ready status")
    } else {
        ("KubeletNotReady", message)
    };
    // Upstream's reasons and messages, for the pressure and its absence.
    let pressure = [
        (
            "MemoryPressure",
            (
                "KubeletHasInsufficientMemory",
                "keelson-agent has insufficient memory available",
            ),
            (
                "KubeletHasSufficientMemory",
                "keelson-agent has sufficient memory available",
            ),
        ),
        (
            "DiskPressure",
            ("KubeletHasDiskPressure", "keelson-agent has disk pressure"),
            (
                "KubeletHasNoDiskPressure",
                "keelson-agent has no disk pressure",
            ),
        ),
        (
            "PIDPressure",
            (
                "KubeletHasInsufficientPID",
                "keelson-agent has insufficient PID available",
            ),
            (
                "KubeletHasSufficientPID",
                "keelson-agent has sufficient PID available",
            ),
        ),
    ];
    let mut out: Vec<NodeCondition> = pressure
        .into_iter()
        .map(|(kind, on, off)| {
            let (reason, msg) = if under(kind) { on } else { off };
            condition(kind, under(kind), reason, msg)
        })
        .collect();
    out.push(condition("Ready", ready, ready_reason, ready_message));
    out
}

fn node_info(cfg: &NodeConfig) -> NodeSystemInfo {
    NodeSystemInfo {
        architecture: machine::arch(),
        boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        container_runtime_version: cfg.runtime_version.clone(),
        kernel_version: machine::kernel_version(),
        kube_proxy_version: String::new(),
        kubelet_version: AGENT_VERSION.into(),
        machine_id: machine::machine_id(),
        operating_system: "linux".into(),
        os_image: machine::os_image(),
        system_uuid: machine::machine_id(),
        ..Default::default()
    }
}

async fn post_status(
    client: &kube::Client,
    cfg: &NodeConfig,
    health: &Health<'_>,
) -> Result<NodeStatus, NodeError> {
    let api: Api<Node> = Api::all(client.clone());
    let err = |source| NodeError::Api {
        node: cfg.name.clone(),
        source,
    };
    let previous = api.get_status(&cfg.name).await.map_err(err)?.status;
    let status = status(cfg, health, previous.as_ref());
    let patch = serde_json::json!({ "status": status });
    api.patch_status(&cfg.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(err)?;
    Ok(status)
}

/// The status without heartbeat times, to tell a real change from the passing of time.
fn without_heartbeats(mut status: NodeStatus) -> NodeStatus {
    for c in status.conditions.iter_mut().flatten() {
        c.last_heartbeat_time = None;
    }
    status
}

/// The node's images for status.images (what the scheduler's image locality scores): names and
/// size, largest first, at most 50 as the kubelet reports. Pure.
pub fn node_images(images: &[keelson_proto::runtime::v1::Image]) -> Vec<ContainerImage> {
    let mut list: Vec<ContainerImage> = images
        .iter()
        .map(|i| {
            let mut names: Vec<String> = i
                .repo_digests
                .iter()
                .chain(i.repo_tags.iter())
                .cloned()
                .collect();
            if names.is_empty() {
                names.push(i.id.clone());
            }
            ContainerImage {
                names: Some(names),
                size_bytes: i64::try_from(i.size).ok(),
            }
        })
        .collect();
    list.sort_by(|a, b| {
        b.size_bytes
            .cmp(&a.size_bytes)
            .then_with(|| a.names.cmp(&b.names))
    });
    list.truncate(50);
    list
}

/// How often an unchanged status is posted anyway (the Lease is the frequent heartbeat), as the
/// kubelet's nodeStatusReportFrequency.
pub const REPORT_UNCHANGED_EVERY: Duration = Duration::from_secs(300);

/// Checks the runtime at once, then every `period` or when `not_ready` changes, and posts the
/// node status when it changed, or every five minutes. Ready follows the runtime's RuntimeReady
/// and NetworkReady conditions and the agent's own reason in `not_ready` (no pod CIDR yet).
pub async fn status_loop(
    client: kube::Client,
    cfg: NodeConfig,
    cri: Arc<dyn Cri>,
    period: Duration,
    mut not_ready: tokio::sync::watch::Receiver<Option<String>>,
    mut pressure: crate::eviction::PressureConditions,
) {
    let mut last: Option<(NodeStatus, std::time::Instant)> = None;
    let mut first = true;
    loop {
        if !std::mem::take(&mut first) {
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                // A closed channel (the agent is past waiting) leaves only the period.
                Ok(()) = not_ready.changed() => {}
                Ok(()) = pressure.changed() => {}
            }
        }
        let agent_reason = not_ready.borrow_and_update().clone();
        let (ready, message) = readiness(&*cri, agent_reason).await;
        let images = cri
            .list_images()
            .await
            .map(|i| node_images(&i))
            .unwrap_or_default();
        let under = pressure.borrow_and_update().clone();
        let health = Health {
            ready,
            message: &message,
            pressure: &under,
            images: &images,
        };
        let candidate = without_heartbeats(status(&cfg, &health, last.as_ref().map(|(s, _)| s)));
        let due = match &last {
            Some((previous, at)) => {
                *previous != candidate
                    || at.elapsed() >= REPORT_UNCHANGED_EVERY
                    || overwritten(&client, &cfg.name, previous).await
            }
            None => true,
        };
        if !due {
            continue;
        }
        match post_status(&client, &cfg, &health).await {
            Ok(posted) => last = Some((without_heartbeats(posted), std::time::Instant::now())),
            Err(e) => tracing::warn!(error = %e, "posting node status failed"),
        }
    }
}

/// Whether the server's conditions are no longer the ones last posted: node lifecycle sets them
/// Unknown when the heartbeats stopped (a network cut the agent lived through), and the agent
/// must correct that at once, not at the next five-minute report.
async fn overwritten(client: &kube::Client, node: &str, posted: &NodeStatus) -> bool {
    let api: Api<Node> = Api::all(client.clone());
    match api.get_status(node).await {
        Ok(n) => {
            let read = n.status.as_ref().and_then(|s| s.conditions.as_deref());
            conditions::states(read) != conditions::states(posted.conditions.as_deref())
        }
        Err(_) => false,
    }
}

/// Ready, and the Ready message when not: the agent's own reason first, then the runtime's
/// failing RuntimeReady/NetworkReady conditions.
async fn readiness(cri: &dyn Cri, agent_reason: Option<String>) -> (bool, String) {
    let mut failing: Vec<String> = agent_reason.into_iter().collect();
    match cri.status().await {
        Ok(s) => failing.extend(
            s.status
                .map(|st| st.conditions)
                .unwrap_or_default()
                .into_iter()
                .filter(|c| !c.status && (c.r#type == "RuntimeReady" || c.r#type == "NetworkReady"))
                .map(|c| format!("{} is false: {} {}", c.r#type, c.reason, c.message)),
        ),
        Err(e) => failing.push(format!("container runtime is down: {e}")),
    }
    (failing.is_empty(), failing.join("; "))
}

#[cfg(test)]
mod tests {
    use super::node_images;
    use keelson_proto::runtime::v1 as cri;

    #[test]
    fn images_largest_first_with_digests_and_tags() {
        let image = |id: &str, tag: &str, size: u64| cri::Image {
            id: id.into(),
            repo_tags: vec![tag.into()],
            repo_digests: vec![format!("{tag}@sha256:{id}")],
            size,
            ..Default::default()
        };
        let list = node_images(&[image("a", "small:1", 10), image("b", "big:1", 1000)]);
        assert_eq!(
            list[0].names.as_ref().unwrap(),
            &vec!["big:1@sha256:b".to_string(), "big:1".to_string()]
        );
        assert_eq!(list[0].size_bytes, Some(1000));
        assert_eq!(list.len(), 2);
        let many: Vec<cri::Image> = (0..60).map(|i| image(&i.to_string(), "x", i)).collect();
        assert_eq!(node_images(&many).len(), 50);
    }
}
