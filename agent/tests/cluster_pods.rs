//! The agent with a real containerd in a test host, the real keelson-apiserver and kubectl.
//! Each test builds its own one-node cluster (see common/mod.rs).

mod common;

use std::time::Duration;

use common::*;

fn http_pod(name: &str, node: &str) -> String {
    pod_yaml(
        name,
        node,
        &format!(
            "  containers:\n  - name: app\n    image: {HTTP_IMAGE}\n    ports: [{{containerPort: 8080}}]\n    readinessProbe:\n      httpGet: {{path: /, port: 8080}}\n      periodSeconds: 1\n"
        ),
    )
}

fn ready_pod_ip(cluster: &Cluster, name: &str, timeout: Duration) -> String {
    cluster.wait_until(timeout, &format!("pod {name} Running and Ready"), || {
        let pod = cluster.pod(name);
        (pod["status"]["phase"] == "Running" && is_ready(&pod))
            .then(|| pod["status"]["podIP"].as_str().unwrap_or("").to_string())
    })
}

#[test]
fn pod_runs_ready_answers_http_and_shows_logs() {
    let cluster = Cluster::start("agrun");
    cluster.apply(&http_pod("web", &cluster.node_name));
    let ip = ready_pod_ip(&cluster, "web", Duration::from_secs(60));

    // The address comes from keelson-cni on the node's bridge, inside the node's pod CIDR.
    assert!(ip.starts_with("10.244.7."), "pod IP {ip} not in {POD_CIDR}");
    let bridge = cluster
        .on_node("ip", &["-4", "addr", "show", "keelson0"])
        .expect("bridge keelson0 exists");
    assert!(bridge.contains("10.244.7.1/24"), "{bridge}");
    assert!(
        cluster.allocated_addresses().contains(&ip),
        "IPAM records {ip}: {:?}",
        cluster.allocated_addresses()
    );
    let pod = cluster.pod("web");
    assert_eq!(pod["status"]["hostIP"], NODE_IP);
    let status = &pod["status"]["containerStatuses"][0];
    assert_eq!(status["ready"], true);
    assert_eq!(status["restartCount"], 0);
    assert!(
        status["containerID"]
            .as_str()
            .unwrap_or("")
            .starts_with("containerd://"),
        "{status}"
    );
    assert!(
        status["imageID"].as_str().unwrap_or("").contains("sha256:"),
        "{status}"
    );

    // HTTP from the test host reaches the pod, which answers with its name.
    let body = cluster
        .on_node(
            "curl",
            &["-sS", "-m", "5", &format!("http://{ip}:8080/hello")],
        )
        .expect("HTTP to the pod");
    assert_eq!(body, "web\n");

    // kubectl logs goes through the apiserver's pods/log to the agent's HTTPS endpoint.
    let logs = cluster.kubectl(&["logs", "web"]).expect("kubectl logs");
    assert!(
        logs.contains("podname-http: web listening on port 8080"),
        "{logs}"
    );
    assert!(logs.contains("GET /hello -> 200"), "{logs}");
    let tail = cluster
        .kubectl(&["logs", "web", "--tail", "1", "--timestamps"])
        .expect("kubectl logs --tail");
    assert_eq!(tail.lines().count(), 1, "{tail}");
    assert!(tail.starts_with("20") && tail.contains("Z GET "), "{tail}");

    // kubectl logs -f streams lines written after it started.
    let mut follow = cluster
        .cp
        .command("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["logs", "-f", "web"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl logs -f");
    std::thread::sleep(Duration::from_secs(1));
    cluster
        .on_node(
            "curl",
            &["-sS", "-m", "5", &format!("http://{ip}:8080/followed")],
        )
        .expect("HTTP");
    std::thread::sleep(Duration::from_secs(2));
    let _ = follow.kill();
    let out = follow.wait_with_output().expect("follow output");
    let streamed = String::from_utf8_lossy(&out.stdout);
    assert!(streamed.contains("GET /followed -> 200"), "{streamed}");

    // --since: only what was written in the last seconds.
    std::thread::sleep(Duration::from_secs(3));
    cluster
        .on_node(
            "curl",
            &["-sS", "-m", "5", &format!("http://{ip}:8080/recent")],
        )
        .expect("HTTP");
    let recent = cluster
        .kubectl(&["logs", "web", "--since=2s"])
        .expect("kubectl logs --since");
    assert!(
        recent.contains("GET /recent -> 200") && !recent.contains("listening"),
        "{recent}"
    );

    // Events tell the story, as `kubectl describe pod` shows it.
    let events = cluster.wait_until(Duration::from_secs(10), "pod events", || {
        let events = cluster.pod_events("web");
        events
            .iter()
            .any(|e| e.starts_with("Started: Started container app"))
            .then_some(events)
    });
    for expected in [
        "Pulling: Pulling image",
        "Pulled: Successfully pulled image",
        "Created: Created container app",
    ] {
        assert!(
            events.iter().any(|e| e.starts_with(expected)),
            "{expected} in {events:?}"
        );
    }

    // Node, lease, health and metrics.
    let node = cluster
        .kubectl_json(&["get", "node", &cluster.node_name])
        .expect("node");
    assert_eq!(node["spec"]["podCIDR"], POD_CIDR);
    assert!(node["status"]["nodeInfo"]["containerRuntimeVersion"]
        .as_str()
        .unwrap_or("")
        .starts_with("containerd://"));
    assert_eq!(
        node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        10250
    );
    // status.images lists what the node holds (the scheduler's image locality reads it).
    cluster.wait_until(Duration::from_secs(30), "the image in node status", || {
        let node = cluster
            .kubectl_json(&["get", "node", &cluster.node_name])
            .ok()?;
        let images = node["status"]["images"].as_array()?.clone();
        images
            .iter()
            .any(|i| {
                i["names"]
                    .as_array()
                    .is_some_and(|n| n.iter().any(|n| n == HTTP_IMAGE))
                    && i["sizeBytes"].as_i64() > Some(0)
            })
            .then_some(())
    });
    let lease = cluster
        .kubectl_json(&["-n", "kube-node-lease", "get", "lease", &cluster.node_name])
        .expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], cluster.node_name.as_str());
    assert_eq!(
        cluster
            .on_node(
                "curl",
                &["-sk", "-m", "5", "https://127.0.0.1:10250/healthz"]
            )
            .as_deref(),
        Ok("ok")
    );
    let metrics = cluster.metrics();
    assert!(
        metrics.contains("keelson_agent_pod_start_duration_seconds_count 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("keelson_agent_cri_call_duration_seconds_count{call=\"RunPodSandbox\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("keelson_agent_pod_workers 1"), "{metrics}");

    // A changed image (kubectl set image) restarts the container with the new one.
    let new_image = HTTP_IMAGE.replace(":1", ":2");
    cluster
        .kubectl(&["set", "image", "pod/web", &format!("app={new_image}")])
        .expect("kubectl set image");
    cluster.wait_until(
        Duration::from_secs(30),
        "the container restarted with the new image",
        || {
            let pod = cluster.pod("web");
            let cs = &pod["status"]["containerStatuses"][0];
            (cs["image"] == new_image.as_str() && cs["restartCount"] == 1 && is_ready(&pod))
                .then_some(())
        },
    );
}

#[test]
fn crash_loop_backs_off_and_probes_restart_and_unready() {
    let cluster = Cluster::start("agcrash");
    let node = cluster.node_name.clone();
    cluster.apply(&pod_yaml(
        "crash",
        &node,
        &format!("  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'echo attempt; exit 1']\n"),
    ));
    cluster.apply(&pod_yaml(
        "live",
        &node,
        &format!(
            "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'touch /tmp/alive; sleep 3; rm /tmp/alive; sleep 3600']\n    livenessProbe:\n      exec: {{command: [cat, /tmp/alive]}}\n      periodSeconds: 1\n      failureThreshold: 2\n"
        ),
    ));
    cluster.apply(&pod_yaml(
        "flap",
        &node,
        &format!(
            "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'while true; do touch /tmp/ready; sleep 5; rm /tmp/ready; sleep 5; done']\n    readinessProbe:\n      exec: {{command: [cat, /tmp/ready]}}\n      periodSeconds: 1\n      failureThreshold: 1\n"
        ),
    ));

    // All three are watched together from the start: the crash loop's first delays are short.
    let mut ready_seen = Vec::new();
    let mut delays = Vec::new();
    cluster.wait_until(
        Duration::from_secs(90),
        "crash loop, liveness restart and readiness flapping",
        || {
            // Readiness: Ready turns true, then false, then true again.
            let ready = is_ready(&cluster.pod("flap"));
            if ready_seen.last() != Some(&ready) {
                ready_seen.push(ready);
            }
            let flapped = ready_seen.windows(3).any(|w| w == [true, false, true]);
            // Liveness: the container is killed and restarted.
            let live_restarted = container_ids(&cluster.pod("live"))
                .get("app")
                .is_some_and(|c| c.1 >= 1);
            // Crash loop: restarts with a growing back-off, shown as CrashLoopBackOff.
            let pod = cluster.pod("crash");
            let cs = &pod["status"]["containerStatuses"][0];
            if let Some(m) = cs["state"]["waiting"]["message"].as_str() {
                assert_eq!(cs["state"]["waiting"]["reason"], "CrashLoopBackOff");
                let delay = m.split_whitespace().nth(1).unwrap_or("").to_string();
                if delays.last() != Some(&delay) {
                    delays.push(delay);
                }
            }
            let crashed = cs["restartCount"].as_i64() >= Some(3);
            (flapped && live_restarted && crashed).then_some(())
        },
    );
    assert_eq!(
        container_ids(&cluster.pod("flap"))["app"].1,
        0,
        "readiness failures do not restart"
    );
    assert!(
        delays.starts_with(&["10s".to_string(), "20s".to_string()]),
        "back-off delays seen: {delays:?}"
    );
    // Right after a restart the container runs for a moment; then kubectl shows the back-off.
    cluster.wait_until(
        Duration::from_secs(20),
        "kubectl to show CrashLoopBackOff",
        || {
            let table = cluster.kubectl(&["get", "pod", "crash"]).ok()?;
            table.contains("CrashLoopBackOff").then_some(())
        },
    );
    let events = cluster.pod_events("crash");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("BackOff: Back-off restarting failed container app")),
        "{events:?}"
    );
    let events = cluster.pod_events("live");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Unhealthy: Liveness probe failed")),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Killing: Container app failed liveness probe")),
        "{events:?}"
    );
    let last = &cluster.pod("crash")["status"]["containerStatuses"][0]["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 1, "{last}");
    let previous = cluster
        .kubectl(&["logs", "crash", "--previous"])
        .expect("logs --previous");
    assert_eq!(previous, "attempt\n");
}

