//! The probes of one pod: a task per probed running container (started and stopped as containers
//! come and go), the table their results go to, and its seeding after an agent restart.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use crate::cri::Cri;
use crate::pod::decide;
use crate::pod::observed::{ObservedPod, RunState};
use crate::pod::probe::{Kind, ProbeTable, ProbeTarget, Probers, ResultSink, SharedProbes};

pub struct PodProbes {
    sink: ResultSink,
    probers: Probers,
    /// Whether readiness was taken over from the API's status yet (once per worker).
    seeded: bool,
}

impl PodProbes {
    /// `poke` wakes the worker when a result changes.
    pub fn new(poke: mpsc::Sender<()>) -> Self {
        PodProbes {
            sink: ResultSink {
                table: SharedProbes::default(),
                poke,
            },
            probers: Probers::default(),
            seeded: false,
        }
    }

    /// After an agent restart, readiness is taken from the status the API holds for the same
    /// container, so adopted pods do not flap to unready while probes warm up.
    pub fn seed(&mut self, pod: &Pod, observed: &ObservedPod) {
        if self.seeded {
            return;
        }
        self.seeded = true;
        let Ok(mut table) = self.sink.table.lock() else {
            return;
        };
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or_default();
        for s in statuses {
            let Some(id) = s
                .container_id
                .as_deref()
                .and_then(|i| i.strip_prefix("containerd://"))
            else {
                continue;
            };
            if observed
                .containers
                .iter()
                .any(|c| c.id == id && c.state == RunState::Running)
            {
                table.view.ready.insert(id.to_string(), s.ready);
                if s.started == Some(true) {
                    table.view.started.insert(id.to_string(), true);
                }
            }
        }
    }

    /// Starts the probes of running containers that have any, and stops those of containers
    /// that no longer run.
    pub fn manage(&mut self, pod: &Pod, observed: &ObservedPod, cri: &Arc<dyn Cri>) {
        let pod_ip = observed.pod_ip();
        let mut running = Vec::new();
        // Native sidecars are probed as the regular containers are.
        for c in decide::sidecars(pod).chain(decide::regular_containers(pod)) {
            let Some(o) = observed
                .latest(&c.name)
                .filter(|o| o.state == RunState::Running)
            else {
                continue;
            };
            running.push(o.id.clone());
            if c.startup_probe.is_some()
                || c.liveness_probe.is_some()
                || c.readiness_probe.is_some()
            {
                let target = ProbeTarget {
                    container: c.clone(),
                    id: o.id.clone(),
                    pod_ip: pod_ip.clone(),
                };
                self.probers.ensure(&target, cri, &self.sink);
            }
        }
        self.probers.retain(&running, &self.sink.table);
    }

    /// Containers whose liveness or startup probe failed past its threshold.
    pub fn unhealthy(&self) -> Vec<String> {
        self.sink
            .table
            .lock()
            .map(|t| t.unhealthy.clone())
            .unwrap_or_default()
    }

    /// Whether each probed container's startup probe passed, by id.
    pub fn started(&self) -> HashMap<String, bool> {
        self.sink
            .table
            .lock()
            .map(|t| t.view.started.clone())
            .unwrap_or_default()
    }

    /// The latest liveness failure message by container id.
    pub fn liveness_failures(&self) -> HashMap<String, String> {
        let Ok(t) = self.sink.table.lock() else {
            return HashMap::new();
        };
        t.last_failure
            .iter()
            .filter(|((_, kind), _)| *kind == Kind::Liveness.name())
            .map(|((id, _), why)| (id.clone(), why.clone()))
            .collect()
    }

    /// The results as they stand.
    pub fn snapshot(&self) -> ProbeTable {
        self.sink
            .table
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    }

    pub fn stop_all(&mut self) {
        self.probers.stop_all();
    }
}
