//! securityContext reaches the running process as the kubelet hands it to containerd, or the pod
//! is refused out loud: read in each container's /proc (Seccomp, NoNewPrivs, capabilities,
//! uid/gid/groups, masked paths, sysctls, the root filesystem) and in the pods' statuses and
//! Events. The real agent, containerd and keelson-apiserver (see common/mod.rs).

mod common;

use std::time::Duration;

use common::*;
use keelson_proto::runtime::v1 as proto;

/// A Localhost profile that lets everything through but mkdir: its effect shows it was loaded.
const DENY_MKDIR: &str = r#"{"defaultAction": "SCMP_ACT_ALLOW",
 "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}]}"#;

/// Prints what the process got, then stays up.
const REPORT: &str =
    "grep -E '^(Uid|Gid|Groups|Seccomp|NoNewPrivs|CapEff|CapBnd):' /proc/self/status; \
     echo somaxconn=$(cat /proc/sys/net/core/somaxconn); \
     echo port_start=$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start); \
     grep -c ' /proc/timer_list ' /proc/self/mountinfo | sed s/^/timer_list_masked=/; \
     grep -q ' /proc/sys ro' /proc/self/mountinfo && echo proc_sys=ro; \
     touch /rootfs-write 2>/dev/null && echo rootfs=rw || echo rootfs=ro; \
     stat -c 'scratch=%g %A' /scratch; grep ' /mem ' /proc/self/mountinfo | sed 's/^.* - /mem=/'; \
     mkdir /scratch/$HOSTNAME-$$ 2>/dev/null && echo mkdir=ok || echo mkdir=denied; sleep 3600";

fn confined_pod(node: &str) -> String {
    pod_yaml(
        "confined",
        node,
        &format!(
            "  securityContext:
    runAsUser: 1000
    runAsGroup: 3000
    supplementalGroups: [4000]
    fsGroup: 2000
    seccompProfile: {{type: RuntimeDefault}}
    sysctls:
    - {{name: net.ipv4.ip_unprivileged_port_start, value: '80'}}
    - {{name: net.core.somaxconn, value: '1024'}}
  volumes:
  - {{name: scratch, emptyDir: {{}}}}
  - {{name: mem, emptyDir: {{medium: Memory, sizeLimit: 8Mi}}}}
  containers:
  - name: user
    image: {BUSYBOX}
    command: [sh, -c, \"{REPORT}\"]
    volumeMounts: [{{name: scratch, mountPath: /scratch}}, {{name: mem, mountPath: /mem}}]
    securityContext: {{allowPrivilegeEscalation: false, readOnlyRootFilesystem: true}}
  - name: root
    image: {BUSYBOX}
    command: [sh, -c, \"{REPORT}\"]
    volumeMounts: [{{name: scratch, mountPath: /scratch}}]
    securityContext:
      runAsUser: 0
      capabilities: {{drop: [ALL], add: [NET_BIND_SERVICE]}}
      seccompProfile: {{type: Localhost, localhostProfile: deny-mkdir.json}}
"
        ),
    )
}

fn simple_pod(name: &str, node: &str, pod_security: &str, container_security: &str) -> String {
    pod_yaml(
        name,
        node,
        &format!(
            "  securityContext: {pod_security}
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'cat /proc/1/comm; sleep 3600']
    securityContext: {container_security}
"
        ),
    )
}

fn logs(cluster: &Cluster, pod: &str, container: &str, until: &str) -> String {
    cluster.wait_until(
        Duration::from_secs(90),
        &format!("{pod}/{container} logs {until}"),
        || {
            let out = cluster.kubectl(&["logs", pod, "-c", container]).ok()?;
            out.contains(until).then_some(out)
        },
    )
}

fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {name} in {out}"))
}

/// The pod's Failed status (reason, message) once the node refused it.
fn rejected(cluster: &Cluster, pod: &str) -> (String, String) {
    cluster.wait_until(Duration::from_secs(60), &format!("{pod} Failed"), || {
        let status = &cluster.pod(pod)["status"];
        (status["phase"] == "Failed").then(|| {
            let s = |k: &str| status[k].as_str().unwrap_or("").to_string();
            (s("reason"), s("message"))
        })
    })
}

fn waiting_message(cluster: &Cluster, pod: &str, reason: &str) -> String {
    cluster.wait_until(Duration::from_secs(90), &format!("{pod} {reason}"), || {
        let pod = cluster.pod(pod);
        let w = &pod["status"]["containerStatuses"][0]["state"]["waiting"];
        (w["reason"] == reason).then(|| w["message"].as_str().unwrap_or("").to_string())
    })
}