#[test]
fn missing_image_gives_err_image_pull_then_back_off() {
    let cluster = Cluster::start("agpull");
    cluster.apply(&pod_yaml(
        "missing",
        &cluster.node_name,
        "  containers:\n  - name: app\n    image: 127.0.0.1:5000/keelson/does-not-exist:1\n",
    ));
    // Watched, because ErrImagePull gives way to ImagePullBackOff within moments.
    let mut watch = cluster
        .cp
        .command("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["get", "pod", "missing", "-w", "-o", "jsonpath={.status.containerStatuses[0].state.waiting.reason}|{.status.containerStatuses[0].state.waiting.message}{\"\\n\"}"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl get -w");
    let stdout = watch.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut reasons: Vec<String> = Vec::new();
    let mut message = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    while std::time::Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) else {
            continue;
        };
        let (reason, msg) = line.split_once('|').unwrap_or((line.as_str(), ""));
        if !reason.is_empty() && reasons.last().map(String::as_str) != Some(reason) {
            reasons.push(reason.to_string());
        }
        if reasons.iter().any(|r| r == "ErrImagePull") && reason == "ImagePullBackOff" {
            message = msg.to_string();
            break;
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(
        !message.is_empty(),
        "reasons seen: {reasons:?}\n{}",
        tail(&cluster.agent_log(), 20)
    );
    assert!(
        message.contains("does-not-exist") && message.contains("not found"),
        "registry's message kept: {message}"
    );
    assert_eq!(cluster.pod("missing")["status"]["phase"], "Pending");
    let events = cluster.pod_events("missing");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Failed: Failed to pull image") && e.contains("not found")),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("BackOff: Back-off pulling image")),
        "{events:?}"
    );
}

#[test]
fn configmap_secret_volumes_and_field_ref_env() {
    let cluster = Cluster::start("agvol");
    cluster.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-config}\ndata: {color: blue, size: L}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: hunter2}\n");
    cluster.apply(&pod_yaml(
        "envvol",
        &cluster.node_name,
        &format!(
            r#"  containers:
  - name: app
    image: {BUSYBOX}
    workingDir: /etc/cfg
    command: [sh, -c, 'echo "name=$POD_NAME ip=$POD_IP color=$COLOR pw=$PW uid=$(id -u) pwd=$(pwd)"; ls /etc/cfg /etc/sec; cat /etc/cfg/color /etc/sec/password; echo; echo limits $(cat /sys/fs/cgroup/memory/memory.limit_in_bytes) $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); cat /etc/resolv.conf; cat /etc/podinfo/labels; sleep 3600']
    securityContext: {{runAsUser: 1234}}
    resources:
      limits: {{cpu: 250m, memory: 64Mi}}
    env:
    - name: POD_NAME
      valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
    - name: POD_IP
      valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}
    - name: COLOR
      valueFrom: {{configMapKeyRef: {{name: app-config, key: color}}}}
    - name: PW
      valueFrom: {{secretKeyRef: {{name: db, key: password}}}}
    volumeMounts:
    - {{name: cfg, mountPath: /etc/cfg}}
    - {{name: sec, mountPath: /etc/sec}}
    - {{name: podinfo, mountPath: /etc/podinfo}}
  volumes:
  - name: podinfo
    downwardAPI:
      items: [{{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}]
  - name: cfg
    configMap: {{name: app-config}}
  - name: sec
    secret: {{secretName: db}}
"#
        ),
    ));
    let ip = ready_pod_ip(&cluster, "envvol", Duration::from_secs(60));
    let logs = cluster.wait_until(Duration::from_secs(20), "the pod's output", || {
        cluster
            .kubectl(&["logs", "envvol"])
            .ok()
            .filter(|l| l.contains("app=\"envvol\""))
    });
    assert!(
        logs.contains(&format!(
            "name=envvol ip={ip} color=blue pw=hunter2 uid=1234 pwd=/etc/cfg"
        )),
        "{logs}"
    );
    assert!(logs.contains("/etc/cfg:\ncolor\nsize\n"), "{logs}");
    assert!(logs.contains("/etc/sec:\npassword\n"), "{logs}");
    assert!(logs.contains("bluehunter2"), "{logs}");
    // Limits reach the container's cgroups: 64Mi of memory, 250m of CPU (CFS quota / period).
    assert!(logs.contains("limits 67108864 25000 100000"), "{logs}");
    // dnsPolicy ClusterFirst: the cluster DNS server and the namespace's search path.
    assert!(
        logs.contains(&format!("nameserver {CLUSTER_DNS}")),
        "{logs}"
    );
    assert!(
        logs.contains("search default.svc.cluster.local svc.cluster.local cluster.local"),
        "{logs}"
    );
    assert!(logs.contains("options ndots:5"), "{logs}");
    assert!(
        logs.contains("app=\"envvol\""),
        "downwardAPI volume: {logs}"
    );
    assert_eq!(cluster.pod("envvol")["status"]["qosClass"], "Guaranteed");
}

