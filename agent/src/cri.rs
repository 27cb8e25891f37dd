//! The CRI calls the agent makes, behind a small trait so pod logic can be tested with a fake,
//! and the gRPC implementation over keelson-proto (with per-call latency metrics).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use keelson_proto::runtime::v1 as cri;
use keelson_proto::{ImageServiceClient, RuntimeServiceClient};
use tonic::transport::Channel;

use crate::metrics::Metrics;

/// Labels the agent puts on sandboxes and containers; the same keys as the kubelet, so
/// `crictl` users find what they expect, and the agent rebuilds its state from them on restart.
pub mod labels {
    pub const POD_NAME: &str = "io.kubernetes.pod.name";
    pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
    pub const POD_UID: &str = "io.kubernetes.pod.uid";
    pub const CONTAINER_NAME: &str = "io.kubernetes.container.name";
    /// Marks objects created by a Keelson agent (value: node name).
    pub const NODE: &str = "io.keelson.node";
    /// "init" for init containers, "regular" otherwise.
    pub const CONTAINER_KIND: &str = "io.keelson.container.kind";
    /// On a sandbox (an annotation): the newest attempt of each container in the sandboxes it
    /// replaced, "name=attempt,..." (those are removed first), so restart counts go on.
    pub const EARLIER_ATTEMPTS: &str = "io.keelson.earlier-attempts";
}

/// A failed CRI call: which call, and the runtime's message.
#[derive(Debug, thiserror::Error)]
#[error("CRI {call} failed: {}", status.message())]
pub struct CriError {
    pub call: &'static str,
    pub status: tonic::Status,
}

impl CriError {
    pub fn is_not_found(&self) -> bool {
        self.status.code() == tonic::Code::NotFound
    }
}

pub type CriResult<T> = Result<T, CriError>;

#[async_trait]
pub trait Cri: Send + Sync {
    async fn version(&self) -> CriResult<cri::VersionResponse>;
    async fn status(&self) -> CriResult<cri::StatusResponse>;
    async fn run_pod_sandbox(&self, config: cri::PodSandboxConfig) -> CriResult<String>;
    async fn stop_pod_sandbox(&self, id: &str) -> CriResult<()>;
    async fn remove_pod_sandbox(&self, id: &str) -> CriResult<()>;
    async fn pod_sandbox_status(&self, id: &str) -> CriResult<cri::PodSandboxStatus>;
    async fn list_pod_sandbox(
        &self,
        labels: HashMap<String, String>,
    ) -> CriResult<Vec<cri::PodSandbox>>;
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: cri::ContainerConfig,
        sandbox_config: cri::PodSandboxConfig,
    ) -> CriResult<String>;
    async fn start_container(&self, id: &str) -> CriResult<()>;
    async fn stop_container(&self, id: &str, timeout_seconds: i64) -> CriResult<()>;
    async fn remove_container(&self, id: &str) -> CriResult<()>;
    async fn list_containers(
        &self,
        labels: HashMap<String, String>,
    ) -> CriResult<Vec<cri::Container>>;
    async fn container_status(&self, id: &str) -> CriResult<cri::ContainerStatus>;
    async fn exec_sync(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout_seconds: i64,
    ) -> CriResult<cri::ExecSyncResponse>;
    /// Asks the runtime to reopen the container's log file (after the agent rotated it).
    async fn reopen_container_log(&self, id: &str) -> CriResult<()>;
    /// Resource usage (CPU time, memory) of the containers that `filter` selects.
    async fn list_container_stats(
        &self,
        filter: cri::ContainerStatsFilter,
    ) -> CriResult<Vec<cri::ContainerStats>>;
    /// Pods' sandboxes as a whole (their network, here).
    async fn list_pod_sandbox_stats(
        &self,
        filter: cri::PodSandboxStatsFilter,
    ) -> CriResult<Vec<cri::PodSandboxStats>>;
    async fn list_images(&self) -> CriResult<Vec<cri::Image>>;
    async fn image_status(&self, image: &str) -> CriResult<Option<cri::Image>>;
    async fn pull_image(
        &self,
        image: &str,
        auth: Option<cri::AuthConfig>,
        sandbox_config: Option<cri::PodSandboxConfig>,
    ) -> CriResult<String>;
    async fn remove_image(&self, image: &str) -> CriResult<()>;
    /// The runtime's sandbox (pause) image, from its verbose status (containerd's
    /// config.sandboxImage), if it says.
    async fn sandbox_image(&self) -> CriResult<Option<String>>;
    /// The filesystems holding the runtime's images (their mountpoints and usage).
    async fn image_fs_info(&self) -> CriResult<cri::ImageFsInfoResponse>;
}