#[test]
fn security_context_reaches_the_process_or_the_pod_is_refused() {
    let mut cluster = Cluster::start("agsec");
    let node = cluster.node_name.clone();
    cluster.stop_agent("TERM");
    cluster.node_mut(&node).extra_args = vec![
        "--allowed-unsafe-sysctls".into(),
        "net.core.somaxconn".into(),
    ];
    cluster.start_agent();
    let seccomp = cluster.tmp.path().join("agent-root/seccomp");
    std::fs::create_dir_all(&seccomp).unwrap();
    std::fs::write(seccomp.join("deny-mkdir.json"), DENY_MKDIR).unwrap();

    cluster.apply(&confined_pod(&node));
    let sysctl = "{sysctls: [{name: net.core.rmem_max, value: '1'}]}";
    cluster.apply(&simple_pod("forbidden", &node, sysctl, "{}"));
    cluster.apply(&simple_pod(
        "armored",
        &node,
        "{appArmorProfile: {type: RuntimeDefault}}",
        "{}",
    ));
    cluster.apply(&simple_pod("nonroot", &node, "{runAsNonRoot: true}", "{}"));
    let missing = "{seccompProfile: {type: Localhost, localhostProfile: absent.json}}";
    cluster.apply(&simple_pod("noprofile", &node, "{}", missing));
    cluster.apply(
        &simple_pod("hostpid", &node, "{}", "{}").replace("spec:\n", "spec:\n  hostPID: true\n"),
    );

    // The user container: the pod's user, group, supplemental groups and fsGroup; filtered
    // syscalls, no privilege escalation, a read-only root, masked /proc, the pod's sysctls.
    let user = logs(&cluster, "confined", "user", "mkdir=");
    assert!(field(&user, "Uid:").starts_with("1000"), "{user}");
    assert!(field(&user, "Gid:").starts_with("3000"), "{user}");
    let groups: Vec<&str> = field(&user, "Groups:").split_whitespace().collect();
    assert!(
        groups.contains(&"2000") && groups.contains(&"4000"),
        "{user}"
    );
    assert_eq!(field(&user, "Seccomp:"), "2", "{user}");
    assert_eq!(field(&user, "NoNewPrivs:"), "1", "{user}");
    assert_eq!(field(&user, "somaxconn="), "1024", "{user}");
    assert_eq!(field(&user, "port_start="), "80", "{user}");
    assert_eq!(field(&user, "timer_list_masked="), "1", "{user}");
    assert!(user.contains("proc_sys=ro"), "{user}");
    assert!(user.contains("rootfs=ro"), "{user}");
    assert!(
        user.contains("mkdir=ok"),
        "RuntimeDefault allows mkdir: {user}"
    );

    // The root container: only NET_BIND_SERVICE (bit 10), and the node's Localhost profile.
    let root = logs(&cluster, "confined", "root", "mkdir=");
    assert!(field(&root, "Uid:").starts_with("0"), "{root}");
    assert_eq!(field(&root, "CapEff:"), "0000000000000400", "{root}");
    assert_eq!(field(&root, "CapBnd:"), "0000000000000400", "{root}");
    assert_eq!(field(&root, "Seccomp:"), "2", "{root}");
    assert!(root.contains("mkdir=denied"), "{root}");
    assert!(root.contains("rootfs=rw"), "{root}");

    // A sysctl the node does not allow: refused before anything runs, as the kubelet does.
    let (reason, message) = rejected(&cluster, "forbidden");
    assert_eq!(reason, "SysctlForbidden");
    assert_eq!(
        message,
        "Pod was rejected: forbidden sysctl: \"net.core.rmem_max\" not allowlisted"
    );
    let events = cluster.pod_events("forbidden");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("SysctlForbidden: forbidden sysctl")),
        "{events:?}"
    );

    // AppArmor on a kernel without it (this one): refused, never run unconfined.
    let apparmor = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|s| s.trim() == "Y");
    if !apparmor {
        let (reason, message) = rejected(&cluster, "armored");
        assert_eq!(reason, "AppArmor");
        assert_eq!(
            message,
            "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host"
        );
    }
    let (sandboxes, _) = cluster.runtime_state();
    let names: Vec<_> = sandboxes
        .iter()
        .filter_map(|s| s.metadata.as_ref().map(|m| m.name.clone()))
        .collect();
    assert!(!names.contains(&"forbidden".to_string()), "{names:?}");

    // runAsNonRoot against busybox, whose image runs as root.
    let message = waiting_message(&cluster, "nonroot", "CreateContainerConfigError");
    assert!(
        message.starts_with(
            "container has runAsNonRoot and image will run as root (pod: \"nonroot_default("
        ),
        "{message}"
    );
    let message = waiting_message(&cluster, "noprofile", "CreateContainerConfigError");
    assert!(message.contains("absent.json"), "{message}");

    // hostPID: the node's PID 1, not the container's own.
    let host_init = std::fs::read_to_string("/proc/1/comm").unwrap();
    let out = logs(&cluster, "hostpid", "app", host_init.trim());
    assert_eq!(out.lines().next(), Some(host_init.trim()), "{out}");

    // Deleted, the pod leaves no tmpfs behind on the node.
    cluster
        .kubectl(&["delete", "pod", "confined", "--wait=true"])
        .unwrap();
    let root = cluster.tmp.path().join("agent-root").display().to_string();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&root), "{mounts}");
    assert!(!cluster.agent_log().contains("panicked"));
}

