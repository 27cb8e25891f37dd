//! Certificate rotation with the real parts: keelson-apiserver, keelson-controller-manager
//! signing 3-minute certificates, and a bootstrapped agent that renews its client certificate
//! (and, with --rotate-server-certificates, its serving certificate) while it runs.

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime};

use common::bootstrap::*;
use common::*;
use keelson_agent::certificate::deadline::{validity, Validity};

/// The controller manager approving and signing with the cluster CA, for `duration`.
fn start_signer(cluster: &mut Cluster, duration: &str) {
    let ca = cluster.api_dir().join("ca.crt").display().to_string();
    let ca_key = cluster.api_dir().join("ca.key").display().to_string();
    cluster.start_controller_manager(&[
        "--cluster-signing-cert-file",
        &ca,
        "--cluster-signing-key-file",
        &ca_key,
        "--cluster-signing-duration",
        duration,
        "--allocate-node-cidrs",
        "--cluster-cidr",
        "10.244.0.0/16",
    ]);
}

fn read_validity(file: &Path) -> Validity {
    let pem = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    validity(&pem).expect("a certificate")
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn node_ready(cluster: &Cluster, name: &str) -> bool {
    cluster
        .kubectl_json(&["get", "node", name])
        .ok()
        .and_then(|n| n["status"]["conditions"].as_array().cloned())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// A pod on `node` that must reach Running.
fn start_pod(cluster: &Cluster, name: &str, node: &str) {
    let body = format!(
        "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sleep, '3600']\n"
    );
    cluster.apply(&pod_yaml(name, node, &body));
    cluster.wait_until(
        Duration::from_secs(60),
        &format!("pod {name} Running"),
        || (cluster.pod(name)["status"]["phase"] == "Running").then_some(()),
    );
}

#[test]
fn the_agent_rotates_its_client_certificate_twice_without_a_restart() {
    let mut cluster = Cluster::control_plane("agrot");
    start_signer(&mut cluster, "3m");
    let bootstrap = prepare(&cluster);
    let name = cluster.add_bootstrapping_node("agrotn", &bootstrap);
    let cert_file = cluster
        .node(&name)
        .cert_dir()
        .join("keelson-agent-client-current.pem");
    let first = read_validity(&cert_file);
    let pid = cluster.node_mut(&name).agent_pid().expect("agent running");
    eprintln!(
        "first certificate {} valid {}s",
        first.serial,
        first.not_after - first.not_before
    );
    assert!(first.not_after - now() <= 180, "a 3-minute certificate");
    let mut seen = vec![first.clone()];
    for round in 1..=2 {
        let previous = seen.last().cloned().expect("a certificate");
        // At 70-90% of its lifetime (notBefore is backdated 5 minutes by the signer): before
        // it expires, in any case.
        let wait = Duration::from_secs((previous.not_after - now()).max(0) as u64 + 30);
        let next = cluster.wait_until(wait, &format!("rotation {round}"), || {
            let v = validity(&std::fs::read(&cert_file).ok()?).ok()?;
            (v.serial != previous.serial).then_some(v)
        });
        eprintln!("rotation {round}: {} -> {}", previous.serial, next.serial);
        assert!(next.not_after > previous.not_after, "{next:?} {previous:?}");
        assert!(
            now() < previous.not_after,
            "renewed before the old one expired"
        );
        assert_eq!(
            cluster.node_mut(&name).agent_pid(),
            Some(pid),
            "the agent was not restarted"
        );
        seen.push(next);
        if round == 2 {
            // Only the newest certificate still authenticates once the first has expired.
            let left = (first.not_after + 5 - now()).max(0) as u64;
            std::thread::sleep(Duration::from_secs(left));
        }
        assert!(node_ready(&cluster, &name), "node {name} Ready");
        start_pod(&cluster, &format!("after-rotation-{round}"), &name);
    }
    // The renewals were the node's own requests, approved as such; no bootstrap token used.
    let list = csrs(&cluster);
    let renewals: Vec<_> = list
        .iter()
        .filter(|c| c["spec"]["username"] == format!("system:node:{name}"))
        .collect();
    // Two, or three when the wait for the first certificate's expiry saw another.
    assert!(
        (2..=3).contains(&renewals.len()),
        "{} renewals",
        renewals.len()
    );
    assert!(renewals.iter().all(|c| is_approved(c)), "{renewals:?}");
    // The Lease is still renewed with the newest certificate.
    let renew_time = |c: &Cluster| {
        c.kubectl_json(&["get", "lease", "-n", "kube-node-lease", &name])
            .ok()
            .and_then(|l| l["spec"]["renewTime"].as_str().map(str::to_string))
    };
    let before = renew_time(&cluster);
    cluster.wait_until(Duration::from_secs(30), "a Lease renewal", || {
        (renew_time(&cluster) != before).then_some(())
    });
    let metrics = cluster.metrics();
    let ttl: i64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("kubelet_certificate_manager_client_ttl_seconds "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("client TTL gauge in {metrics}"));
    assert!(ttl > 0 && ttl <= 180, "{ttl}");
    assert!(
        metrics.contains("kubelet_certificate_manager_client_expiration_renew_errors 0"),
        "{metrics}"
    );
    assert_eq!(cluster.node_mut(&name).agent_pid(), Some(pid));
}

/// A kubelet-serving CSR made with the node's own identity, for `sans`; its name.
fn serving_csr_as_node(cluster: &Cluster, kubeconfig: &Path, node: &str, sans: &[&str]) -> String {
    use keelson_agent::bootstrap::csr;
    let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
    let request = csr::request_with_names(node, &sans).expect("a CSR");
    let name = csr::name();
    let object = csr::object_for(
        &name,
        &request.csr_pem,
        csr::SERVING_SIGNER,
        &csr::SERVING_USAGES,
    );
    let file = cluster.tmp.path().join(format!("{name}.json"));
    std::fs::write(&file, serde_json::to_string(&object).expect("json")).expect("write");
    kubectl_as(cluster, kubeconfig)
        .run(&["create", "-f", &file.display().to_string()])
        .expect("the node creates its CSR");
    name
}

#[test]
fn port_10250_serves_a_signed_certificate_and_only_the_nodes_own_names_are_approved() {
    let mut cluster = Cluster::control_plane("agsrv");
    start_signer(&mut cluster, "1h");
    let bootstrap = prepare(&cluster);
    let name = cluster.add_bootstrapping_node_with(
        "agsrvn",
        &bootstrap,
        &["--rotate-server-certificates"],
    );
    let node = cluster.node(&name);
    let cert_file = node.cert_dir().join("keelson-agent-server-current.pem");
    cluster.wait_until(Duration::from_secs(60), "the serving certificate", || {
        std::fs::read(&cert_file)
            .ok()
            .and_then(|pem| validity(&pem).ok())
    });
    // The handshake verifies against the cluster CA, by the node's address and by its name.
    let ca = cluster.api_dir().join("ca.crt").display().to_string();
    let ip = node.ip.clone();
    let by_ip = format!("https://{ip}:10250/healthz");
    let resolve = format!("{name}:10250:{ip}");
    let by_name = format!("https://{name}:10250/healthz");
    let curl = |args: &[&str]| cluster.on_node("curl", args);
    let ok = cluster.wait_until(Duration::from_secs(30), "10250 presents it", || {
        curl(&["-s", "-m", "5", "--cacert", &ca, &by_ip]).ok()
    });
    assert_eq!(ok, "ok");
    assert_eq!(
        curl(&[
            "-s",
            "-m",
            "5",
            "--cacert",
            &ca,
            "--resolve",
            &resolve,
            &by_name
        ])
        .as_deref(),
        Ok("ok")
    );
    let served = cluster
        .on_node(
            "sh",
            &["-c", &format!("openssl s_client -connect {ip}:10250 -CAfile {ca} </dev/null 2>/dev/null | openssl x509 -noout -serial")],
        )
        .expect("openssl");
    let on_disk = read_validity(&cert_file)
        .serial
        .replace(':', "")
        .to_uppercase();
    assert!(served.contains(&on_disk), "{served} vs {on_disk}");

    let list = csrs(&cluster);
    let serving: Vec<_> = list
        .iter()
        .filter(|c| c["spec"]["signerName"] == "kubernetes.io/kubelet-serving")
        .collect();
    assert_eq!(serving.len(), 1, "{list:?}");
    assert!(is_approved(serving[0]), "{}", serving[0]);
    assert_eq!(
        serving[0]["spec"]["username"],
        format!("system:node:{name}")
    );

    // The node asking for an address that is not its own: not approved, nor signed.
    let kubeconfig = cluster.node(&name).kubeconfig().to_path_buf();
    let foreign = serving_csr_as_node(&cluster, &kubeconfig, &name, &[&name, "10.9.9.9"]);
    let own = serving_csr_as_node(&cluster, &kubeconfig, &name, &[&name, &ip]);
    cluster.wait_until(Duration::from_secs(30), "its own names approved", || {
        let c = cluster.kubectl_json(&["get", "csr", &own]).ok()?;
        is_approved(&c).then_some(())
    });
    let c = cluster
        .kubectl_json(&["get", "csr", &foreign])
        .expect("csr");
    assert!(!is_approved(&c), "{c}");
    assert!(c["status"]["certificate"].is_null(), "{c}");
    let log = cluster.controller_manager_log();
    assert!(log.contains("10.9.9.9 is not among"), "{}", tail(&log, 20));
    let metrics = cluster.metrics();
    assert!(
        metrics.contains("kubelet_certificate_manager_server_ttl_seconds"),
        "{metrics}"
    );
}