/// Stops and removes every pod sandbox the runtime holds (CNI DEL releases their addresses), one
/// failure not stopping the rest: how tests and benchmarks leave a node clean.
pub async fn remove_all_sandboxes(cri: &dyn Cri) -> CriResult<()> {
    for s in cri.list_pod_sandbox(HashMap::new()).await? {
        let _ = cri.stop_pod_sandbox(&s.id).await;
        let _ = cri.remove_pod_sandbox(&s.id).await;
    }
    Ok(())
}

/// CRI over gRPC to containerd.
#[derive(Clone)]
pub struct GrpcCri {
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
    metrics: Arc<Metrics>,
}

impl GrpcCri {
    pub fn new(channel: Channel, metrics: Arc<Metrics>) -> Self {
        // containerd answers large lists (many containers); raise tonic's 4 MiB decode default.
        let runtime =
            RuntimeServiceClient::new(channel.clone()).max_decoding_message_size(64 << 20);
        let images = ImageServiceClient::new(channel).max_decoding_message_size(64 << 20);
        GrpcCri {
            runtime,
            images,
            metrics,
        }
    }

    /// Connects to the runtime's CRI socket (one try).
    pub async fn connect(
        socket: &Path,
        metrics: Arc<Metrics>,
    ) -> Result<Self, keelson_proto::ConnectError> {
        let channel = keelson_proto::connect_unix(socket).await?;
        Ok(GrpcCri::new(channel, metrics))
    }

    fn observe(&self, call: &'static str, started: Instant) {
        self.metrics
            .observe_cri(call, started.elapsed().as_secs_f64());
    }
}

macro_rules! call {
    ($self:ident, $client:ident, $method:ident, $name:literal, $req:expr) => {{
        let started = Instant::now();
        let mut client = $self.$client.clone();
        let result = client.$method($req).await;
        $self.observe($name, started);
        result.map(|r| r.into_inner()).map_err(|status| CriError {
            call: $name,
            status,
        })
    }};
}

#[async_trait]
impl Cri for GrpcCri {
    async fn version(&self) -> CriResult<cri::VersionResponse> {
        call!(
            self,
            runtime,
            version,
            "Version",
            cri::VersionRequest {
                version: "v1".into()
            }
        )
    }

    async fn status(&self) -> CriResult<cri::StatusResponse> {
        call!(
            self,
            runtime,
            status,
            "Status",
            cri::StatusRequest { verbose: false }
        )
    }

    async fn run_pod_sandbox(&self, config: cri::PodSandboxConfig) -> CriResult<String> {
        let req = cri::RunPodSandboxRequest {
            config: Some(config),
            runtime_handler: String::new(),
        };
        call!(self, runtime, run_pod_sandbox, "RunPodSandbox", req).map(|r| r.pod_sandbox_id)
    }

    async fn stop_pod_sandbox(&self, id: &str) -> CriResult<()> {
        let req = cri::StopPodSandboxRequest {
            pod_sandbox_id: id.into(),
        };
        call!(self, runtime, stop_pod_sandbox, "StopPodSandbox", req).map(|_| ())
    }

    async fn remove_pod_sandbox(&self, id: &str) -> CriResult<()> {
        let req = cri::RemovePodSandboxRequest {
            pod_sandbox_id: id.into(),
        };
        call!(self, runtime, remove_pod_sandbox, "RemovePodSandbox", req).map(|_| ())
    }

    async fn pod_sandbox_status(&self, id: &str) -> CriResult<cri::PodSandboxStatus> {
        let req = cri::PodSandboxStatusRequest {
            pod_sandbox_id: id.into(),
            verbose: false,
        };
        let resp = call!(self, runtime, pod_sandbox_status, "PodSandboxStatus", req)?;
        resp.status.ok_or_else(|| CriError {
            call: "PodSandboxStatus",
            status: tonic::Status::not_found(format!("no status for sandbox {id}")),
        })
    }

    async fn list_pod_sandbox(
        &self,
        labels: HashMap<String, String>,
    ) -> CriResult<Vec<cri::PodSandbox>> {
        let req = cri::ListPodSandboxRequest {
            filter: Some(cri::PodSandboxFilter {
                label_selector: labels,
                ..Default::default()
            }),
        };
        call!(self, runtime, list_pod_sandbox, "ListPodSandbox", req).map(|r| r.items)
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: cri::ContainerConfig,
        sandbox_config: cri::PodSandboxConfig,
    ) -> CriResult<String> {
        let req = cri::CreateContainerRequest {
            pod_sandbox_id: sandbox_id.into(),
            config: Some(config),
            sandbox_config: Some(sandbox_config),
        };
        call!(self, runtime, create_container, "CreateContainer", req).map(|r| r.container_id)
    }

    async fn start_container(&self, id: &str) -> CriResult<()> {
        let req = cri::StartContainerRequest {
            container_id: id.into(),
        };
        call!(self, runtime, start_container, "StartContainer", req).map(|_| ())
    }

