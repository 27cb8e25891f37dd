//! What the worker tells: probes seeded and run, events, the start metric, and the status.

use super::*;

impl Worker {
    /// After an agent restart, readiness is taken from the status the API holds for the same
    /// container, so adopted pods do not flap to unready while probes warm up.
    pub(super) fn seed_probes(&mut self, pod: &Pod, observed: &ObservedPod) {
        if self.seeded {
            return;
        }
        self.seeded = true;
        let Ok(mut table) = self.probes.lock() else {
            return;
        };
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
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

    pub(super) fn manage_probes(&mut self, pod: &Pod, observed: &ObservedPod) {
        let ip = observed
            .sandbox
            .as_ref()
            .and_then(|s| s.ip.clone())
            .unwrap_or_default();
        let mut running = Vec::new();
        for c in decide::regular_containers(pod) {
            if let Some(o) = observed
                .latest(&c.name)
                .filter(|o| o.state == RunState::Running)
            {
                running.push(o.id.clone());
                if c.startup_probe.is_some()
                    || c.liveness_probe.is_some()
                    || c.readiness_probe.is_some()
                {
                    self.probers
                        .ensure(c, &o.id, &ip, &self.ctx.cri, &self.probes, &self.poke_tx);
                }
            }
        }
        self.probers.retain(&running, &self.probes);
    }

    /// Events for waiting containers (BackOff, Failed) and readiness failures, once per change.
    pub(super) fn announce(
        &mut self,
        pod: &Pod,
        observed: &ObservedPod,
        waiting: &BTreeMap<String, Waiting>,
    ) {
        for (name, w) in waiting {
            let key = format!("{}|{}", w.reason, w.message);
            if self.announced_waiting.get(name) == Some(&key) {
                continue;
            }
            self.announced_waiting.insert(name.clone(), key);
            let (kind, reason, message) = match w.reason.as_str() {
                "CrashLoopBackOff" => (
                    Kind::Warning,
                    "BackOff",
                    format!(
                        "Back-off restarting failed container {name} in pod {}",
                        pod_key(pod)
                    ),
                ),
                "ImagePullBackOff" => (Kind::Normal, "BackOff", w.message.clone()),
                "ContainerCreating" | "PodInitializing" => continue,
                other => (
                    Kind::Warning,
                    "Failed",
                    format!("Error: {other}: {}", w.message),
                ),
            };
            self.ctx.events.pod(pod, Some(name), kind, reason, message);
        }
        self.announced_waiting
            .retain(|name, _| waiting.contains_key(name));
        let Ok(table) = self.probes.lock() else {
            return;
        };
        for c in observed
            .containers
            .iter()
            .filter(|c| c.state == RunState::Running)
        {
            let unready = table.view.ready.get(&c.id) == Some(&false);
            if unready && self.announced_unready.insert(c.id.clone()) {
                if let Some(why) = table.last_failure.get(&(c.id.clone(), "Readiness")) {
                    self.ctx.events.pod(
                        pod,
                        Some(&c.name),
                        Kind::Warning,
                        "Unhealthy",
                        format!("Readiness probe failed: {why}"),
                    );
                }
            } else if !unready {
                self.announced_unready.remove(&c.id);
            }
        }
    }

    pub(super) fn record_start(&mut self, pod: &Pod, status: &PodStatus) {
        if self.start_recorded {
            return;
        }
        let all_running = status.container_statuses.as_ref().is_some_and(|cs| {
            !cs.is_empty()
                && cs
                    .iter()
                    .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        });
        if all_running {
            self.start_recorded = true;
            // Pods adopted after a restart were started long ago: only fresh starts count.
            if pod.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running") {
                if let Some(created) = &pod.metadata.creation_timestamp {
                    let secs = Timestamp::now().duration_since(created.0).as_secs_f64();
                    self.ctx.metrics.observe_pod_start(secs.max(0.0));
                }
            }
        }
    }

    pub(super) async fn write_status(
        &mut self,
        pod: &Pod,
        status: PodStatus,
    ) -> Result<(), SyncError> {
        if pod.status.as_ref() == Some(&status) || self.last_written.as_ref() == Some(&status) {
            return Ok(());
        }
        let api: Api<Pod> = Api::namespaced(
            self.ctx.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = pod.metadata.name.clone().unwrap_or_default();
        let patch = serde_json::json!({ "status": status });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.last_written = Some(status);
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(SyncError::Api(format!(
                "writing status of pod {}: {e}",
                pod_key(pod)
            ))),
        }
    }
}