#[test]
fn delete_removes_sandbox_and_address_and_cleans_up_after_downtime() {
    let mut cluster = Cluster::start("agdel");
    let node = cluster.node_name.clone();
    // "first" has a preStop hook that writes into a hostPath directory.
    let host_dir = cluster.tmp.path().join("prestop");
    std::fs::create_dir_all(&host_dir).expect("host dir");
    cluster.apply(&pod_yaml(
        "first",
        &node,
        &format!(
            "  containers:\n  - name: app\n    image: {HTTP_IMAGE}\n    readinessProbe:\n      tcpSocket: {{port: 8080}}\n      periodSeconds: 1\n    lifecycle:\n      preStop:\n        exec: {{command: [sh, -c, 'echo bye from $HOSTNAME > /host/prestop']}}\n    volumeMounts: [{{name: host, mountPath: /host}}]\n  volumes:\n  - name: host\n    hostPath: {{path: {}, type: Directory}}\n",
            host_dir.display()
        ),
    ));
    for name in ["second", "third"] {
        cluster.apply(&http_pod(name, &node));
    }
    let ip = ready_pod_ip(&cluster, "first", Duration::from_secs(60));
    ready_pod_ip(&cluster, "second", Duration::from_secs(60));
    ready_pod_ip(&cluster, "third", Duration::from_secs(60));
    assert_eq!(cluster.runtime_state().0.len(), 3);

    // kubectl delete returns once the agent has stopped everything and removed the object.
    let started = std::time::Instant::now();
    cluster
        .kubectl(&["delete", "pod", "first", "--timeout=30s"])
        .expect("kubectl delete");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "delete took {:?}",
        started.elapsed()
    );
    let (sandboxes, containers) = cluster.runtime_state();
    assert_eq!(sandboxes.len(), 2, "first's sandbox removed");
    assert!(containers
        .iter()
        .all(|c| c.labels.get("io.kubernetes.pod.name").map(String::as_str) != Some("first")));
    assert!(
        !cluster.allocated_addresses().contains(&ip),
        "address {ip} released"
    );
    assert!(cluster.kubectl(&["get", "pod", "first"]).is_err());

    // While the agent is down: "second" is deleted gracefully (it waits for the agent), "third"
    // is force-deleted (gone from the API at once).
    cluster.stop_agent("KILL");
    cluster
        .kubectl(&["delete", "pod", "second", "--wait=false"])
        .expect("delete second");
    cluster
        .kubectl(&["delete", "pod", "third", "--grace-period=0", "--force"])
        .expect("delete third");
    assert_eq!(
        cluster.runtime_state().0.len(),
        2,
        "nothing removed while the agent is down"
    );
    cluster.start_agent();
    cluster.wait_until(
        Duration::from_secs(30),
        "both pods removed from containerd and the API",
        || {
            let (sandboxes, _) = cluster.runtime_state();
            (sandboxes.is_empty() && cluster.kubectl(&["get", "pod", "second"]).is_err())
                .then_some(())
        },
    );
    assert!(
        cluster.allocated_addresses().is_empty(),
        "{:?}",
        cluster.allocated_addresses()
    );
}

