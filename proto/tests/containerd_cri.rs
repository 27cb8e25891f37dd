//! Proves the CRI messages' field numbers against a real containerd: every field the test sets
//! must come back from containerd (labels, metadata, hostname, env, log path) or have an effect
//! (image pulled, pod address, HTTP answer from inside the pod, CPU time and memory in stats).

use std::collections::HashMap;

use keelson_proto::runtime::v1 as cri;
use keelson_proto::{connect_unix, ImageServiceClient, RuntimeServiceClient};
use keelson_testing::containerd::write_reference_conflist;
use keelson_testing::{eventually, require_root_and_tools, run, Containerd, TestHost};
use tonic::transport::Channel;

const IMAGE: &str = "127.0.0.1:5000/keelson/podname-http:1";

#[tokio::test]
async fn cri_calls_round_trip_with_real_containerd() {
    require_root_and_tools(&[
        "containerd",
        "runc",
        "skopeo",
        "docker-registry",
        "nsenter",
        "ip",
        "curl",
    ]);
    let host = TestHost::create("proto");
    let tmp = tempfile::tempdir().expect("tempdir");
    let conf_dir = tmp.path().join("net.d");
    write_reference_conflist(&conf_dir, &host.name, "kbr0", "10.99.0.0/24").expect("conflist");
    let containerd = Containerd::start(&host, std::path::Path::new("/usr/lib/cni"), &conf_dir);
    let channel = connect_unix(&containerd.socket).await.expect("connect");
    let mut rt = RuntimeServiceClient::new(channel.clone());
    let mut img = ImageServiceClient::new(channel);

    let version = rt
        .version(cri::VersionRequest {
            version: "v1".into(),
        })
        .await
        .expect("Version")
        .into_inner();
    assert_eq!(version.runtime_name, "containerd");
    assert_eq!(version.runtime_api_version, "v1");
    assert!(!version.runtime_version.is_empty());

    let status = rt
        .status(cri::StatusRequest { verbose: false })
        .await
        .expect("Status")
        .into_inner();
    let conditions: HashMap<String, bool> = status
        .status
        .expect("runtime status")
        .conditions
        .into_iter()
        .map(|c| (c.r#type, c.status))
        .collect();
    assert_eq!(
        conditions.get("RuntimeReady"),
        Some(&true),
        "{conditions:?}"
    );
    assert_eq!(
        conditions.get("NetworkReady"),
        Some(&true),
        "{conditions:?}"
    );

    let pulled = img
        .pull_image(cri::PullImageRequest {
            image: Some(cri::ImageSpec {
                image: IMAGE.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("PullImage")
        .into_inner();
    assert!(
        pulled.image_ref.starts_with("sha256:"),
        "{}",
        pulled.image_ref
    );
    let image = img
        .image_status(cri::ImageStatusRequest {
            image: Some(cri::ImageSpec {
                image: IMAGE.into(),
                ..Default::default()
            }),
            verbose: false,
        })
        .await
        .expect("ImageStatus")
        .into_inner()
        .image
        .expect("image present after pull");
    assert_eq!(image.id, pulled.image_ref);
    assert!(
        image.repo_tags.iter().any(|t| t == IMAGE),
        "{:?}",
        image.repo_tags
    );

    let missing = img
        .pull_image(cri::PullImageRequest {
            image: Some(cri::ImageSpec {
                image: "127.0.0.1:5000/keelson/does-not-exist:1".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect_err("a missing image fails to pull");
    assert!(
        missing.message().contains("not found"),
        "{}",
        missing.message()
    );

    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(&logs).expect("log dir");
    let labels = HashMap::from([("io.keelson.test".to_string(), host.name.clone())]);
    let sandbox_config = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: "cri-test".into(),
            uid: "uid-1".into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        hostname: "cri-test".into(),
        log_directory: logs.to_string_lossy().into_owned(),
        labels: labels.clone(),
        annotations: HashMap::from([("note".to_string(), "kept".to_string())]),
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
    let sandbox = rt
        .pod_sandbox_status(cri::PodSandboxStatusRequest {
            pod_sandbox_id: sandbox_id.clone(),
            verbose: false,
        })
        .await
        .expect("PodSandboxStatus")
        .into_inner()
        .status
        .expect("sandbox status");
    assert_eq!(sandbox.state, cri::PodSandboxState::SandboxReady as i32);
    assert_eq!(
        sandbox.metadata.as_ref().map(|m| m.name.as_str()),
        Some("cri-test")
    );
    assert_eq!(sandbox.labels.get("io.keelson.test"), Some(&host.name));
    assert_eq!(
        sandbox.annotations.get("note").map(String::as_str),
        Some("kept")
    );
    let pod_ip = sandbox.network.expect("network status").ip;
    assert!(pod_ip.starts_with("10.99.0."), "pod ip {pod_ip}");

    let listed = rt
        .list_pod_sandbox(cri::ListPodSandboxRequest {
            filter: Some(cri::PodSandboxFilter {
                label_selector: labels.clone(),
                ..Default::default()
            }),
        })
        .await
        .expect("ListPodSandbox")
        .into_inner()
        .items;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, sandbox_id);

    let container_id = rt
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox_id.clone(),
            config: Some(cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata {
                    name: "web".into(),
                    attempt: 0,
                }),
                image: Some(cri::ImageSpec {
                    image: pulled.image_ref.clone(),
                    ..Default::default()
                }),
                envs: vec![cri::KeyValue {
                    key: "GREETING".into(),
                    value: "hello-cri".into(),
                }],
                labels: HashMap::from([("io.keelson.container".to_string(), "web".to_string())]),
                log_path: "web/0.log".into(),
                working_dir: "/tmp".into(),
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

    let containers = rt
        .list_containers(cri::ListContainersRequest {
            filter: Some(cri::ContainerFilter {
                pod_sandbox_id: sandbox_id.clone(),
                ..Default::default()
            }),
        })
        .await
        .expect("ListContainers")
        .into_inner()
        .containers;
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0].id, container_id);
    assert_eq!(
        containers[0].state,
        cri::ContainerState::ContainerRunning as i32
    );
    assert_eq!(
        containers[0].metadata.as_ref().map(|m| m.name.as_str()),
        Some("web")
    );
    assert_eq!(
        containers[0]
            .labels
            .get("io.keelson.container")
            .map(String::as_str),
        Some("web")
    );

    let exec = rt
        .exec_sync(cri::ExecSyncRequest {
            container_id: container_id.clone(),
            cmd: vec![
                "sh".into(),
                "-c".into(),
                "echo $GREETING; pwd; exit 3".into(),
            ],
            timeout: 5,
        })
        .await
        .expect("ExecSync")
        .into_inner();
    assert_eq!(String::from_utf8_lossy(&exec.stdout), "hello-cri\n/tmp\n");
    assert_eq!(exec.exit_code, 3);

    // Stats (field numbers of ListContainerStats and ContainerStats): a second of a busy loop
    // in the container is far more than 100 ms of CPU, and CPU time only grows.
    rt.exec_sync(cri::ExecSyncRequest {
        container_id: container_id.clone(),
        cmd: vec![
            "timeout".into(),
            "1".into(),
            "sh".into(),
            "-c".into(),
            "while :; do :; done".into(),
        ],
        timeout: 5,
    })
    .await
    .expect("ExecSync busy loop");
    let by_id = list_stats(
        &mut rt,
        cri::ContainerStatsFilter {
            id: container_id.clone(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(by_id.len(), 1, "{by_id:?}");
    let attrs = by_id[0].attributes.as_ref().expect("attributes");
    assert_eq!(attrs.id, container_id);
    assert_eq!(
        attrs.metadata.as_ref().map(|m| m.name.as_str()),
        Some("web")
    );
    assert_eq!(
        attrs.labels.get("io.keelson.container").map(String::as_str),
        Some("web")
    );
    assert!(cpu_ns(&by_id[0]) > 100_000_000, "{:?}", by_id[0]);
    assert!(working_set(&by_id[0]) > 0, "{:?}", by_id[0]);
    assert!(by_id[0].cpu.as_ref().is_some_and(|c| c.timestamp > 0));
    let by_sandbox = list_stats(
        &mut rt,
        cri::ContainerStatsFilter {
            pod_sandbox_id: sandbox_id.clone(),
            label_selector: HashMap::from([(
                "io.keelson.container".to_string(),
                "web".to_string(),
            )]),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(by_sandbox.len(), 1, "{by_sandbox:?}");
    assert!(
        cpu_ns(&by_sandbox[0]) >= cpu_ns(&by_id[0]),
        "CPU time grows"
    );
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
    // The sandbox as a whole: its cgroup's CPU (the busy loop included) and its network.
    let pods = rt
        .list_pod_sandbox_stats(cri::ListPodSandboxStatsRequest {
            filter: Some(cri::PodSandboxStatsFilter {
                id: sandbox_id.clone(),
                ..Default::default()
            }),
        })
        .await
        .expect("ListPodSandboxStats")
        .into_inner()
        .stats;
    assert_eq!(pods.len(), 1, "{pods:?}");
    assert_eq!(
        pods[0].attributes.as_ref().map(|a| a.id.as_str()),
        Some(sandbox_id.as_str())
    );
    let linux = pods[0].linux.as_ref().expect("linux stats");
    let pod_cpu = linux
        .cpu
        .as_ref()
        .and_then(|c| c.usage_core_nano_seconds.as_ref())
        .map_or(0, |v| v.value);
    assert!(
        pod_cpu >= cpu_ns(&by_id[0]),
        "pod {pod_cpu} < container {}",
        cpu_ns(&by_id[0])
    );
    let eth0 = linux
        .network
        .as_ref()
        .and_then(|n| n.default_interface.as_ref())
        .expect("network");
    assert_eq!(eth0.name, "eth0");

    let url = format!("http://{pod_ip}:8080/");
    let body = eventually(
        "the pod's HTTP answer",
        std::time::Duration::from_secs(10),
        || run(host.command("curl").args(["-sS", "-m", "2", &url])),
    );
    assert_eq!(body, "cri-test\n", "the pod answers with its hostname");

    rt.stop_container(cri::StopContainerRequest {
        container_id: container_id.clone(),
        timeout: 5,
    })
    .await
    .expect("StopContainer");
    let stopped = rt
        .container_status(cri::ContainerStatusRequest {
            container_id: container_id.clone(),
            verbose: false,
        })
        .await
        .expect("ContainerStatus")
        .into_inner()
        .status
        .expect("container status");
    assert_eq!(stopped.state, cri::ContainerState::ContainerExited as i32);
    assert!(stopped.finished_at > stopped.started_at && stopped.started_at > 0);
    assert_eq!(stopped.log_path, logs.join("web/0.log").to_string_lossy());
    let log = std::fs::read_to_string(logs.join("web/0.log")).expect("container log");
    assert!(
        log.contains("listening on port 8080") && log.contains("GET / -> 200"),
        "{log}"
    );

    rt.remove_container(cri::RemoveContainerRequest { container_id })
        .await
        .expect("RemoveContainer");
    rt.stop_pod_sandbox(cri::StopPodSandboxRequest {
        pod_sandbox_id: sandbox_id.clone(),
    })
    .await
    .expect("StopPodSandbox");
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest {
        pod_sandbox_id: sandbox_id,
    })
    .await
    .expect("RemovePodSandbox");
    let left = rt
        .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
        .await
        .expect("ListPodSandbox")
        .into_inner()
        .items;
    assert!(left.is_empty(), "{left:?}");
    drop(containerd);
    drop(host);
}

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
