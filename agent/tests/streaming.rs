//! kubectl exec, attach, cp and port-forward through the real keelson-apiserver to the agent and
//! a real containerd, with the machine's kubectl (1.32): WebSocket first (v5.channel.k8s.io for
//! exec/attach/cp, SPDY tunneled over WebSocket for port-forward), and the SPDY fallback that
//! older clients use (forced with kubectl's KUBECTL_*_WEBSOCKETS=false switches).

mod common;

use std::process::{Output, Stdio};
use std::time::Duration;

use common::*;

/// A busybox pod that keeps printing, for exec, cp and attach.
fn ticker_pod(node: &str) -> String {
    pod_yaml(
        "box",
        node,
        &format!(
            "  containers:\n  - name: main\n    image: {BUSYBOX}\n    command: [sh, -c, 'i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.3; done']\n"
        ),
    )
}

fn http_pod(node: &str) -> String {
    pod_yaml(
        "web",
        node,
        &format!("  containers:\n  - name: app\n    image: {HTTP_IMAGE}\n    ports: [{{containerPort: 8080}}]\n"),
    )
}

fn running(cluster: &Cluster, name: &str) {
    cluster.wait_until(
        Duration::from_secs(60),
        &format!("pod {name} Running"),
        || (cluster.pod(name)["status"]["phase"] == "Running").then_some(()),
    );
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// kubectl with `env` set, stdin from `input`.
fn kubectl_env(cluster: &Cluster, env: &[(&str, &str)], args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut cmd = cluster.kubectl_cmd().command(args);
    cmd.envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl");
    // Written from another thread: kubectl's output is read meanwhile, so a large echo does
    // not fill both pipes.
    let writer = child.stdin.take().map(|mut stdin| {
        let input = input.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        })
    });
    let out = child.wait_with_output().expect("wait for kubectl");
    if let Some(w) = writer {
        let _ = w.join();
    }
    out
}

fn interrupt(child: &std::process::Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
}

const WEBSOCKET: &[(&str, &str)] = &[];
const SPDY: &[(&str, &str)] = &[
    ("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false"),
    ("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false"),
];

fn exec_streams_stdin_and_exit_code(cluster: &Cluster, env: &[(&str, &str)], how: &str) {
    let script = "echo out; echo err >&2; exit 3";
    let out = kubectl_env(
        cluster,
        env,
        &["exec", "box", "--", "sh", "-c", script],
        b"",
    );
    assert_eq!(
        (out.status.code(), text(&out.stdout).as_str()),
        (Some(3), "out\n"),
        "{how}: stderr {}\n--- agent log ---\n{}",
        text(&out.stderr),
        tail(&cluster.agent_log(), 30)
    );
    assert!(
        text(&out.stderr).contains("err\n"),
        "{how}: {}",
        text(&out.stderr)
    );

    let script = "cat; echo done";
    let out = kubectl_env(
        cluster,
        env,
        &["exec", "-i", "box", "--", "sh", "-c", script],
        b"hello\nworld\n",
    );
    assert!(out.status.success(), "{how}: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello\nworld\ndone\n", "{how}");

    // 4 MiB echoed back while it is still being sent: both directions move at once.
    let big: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let out = kubectl_env(cluster, env, &["exec", "-i", "box", "--", "cat"], &big);
    assert!(out.status.success(), "{how}: {}", text(&out.stderr));
    assert_eq!(out.stdout.len(), big.len(), "{how}: bytes echoed");
    assert!(out.stdout == big, "{how}: the echo differs");
}

fn sha256(bytes: &[u8], cluster: &Cluster) -> String {
    let path = cluster.tmp.path().join("hash-input");
    std::fs::write(&path, bytes).expect("write");
    let out = cluster
        .on_cp("sha256sum", &[path.to_str().expect("utf-8")])
        .expect("sha256sum");
    out.split_whitespace().next().unwrap_or("").to_string()
}

