//! An in-memory CRI runtime for tests of the pod worker: sandboxes and containers with the
//! states, labels and timestamps containerd reports, and a log of the calls made.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use keelson_proto::runtime::v1 as cri;

use crate::cri::{Cri, CriError, CriResult};

#[derive(Default)]
struct State {
    sandboxes: Vec<(cri::PodSandbox, String)>,
    containers: Vec<cri::ContainerStatus>,
    container_sandbox: HashMap<String, String>,
    images: HashSet<String>,
    next: u32,
}

#[derive(Default)]
pub struct FakeCri {
    state: Mutex<State>,
    calls: Mutex<Vec<String>>,
    /// Images whose pull fails with "not found".
    pub missing_images: Mutex<HashSet<String>>,
    /// ExecSync answers by command (joined with spaces): the exit code, and how long the
    /// command runs first. Other commands exit 0 at once.
    pub exec_answers: Mutex<HashMap<String, (i32, std::time::Duration)>>,
    /// What ListContainerStats answers (filtered by id and labels), as a test sets it.
    pub container_stats: Mutex<Vec<cri::ContainerStats>>,
    /// ListContainerStats fails while this is set (a runtime that cannot read cgroups).
    pub container_stats_fail: std::sync::atomic::AtomicBool,
    /// What ListPodSandboxStats answers (filtered by id and labels).
    pub pod_sandbox_stats: Mutex<Vec<cri::PodSandboxStats>>,
}

fn now_ns() -> i64 {
    i64::try_from(k8s_openapi::jiff::Timestamp::now().as_nanosecond()).unwrap_or(0)
}

/// The stats a test set that a List*Stats filter (id, labels) selects.
fn selected<T: Clone>(
    items: &Mutex<Vec<T>>,
    call: &'static str,
    attrs: impl Fn(&T) -> (Option<String>, Option<HashMap<String, String>>),
    id: &str,
    selector: &HashMap<String, String>,
) -> CriResult<Vec<T>> {
    let items = items.lock().map_err(|_| not_found(call, "lock"))?;
    Ok(items
        .iter()
        .filter(|s| {
            let (sid, labels) = attrs(s);
            (id.is_empty() || sid.as_deref() == Some(id))
                && matches(&labels.unwrap_or_default(), selector)
        })
        .cloned()
        .collect())
}

