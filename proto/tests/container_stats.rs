//! Proves the stats messages' field numbers against a real containerd: a container burning CPU
//! is listed by ListContainerStats (filtered by its id, and by its pod's sandbox) with its own
//! id, name and labels, CPU time and a memory working set; ContainerStats answers the same.

use std::collections::HashMap;
use std::time::Duration;

use keelson_proto::runtime::v1 as cri;
use keelson_proto::{connect_unix, ImageServiceClient, RuntimeServiceClient};
use keelson_testing::containerd::write_reference_conflist;
use keelson_testing::{require_root_and_tools, Containerd, TestHost};
use tonic::transport::Channel;

const BUSYBOX: &str = "127.0.0.1:5000/keelson/busybox:1.35";

async fn list_stats(
    rt: &mut RuntimeServiceClient<Channel>,
    filter: cri::ContainerStatsFilter,
) -> Vec<cri::ContainerStats> {
    rt.list_container_stats(cri::ListContainerStatsRequest {
        filter: Some(filter),
    })
    .await
    .expect("ListContainerStats")
    .into_inner()
    .stats
}

fn cpu_ns(s: &cri::ContainerStats) -> u64 {
    s.cpu
        .as_ref()
        .and_then(|c| c.usage_core_nano_seconds.as_ref())
        .map_or(0, |v| v.value)
}

fn working_set(s: &cri::ContainerStats) -> u64 {
    s.memory
        .as_ref()
        .and_then(|m| m.working_set_bytes.as_ref())
        .map_or(0, |v| v.value)
}

#[tokio::test]
async fn list_container_stats_reports_a_busy_containers_usage() {
    require_root_and_tools(&["containerd", "runc", "skopeo", "docker-registry", "nsenter"]);
    let host = TestHost::create("pstat");
    let tmp = tempfile::tempdir().expect("tempdir");
    let conf_dir = tmp.path().join("net.d");
    write_reference_conflist(&conf_dir, &host.name, "kbr0", "10.98.0.0/24").expect("conflist");
    let containerd = Containerd::start(&host, std::path::Path::new("/usr/lib/cni"), &conf_dir);
    let channel = connect_unix(&containerd.socket).await.expect("connect");
    let mut rt = RuntimeServiceClient::new(channel.clone());
    let mut img = ImageServiceClient::new(channel);

    let image_ref = img
        .pull_image(cri::PullImageRequest {
            image: Some(cri::ImageSpec {
                image: BUSYBOX.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("PullImage")
        .into_inner()
        .image_ref;
    let sandbox_config = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: "stats-test".into(),
            uid: "uid-stats".into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        log_directory: tmp.path().join("logs").to_string_lossy().into_owned(),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: format!("/{}", host.name),
            ..Default::default()
        }),
        ..Default::default()
    };
    let sandbox_id = rt
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(sandbox_config.clone()),
            runtime_handler: String::new(),
        })
        .await
        .expect("RunPodSandbox")
        .into_inner()
        .pod_sandbox_id;
    let labels = HashMap::from([("io.keelson.test".to_string(), "burner".to_string())]);
    let container_id = rt
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox_id.clone(),
            config: Some(cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata {
                    name: "burn".into(),
                    attempt: 0,
                }),
                image: Some(cri::ImageSpec {
                    image: image_ref,
                    ..Default::default()
                }),
                command: vec!["sh".into(), "-c".into(), "while :; do :; done".into()],
                labels: labels.clone(),
                log_path: "burn.log".into(),
                ..Default::default()
            }),
            sandbox_config: Some(sandbox_config),
        })
        .await
        .expect("CreateContainer")
        .into_inner()
        .container_id;
    rt.start_container(cri::StartContainerRequest {
        container_id: container_id.clone(),
    })
    .await
    .expect("StartContainer");
    tokio::time::sleep(Duration::from_secs(1)).await;

    let by_id = list_stats(
        &mut rt,
        cri::ContainerStatsFilter {
            id: container_id.clone(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(by_id.len(), 1, "{by_id:?}");
    let first = &by_id[0];
    let attrs = first.attributes.as_ref().expect("attributes");
    assert_eq!(attrs.id, container_id);
    assert_eq!(
        attrs.metadata.as_ref().map(|m| m.name.as_str()),
        Some("burn")
    );
    assert_eq!(
        attrs.labels.get("io.keelson.test"),
        Some(&"burner".to_string())
    );
    // A second of a busy loop is far more than 100 ms of CPU.
    assert!(cpu_ns(first) > 100_000_000, "{first:?}");
    assert!(working_set(first) > 0, "{first:?}");
    assert!(first.cpu.as_ref().is_some_and(|c| c.timestamp > 0));

    tokio::time::sleep(Duration::from_millis(500)).await;
    let by_sandbox = list_stats(
        &mut rt,
        cri::ContainerStatsFilter {
            pod_sandbox_id: sandbox_id.clone(),
            label_selector: labels,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(by_sandbox.len(), 1, "{by_sandbox:?}");
    assert!(cpu_ns(&by_sandbox[0]) > cpu_ns(first), "CPU time grows");

    let single = rt
        .container_stats(cri::ContainerStatsRequest {
            container_id: container_id.clone(),
        })
        .await
        .expect("ContainerStats")
        .into_inner()
        .stats
        .expect("stats");
    assert_eq!(single.attributes.map(|a| a.id), Some(container_id.clone()));
    assert!(working_set(&by_sandbox[0]) > 0);

    let _ = rt
        .stop_container(cri::StopContainerRequest {
            container_id,
            timeout: 1,
        })
        .await;
    let _ = rt
        .stop_pod_sandbox(cri::StopPodSandboxRequest {
            pod_sandbox_id: sandbox_id.clone(),
        })
        .await;
    let _ = rt
        .remove_pod_sandbox(cri::RemovePodSandboxRequest {
            pod_sandbox_id: sandbox_id,
        })
        .await;
    drop(containerd);
    drop(host);
}