#[test]
fn agent_restart_adopts_running_pods_without_restarts() {
    let mut cluster = Cluster::start("agadopt");
    let node = cluster.node_name.clone();
    let names: Vec<String> = (0..10).map(|i| format!("web-{i}")).collect();
    for name in &names {
        cluster.apply(&http_pod(name, &node));
    }
    for name in &names {
        ready_pod_ip(&cluster, name, Duration::from_secs(120));
    }
    let before: Vec<_> = names
        .iter()
        .map(|n| container_ids(&cluster.pod(n)))
        .collect();
    let node_uid =
        cluster.kubectl_json(&["get", "node", &node]).expect("node")["metadata"]["uid"].clone();
    let lease_before = cluster
        .kubectl_json(&["-n", "kube-node-lease", "get", "lease", &node])
        .expect("lease");

    for signal in ["KILL", "TERM"] {
        cluster.stop_agent(signal);
        cluster.start_agent();
        std::thread::sleep(Duration::from_secs(5));
        cluster.wait_until(Duration::from_secs(30), "healthz after restart", || {
            cluster
                .on_node(
                    "curl",
                    &["-sk", "-m", "2", "https://127.0.0.1:10250/healthz"],
                )
                .ok()
        });
        for (name, ids) in names.iter().zip(&before) {
            let pod = cluster.pod(name);
            assert_eq!(
                &container_ids(&pod),
                ids,
                "{name}: same containers, no restarts after {signal}"
            );
            assert!(is_ready(&pod), "{name} stays Ready after {signal}");
        }
        assert_eq!(
            cluster.runtime_state().0.len(),
            10,
            "no new sandboxes after {signal}"
        );
    }
    let node_after = cluster.kubectl_json(&["get", "node", &node]).expect("node");
    assert_eq!(
        node_after["metadata"]["uid"], node_uid,
        "the Node is taken over, not recreated"
    );
    let lease_after = cluster
        .kubectl_json(&["-n", "kube-node-lease", "get", "lease", &node])
        .expect("lease");
    assert_eq!(
        lease_after["metadata"]["uid"], lease_before["metadata"]["uid"],
        "the Lease is taken over"
    );
    assert_ne!(
        lease_after["spec"]["renewTime"], lease_before["spec"]["renewTime"],
        "and renewed"
    );
    assert_eq!(
        cluster
            .kubectl(&["get", "pods", "--no-headers"])
            .expect("get pods")
            .lines()
            .filter(|l| l.contains("1/1"))
            .count(),
        10
    );
}