fn cp_in_and_out(cluster: &Cluster, env: &[(&str, &str)], how: &str) {
    // 300 KiB of varied bytes: several frames each way, not only text.
    let content: Vec<u8> = (0..300 * 1024u32)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    let local = cluster.tmp.path().join(format!("in-{how}.bin"));
    std::fs::write(&local, &content).expect("write");
    let local = local.to_str().expect("utf-8");
    let remote = format!("box:/tmp/copied-{how}.bin");
    let out = kubectl_env(cluster, env, &["cp", local, &remote], b"");
    assert!(
        out.status.success(),
        "{how}: kubectl cp in: {}",
        text(&out.stderr)
    );
    let inside = kubectl_env(
        cluster,
        env,
        &[
            "exec",
            "box",
            "--",
            "sha256sum",
            &format!("/tmp/copied-{how}.bin"),
        ],
        b"",
    );
    let expected = sha256(&content, cluster);
    assert!(
        text(&inside.stdout).starts_with(&expected),
        "{how}: {} vs {expected}",
        text(&inside.stdout)
    );
    let back = cluster.tmp.path().join(format!("out-{how}.bin"));
    let out = kubectl_env(
        cluster,
        env,
        &["cp", &remote, back.to_str().expect("utf-8")],
        b"",
    );
    assert!(
        out.status.success(),
        "{how}: kubectl cp out: {}",
        text(&out.stderr)
    );
    let copied = std::fs::read(&back).expect("copied file");
    assert_eq!(
        sha256(&copied, cluster),
        expected,
        "{how}: the file came back changed"
    );
}

fn attach_sees_output(cluster: &Cluster, env: &[(&str, &str)], how: &str) {
    let mut cmd = cluster.kubectl_cmd().command(&["attach", "box"]);
    cmd.envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("kubectl attach");
    std::thread::sleep(Duration::from_secs(3));
    // kubectl attach runs until the process ends; stop it once it has had time to print.
    interrupt(&child);
    let out = child.wait_with_output().expect("wait for kubectl attach");
    let seen = text(&out.stdout);
    assert!(
        seen.matches("tick ").count() >= 3,
        "{how}: attach printed {seen:?}; stderr {}",
        text(&out.stderr)
    );
}

/// A pod whose process answers each line of its stdin (the container keeps stdin open).
fn echo_pod(node: &str) -> String {
    pod_yaml(
        "echo",
        node,
        &format!(
            "  containers:\n  - name: main\n    image: {BUSYBOX}\n    stdin: true\n    command: [sh, -c, 'while read l; do echo got $l; done']\n"
        ),
    )
}

fn attach_passes_stdin(cluster: &Cluster, env: &[(&str, &str)], how: &str) {
    use std::io::Write;
    let mut cmd = cluster.kubectl_cmd().command(&["attach", "-i", "echo"]);
    cmd.envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl attach -i");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{how}\n").as_bytes())
        .expect("write");
    std::thread::sleep(Duration::from_secs(3));
    // The process keeps running after the line: stop kubectl once it had time to answer.
    interrupt(&child);
    drop(stdin);
    let out = child.wait_with_output().expect("wait for kubectl attach");
    let seen = text(&out.stdout);
    assert!(
        seen.contains(&format!("got {how}")),
        "{how}: attach -i printed {seen:?}; stderr {}",
        text(&out.stderr)
    );
}