/// The fields beside securityContext: one the agent does not honour refuses the pod naming it;
/// readiness gates hold Ready until their condition is True, and the agent's status writes
/// leave that condition alone; setHostnameAsFQDN gives the pod its whole name.
#[test]
fn unhonoured_fields_refuse_the_pod_and_readiness_gates_hold_ready() {
    let cluster = Cluster::start("agspec");
    let node = cluster.node_name.clone();
    cluster.apply(
        &simple_pod("userns", &node, "{}", "{}").replace("spec:\n", "spec:\n  hostUsers: false\n"),
    );
    let gated = simple_pod("gated", &node, "{}", "{}").replace(
        "spec:\n",
        "spec:\n  readinessGates: [{conditionType: example.com/lb}]\n",
    );
    cluster.apply(&gated);
    let fqdn = pod_yaml(
        "fq",
        &node,
        &format!(
            "  subdomain: db
  setHostnameAsFQDN: true
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'hostname; sleep 3600']
"
        ),
    );
    cluster.apply(&fqdn);
    let deadline = simple_pod("deadline", &node, "{}", "{}")
        .replace("spec:\n", "spec:\n  activeDeadlineSeconds: 3\n");
    cluster.apply(&deadline);

    let (reason, message) = rejected(&cluster, "userns");
    assert_eq!(reason, "UnsupportedPodSpec");
    assert!(
        message.starts_with("Pod was rejected: spec.hostUsers is not supported by keelson-agent"),
        "{message}"
    );
    let events = cluster.pod_events("userns");
    assert!(
        events.iter().any(|e| e.contains("spec.hostUsers")),
        "{events:?}"
    );

    let ready = |c: &str| {
        let pod = cluster.pod("gated");
        let conds = pod["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        conds.into_iter().find(|x| x["type"] == c)
    };
    let held = cluster.wait_until(Duration::from_secs(60), "gated running, not Ready", || {
        let r = ready("Ready")?;
        (ready("ContainersReady")?["status"] == "True").then_some(r)
    });
    assert_eq!(held["status"], "False", "{held}");
    assert_eq!(held["reason"], "ReadinessGatesNotReady", "{held}");
    assert_eq!(
        held["message"],
        "corresponding condition of pod readiness gate \"example.com/lb\" does not exist."
    );
    let gate = r#"{"status":{"conditions":[{"type":"example.com/lb","status":"True"}]}}"#;
    cluster
        .kubectl(&[
            "patch",
            "pod",
            "gated",
            "--subresource=status",
            "--type=strategic",
            "-p",
            gate,
        ])
        .unwrap();
    cluster.wait_until(Duration::from_secs(30), "gated Ready", || {
        (ready("Ready")?["status"] == "True").then_some(())
    });
    assert_eq!(ready("example.com/lb").unwrap()["status"], "True");

    // Past activeDeadlineSeconds: stopped and Failed, as the kubelet does.
    let (reason, message) = rejected(&cluster, "deadline");
    assert_eq!(reason, "DeadlineExceeded");
    assert_eq!(
        message,
        "Pod was active on the node longer than the specified deadline"
    );
    let (_, containers) = cluster.runtime_state();
    let running = containers.iter().any(|c| {
        c.labels.get("io.kubernetes.pod.name").map(String::as_str) == Some("deadline")
            && c.state == proto::ContainerState::ContainerRunning as i32
    });
    assert!(!running, "{containers:?}");

    let out = logs(&cluster, "fq", "app", "svc");
    assert_eq!(out.trim(), "fq.db.default.svc.cluster.local");
}