#[test]
fn init_containers_run_in_order_and_exits_are_noticed_within_two_seconds() {
    let cluster = Cluster::start("aginit");
    cluster.apply(&pod_yaml(
        "job",
        &cluster.node_name,
        &format!(
            r#"  restartPolicy: Never
  initContainers:
  - name: first
    image: {BUSYBOX}
    command: [sh, -c, 'echo one > /work/order']
    volumeMounts: [{{name: work, mountPath: /work}}]
  - name: second
    image: {BUSYBOX}
    command: [sh, -c, 'echo two >> /work/order']
    volumeMounts: [{{name: work, mountPath: /work}}]
  containers:
  - name: main
    image: {BUSYBOX}
    command: [sh, -c, 'cat /work/order; echo all done > /dev/termination-log; sleep 3']
    volumeMounts: [{{name: work, mountPath: /work}}]
  volumes:
  - name: work
    emptyDir: {{}}
"#
        ),
    ));
    let pod = cluster.wait_until(Duration::from_secs(60), "the pod to succeed", || {
        let pod = cluster.pod("job");
        (pod["status"]["phase"] == "Succeeded").then_some(pod)
    });
    let seen_at = std::time::SystemTime::now();
    let finished = pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
        .as_str()
        .expect("finishedAt")
        .to_string();
    let finished: k8s_openapi::jiff::Timestamp = finished.parse().expect("RFC 3339");
    let finished = std::time::UNIX_EPOCH
        + Duration::from_secs(u64::try_from(finished.as_second()).expect("after 1970"));
    // finishedAt is truncated to the second: up to 1 s of the gap is rounding, 2 s is the budget.
    let gap = seen_at.duration_since(finished).unwrap_or_default();
    assert!(
        gap <= Duration::from_millis(3500),
        "exit noticed {gap:?} after finishedAt"
    );
    let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(
        terminated["message"], "all done\n",
        "terminationMessagePath read: {terminated}"
    );
    assert_eq!(terminated["reason"], "Completed");
    let inits = pod["status"]["initContainerStatuses"]
        .as_array()
        .expect("init statuses");
    assert_eq!(inits.len(), 2);
    for init in inits {
        assert_eq!(init["state"]["terminated"]["reason"], "Completed", "{init}");
    }
    let conditions = pod["status"]["conditions"].as_array().expect("conditions");
    assert!(conditions
        .iter()
        .any(|c| c["type"] == "Initialized" && c["status"] == "True"));
    assert_eq!(
        cluster
            .kubectl(&["logs", "job", "-c", "main"])
            .expect("logs"),
        "one\ntwo\n"
    );
    assert_eq!(
        cluster
            .kubectl(&["logs", "job", "-c", "second"])
            .expect("logs"),
        ""
    );
    // The finished pod's sandbox is stopped and its address released; the status keeps it.
    cluster.wait_until(Duration::from_secs(10), "the sandbox to stop", || {
        let (sandboxes, _) = cluster.runtime_state();
        sandboxes.iter().all(|s| s.state != 0).then_some(())
    });
    assert!(
        cluster.allocated_addresses().is_empty(),
        "{:?}",
        cluster.allocated_addresses()
    );
    assert!(cluster.pod("job")["status"]["podIP"]
        .as_str()
        .is_some_and(|ip| ip.starts_with("10.244.7.")));
}