fn matches(labels: &HashMap<String, String>, selector: &HashMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn not_found(call: &'static str, what: &str) -> CriError {
    CriError {
        call,
        status: tonic::Status::not_found(format!("{what} not found")),
    }
}

impl State {
    /// The containers of a sandbox.
    fn members(&self, sandbox: &str) -> Vec<String> {
        self.container_sandbox
            .iter()
            .filter(|(_, sb)| *sb == sandbox)
            .map(|(c, _)| c.clone())
            .collect()
    }
}

impl FakeCri {
    fn lock_state(&self, call: &'static str) -> CriResult<MutexGuard<'_, State>> {
        self.state.lock().map_err(|_| not_found(call, "lock"))
    }

    fn log(&self, call: impl Into<String>) {
        if let Ok(mut c) = self.calls.lock() {
            c.push(call.into());
        }
    }

    /// The calls made so far (name and main argument), then forgotten.
    pub fn take_calls(&self) -> Vec<String> {
        self.calls
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    }

    pub fn add_image(&self, image: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.images.insert(image.to_string());
        }
    }

    /// Makes the newest running container named `name` exit with `code`, `ago_s` seconds ago.
    pub fn exit(&self, name: &str, code: i32, ago_s: i64) {
        if let Ok(mut s) = self.state.lock() {
            if let Some(c) = s
                .containers
                .iter_mut()
                .filter(|c| c.metadata.as_ref().is_some_and(|m| m.name == name))
                .max_by_key(|c| c.metadata.as_ref().map_or(0, |m| m.attempt))
            {
                c.state = cri::ContainerState::ContainerExited as i32;
                c.exit_code = code;
                c.finished_at = now_ns() - ago_s * 1_000_000_000;
            }
        }
    }

    pub fn running_containers(&self) -> usize {
        self.state
            .lock()
            .map(|s| {
                s.containers
                    .iter()
                    .filter(|c| c.state == cri::ContainerState::ContainerRunning as i32)
                    .count()
            })
            .unwrap_or(0)
    }

    pub fn sandbox_count(&self) -> usize {
        self.state.lock().map(|s| s.sandboxes.len()).unwrap_or(0)
    }
}

#[async_trait]
impl Cri for FakeCri {
    async fn version(&self) -> CriResult<cri::VersionResponse> {
        Ok(cri::VersionResponse {
            runtime_name: "fake".into(),
            runtime_version: "1".into(),
            runtime_api_version: "v1".into(),
            ..Default::default()
        })
    }

    async fn status(&self) -> CriResult<cri::StatusResponse> {
        Ok(cri::StatusResponse::default())
    }

    async fn run_pod_sandbox(&self, config: cri::PodSandboxConfig) -> CriResult<String> {
        let mut s = self.lock_state("RunPodSandbox")?;
        s.next += 1;
        let id = format!("sb{}", s.next);
        let ip = format!("10.0.0.{}", s.next + 1);
        self.log(format!(
            "RunPodSandbox {}",
            config.metadata.as_ref().map_or("", |m| m.name.as_str())
        ));
        s.sandboxes.push((
            cri::PodSandbox {
                id: id.clone(),
                metadata: config.metadata.clone(),
                state: cri::PodSandboxState::SandboxReady as i32,
                created_at: now_ns(),
                labels: config.labels.clone(),
                annotations: config.annotations.clone(),
                runtime_handler: String::new(),
            },
            ip,
        ));
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, id: &str) -> CriResult<()> {
        self.log(format!("StopPodSandbox {id}"));
        let mut s = self.lock_state("StopPodSandbox")?;
        for (sb, _) in s.sandboxes.iter_mut().filter(|(sb, _)| sb.id == id) {
            sb.state = cri::PodSandboxState::SandboxNotready as i32;
        }
        let members = s.members(id);
        for c in s.containers.iter_mut().filter(|c| members.contains(&c.id)) {
            if c.state == cri::ContainerState::ContainerRunning as i32 {
                c.state = cri::ContainerState::ContainerExited as i32;
                c.exit_code = 137;
                c.finished_at = now_ns();
            }
        }
        Ok(())
    }

    async fn remove_pod_sandbox(&self, id: &str) -> CriResult<()> {
        self.log(format!("RemovePodSandbox {id}"));
        let mut s = self.lock_state("RemovePodSandbox")?;
        s.sandboxes.retain(|(sb, _)| sb.id != id);
        let members = s.members(id);
        s.containers.retain(|c| !members.contains(&c.id));
        Ok(())
    }

    async fn pod_sandbox_status(&self, id: &str) -> CriResult<cri::PodSandboxStatus> {
        let s = self.lock_state("PodSandboxStatus")?;
        let (sb, ip) = s
            .sandboxes
            .iter()
            .find(|(sb, _)| sb.id == id)
            .ok_or_else(|| not_found("PodSandboxStatus", id))?;
        Ok(cri::PodSandboxStatus {
            id: sb.id.clone(),
            metadata: sb.metadata.clone(),
            state: sb.state,
            created_at: sb.created_at,
            network: Some(cri::PodSandboxNetworkStatus {
                ip: ip.clone(),
                additional_ips: vec![],
            }),
            labels: sb.labels.clone(),
            ..Default::default()
        })
    }

    async fn list_pod_sandbox(
        &self,
        labels: HashMap<String, String>,
    ) -> CriResult<Vec<cri::PodSandbox>> {
        self.log("ListPodSandbox");
        let s = self.lock_state("ListPodSandbox")?;
        Ok(s.sandboxes
            .iter()
            .filter(|(sb, _)| matches(&sb.labels, &labels))
            .map(|(sb, _)| sb.clone())
            .collect())
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: cri::ContainerConfig,
        _: cri::PodSandboxConfig,
    ) -> CriResult<String> {
        let mut s = self.lock_state("CreateContainer")?;
        s.next += 1;
        let id = format!("c{}", s.next);
        let meta = config.metadata.clone().unwrap_or_default();
        self.log(format!("CreateContainer {} {}", meta.name, meta.attempt));
        s.container_sandbox
            .insert(id.clone(), sandbox_id.to_string());
        s.containers.push(cri::ContainerStatus {
            id: id.clone(),
            metadata: config.metadata.clone(),
            state: cri::ContainerState::ContainerCreated as i32,
            created_at: now_ns(),
            image: config.image.clone(),
            image_ref: config
                .image
                .as_ref()
                .map(|i| i.image.clone())
                .unwrap_or_default(),
            labels: config.labels.clone(),
            annotations: config.annotations.clone(),
            log_path: config.log_path.clone(),
            ..Default::default()
        });
        Ok(id)
    }

    async fn start_container(&self, id: &str) -> CriResult<()> {
        self.log(format!("StartContainer {id}"));
        let mut s = self.lock_state("StartContainer")?;
        let c = s
            .containers
            .iter_mut()
            .find(|c| c.id == id)
            .ok_or_else(|| not_found("StartContainer", id))?;
        c.state = cri::ContainerState::ContainerRunning as i32;
        c.started_at = now_ns();
        Ok(())
    }

    async fn stop_container(&self, id: &str, timeout_seconds: i64) -> CriResult<()> {
        self.log(format!("StopContainer {id} {timeout_seconds}"));
        let mut s = self.lock_state("StopContainer")?;
        if let Some(c) = s.containers.iter_mut().find(|c| c.id == id) {
            if c.state == cri::ContainerState::ContainerRunning as i32 {
                c.state = cri::ContainerState::ContainerExited as i32;
                c.exit_code = 0;
                c.finished_at = now_ns();
            }
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> CriResult<()> {
        self.log(format!("RemoveContainer {id}"));
        let mut s = self.lock_state("RemoveContainer")?;
        s.containers.retain(|c| c.id != id);
        Ok(())
    }

    async fn list_containers(
        &self,
        labels: HashMap<String, String>,
    ) -> CriResult<Vec<cri::Container>> {
        self.log("ListContainers");
        let s = self.lock_state("ListContainers")?;
        Ok(s.containers
            .iter()
            .filter(|c| matches(&c.labels, &labels))
            .map(|c| cri::Container {
                id: c.id.clone(),
                pod_sandbox_id: s.container_sandbox.get(&c.id).cloned().unwrap_or_default(),
                metadata: c.metadata.clone(),
                image: c.image.clone(),
                image_ref: c.image_ref.clone(),
                state: c.state,
                created_at: c.created_at,
                labels: c.labels.clone(),
                annotations: c.annotations.clone(),
                image_id: c.image_ref.clone(),
            })
            .collect())
    }

    async fn container_status(&self, id: &str) -> CriResult<cri::ContainerStatus> {
        let s = self.lock_state("ContainerStatus")?;
        s.containers
            .iter()
            .find(|c| c.id == id)
            .cloned()
            .ok_or_else(|| not_found("ContainerStatus", id))
    }

    async fn exec_sync(
        &self,
        id: &str,
        cmd: Vec<String>,
        _: i64,
    ) -> CriResult<cri::ExecSyncResponse> {
        let cmd = cmd.join(" ");
        self.log(format!("ExecSync {id} {cmd}"));
        let answer = self
            .exec_answers
            .lock()
            .ok()
            .and_then(|a| a.get(&cmd).copied());
        let Some((exit_code, takes)) = answer else {
            return Ok(cri::ExecSyncResponse::default());
        };
        tokio::time::sleep(takes).await;
        Ok(cri::ExecSyncResponse {
            exit_code,
            ..Default::default()
        })
    }

    async fn reopen_container_log(&self, id: &str) -> CriResult<()> {
        self.log(format!("ReopenContainerLog {id}"));
        Ok(())
    }

    async fn list_pod_sandbox_stats(
        &self,
        filter: cri::PodSandboxStatsFilter,
    ) -> CriResult<Vec<cri::PodSandboxStats>> {
        self.log("ListPodSandboxStats");
        let attrs = |s: &cri::PodSandboxStats| {
            let a = s.attributes.as_ref();
            (a.map(|a| a.id.clone()), a.map(|a| a.labels.clone()))
        };
        selected(
            &self.pod_sandbox_stats,
            "ListPodSandboxStats",
            attrs,
            &filter.id,
            &filter.label_selector,
        )
    }

    async fn list_container_stats(
        &self,
        filter: cri::ContainerStatsFilter,
    ) -> CriResult<Vec<cri::ContainerStats>> {
        self.log("ListContainerStats");
        if self
            .container_stats_fail
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(CriError {
                call: "ListContainerStats",
                status: tonic::Status::unavailable("cgroup stats unavailable"),
            });
        }
        let attrs = |s: &cri::ContainerStats| {
            let a = s.attributes.as_ref();
            (a.map(|a| a.id.clone()), a.map(|a| a.labels.clone()))
        };
        selected(
            &self.container_stats,
            "ListContainerStats",
            attrs,
            &filter.id,
            &filter.label_selector,
        )
    }

    async fn list_images(&self) -> CriResult<Vec<cri::Image>> {
        let s = self.lock_state("ListImages")?;
        Ok(s.images
            .iter()
            .map(|i| cri::Image {
                id: format!("sha256:{i}"),
                repo_tags: vec![i.clone()],
                size: 1000,
                ..Default::default()
            })
            .collect())
    }

    async fn image_status(&self, image: &str) -> CriResult<Option<cri::Image>> {
        let s = self.lock_state("ImageStatus")?;
        Ok(s.images.contains(image).then(|| cri::Image {
            id: format!("sha256:{image}"),
            repo_tags: vec![image.to_string()],
            ..Default::default()
        }))
    }

    async fn pull_image(
        &self,
        image: &str,
        auth: Option<cri::AuthConfig>,
        _: Option<cri::PodSandboxConfig>,
    ) -> CriResult<String> {
        let user = auth
            .map(|a| format!(" as {}", a.username))
            .unwrap_or_default();
        self.log(format!("PullImage {image}{user}"));
        if self
            .missing_images
            .lock()
            .map(|m| m.contains(image))
            .unwrap_or(false)
        {
            return Err(CriError {
                call: "PullImage",
                status: tonic::Status::not_found(format!("{image}: not found")),
            });
        }
        self.add_image(image);
        Ok(format!("sha256:{image}"))
    }

    async fn remove_image(&self, image: &str) -> CriResult<()> {
        self.log(format!("RemoveImage {image}"));
        self.lock_state("RemoveImage")?.images.remove(image);
        Ok(())
    }

    async fn sandbox_image(&self) -> CriResult<Option<String>> {
        Ok(None)
    }

    async fn image_fs_info(&self) -> CriResult<cri::ImageFsInfoResponse> {
        Ok(cri::ImageFsInfoResponse::default())
    }
}
