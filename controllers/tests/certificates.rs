//! CSR approving and signing against a real keelson-apiserver: CSRs created with kubectl by
//! a bootstrap token (as a joining node), by the node's own issued certificate (renewal) and by
//! a plain user (a static token); the controller manager signs with the API server's own CA
//! files; certificates are checked with openssl against that CA.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use keelson_testing::{binary, free_port, run, Apiserver, ChildGuard, Component};
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

const KUBELET_CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const CLIENT: &[&str] = &["digital signature", "client auth"];

/// A plain user, from the API server's --token-auth-file.
const JANE: &str = "--token=jane-token";
/// The bootstrap token of BOOTSTRAP_SECRET.
const BOOTSTRAPPER: &str = "--token=abcdef.0123456789abcdef";
const BOOTSTRAP_SECRET: &str = "apiVersion: v1
kind: Secret
metadata: {name: bootstrap-token-abcdef, namespace: kube-system}
type: bootstrap.kubernetes.io/token
stringData:
  token-id: abcdef
  token-secret: 0123456789abcdef
  usage-bootstrap-authentication: \"true\"
  expiration: \"2099-01-01T00:00:00Z\"
";

struct Cluster {
    api: Apiserver,
    _tokens: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let tokens = tempfile::tempdir().unwrap();
        let file = tokens.path().join("tokens.csv");
        std::fs::write(&file, "jane-token,jane,u3,\"dev\"\n").unwrap();
        let api = Apiserver::start_with(&["--token-auth-file", file.to_str().unwrap()]);
        api.apply(BOOTSTRAP_SECRET);
        // RBAC lets no plain user ask for certificates by default: jane is granted it.
        api.kubectl_ok(&[
            "create",
            "clusterrole",
            "csr-requester",
            "--verb=create,get,list,watch",
            "--resource=certificatesigningrequests.certificates.k8s.io",
        ]);
        api.kubectl_ok(&[
            "create",
            "clusterrolebinding",
            "jane-csr",
            "--clusterrole=csr-requester",
            "--user=jane",
        ]);
        Cluster {
            api,
            _tokens: tokens,
        }
    }

    fn ca(&self) -> PathBuf {
        self.api.dir.path().join("ca.crt")
    }

    fn controller_manager(&self) -> ChildGuard {
        let dir = self.api.dir.path();
        let mut cmd = Command::new(binary("keelson-controller-manager"));
        cmd.arg("--kubeconfig")
            .arg(self.api.kubeconfig_of(Component::ControllerManager))
            .args([
                "--metrics-bind-address",
                &format!("127.0.0.1:{}", free_port()),
            ])
            .arg("--cluster-signing-cert-file")
            .arg(self.ca())
            .arg("--cluster-signing-key-file")
            .arg(dir.join("ca.key"));
        ChildGuard::spawn_logged(&mut cmd, &dir.join("controller-manager.log"))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.api.dir.path().join("controller-manager.log"))
            .unwrap_or_default()
    }

    /// kubectl as the admin.
    fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        self.api.kubectl_cmd().run(args)
    }

    /// A kubeconfig that authenticates with a client certificate and key (PEM).
    fn cert_kubeconfig(&self, cert: &str, key: &str) -> PathBuf {
        let dir = self.api.dir.path();
        let (cert_file, key_file) = (dir.join("node.crt"), dir.join("node.key"));
        std::fs::write(&cert_file, cert).unwrap();
        std::fs::write(&key_file, key).unwrap();
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"{}\", certificate-authority: {}}}\nusers:\n- name: node-n1\n  user: {{client-certificate: {}, client-key: {}}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: node-n1}}\ncurrent-context: c\n",
            self.api.url(""),
            self.ca().display(),
            cert_file.display(),
            key_file.display()
        );
        let path = dir.join("node.kubeconfig");
        std::fs::write(&path, config).unwrap();
        path
    }

    /// Creates a CSR named `name` with kubectl and `who` (its credentials flags).
    fn create_csr(&self, who: &str, name: &str, pem: &str, signer: &str, usages: &[&str]) {
        let yaml = format!(
            "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {}\n  signerName: {signer}\n  usages: {usages:?}\n",
            keelson_apimachinery::base64::encode(pem.as_bytes())
        );
        let out = self
            .api
            .kubectl_cmd()
            .with_stdin(&[who, "create", "-f", "-"], &yaml);
        assert!(
            out.status.success(),
            "create {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `type/reason` of each condition, and whether status.certificate is set.
    fn state(&self, name: &str) -> (String, bool) {
        let path =
            "jsonpath={range .status.conditions[*]}{.type}/{.reason} {end}|{.status.certificate}";
        let out = self.kubectl(&["get", "csr", name, "-o", path]).unwrap();
        let (conds, cert) = out.split_once('|').unwrap_or((&out, ""));
        (conds.trim().to_string(), !cert.is_empty())
    }

    /// The issued certificate (PEM), once there.
    fn wait_certificate(&self, name: &str) -> String {
        keelson_testing::eventually("a signed certificate", Duration::from_secs(30), || {
            let b64 =
                self.kubectl(&["get", "csr", name, "-o", "jsonpath={.status.certificate}"])?;
            keelson_apimachinery::base64::decode(&b64)
                .filter(|pem| !pem.is_empty())
                .map(|pem| String::from_utf8(pem).unwrap())
                .ok_or_else(|| format!("{name}: {:?}\n{}", self.state(name), self.log()))
        })
    }
}

/// A PEM CSR with this subject and a fresh P-256 key (what the agent sends); and the key (PEM).
fn csr_with_key(cn: &str, orgs: &[&str]) -> (String, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    for (i, o) in orgs.iter().enumerate() {
        // rcgen keeps one value per type: a second O goes under the O attribute's OID.
        let ty = if i == 0 {
            DnType::OrganizationName
        } else {
            DnType::CustomDnType(vec![2, 5, 4, 10])
        };
        dn.push(ty, *o);
    }
    params.distinguished_name = dn;
    let key = KeyPair::generate().unwrap();
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    (pem, key.serialize_pem())
}

fn csr_pem(cn: &str, orgs: &[&str]) -> String {
    csr_with_key(cn, orgs).0
}

/// `openssl verify` of a client certificate against the CA, and its subject as openssl prints it.
fn openssl_client_cert(ca: &Path, pem: &str, dir: &Path) -> String {
    let file = dir.join(format!("cert-{}.pem", keelson_testing::random_suffix()));
    std::fs::write(&file, pem).unwrap();
    let verified = run(Command::new("openssl")
        .args(["verify", "-purpose", "sslclient", "-CAfile"])
        .arg(ca)
        .arg(&file))
    .unwrap_or_else(|e| panic!("openssl verify: {e}"));
    assert!(verified.trim().ends_with(": OK"), "{verified}");
    run(Command::new("openssl")
        .args([
            "x509",
            "-noout",
            "-subject",
            "-ext",
            "extendedKeyUsage",
            "-in",
        ])
        .arg(&file))
    .unwrap()
}

/// The issued certificate is approved automatically, passes openssl's client check against
/// the CA, and names node n1 in group system:nodes with client auth only.
fn check_node_certificate(c: &Cluster, name: &str) -> String {
    let pem = c.wait_certificate(name);
    assert_eq!(c.state(name).0, "Approved/AutoApproved", "{name}");
    let shown = openssl_client_cert(&c.ca(), &pem, c.api.dir.path());
    let subject = shown.lines().next().unwrap_or_default();
    assert_eq!(subject, "subject=CN = system:node:n1, O = system:nodes");
    assert!(shown.contains("TLS Web Client Authentication"), "{shown}");
    assert!(!shown.contains("Server Authentication"), "{shown}");
    pem
}

#[test]
fn node_client_csrs_are_approved_and_signed_and_nothing_else_is() {
    let c = Cluster::start();
    let _cm = c.controller_manager();
    let (node, node_key) = csr_with_key("system:node:n1", &["system:nodes"]);
    // What must stay unapproved is created first, so the controller has looked at it by the
    // time the good ones are done.
    let wrong_cn = csr_pem("admin", &["system:nodes"]);
    c.create_csr(BOOTSTRAPPER, "other-cn", &wrong_cn, KUBELET_CLIENT, CLIENT);
    let masters = csr_pem("system:node:n1", &["system:nodes", "system:masters"]);
    c.create_csr(BOOTSTRAPPER, "extra-o", &masters, KUBELET_CLIENT, CLIENT);
    let server = ["digital signature", "server auth"];
    c.create_csr(BOOTSTRAPPER, "server-usage", &node, KUBELET_CLIENT, &server);
    c.create_csr(JANE, "plain-user", &node, KUBELET_CLIENT, CLIENT);

    // A joining node: its bootstrap token asks for its client certificate.
    c.create_csr(BOOTSTRAPPER, "node-csr-boot", &node, KUBELET_CLIENT, CLIENT);
    let cert = check_node_certificate(&c, "node-csr-boot");
    // The node, now known by that certificate, renews it; asking for another node's is refused.
    let as_node = format!(
        "--kubeconfig={}",
        c.cert_kubeconfig(&cert, &node_key).display()
    );
    let n2 = csr_pem("system:node:n2", &["system:nodes"]);
    c.create_csr(&as_node, "other-node", &n2, KUBELET_CLIENT, CLIENT);
    let renewal = csr_pem("system:node:n1", &["system:nodes"]);
    c.create_csr(&as_node, "node-csr-renew", &renewal, KUBELET_CLIENT, CLIENT);
    check_node_certificate(&c, "node-csr-renew");
    let requester = c.kubectl(&[
        "get",
        "csr",
        "node-csr-renew",
        "-o",
        "jsonpath={.spec.username}",
    ]);
    assert_eq!(requester.unwrap(), "system:node:n1");

    std::thread::sleep(Duration::from_secs(2));
    for name in [
        "other-cn",
        "extra-o",
        "server-usage",
        "plain-user",
        "other-node",
    ] {
        assert_eq!(c.state(name), (String::new(), false), "{name}\n{}", c.log());
    }
    // A person approves jane's: it is signed then (the signer does not second-guess approvals
    // of valid client requests).
    c.kubectl(&["certificate", "approve", "plain-user"])
        .unwrap();
    let pem = c.wait_certificate("plain-user");
    openssl_client_cert(&c.ca(), &pem, c.api.dir.path());
    // Approved by a person but asking for server auth from a client signer: Failed, unsigned.
    c.kubectl(&["certificate", "approve", "server-usage"])
        .unwrap();
    keelson_testing::eventually("server-usage to fail", Duration::from_secs(30), || {
        let s = c.state("server-usage");
        (s == (
            "Approved/KubectlApprove Failed/SignerValidationFailure".into(),
            false,
        ))
            .then_some(())
            .ok_or_else(|| format!("{s:?}\n{}", c.log()))
    });
}

#[test]
fn a_denied_csr_is_never_approved_or_signed() {
    let c = Cluster::start();
    let node = csr_pem("system:node:n1", &["system:nodes"]);
    // Denied before any controller runs: it would be auto-approved otherwise.
    c.create_csr(BOOTSTRAPPER, "denied", &node, KUBELET_CLIENT, CLIENT);
    c.kubectl(&["certificate", "deny", "denied"]).unwrap();
    let _cm = c.controller_manager();
    let other = csr_pem("system:node:n1", &["system:nodes"]);
    c.create_csr(BOOTSTRAPPER, "allowed", &other, KUBELET_CLIENT, CLIENT);
    c.wait_certificate("allowed");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        c.state("denied"),
        ("Denied/KubectlDeny".into(), false),
        "{}",
        c.log()
    );
    // Approving a denied CSR is refused by the API server; either way nothing is signed.
    let _ = c.kubectl(&["certificate", "approve", "denied"]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(!c.state("denied").1, "{}", c.log());
}

#[test]
fn csrs_that_served_their_purpose_are_cleaned_up() {
    let c = Cluster::start();
    let signer = "example.com/signer";
    for name in ["old-denied", "fresh-denied", "pending"] {
        c.create_csr(JANE, name, &csr_pem("jane", &[]), signer, CLIENT);
    }
    // Denied two hours ago: the decision's time is what the cleaner counts from.
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let two_hours_ago = k8s_openapi::jiff::Timestamp::from_second(now - 7200).unwrap();
    let mut old: serde_json::Value = serde_json::from_str(
        &c.kubectl(&["get", "csr", "old-denied", "-o", "json"])
            .unwrap(),
    )
    .unwrap();
    old["status"]["conditions"] = serde_json::json!([{"type": "Denied", "status": "True",
        "reason": "Expired", "message": "decided long ago",
        "lastUpdateTime": two_hours_ago.to_string()}]);
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests/old-denied/approval";
    let (code, body) = c.api.curl_admin(
        "PUT",
        path,
        Some("application/json"),
        Some(&old.to_string()),
    );
    assert_eq!(code, 200, "{body}");
    c.kubectl(&["certificate", "deny", "fresh-denied"]).unwrap();

    let _cm = c.controller_manager();
    keelson_testing::eventually("old-denied deleted", Duration::from_secs(30), || {
        let names = c.kubectl(&["get", "csr", "-o", "name"])?;
        (!names.contains("old-denied"))
            .then_some(())
            .ok_or_else(|| format!("{names}\n{}", c.log()))
    });
    // A CSR denied a moment ago and one pending for less than a day stay.
    let names = c.kubectl(&["get", "csr", "-o", "name"]).unwrap();
    assert!(
        names.contains("fresh-denied") && names.contains("/pending"),
        "{names}"
    );
    assert!(
        c.log().contains("CSR cleaned up: denied for more than 1h"),
        "{}",
        c.log()
    );
}