#[test]
fn pods_on_two_nodes_reach_each_other_through_node_routes() {
    let mut cluster = Cluster::start("agtwo");
    let second = cluster.add_node("agtwob").name.clone();
    let first = cluster.node_name.clone();
    cluster.apply(&http_pod("here", &first));
    cluster.apply(&http_pod("there", &second));
    let here = ready_pod_ip(&cluster, "here", Duration::from_secs(60));
    let there = ready_pod_ip(&cluster, "there", Duration::from_secs(60));
    assert!(
        there.starts_with("10.244.8."),
        "second node's pod CIDR: {there}"
    );

    // Each agent routes the other node's pod CIDR via that node's InternalIP.
    let routes = cluster.wait_until(
        Duration::from_secs(20),
        "a route to the second node's pods",
        || {
            cluster
                .on_node("ip", &["-4", "route", "show", "10.244.8.0/24"])
                .ok()
                .filter(|r| r.contains("via 172.31.255.3"))
        },
    );
    assert!(routes.contains("proto 252"), "{routes}");

    // Pod to pod across nodes: wget inside the "here" container (CRI ExecSync) reaches "there".
    let here_container = container_ids(&cluster.pod("here"))["app"]
        .0
        .trim_start_matches("containerd://")
        .to_string();
    let url = format!("http://{there}:8080/from-pod");
    let socket = cluster.socket.clone();
    let out = block_on(async move {
        let channel = keelson_proto::connect_unix(&socket).await.expect("connect");
        let mut rt = keelson_proto::RuntimeServiceClient::new(channel);
        rt.exec_sync(keelson_proto::runtime::v1::ExecSyncRequest {
            container_id: here_container,
            cmd: vec![
                "timeout".into(),
                "5".into(),
                "wget".into(),
                "-qO-".into(),
                url,
            ],
            timeout: 10,
        })
        .await
        .expect("ExecSync")
        .into_inner()
    });
    assert_eq!(
        (
            out.exit_code,
            String::from_utf8_lossy(&out.stdout).to_string()
        ),
        (0, "there\n".to_string()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = cluster
        .on_node(
            "curl",
            &["-sS", "-m", "5", &format!("http://{there}:8080/from-node")],
        )
        .expect("node to a pod on the other node");
    assert_eq!(body, "there\n");
    let body = cluster
        .on_node("curl", &["-sS", "-m", "5", &format!("http://{here}:8080/")])
        .expect("node to its own pod");
    assert_eq!(body, "here\n");
    let logs = cluster
        .kubectl(&["logs", "there"])
        .expect("logs from the second node");
    assert!(
        logs.contains("GET /from-node -> 200") && logs.contains("GET /from-pod -> 200"),
        "{logs}"
    );
}

#[test]
fn a_pod_bound_after_creation_is_started() {
    let cluster = Cluster::start("agbind");
    // Created unbound, then bound through pods/binding, as the scheduler does.
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: late\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: {HTTP_IMAGE}\n"
    ));
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        cluster.pod("late")["status"]["phase"]
            .as_str()
            .unwrap_or("Pending"),
        "Pending"
    );
    let binding = cluster.tmp.path().join("binding.json");
    std::fs::write(
        &binding,
        format!(
            r#"{{"apiVersion":"v1","kind":"Binding","metadata":{{"name":"late"}},"target":{{"apiVersion":"v1","kind":"Node","name":"{}"}}}}"#,
            cluster.node_name
        ),
    )
    .expect("binding");
    cluster
        .kubectl(&[
            "create",
            "--raw",
            "/api/v1/namespaces/default/pods/late/binding",
            "-f",
            &binding.to_string_lossy(),
        ])
        .expect("bind");
    ready_pod_ip(&cluster, "late", Duration::from_secs(60));
}

