//! TLS bootstrap with the real parts: keelson-apiserver (bootstrap tokens, CSRs, client
//! certificates) and keelson-controller-manager (approving and signing with the cluster CA, node
//! IPAM) in the control-plane host; a node whose agent has only a bootstrap kubeconfig.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use common::bootstrap::*;
use common::*;
use x509_parser::prelude::FromDer;

/// Subject CN and O values of the first certificate in a PEM file.
fn subject(pem: &[u8]) -> (Vec<String>, Vec<String>) {
    let block = x509_parser::pem::Pem::iter_from_buffer(pem)
        .next()
        .expect("a PEM block")
        .expect("PEM");
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(&block.contents)
        .expect("an X.509 certificate first");
    let s = cert.subject();
    (
        strings(s.iter_common_name()),
        strings(s.iter_organization()),
    )
}

fn strings<'a>(
    values: impl Iterator<Item = &'a x509_parser::x509::AttributeTypeAndValue<'a>>,
) -> Vec<String> {
    values
        .map(|a| a.as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn a_node_joins_with_a_bootstrap_token_then_acts_as_itself_and_restarts_without_a_new_csr() {
    let mut cluster = Cluster::control_plane("agtls");
    let ca = cluster.api_dir().join("ca.crt").display().to_string();
    let ca_key = cluster.api_dir().join("ca.key").display().to_string();
    cluster.start_controller_manager(&[
        "--cluster-signing-cert-file",
        &ca,
        "--cluster-signing-key-file",
        &ca_key,
        "--allocate-node-cidrs",
        "--cluster-cidr",
        "10.244.0.0/16",
    ]);
    let bootstrap = prepare(&cluster);
    let name = cluster.add_bootstrapping_node("agtlsn", &bootstrap);

    // One CSR, sent with the bootstrap token, approved and signed by the controller manager.
    let list = csrs(&cluster);
    assert_eq!(list.len(), 1, "{list:?}");
    let csr = &list[0];
    assert_eq!(csr["spec"]["username"], "system:bootstrap:abcdef", "{csr}");
    assert_eq!(
        csr["spec"]["signerName"],
        "kubernetes.io/kube-apiserver-client-kubelet"
    );
    assert!(is_approved(csr), "{}", csr["status"]);

    // The node's own credentials: a certificate for system:node:<name> in a 0600 file, and a
    // kubeconfig naming it with no token.
    let node = cluster.node(&name);
    let cert_file = node.cert_dir().join("keelson-agent-client-current.pem");
    let pem = std::fs::read(&cert_file).expect("the client certificate file");
    assert_eq!(
        subject(&pem),
        (
            vec![format!("system:node:{name}")],
            vec!["system:nodes".to_string()]
        )
    );
    let mode = std::fs::metadata(&cert_file)
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let kubeconfig = node.kubeconfig().to_path_buf();
    let text = std::fs::read_to_string(&kubeconfig).expect("the written kubeconfig");
    assert!(!text.contains("token"), "{text}");
    assert!(text.contains(&cert_file.display().to_string()), "{text}");

    // That identity reads the cluster; the bootstrap token alone may not.
    kubectl_as(&cluster, &kubeconfig)
        .run(&["get", "node", &name])
        .expect("the node's identity reads its Node");
    let refused = kubectl_as(&cluster, &bootstrap)
        .run(&["get", "nodes"])
        .expect_err("the bootstrap token lists nodes");
    assert!(
        refused.contains("system:bootstrap:abcdef") && refused.contains("forbidden"),
        "{refused}"
    );

    // Node IPAM gave the node its pod CIDR; its pods get addresses from it.
    let cidr = cluster.kubectl_json(&["get", "node", &name]).expect("node")["spec"]["podCIDR"]
        .as_str()
        .expect("spec.podCIDR from node IPAM")
        .to_string();
    let prefix = cidr.trim_end_matches("0/24");
    assert!(
        cidr.starts_with("10.244.") && cidr.ends_with(".0/24"),
        "{cidr}"
    );
    cluster.apply(&pod_yaml(
        "joined",
        &name,
        &format!(
            "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sleep, '3600']\n"
        ),
    ));
    let ip = cluster.wait_until(Duration::from_secs(60), "pod Running with an IP", || {
        let pod = cluster.pod("joined");
        (pod["status"]["phase"] == "Running")
            .then(|| pod["status"]["podIP"].as_str().unwrap_or("").to_string())
    });
    assert!(ip.starts_with(prefix), "pod IP {ip} not in {cidr}");
    // Its port 10250 asks for TokenReviews and SubjectAccessReviews with the node's own
    // credentials: the admin's token and the API server's certificate (kubectl logs) get in.
    let pods = cluster.agent_get("/pods", Some(&cluster.admin_token()));
    assert!(
        pods.ends_with(" 200") && pods.contains("\"joined\""),
        "{pods}"
    );
    assert_eq!(cluster.agent_get("/pods", None), "Unauthorized 401");
    assert_eq!(cluster.kubectl(&["logs", "joined"]), Ok(String::new()));

    // Restart with the token gone: the agent keeps using its certificate, sends no new CSR, and
    // keeps writing its Node's Lease and status as system:node:<name>.
    cluster
        .kubectl(&[
            "delete",
            "secret",
            "-n",
            "kube-system",
            "bootstrap-token-abcdef",
        ])
        .expect("delete the token");
    let renewed = |c: &Cluster| {
        c.kubectl_json(&["get", "lease", "-n", "kube-node-lease", &name])
            .ok()
            .and_then(|l| l["spec"]["renewTime"].as_str().map(str::to_string))
    };
    let node = cluster.node_mut(&name);
    node.stop_agent("TERM");
    node.start_agent();
    let before = renewed(&cluster);
    cluster.wait_until(
        Duration::from_secs(40),
        "the restarted agent to renew its Lease",
        || (renewed(&cluster) != before).then_some(()),
    );
    let log = cluster.node(&name).agent_log();
    assert_eq!(
        log.matches("using the node's client certificate").count(),
        1,
        "{}",
        tail(&log, 30)
    );
    assert_eq!(csrs(&cluster).len(), 1, "no new CSR on restart");
}

/// The agent's side alone against the real API server and controller manager, with the admin
/// kubeconfig as the bootstrap kubeconfig (the admin is no bootstrapper, so nothing approves its
/// request by itself): the agent waits until kubectl approves and the controller manager signs,
/// then writes its credentials; a second start sends nothing; a denied request ends the
/// bootstrap with the condition's reason.
#[test]
fn the_agent_waits_for_approval_writes_its_credentials_once_and_stops_when_denied() {
    use keelson_agent::bootstrap::{ensure, BootstrapError, Settings};
    let api = keelson_testing::Apiserver::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = |p: &Path| p.display().to_string();
    let mut cmd = std::process::Command::new(keelson_testing::binary("keelson-controller-manager"));
    let own = api.kubeconfig_of(keelson_testing::Component::ControllerManager);
    cmd.args(["--kubeconfig", &path(&own)])
        .args([
            "--metrics-bind-address",
            &format!("127.0.0.1:{}", keelson_testing::free_port()),
        ])
        .args([
            "--cluster-signing-cert-file",
            &path(&api.dir.path().join("ca.crt")),
        ])
        .args([
            "--cluster-signing-key-file",
            &path(&api.dir.path().join("ca.key")),
        ]);
    let _cm = keelson_testing::ChildGuard::spawn_logged(&mut cmd, &tmp.path().join("cm.log"));
    let settings = Settings {
        node_name: "n1".into(),
        bootstrap_kubeconfig: Some(api.kubeconfig()),
        kubeconfig: tmp.path().join("kubeconfig"),
        cert_dir: tmp.path().join("pki"),
        timeout: Duration::from_secs(120),
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let kubectl = api.kubectl_cmd();
    let names = || -> Vec<String> {
        kubectl.json(&["get", "csr"]).expect("list CSRs")["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
            .collect()
    };
    // The one request not among `before` (lists come sorted by name, not by age).
    let sent = |before: &[String]| {
        keelson_testing::eventually("the agent's CSR", Duration::from_secs(30), || {
            let new: Vec<String> = names()
                .into_iter()
                .filter(|n| !before.contains(n))
                .collect();
            match new.as_slice() {
                [one] => Ok(one.clone()),
                _ => Err(format!("new CSRs: {new:?}")),
            }
        })
    };

    let task = runtime.spawn({
        let s = settings.clone();
        async move { ensure(&s).await }
    });
    let name = sent(&[]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !task.is_finished(),
        "the agent waits while the request is pending"
    );
    assert!(!settings.kubeconfig.exists());
    kubectl.ok(&["certificate", "approve", &name]);
    runtime
        .block_on(task)
        .expect("task")
        .expect("bootstrap once approved and signed");
    let cert_file = settings.cert_dir.join("keelson-agent-client-current.pem");
    let pem = std::fs::read(&cert_file).expect("certificate file");
    assert_eq!(subject(&pem).0, ["system:node:n1"]);
    let text = std::fs::read_to_string(&settings.kubeconfig).expect("kubeconfig");
    assert!(
        text.contains(&path(&cert_file)) && !text.contains("token"),
        "{text}"
    );

    // Started again with those credentials: nothing is sent.
    runtime
        .block_on(ensure(&settings))
        .expect("valid credentials");
    assert_eq!(names().len(), 1);

    // Without them (say, deleted), a new request; denied, the agent stops saying why.
    std::fs::remove_file(&settings.kubeconfig).expect("remove kubeconfig");
    let task = runtime.spawn({
        let s = settings.clone();
        async move { ensure(&s).await }
    });
    let second = sent(&[name]);
    kubectl.ok(&["certificate", "deny", &second]);
    match runtime.block_on(task).expect("task") {
        Err(BootstrapError::Refused { name, why }) => {
            assert_eq!(name, second);
            assert!(why.starts_with("Denied"), "{why}");
        }
        other => panic!("a denied request gave {other:?}"),
    }
    assert!(!settings.kubeconfig.exists());
}
