//! Pulls from a registry that requires basic auth: with the pod's imagePullSecrets the image is
//! pulled; without them the pull fails as upstream reports it (ErrImagePull, then
//! ImagePullBackOff), and the pod never runs.

use std::time::Duration;

use keelson_testing::ChildGuard;

use super::common::*;

const USER: &str = "puller";
const PASSWORD: &str = "s3cret-pull";
const PRIVATE: &str = "127.0.0.1:5001/keelson/busybox:1.35";

/// A second registry in the node's test host, on 127.0.0.1:5001, serving the test images'
/// storage (read only) to `USER` alone.
fn private_registry(cluster: &Cluster, node: &str) -> ChildGuard {
    let dir = cluster.tmp.path().join("private-registry");
    std::fs::create_dir_all(&dir).unwrap();
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    std::fs::write(dir.join("htpasswd"), format!("{USER}:{hash}\n")).unwrap();
    let storage = std::env::var("KEELSON_REGISTRY_DIR")
        .unwrap_or_else(|_| "/var/lib/keelson/registry".into());
    let config = format!(
        "version: 0.1
log: {{level: warn}}
storage:
  filesystem: {{rootdirectory: {storage}/data}}
  maintenance: {{readonly: {{enabled: true}}}}
http: {{addr: 127.0.0.1:5001}}
auth:
  htpasswd: {{realm: keelson-test, path: {}}}
",
        dir.join("htpasswd").display()
    );
    std::fs::write(dir.join("config.yml"), config).unwrap();
    let mut cmd = cluster.node(node).host.command("docker-registry");
    cmd.arg("serve").arg(dir.join("config.yml"));
    let registry = ChildGuard::spawn_logged(&mut cmd, &dir.join("registry.log"));
    cluster.wait_until(
        Duration::from_secs(10),
        "the private registry answers",
        || {
            let out = cluster
                .on_node(
                    "curl",
                    &[
                        "-s",
                        "-o",
                        "/dev/null",
                        "-w",
                        "%{http_code}",
                        "http://127.0.0.1:5001/v2/",
                    ],
                )
                .ok()?;
            (out == "401").then_some(())
        },
    );
    registry
}

fn private_pod(name: &str, node: &str, secrets: &str) -> String {
    pod_yaml(
        name,
        node,
        &format!(
            "  imagePullSecrets: {secrets}
  containers:
  - name: app
    image: {PRIVATE}
    imagePullPolicy: Always
    command: [sh, -c, 'echo pulled; sleep 3600']
"
        ),
    )
}

#[test]
fn a_registry_with_basic_auth_pulls_with_the_pods_secret_only() {
    let cluster = Cluster::start("agauth");
    let node = cluster.node_name.clone();
    let _registry = private_registry(&cluster, &node);
    cluster
        .kubectl(&[
            "create",
            "secret",
            "docker-registry",
            "regcred",
            "--docker-server=127.0.0.1:5001",
            &format!("--docker-username={USER}"),
            &format!("--docker-password={PASSWORD}"),
        ])
        .unwrap();
    cluster.apply(&private_pod("with-secret", &node, "[{name: regcred}]"));
    cluster.apply(&private_pod("anonymous", &node, "[]"));

    cluster.wait_until(
        Duration::from_secs(90),
        "with-secret pulled and running",
        || {
            let logs = cluster.kubectl(&["logs", "with-secret"]).ok()?;
            (logs == "pulled\n").then_some(())
        },
    );
    let (reason, message) =
        cluster.wait_until(Duration::from_secs(90), "anonymous backing off", || {
            let pod = cluster.pod("anonymous");
            let w = &pod["status"]["containerStatuses"][0]["state"]["waiting"];
            let reason = w["reason"].as_str()?.to_string();
            (reason == "ImagePullBackOff")
                .then(|| (reason, w["message"].as_str().unwrap_or("").to_string()))
        });
    assert!(message.contains(PRIVATE), "{reason}: {message}");
    let events = cluster.pod_events("anonymous");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Failed: Failed to pull image") && e.contains("401")),
        "{events:?}"
    );
    assert_ne!(cluster.pod("anonymous")["status"]["phase"], "Running");
}