#[test]
fn startup_probe_gates_liveness_and_readiness() {
    let cluster = Cluster::start("agstart");
    cluster.apply(&pod_yaml(
        "slow",
        &cluster.node_name,
        &format!(
            r#"  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'sleep 4; touch /tmp/up; sleep 3600']
    startupProbe:
      exec: {{command: [cat, /tmp/up]}}
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      exec: {{command: [cat, /tmp/up]}}
      periodSeconds: 1
      failureThreshold: 1
    readinessProbe:
      exec: {{command: [cat, /tmp/up]}}
      periodSeconds: 1
"#
        ),
    ));
    // Running but not started (and so not ready) while the startup probe fails; the liveness
    // probe, which would fail too, does not run yet.
    cluster.wait_until(Duration::from_secs(30), "running, not yet started", || {
        let pod = cluster.pod("slow");
        let cs = &pod["status"]["containerStatuses"][0];
        (cs["state"]["running"].is_object() && cs["started"] == false && cs["ready"] == false)
            .then_some(())
    });
    cluster.wait_until(Duration::from_secs(30), "started and ready", || {
        let pod = cluster.pod("slow");
        let cs = &pod["status"]["containerStatuses"][0];
        (cs["started"] == true && cs["ready"] == true).then_some(())
    });
    assert_eq!(
        container_ids(&cluster.pod("slow"))["app"].1,
        0,
        "no liveness restart before startup"
    );
}

