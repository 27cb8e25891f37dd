//! The kubelet's Summary API (stats/v1alpha1, the subset metrics-server and `kubectl top`
//! read), assembled from one reading of the node and the runtime (pure).

use std::collections::BTreeMap;

use keelson_proto::runtime::v1 as cri;
use serde::Serialize;

use super::proc::MemInfo;
use super::rate::{History, Sample};
use crate::cri::labels;

/// Nanoseconds since the epoch, written as metav1.Time writes itself: RFC 3339 in whole seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Time(pub i64);

impl Time {
    pub fn millis(self) -> i64 {
        self.0.div_euclid(1_000_000)
    }
}

impl Serialize for Time {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let secs = self.0.div_euclid(1_000_000_000);
        let t =
            k8s_openapi::jiff::Timestamp::from_second(secs).map_err(serde::ser::Error::custom)?;
        s.collect_str(&t)
    }
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub node: NodeStats,
    pub pods: Vec<PodStats>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    pub node_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    pub pod_ref: PodReference,
    pub start_time: Time,
    pub containers: Vec<ContainerStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
}

/// A pod's network (its default interface's counters, then every interface), as the kubelet's.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStats {
    pub time: Time,
    #[serde(flatten)]
    pub default: InterfaceStats,
    pub interfaces: Vec<InterfaceStats>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceStats {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_errors: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_errors: Option<u64>,
}

fn interface(i: &cri::NetworkInterfaceUsage) -> InterfaceStats {
    let v = |x: &Option<cri::UInt64Value>| x.as_ref().map(|v| v.value);
    InterfaceStats {
        name: i.name.clone(),
        rx_bytes: v(&i.rx_bytes),
        rx_errors: v(&i.rx_errors),
        tx_bytes: v(&i.tx_bytes),
        tx_errors: v(&i.tx_errors),
    }
}

