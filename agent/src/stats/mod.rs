//! Resource usage as the kubelet serves it (`/stats/summary`, `/metrics/resource`): the node's
//! from /proc, the containers' from CRI ListContainerStats, pods' as their containers' sum (and
//! their network from ListPodSandboxStats).
//! CPU rates come from samples taken every [`SAMPLE_PERIOD`] in the background (`rate`).
//!
//! Parsing, rates, assembly and rendering are pure (`proc`, `rate`, `summary`,
//! `resource_metrics`); this file only reads /proc and the runtime.

pub mod proc;
pub mod rate;
pub mod resource_metrics;
pub mod summary;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keelson_proto::runtime::v1 as cri;

use crate::cri::{labels, Cri, CriError};
use rate::{History, Sample};
use summary::{NodeReading, RuntimeReading, Summary};

/// As the kubelet's housekeeping: often enough for `kubectl top`, cheap for the runtime.
pub const SAMPLE_PERIOD: Duration = Duration::from_secs(10);

/// One look at the node and its pods, and what could not be read.
pub struct Collected {
    pub summary: Summary,
    /// Why the runtime's part is missing (the pods are then empty).
    pub error: Option<CriError>,
}

pub struct Stats {
    cri: Arc<dyn Cri>,
    node_name: String,
    /// Where stat and meminfo are read: /proc, or a folder a test writes.
    proc_root: PathBuf,
    history: Mutex<History>,
}

impl Stats {
    pub fn new(cri: Arc<dyn Cri>, node_name: String) -> Stats {
        Stats::with_proc_root(cri, node_name, PathBuf::from("/proc"))
    }

    pub fn with_proc_root(cri: Arc<dyn Cri>, node_name: String, proc_root: PathBuf) -> Stats {
        Stats {
            cri,
            node_name,
            proc_root,
            history: Mutex::new(History::default()),
        }
    }

    /// Samples every [`SAMPLE_PERIOD`] until the process ends.
    pub async fn run(self: Arc<Self>) {
        let mut tick = tokio::time::interval(SAMPLE_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = self.sample().await {
                tracing::warn!(error = %e, "container stats sample failed; CPU rates wait for the next one");
            }
        }
    }

    /// Records the node's and every container's CPU time, for rates computed later.
    pub async fn sample(&self) -> Result<(), CriError> {
        let node = self.read_node().await;
        let stats = self.cri.list_container_stats(self.filter()).await;
        let mut history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(usage_ns) = node.cpu_ns {
            history.record_node(Sample {
                at_ns: node.at_ns,
                usage_ns,
            });
        }
        let stats = stats?;
        let mut seen = HashSet::new();
        for s in &stats {
            let (Some(a), Some(sample)) = (&s.attributes, summary::cpu_sample(s)) else {
                continue;
            };
            history.record_container(&a.id, sample);
            seen.insert(a.id.as_str());
        }
        history.keep_only(&seen);
        Ok(())
    }

    /// The summary as of now, rates measured since the last samples.
    pub async fn collect(&self) -> Collected {
        let node = self.read_node().await;
        let runtime = self.read_runtime().await;
        let history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let node_stats = summary::node_stats(&self.node_name, &node, &history);
        let (pods, error) = match runtime {
            Ok(rt) => (summary::pod_stats(&rt, &history, node.at_ns), None),
            Err(e) => (Vec::new(), Some(e)),
        };
        Collected {
            summary: Summary {
                node: node_stats,
                pods,
            },
            error,
        }
    }

    /// Only this agent's objects: another kubelet or a user may share the runtime.
    fn selector(&self) -> HashMap<String, String> {
        HashMap::from([(labels::NODE.to_string(), self.node_name.clone())])
    }

    fn filter(&self) -> cri::ContainerStatsFilter {
        cri::ContainerStatsFilter {
            label_selector: self.selector(),
            ..Default::default()
        }
    }

    async fn read_node(&self) -> NodeReading {
        let at_ns = now_ns();
        let stat = tokio::fs::read_to_string(self.proc_root.join("stat")).await;
        let meminfo = tokio::fs::read_to_string(self.proc_root.join("meminfo")).await;
        let stat = stat.unwrap_or_default();
        NodeReading {
            at_ns,
            boot_ns: proc::boot_time_ns(&stat),
            cpu_ns: proc::cpu_usage_ns(&stat),
            memory: meminfo.ok().as_deref().and_then(proc::meminfo),
        }
    }

    async fn read_runtime(&self) -> Result<RuntimeReading, CriError> {
        let ready = cri::PodSandboxState::SandboxReady as i32;
        let running = cri::ContainerState::ContainerRunning as i32;
        let mut sandboxes = self.cri.list_pod_sandbox(self.selector()).await?;
        sandboxes.retain(|s| s.state == ready);
        let mut containers = self.cri.list_containers(self.selector()).await?;
        containers.retain(|c| c.state == running);
        let stats = self.cri.list_container_stats(self.filter()).await?;
        let filter = cri::PodSandboxStatsFilter {
            label_selector: self.selector(),
            ..Default::default()
        };
        // Only the network comes from here: an older runtime without the call loses just that.
        let sandbox_stats = match self.cri.list_pod_sandbox_stats(filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "no pod sandbox stats; pods without network stats");
                Vec::new()
            }
        };
        Ok(RuntimeReading {
            sandboxes,
            containers,
            stats,
            sandbox_stats,
        })
    }
}

fn now_ns() -> i64 {
    i64::try_from(k8s_openapi::jiff::Timestamp::now().as_nanosecond()).unwrap_or(0)
}