    async fn stop_container(&self, id: &str, timeout_seconds: i64) -> CriResult<()> {
        let req = cri::StopContainerRequest {
            container_id: id.into(),
            timeout: timeout_seconds,
        };
        call!(self, runtime, stop_container, "StopContainer", req).map(|_| ())
    }

    async fn remove_container(&self, id: &str) -> CriResult<()> {
        let req = cri::RemoveContainerRequest {
            container_id: id.into(),
        };
        call!(self, runtime, remove_container, "RemoveContainer", req).map(|_| ())
    }

    async fn list_containers(
        &self,
        labels: HashMap<String, String>,
    ) -> CriResult<Vec<cri::Container>> {
        let req = cri::ListContainersRequest {
            filter: Some(cri::ContainerFilter {
                label_selector: labels,
                ..Default::default()
            }),
        };
        call!(self, runtime, list_containers, "ListContainers", req).map(|r| r.containers)
    }

    async fn container_status(&self, id: &str) -> CriResult<cri::ContainerStatus> {
        let req = cri::ContainerStatusRequest {
            container_id: id.into(),
            verbose: false,
        };
        let resp = call!(self, runtime, container_status, "ContainerStatus", req)?;
        resp.status.ok_or_else(|| CriError {
            call: "ContainerStatus",
            status: tonic::Status::not_found(format!("no status for container {id}")),
        })
    }

    async fn exec_sync(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout_seconds: i64,
    ) -> CriResult<cri::ExecSyncResponse> {
        let req = cri::ExecSyncRequest {
            container_id: id.into(),
            cmd,
            timeout: timeout_seconds,
        };
        call!(self, runtime, exec_sync, "ExecSync", req)
    }

    async fn reopen_container_log(&self, id: &str) -> CriResult<()> {
        let req = cri::ReopenContainerLogRequest {
            container_id: id.into(),
        };
        call!(
            self,
            runtime,
            reopen_container_log,
            "ReopenContainerLog",
            req
        )
        .map(|_| ())
    }

    async fn list_container_stats(
        &self,
        filter: cri::ContainerStatsFilter,
    ) -> CriResult<Vec<cri::ContainerStats>> {
        let req = cri::ListContainerStatsRequest {
            filter: Some(filter),
        };
        call!(
            self,
            runtime,
            list_container_stats,
            "ListContainerStats",
            req
        )
        .map(|r| r.stats)
    }

    async fn list_pod_sandbox_stats(
        &self,
        filter: cri::PodSandboxStatsFilter,
    ) -> CriResult<Vec<cri::PodSandboxStats>> {
        let req = cri::ListPodSandboxStatsRequest {
            filter: Some(filter),
        };
        call!(
            self,
            runtime,
            list_pod_sandbox_stats,
            "ListPodSandboxStats",
            req
        )
        .map(|r| r.stats)
    }

    async fn list_images(&self) -> CriResult<Vec<cri::Image>> {
        call!(
            self,
            images,
            list_images,
            "ListImages",
            cri::ListImagesRequest { filter: None }
        )
        .map(|r| r.images)
    }

    async fn image_status(&self, image: &str) -> CriResult<Option<cri::Image>> {
        let req = cri::ImageStatusRequest {
            image: Some(cri::ImageSpec {
                image: image.into(),
                ..Default::default()
            }),
            verbose: false,
        };
        call!(self, images, image_status, "ImageStatus", req).map(|r| r.image)
    }

    async fn pull_image(
        &self,
        image: &str,
        auth: Option<cri::AuthConfig>,
        sandbox_config: Option<cri::PodSandboxConfig>,
    ) -> CriResult<String> {
        let req = cri::PullImageRequest {
            image: Some(cri::ImageSpec {
                image: image.into(),
                ..Default::default()
            }),
            auth,
            sandbox_config,
        };
        call!(self, images, pull_image, "PullImage", req).map(|r| r.image_ref)
    }

    async fn remove_image(&self, image: &str) -> CriResult<()> {
        let req = cri::RemoveImageRequest {
            image: Some(cri::ImageSpec {
                image: image.into(),
                ..Default::default()
            }),
        };
        call!(self, images, remove_image, "RemoveImage", req).map(|_| ())
    }

    async fn sandbox_image(&self) -> CriResult<Option<String>> {
        let req = cri::StatusRequest { verbose: true };
        let status = call!(self, runtime, status, "Status", req)?;
        let config = status
            .info
            .get("config")
            .map(String::as_str)
            .unwrap_or("{}");
        let config: serde_json::Value = serde_json::from_str(config).unwrap_or_default();
        Ok(config
            .get("sandboxImage")
            .and_then(|v| v.as_str())
            .map(str::to_string))
    }

    async fn image_fs_info(&self) -> CriResult<cri::ImageFsInfoResponse> {
        call!(
            self,
            images,
            image_fs_info,
            "ImageFsInfo",
            cri::ImageFsInfoRequest {}
        )
    }
}
