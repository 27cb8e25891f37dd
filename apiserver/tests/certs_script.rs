//! scripts/certs against a real API server's data directory: `check` lists every certificate
//! and fails within the limit; `renew` reissues them from the CA with the same keys and
//! subjects, can run again, and the restarted server serves the new certificate.

use std::path::{Path, PathBuf};
use std::process::Command;

use keelson_testing::Apiserver;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/certs")
}

/// Runs scripts/certs with KEELSON_DATA `data`: (success, stdout, stderr).
fn certs(data: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(script())
        .args(args)
        .env("KEELSON_DATA", data)
        .env("KEELSON_BIN_DIR", keelson_testing::bins::bin_dir())
        .output()
        .expect("run scripts/certs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Serial, subject and public key of the first certificate in a PEM file.
fn identity(pem: &[u8]) -> (String, String, Vec<u8>) {
    let block = x509_parser::pem::Pem::iter_from_buffer(pem)
        .next()
        .expect("a PEM block")
        .expect("PEM");
    let cert = block.parse_x509().expect("a certificate");
    (
        cert.raw_serial_as_string(),
        cert.subject().to_string(),
        cert.public_key().raw.to_vec(),
    )
}

/// The client certificate embedded in a kubeconfig.
fn kubeconfig_cert(path: &Path) -> Vec<u8> {
    let text = std::fs::read_to_string(path).expect("kubeconfig");
    let b64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("client-certificate-data:"))
        .expect("client-certificate-data")
        .trim();
    keelson_apimachinery::base64::decode(b64).expect("base64")
}

#[test]
fn certs_check_lists_and_renew_reissues_with_the_same_keys() {
    let mut api = Apiserver::start();
    let scheduler = api.kubeconfig_for("system:kube-scheduler", &[]);
    let jane = api.kubeconfig_for("jane", &["dev", "ops"]);
    let data = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(api.dir.path(), data.path().join("apiserver")).expect("symlink");

    let (ok, table, err) = certs(data.path(), &["check"]);
    assert!(ok, "{table}{err}");
    for name in [
        "apiserver/apiserver.crt",
        "apiserver/ca.crt",
        "apiserver/apiserver-kubelet-client.crt",
        "apiserver/system-kube-scheduler.kubeconfig",
        "apiserver/jane.kubeconfig",
    ] {
        assert!(table.contains(name), "{name} in\n{table}");
    }
    assert!(table.contains("CN=keelson-apiserver"), "{table}");
    let (ok, _, err) = certs(data.path(), &["check", "--within", "36500"]);
    assert!(!ok && err.contains("certs renew"), "{err}");

    let crt = api.dir.path().join("apiserver.crt");
    let before = identity(&std::fs::read(&crt).expect("apiserver.crt"));
    let jane_before = identity(&kubeconfig_cert(&jane));
    let (ok, out, err) = certs(data.path(), &["renew"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("apiserver/apiserver.crt: renewed"), "{out}");
    assert!(out.contains("apiserver/ca.crt: a CA, kept"), "{out}");
    assert!(out.contains("restart"), "{out}");
    let after = identity(&std::fs::read(&crt).expect("apiserver.crt"));
    assert_ne!(before.0, after.0, "a new serial");
    assert_eq!(
        (&before.1, &before.2),
        (&after.1, &after.2),
        "same subject and key"
    );
    let jane_after = identity(&kubeconfig_cert(&jane));
    assert_ne!(jane_before.0, jane_after.0);
    assert_eq!(jane_before.1, jane_after.1, "both groups kept");
    // A year from now, checked clean; running it again is as good.
    let (ok, table, err) = certs(data.path(), &["check", "--within", "360"]);
    assert!(ok && table.contains("365"), "{table}{err}");
    let (ok, out, err) = certs(data.path(), &["renew"]);
    assert!(ok, "{out}{err}");

    // The restarted server serves the renewed certificate; the renewed identities sign in.
    api.restart();
    let ttl = api.metric("apiserver_certificate_expiration_seconds{certificate=\"serving\"}");
    assert!(ttl > 364.0 * 86_400.0 && ttl <= 365.0 * 86_400.0, "{ttl}");
    let kubectl = keelson_testing::Kubectl {
        kubeconfig: scheduler,
        netns: None,
    };
    kubectl.ok(&["get", "nodes"]);
}