/// The network part of a sandbox's stats, when the runtime gave one.
fn network(s: &cri::PodSandboxStats) -> Option<NetworkStats> {
    let n = s.linux.as_ref()?.network.as_ref()?;
    let default = n.default_interface.as_ref()?;
    let mut interfaces = vec![interface(default)];
    interfaces.extend(n.interfaces.iter().map(interface));
    Some(NetworkStats {
        time: Time(n.timestamp),
        default: interface(default),
        interfaces,
    })
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct PodReference {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    pub name: String,
    pub start_time: Time,
    pub cpu: CpuStats,
    pub memory: MemoryStats,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    pub time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_core_nano_seconds: Option<u64>,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    pub time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
}

/// The node as read from /proc at `at_ns`.
#[derive(Clone, Debug, Default)]
pub struct NodeReading {
    pub at_ns: i64,
    pub boot_ns: Option<i64>,
    pub cpu_ns: Option<u64>,
    pub memory: Option<MemInfo>,
}

/// This agent's ready sandboxes, running containers and their usage, as the runtime listed them.
#[derive(Clone, Debug, Default)]
pub struct RuntimeReading {
    pub sandboxes: Vec<cri::PodSandbox>,
    pub containers: Vec<cri::Container>,
    pub stats: Vec<cri::ContainerStats>,
    /// Empty when the runtime has no ListPodSandboxStats (the pods then have no network).
    pub sandbox_stats: Vec<cri::PodSandboxStats>,
}

pub fn node_stats(name: &str, node: &NodeReading, history: &History) -> NodeStats {
    let time = Time(node.at_ns);
    let cpu = node.cpu_ns.map(|usage_ns| CpuStats {
        time,
        usage_nano_cores: history.node_rate(Sample {
            at_ns: node.at_ns,
            usage_ns,
        }),
        usage_core_nano_seconds: Some(usage_ns),
    });
    let memory = node.memory.map(|m| MemoryStats {
        time,
        available_bytes: Some(m.available),
        usage_bytes: Some(m.usage()),
        working_set_bytes: Some(m.working_set()),
        ..Default::default()
    });
    NodeStats {
        node_name: name.to_string(),
        start_time: node.boot_ns.map(Time),
        cpu,
        memory,
    }
}

/// The CPU sample of a container's stats (its cumulative time when the runtime read it).
pub fn cpu_sample(s: &cri::ContainerStats) -> Option<Sample> {
    let cpu = s.cpu.as_ref()?;
    Some(Sample {
        at_ns: cpu.timestamp,
        usage_ns: cpu.usage_core_nano_seconds.as_ref()?.value,
    })
}

fn container_stats(
    s: &cri::ContainerStats,
    c: &cri::Container,
    history: &History,
    at_ns: i64,
) -> ContainerStats {
    let value = |v: &Option<cri::UInt64Value>| v.as_ref().map(|v| v.value);
    let cpu = s.cpu.unwrap_or_default();
    let cpu_time = if cpu.timestamp > 0 {
        cpu.timestamp
    } else {
        at_ns
    };
    let mem = s.memory.unwrap_or_default();
    let mem_time = if mem.timestamp > 0 {
        mem.timestamp
    } else {
        at_ns
    };
    let name = c.labels.get(labels::CONTAINER_NAME).cloned();
    ContainerStats {
        name: name.unwrap_or_else(|| c.metadata.clone().unwrap_or_default().name),
        start_time: Time(c.created_at),
        cpu: CpuStats {
            time: Time(cpu_time),
            usage_nano_cores: cpu_sample(s).and_then(|now| history.container_rate(&c.id, now)),
            usage_core_nano_seconds: value(&cpu.usage_core_nano_seconds),
        },
        memory: MemoryStats {
            time: Time(mem_time),
            // containerd writes 0 for a container without a memory limit, where the kubelet
            // leaves the field out: 0 would read as "no memory left".
            available_bytes: value(&mem.available_bytes).filter(|b| *b > 0),
            usage_bytes: value(&mem.usage_bytes),
            working_set_bytes: value(&mem.working_set_bytes),
            rss_bytes: value(&mem.rss_bytes),
            page_faults: value(&mem.page_faults),
            major_page_faults: value(&mem.major_page_faults),
        },
    }
}

/// Pods (by their ready sandbox, the newest if several) with their running containers' usage,
/// sorted by namespace and name; containers are matched to pods by the pod UID label.
pub fn pod_stats(rt: &RuntimeReading, history: &History, at_ns: i64) -> Vec<PodStats> {
    let mut sandboxes: BTreeMap<&str, &cri::PodSandbox> = BTreeMap::new();
    for sb in &rt.sandboxes {
        let Some(uid) = sb.labels.get(labels::POD_UID) else {
            continue;
        };
        let newer = sandboxes
            .get(uid.as_str())
            .is_none_or(|o| o.created_at < sb.created_at);
        if newer {
            sandboxes.insert(uid, sb);
        }
    }
    let mut pods: BTreeMap<&str, PodStats> = sandboxes
        .into_iter()
        .map(|(uid, sb)| {
            let label = |k: &str| sb.labels.get(k).cloned().unwrap_or_default();
            let pod = PodStats {
                pod_ref: PodReference {
                    name: label(labels::POD_NAME),
                    namespace: label(labels::POD_NAMESPACE),
                    uid: uid.to_string(),
                },
                start_time: Time(sb.created_at),
                containers: Vec::new(),
                cpu: None,
                memory: None,
                network: rt
                    .sandbox_stats
                    .iter()
                    .find(|s| s.attributes.as_ref().is_some_and(|a| a.id == sb.id))
                    .and_then(network),
            };
            (uid, pod)
        })
        .collect();
    for s in &rt.stats {
        let id = s.attributes.as_ref().map_or("", |a| a.id.as_str());
        let Some(c) = rt.containers.iter().find(|c| c.id == id) else {
            continue;
        };
        let uid = c.labels.get(labels::POD_UID).map_or("", String::as_str);
        if let Some(pod) = pods.get_mut(uid) {
            pod.containers.push(container_stats(s, c, history, at_ns));
        }
    }
    let mut out: Vec<PodStats> = pods.into_values().map(with_totals).collect();
    out.sort_by(|a, b| {
        (&a.pod_ref.namespace, &a.pod_ref.name).cmp(&(&b.pod_ref.namespace, &b.pod_ref.name))
    });
    out
}

/// A pod's usage is the sum of its containers' (none without containers; no rate unless every
/// container has one, since a partial sum would understate the pod).
fn with_totals(mut pod: PodStats) -> PodStats {
    pod.containers.sort_by(|a, b| a.name.cmp(&b.name));
    let cs = &pod.containers;
    if cs.is_empty() {
        return pod;
    }
    let sum = |f: &dyn Fn(&ContainerStats) -> Option<u64>| -> Option<u64> {
        cs.iter().filter_map(f).reduce(u64::saturating_add)
    };
    let all = |f: &dyn Fn(&ContainerStats) -> Option<u64>| -> Option<u64> {
        cs.iter()
            .map(f)
            .try_fold(0u64, |acc, v| Some(acc.saturating_add(v?)))
    };
    pod.cpu = Some(CpuStats {
        time: cs.iter().map(|c| c.cpu.time).max().unwrap_or_default(),
        usage_nano_cores: all(&|c| c.cpu.usage_nano_cores),
        usage_core_nano_seconds: sum(&|c| c.cpu.usage_core_nano_seconds),
    });
    pod.memory = Some(MemoryStats {
        time: cs.iter().map(|c| c.memory.time).max().unwrap_or_default(),
        available_bytes: None,
        usage_bytes: sum(&|c| c.memory.usage_bytes),
        working_set_bytes: sum(&|c| c.memory.working_set_bytes),
        rss_bytes: sum(&|c| c.memory.rss_bytes),
        page_faults: sum(&|c| c.memory.page_faults),
        major_page_faults: sum(&|c| c.memory.major_page_faults),
    });
    pod
}
