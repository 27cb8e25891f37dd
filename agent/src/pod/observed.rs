//! What the runtime holds for one pod, rebuilt from CRI labels at every sync (so a restarted
//! agent adopts running pods instead of recreating them).

use keelson_proto::runtime::v1 as cri;

use super::container_kind::ContainerKind;
use crate::cri::labels;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunState {
    Created,
    Running,
    Exited,
    Unknown,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ObservedSandbox {
    pub id: String,
    pub ready: bool,
    pub ip: Option<String>,
    pub attempt: u32,
    pub created_at_ns: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ObservedContainer {
    pub id: String,
    pub sandbox_id: String,
    pub name: String,
    pub kind: ContainerKind,
    pub attempt: u32,
    pub state: RunState,
    pub created_at_ns: i64,
    pub started_at_ns: i64,
    pub finished_at_ns: i64,
    pub exit_code: i32,
    pub reason: String,
    pub message: String,
    pub image: String,
    pub image_ref: String,
    /// Hash of the container spec it was created from (empty for containers of older agents).
    pub spec_hash: String,
    pub log_path: String,
}

/// The runtime view of one pod: its newest sandbox and that sandbox's containers, plus every
/// sandbox and container found (for cleanup of older ones).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObservedPod {
    pub sandbox: Option<ObservedSandbox>,
    pub containers: Vec<ObservedContainer>,
    pub all_sandbox_ids: Vec<String>,
    pub stale_containers: Vec<String>,
    /// The newest attempt of each container name in older sandboxes: a container started in a
    /// new sandbox (one that died, or a node that rebooted) continues their count, so its
    /// restartCount goes on as upstream's does.
    pub earlier_attempts: std::collections::BTreeMap<String, u32>,
}

impl ObservedPod {
    /// Builds the view from the pod's sandboxes and the statuses of its containers.
    /// `containers` pairs each container's sandbox id (from ListContainers) with its status.
    pub fn from_cri(
        sandboxes: &[cri::PodSandbox],
        ips: &[(String, String)],
        containers: &[(String, cri::ContainerStatus)],
    ) -> Self {
        let newest = sandboxes
            .iter()
            .max_by_key(|s| (s.metadata.as_ref().map_or(0, |m| m.attempt), s.created_at));
        let sandbox = newest.map(|s| ObservedSandbox {
            id: s.id.clone(),
            ready: s.state == cri::PodSandboxState::SandboxReady as i32,
            ip: ips
                .iter()
                .find(|(id, _)| *id == s.id)
                .map(|(_, ip)| ip.clone())
                .filter(|ip| !ip.is_empty()),
            attempt: s.metadata.as_ref().map_or(0, |m| m.attempt),
            created_at_ns: s.created_at,
        });
        let sandbox_id = sandbox.as_ref().map(|s| s.id.clone()).unwrap_or_default();
        let mut current = Vec::new();
        let mut stale = Vec::new();
        let mut earlier_attempts = newest
            .and_then(|s| s.annotations.get(labels::EARLIER_ATTEMPTS))
            .map(|v| parse_attempts(v))
            .unwrap_or_default();
        for (container_sandbox, c) in containers {
            let observed = observe_container(c, container_sandbox);
            if observed.sandbox_id == sandbox_id {
                current.push(observed);
            } else {
                let newest = earlier_attempts.entry(observed.name).or_default();
                *newest = (*newest).max(observed.attempt);
                stale.push(observed.id);
            }
        }
        current.sort_by(|a, b| (a.name.as_str(), a.attempt).cmp(&(b.name.as_str(), b.attempt)));
        ObservedPod {
            sandbox,
            containers: current,
            all_sandbox_ids: sandboxes.iter().map(|s| s.id.clone()).collect(),
            stale_containers: stale,
            earlier_attempts,
        }
    }

    /// The address of the current sandbox ("" when it has none).
    pub fn pod_ip(&self) -> String {
        self.sandbox
            .as_ref()
            .and_then(|s| s.ip.clone())
            .unwrap_or_default()
    }

    /// The newest attempt of the named container in the current sandbox.
    pub fn latest(&self, name: &str) -> Option<&ObservedContainer> {
        self.containers
            .iter()
            .filter(|c| c.name == name)
            .max_by_key(|c| c.attempt)
    }

    /// The newest attempt of each container, in this sandbox or the ones before it: what a
    /// sandbox that replaces this one records (labels::EARLIER_ATTEMPTS).
    pub fn attempts_so_far(&self) -> String {
        let mut newest = self.earlier_attempts.clone();
        for c in &self.containers {
            let a = newest.entry(c.name.clone()).or_default();
            *a = (*a).max(c.attempt);
        }
        newest
            .iter()
            .map(|(name, attempt)| format!("{name}={attempt}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The attempt a container's first start in the current sandbox gets: 0, or one past its
    /// newest attempt in an older sandbox.
    pub fn first_attempt(&self, name: &str) -> u32 {
        self.earlier_attempts.get(name).map_or(0, |a| a + 1)
    }

    /// The attempt before the newest one (for lastState and `logs --previous`).
    pub fn previous(&self, name: &str) -> Option<&ObservedContainer> {
        let latest = self.latest(name)?;
        self.containers
            .iter()
            .filter(|c| c.name == name && c.attempt < latest.attempt)
            .max_by_key(|c| c.attempt)
    }

    /// Exited attempts older than the previous one, and created-but-never-started ones that are
    /// not the newest (left by an agent that died in between): removed so they do not pile up.
    pub fn garbage(&self) -> Vec<String> {
        let mut ids = Vec::new();
        let names: std::collections::BTreeSet<&str> =
            self.containers.iter().map(|c| c.name.as_str()).collect();
        for name in names {
            let keep: Vec<&str> = [self.latest(name), self.previous(name)]
                .into_iter()
                .flatten()
                .map(|c| c.id.as_str())
                .collect();
            ids.extend(
                self.containers
                    .iter()
                    .filter(|c| {
                        let newest = keep.first() == Some(&c.id.as_str());
                        c.name == name
                            && ((c.state == RunState::Exited && !keep.contains(&c.id.as_str()))
                                || (c.state == RunState::Created && !newest))
                    })
                    .map(|c| c.id.clone()),
            );
        }
        ids
    }
}

/// "name=attempt,..." (labels::EARLIER_ATTEMPTS); a malformed entry is skipped.
fn parse_attempts(value: &str) -> std::collections::BTreeMap<String, u32> {
    value
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(name, attempt)| Some((name.to_string(), attempt.parse().ok()?)))
        .collect()
}

fn observe_container(c: &cri::ContainerStatus, sandbox_id: &str) -> ObservedContainer {
    let state = match cri::ContainerState::try_from(c.state) {
        Ok(cri::ContainerState::ContainerCreated) => RunState::Created,
        Ok(cri::ContainerState::ContainerRunning) => RunState::Running,
        Ok(cri::ContainerState::ContainerExited) => RunState::Exited,
        _ => RunState::Unknown,
    };
    let name = c
        .labels
        .get(labels::CONTAINER_NAME)
        .cloned()
        .or_else(|| c.metadata.as_ref().map(|m| m.name.clone()))
        .unwrap_or_default();
    ObservedContainer {
        id: c.id.clone(),
        sandbox_id: sandbox_id.to_string(),
        name,
        kind: ContainerKind::from_label(c.labels.get(labels::CONTAINER_KIND).map(String::as_str)),
        attempt: c.metadata.as_ref().map_or(0, |m| m.attempt),
        state,
        created_at_ns: c.created_at,
        started_at_ns: c.started_at,
        finished_at_ns: c.finished_at,
        exit_code: c.exit_code,
        reason: c.reason.clone(),
        message: c.message.clone(),
        image: c
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default(),
        image_ref: c.image_ref.clone(),
        log_path: c.log_path.clone(),
        spec_hash: c
            .annotations
            .get(crate::pod::translate::HASH_ANNOTATION)
            .cloned()
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(id: &str, attempt: u32, annotations: &[(&str, &str)]) -> cri::PodSandbox {
        cri::PodSandbox {
            id: id.into(),
            metadata: Some(cri::PodSandboxMetadata {
                attempt,
                ..Default::default()
            }),
            state: cri::PodSandboxState::SandboxReady as i32,
            created_at: i64::from(attempt),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn container(name: &str, attempt: u32) -> cri::ContainerStatus {
        cri::ContainerStatus {
            id: format!("{name}-{attempt}"),
            metadata: Some(cri::ContainerMetadata {
                name: name.into(),
                attempt,
            }),
            state: cri::ContainerState::ContainerExited as i32,
            ..Default::default()
        }
    }

    #[test]
    fn a_replacing_sandbox_carries_the_attempts_of_the_removed_ones() {
        // The first sandbox ran app up to attempt 2 and init once; the agent records that on
        // the sandbox replacing it (and removes the old one with its containers).
        let old = ObservedPod::from_cri(
            &[sandbox("sb0", 0, &[])],
            &[],
            &[
                ("sb0".into(), container("app", 1)),
                ("sb0".into(), container("app", 2)),
                ("sb0".into(), container("init", 0)),
            ],
        );
        let carried = old.attempts_so_far();
        assert_eq!(carried, "app=2,init=0");
        let new = ObservedPod::from_cri(
            &[sandbox("sb1", 1, &[(labels::EARLIER_ATTEMPTS, &carried)])],
            &[],
            &[],
        );
        assert_eq!(new.first_attempt("app"), 3);
        assert_eq!(new.first_attempt("init"), 1);
        assert_eq!(new.first_attempt("sidecar"), 0);
        // Replaced again before app restarted in sb1: the count still goes on.
        assert_eq!(new.attempts_so_far(), "app=2,init=0");
        // A malformed annotation is ignored, not fatal.
        let odd = ObservedPod::from_cri(
            &[sandbox(
                "sb2",
                2,
                &[(labels::EARLIER_ATTEMPTS, "app=x,=,web")],
            )],
            &[],
            &[],
        );
        assert_eq!(odd.first_attempt("app"), 0);
    }
}