fn port_forward_serves(
    cluster: &Cluster,
    env: &[(&str, &str)],
    local: u16,
    how: &str,
    method: &str,
) {
    let ports = format!("{local}:8080");
    let mut cmd = cluster
        .kubectl_cmd()
        .command(&["port-forward", "pod/web", &ports]);
    cmd.envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl port-forward");
    let url = format!("http://127.0.0.1:{local}/pf");
    let first = cluster.wait_until(
        Duration::from_secs(20),
        &format!("{how}: port-forward answers"),
        || cluster.on_cp("curl", &["-sS", "-m", "5", &url]).ok(),
    );
    assert_eq!(first, "web\n", "{how}");
    for i in 0..100 {
        let body = cluster.on_cp("curl", &["-sS", "-m", "5", &url]);
        assert_eq!(
            body.as_deref(),
            Ok("web\n"),
            "{how}: sequential request {i}"
        );
    }
    let concurrent: Vec<_> = (0..10)
        .map(|_| {
            cluster
                .cp
                .command("curl")
                .args(["-sS", "-m", "10", &url])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("curl")
        })
        .collect();
    for (i, c) in concurrent.into_iter().enumerate() {
        let out = c.wait_with_output().expect("curl");
        assert_eq!(
            text(&out.stdout),
            "web\n",
            "{how}: concurrent request {i}: {}",
            text(&out.stderr)
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    // The agent names how each port-forward came (kubectl falls back to SPDY silently).
    let seen = format!("port-forward over {method}");
    assert!(
        cluster.agent_log().contains(&seen),
        "{how}: the agent's log has no {seen:?}"
    );
}

/// The method kubectl's -v=6 log shows for the upgrade that switched protocols: GET for
/// WebSocket, POST for SPDY (so a silent fallback from WebSocket to SPDY fails the test).
fn upgraded_with(cluster: &Cluster, env: &[(&str, &str)], args: &[&str], path: &str) -> String {
    let mut all = vec!["-v=6"];
    all.extend_from_slice(args);
    let out = kubectl_env(cluster, env, &all, b"");
    let log = text(&out.stderr);
    let line = log
        .lines()
        .find(|l| l.contains(path) && l.contains("101"))
        .unwrap_or_else(|| panic!("no upgrade to {path} in kubectl's log:\n{log}"));
    let method = ["GET", "POST"]
        .into_iter()
        .find(|m| line.contains(&format!("\"{m}\"")) || line.contains(&format!(" {m} ")));
    method
        .unwrap_or_else(|| panic!("no method in {line}"))
        .to_string()
}

#[test]
fn exec_cp_attach_and_port_forward_over_websocket_and_spdy() {
    let cluster = Cluster::start("agstr");
    cluster.apply(&ticker_pod(&cluster.node_name));
    cluster.apply(&echo_pod(&cluster.node_name));
    cluster.apply(&http_pod(&cluster.node_name));
    running(&cluster, "box");
    running(&cluster, "echo");
    running(&cluster, "web");
    for (env, how, method) in [(WEBSOCKET, "websocket", "GET"), (SPDY, "spdy", "POST")] {
        let exec = upgraded_with(&cluster, env, &["exec", "box", "--", "true"], "/exec?");
        assert_eq!(exec, method, "{how}: exec");
        exec_streams_stdin_and_exit_code(&cluster, env, how);
        cp_in_and_out(&cluster, env, how);
        attach_sees_output(&cluster, env, how);
        attach_passes_stdin(&cluster, env, how);
    }
    port_forward_serves(&cluster, WEBSOCKET, 18080, "websocket", "WebSocket");
    port_forward_serves(&cluster, SPDY, 18081, "spdy", "SPDY");

    // A terminal: kubectl sends the pseudo-terminal's size on the resize channel, and again
    // when the terminal is resized (SIGWINCH) during the session. The runtime applies a size
    // after it started the process: the command waits for each.
    let kubeconfig = cluster.kubectl_cmd().kubeconfig;
    let line = "stty rows 31 cols 101; \
        kubectl exec -it box -- sh -c 'sleep 2; stty size; sleep 4; stty size' </dev/tty & \
        sleep 4; stty rows 40 cols 120; kill -WINCH $!; wait";
    let tty = keelson_testing::run(
        cluster
            .cp
            .command("script")
            .args(["-qec", line, "/dev/null"])
            .env("KUBECONFIG", &kubeconfig),
    )
    .expect("kubectl exec -it under script");
    // (The terminal may echo a control character before the first answer.)
    let (initial, resized) = (tty.find("31 101"), tty.find("40 120"));
    assert!(
        matches!((initial, resized), (Some(a), Some(b)) if a < b),
        "stty size in the container, before and after the resize: {tty:?}"
    );
}
