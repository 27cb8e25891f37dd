//! Tearing a pod down: preStop hooks, stop within the grace period, sandboxes removed, then
//! the API object deleted; and the termination messages of exited containers.

use super::*;

impl Worker {
    /// Stops every container (preStop first, within the grace period), stops and removes the
    /// sandboxes (CNI DEL releases the address), removes the pod's volumes and logs, then deletes
    /// the API object with grace 0 so `kubectl delete` returns.
    pub(super) async fn teardown(
        &mut self,
        pod: Option<&Pod>,
        why: Teardown,
    ) -> Result<(), SyncError> {
        self.probers.stop_all();
        let observed = self.observe().await?;
        let grace = pod.map_or(2, grace_seconds);
        let cri = self.ctx.cri.clone();
        let mut stops = Vec::new();
        for c in observed
            .containers
            .iter()
            .filter(|c| c.state == RunState::Running)
        {
            let spec = pod.and_then(|p| find_container(p, &c.name, c.init));
            if let Some(p) = pod {
                let msg = format!("Stopping container {}", c.name);
                self.ctx
                    .events
                    .pod(p, Some(&c.name), Kind::Normal, "Killing", msg);
            }
            let id = c.id.clone();
            let cri = cri.clone();
            let ip = observed
                .sandbox
                .as_ref()
                .and_then(|s| s.ip.clone())
                .unwrap_or_default();
            stops.push(async move {
                if let Some(spec) = spec {
                    pre_stop(cri.as_ref(), &spec, &id, &ip, grace).await;
                }
                cri.stop_container(&id, grace).await
            });
        }
        for result in futures::future::join_all(stops).await {
            if let Err(e) = result {
                if !e.is_not_found() {
                    return Err(e.into());
                }
            }
        }
        for id in &observed.all_sandbox_ids {
            cri.stop_pod_sandbox(id).await?;
            cri.remove_pod_sandbox(id).await?;
        }
        if let Some(p) = pod {
            let _ = std::fs::remove_dir_all(volumes::pod_dir(&self.ctx.root, p));
            let _ = std::fs::remove_dir_all(translate::pod_log_dir(&self.ctx.settings, p));
        } else {
            let _ = std::fs::remove_dir_all(self.ctx.root.join("pods").join(&self.uid));
        }
        if let (Some(p), Teardown::Deleted) = (pod, why) {
            let api: Api<Pod> = Api::namespaced(
                self.ctx.client.clone(),
                p.metadata.namespace.as_deref().unwrap_or("default"),
            );
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: p.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match api
                .delete(p.metadata.name.as_deref().unwrap_or(""), &params)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => return Err(SyncError::Api(format!("deleting pod {}: {e}", pod_key(p)))),
            }
            tracing::info!(pod = %pod_key(p), "pod terminated and deleted");
        } else {
            tracing::info!(pod = %self.uid, "pod no longer in the API: removed from the runtime");
        }
        Ok(())
    }
}

/// The message of exited containers: what they wrote to their terminationMessagePath, or with
/// terminationMessagePolicy FallbackToLogsOnError and a failure, the end of their log.
pub(super) fn termination_messages(root: &std::path::Path, pod: &Pod, observed: &mut ObservedPod) {
    const MAX: usize = 4096;
    for c in observed
        .containers
        .iter_mut()
        .filter(|c| c.state == RunState::Exited && c.message.is_empty())
    {
        let file = volumes::termination_log(root, pod, &c.name, c.attempt);
        let mut text = std::fs::read(&file)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let spec = find_container(pod, &c.name, c.init);
        let fallback = spec.and_then(|s| s.termination_message_policy).as_deref()
            == Some("FallbackToLogsOnError");
        if text.is_empty() && fallback && c.exit_code != 0 {
            let log = std::fs::read_to_string(&c.log_path).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = crate::server::logs::tail(&lines, 80);
            text = crate::server::logs::render(&tail, false);
            if text.len() > 2048 {
                let cut = text.len() - 2048;
                let start = (cut..text.len())
                    .find(|i| text.is_char_boundary(*i))
                    .unwrap_or(text.len());
                text = text[start..].to_string();
            }
        }
        if text.len() > MAX {
            let end = (0..=MAX)
                .rev()
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(0);
            text.truncate(end);
        }
        c.message = text;
    }
}

/// preStop hook (exec, httpGet, tcpSocket or sleep), bounded by the grace period.
pub(super) async fn pre_stop(
    cri: &dyn crate::cri::Cri,
    container: &Container,
    id: &str,
    pod_ip: &str,
    grace: i64,
) {
    let Some(handler) = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.clone())
    else {
        return;
    };
    let budget = Duration::from_secs(u64::try_from(grace.max(1)).unwrap_or(30));
    if let Some(sleep) = handler.sleep.as_ref() {
        tokio::time::sleep(
            Duration::from_secs(u64::try_from(sleep.seconds.max(0)).unwrap_or(0)).min(budget),
        )
        .await;
        return;
    }
    let probe = k8s_openapi::api::core::v1::Probe {
        exec: handler.exec.clone(),
        http_get: handler.http_get.clone(),
        tcp_socket: handler.tcp_socket.clone(),
        timeout_seconds: Some(i32::try_from(grace.max(1)).unwrap_or(30)),
        ..Default::default()
    };
    let result = tokio::time::timeout(
        budget,
        probe::probe_once(&probe, container, pod_ip, id, cri),
    )
    .await;
    tracing::info!(container = %container.name, ?result, "preStop hook ran");
}