#[test]
fn containerd_restart_keeps_pods_and_the_agent_recovers() {
    let cluster = Cluster::start("agcrd");
    cluster.apply(&http_pod("before", &cluster.node_name));
    let ip = ready_pod_ip(&cluster, "before", Duration::from_secs(60));
    let ids = container_ids(&cluster.pod("before"));
    cluster.restart_containerd();
    cluster.apply(&http_pod("after", &cluster.node_name));
    ready_pod_ip(&cluster, "after", Duration::from_secs(60));
    assert_eq!(
        container_ids(&cluster.pod("before")),
        ids,
        "the running pod was not restarted"
    );
    let body = cluster
        .on_node("curl", &["-sS", "-m", "5", &format!("http://{ip}:8080/")])
        .expect("HTTP");
    assert_eq!(body, "before\n");
    cluster
        .kubectl(&["delete", "pod", "before", "--timeout=30s"])
        .expect("delete after the restart");
}

#[test]
fn container_logs_are_rotated_and_still_served_in_order() {
    let cluster = Cluster::start("agrot");
    let pad = "x".repeat(100);
    cluster.apply(&pod_yaml(
        "chatty",
        &cluster.node_name,
        &format!(
            "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'i=0; while true; do echo \"line $i {pad}\"; i=$((i+1)); usleep 5000; done']\n"
        ),
    ));
    ready_pod_ip(&cluster, "chatty", Duration::from_secs(60));
    // The agent runs with --container-log-max-size 64Ki --container-log-max-files 3.
    cluster.wait_until(Duration::from_secs(60), "two rotations", || {
        let files = cluster.log_files(&cluster.pod("chatty"), "app");
        (files.len() >= 3).then_some(())
    });
    std::thread::sleep(Duration::from_secs(11));
    let files = cluster.log_files(&cluster.pod("chatty"), "app");
    assert!(files.len() <= 3, "at most 3 files per container: {files:?}");
    let logs = cluster.kubectl(&["logs", "chatty"]).expect("kubectl logs");
    let numbers: Vec<u64> = logs
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    assert!(numbers.len() > 500, "{} lines", numbers.len());
    assert!(
        numbers.first() > Some(&0),
        "the oldest lines were rotated away"
    );
    assert!(
        numbers.windows(2).all(|w| w[1] == w[0] + 1),
        "served in order, without gaps"
    );
    let last = cluster
        .kubectl(&["logs", "chatty", "--tail", "1"])
        .expect("tail");
    assert!(last.starts_with("line "), "{last}");
}

#[test]
fn host_network_pod_uses_the_node_address() {
    let cluster = Cluster::start("aghost");
    cluster.apply(&pod_yaml(
        "hostnet",
        &cluster.node_name,
        &format!("  hostNetwork: true\n  containers:\n  - name: app\n    image: {HTTP_IMAGE}\n    env: [{{name: PORT, value: \"18080\"}}, {{name: POD_NAME, value: hostnet}}]\n"),
    ));
    let ip = ready_pod_ip(&cluster, "hostnet", Duration::from_secs(60));
    assert_eq!(ip, NODE_IP, "a host-network pod has the node's address");
    let body = cluster
        .on_node(
            "curl",
            &["-sS", "-m", "5", &format!("http://{NODE_IP}:18080/")],
        )
        .expect("HTTP on the node address");
    assert_eq!(body, "hostnet\n");
    assert!(
        cluster.allocated_addresses().is_empty(),
        "no pod address allocated: {:?}",
        cluster.allocated_addresses()
    );
}
