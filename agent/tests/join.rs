//! `keelson-agent join` against a real keelson-apiserver: the CA read from cluster-info is
//! trusted only with the right pin, and the bootstrap kubeconfig it writes authenticates as the
//! bootstrap token through a verified TLS connection (kubectl auth whoami).

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use keelson_testing::process::run_ok;
use keelson_testing::{binary, Apiserver, Kubectl};

const TOKEN: &str = "abcdef.0123456789abcdef";

/// The token's Secret, as scripts/token writes it.
const SECRET: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bootstrap-token-abcdef\n  namespace: kube-system\ntype: bootstrap.kubernetes.io/token\nstringData:\n  token-id: abcdef\n  token-secret: 0123456789abcdef\n  expiration: \"2099-01-01T00:00:00Z\"\n  usage-bootstrap-authentication: \"true\"\n";

/// sha256 of the CA's public key, from the CA's own key file (not from the certificate the
/// command reads), as kubeadm prints it.
fn pin(server: &Apiserver) -> String {
    let key = std::fs::read_to_string(server.dir.path().join("ca.key")).unwrap();
    let key = rcgen::KeyPair::from_pem(&key).unwrap();
    let (_, spki) = x509_parser::pem::parse_x509_pem(key.public_key_pem().as_bytes()).unwrap();
    let digest = ring::digest::digest(&ring::digest::SHA256, &spki.contents);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn join(server: &Apiserver, hash: &str, dir: &std::path::Path) -> std::process::Output {
    Command::new(binary("keelson-agent"))
        .args(["join", &format!("https://127.0.0.1:{}", server.port)])
        .args(["--token", TOKEN, "--ca-cert-hash", hash])
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap()
}

#[test]
fn the_ca_is_trusted_only_with_its_pin_and_the_kubeconfig_authenticates_the_token() {
    let server = Apiserver::start();
    server.apply(SECRET);
    let dir = tempfile::tempdir().unwrap();

    let wrong = format!("sha256:{}", "0".repeat(64));
    let out = join(&server, &wrong, dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("not the {wrong} given; refusing to join")),
        "{stderr}"
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing written for a CA that does not match"
    );

    let out = join(&server, &pin(&server), dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kubeconfig = dir.path().join("bootstrap.kubeconfig");
    for f in [&kubeconfig, &dir.path().join("ca.crt")] {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
    let whoami = Kubectl::new(&kubeconfig).output(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&whoami.stdout),
        "system:bootstrap:abcdef",
        "{}",
        String::from_utf8_lossy(&whoami.stderr)
    );
}

/// `keelson-apiserver token create --print-join-command` prints what joins: its URL, token and
/// pin work with `keelson-agent join`; `token list` shows the token and `token delete` ends it.
#[test]
fn a_token_and_join_command_made_by_keelson_apiserver_token_join() {
    let server = Apiserver::start();
    let token = |args: &[&str]| {
        let out = Command::new(binary("keelson-apiserver"))
            .arg("token")
            .args(args)
            .arg("--kubeconfig")
            .arg(server.kubeconfig())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "token {args:?}: {stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let command = token(&["create", "--ttl", "10m", "--print-join-command"]);
    let words: Vec<&str> = command.split_whitespace().collect();
    let [join_script, url, "--token", tok, "--ca-cert-hash", hash] = words[..] else {
        panic!("not a join command: {command}");
    };
    assert_eq!(join_script, "scripts/join");
    let id = tok.split('.').next().unwrap();
    assert!(token(&["list"]).contains(id));

    let dir = tempfile::tempdir().unwrap();
    run_ok(
        Command::new(binary("keelson-agent"))
            .args(["join", url, "--token", tok, "--ca-cert-hash", hash, "--dir"])
            .arg(dir.path()),
    );
    let kubeconfig = dir.path().join("bootstrap.kubeconfig");
    let whoami = || {
        let out = Kubectl::new(&kubeconfig).output(&[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(whoami(), format!("system:bootstrap:{id}"));

    token(&["delete", id]);
    assert!(!token(&["list"]).contains(id));
    assert_ne!(
        whoami(),
        format!("system:bootstrap:{id}"),
        "a deleted token still works"
    );
}
