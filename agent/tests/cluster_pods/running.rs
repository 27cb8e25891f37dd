//! Pods that run: networking, logs, events, volumes and env, binding, host network.

use std::time::Duration;

use super::common::*;
use super::{http_pod, ready_pod_ip};

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
        .kubectl_cmd()
        .command(&["logs", "-f", "web"])
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
    let pods = cluster.agent_get("/pods", Some(&cluster.admin_token()));
    let pods = pods.strip_suffix(" 200").expect("/pods answers 200");
    let pods: serde_json::Value = serde_json::from_str(pods).expect("a PodList");
    assert_eq!(pods["items"][0]["metadata"]["name"], "web");
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
    assert!(
        metrics.contains("keelson_agent_relist_duration_seconds_count"),
        "{metrics}"
    );

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
    command: [sh, -c, 'echo "name=$POD_NAME ip=$POD_IP color=$COLOR pw=$PW uid=$(id -u) pwd=$(pwd)"; ls /etc/cfg /etc/sec; cat /etc/cfg/color /etc/sec/password; echo; if [ -e /sys/fs/cgroup/cpu.max ]; then echo limits $(cat /sys/fs/cgroup/memory.max) $(cat /sys/fs/cgroup/cpu.max); else echo limits $(cat /sys/fs/cgroup/memory/memory.limit_in_bytes) $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); fi; cat /etc/resolv.conf; cat /etc/podinfo/labels; sleep 3600']
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
    // Limits reach the container's cgroups: 64Mi of memory, 250m of CPU (CFS quota / period),
    // read from cgroup v1's files or v2's memory.max and cpu.max, which print the same numbers.
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

#[test]
fn host_port_reaches_the_pod_from_another_host() {
    let cluster = Cluster::start("aghp");
    cluster.apply(&pod_yaml(
        "hp",
        &cluster.node_name,
        &format!("  containers:\n  - name: app\n    image: {HTTP_IMAGE}\n    ports: [{{containerPort: 8080, hostPort: 18082}}]\n"),
    ));
    ready_pod_ip(&cluster, "hp", Duration::from_secs(60));
    // From the control-plane host, to the node's address and the hostPort (portmap's DNAT).
    let body = cluster.wait_until(Duration::from_secs(10), "the hostPort to answer", || {
        cluster
            .on_cp(
                "curl",
                &["-sS", "-m", "2", &format!("http://{NODE_IP}:18082/")],
            )
            .ok()
    });
    assert_eq!(body, "hp\n");
}

#[test]
fn hostname_subdomain_and_etc_hosts_as_the_kubelet_sets_them() {
    let cluster = Cluster::start("aghosts");
    cluster.apply(&pod_yaml(
        "hosts",
        &cluster.node_name,
        &format!(
            r#"  hostname: db-0
  subdomain: db
  hostAliases: [{{ip: 10.1.2.3, hostnames: [foo.local, bar.local]}}]
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'echo "hostname=$(hostname)"; cat /etc/hosts; echo END; sleep 3600']
"#
        ),
    ));
    let ip = ready_pod_ip(&cluster, "hosts", Duration::from_secs(60));
    let logs = cluster.wait_until(Duration::from_secs(20), "the pod's output", || {
        cluster
            .kubectl(&["logs", "hosts"])
            .ok()
            .filter(|l| l.contains("END"))
    });
    assert!(logs.contains("hostname=db-0\n"), "{logs}");
    assert!(
        logs.contains("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"),
        "{logs}"
    );
    assert!(
        logs.contains(&format!(
            "\n{ip}\tdb-0.db.default.svc.cluster.local\tdb-0\n"
        )),
        "{logs}"
    );
    assert!(
        logs.contains("# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"),
        "{logs}"
    );
}
