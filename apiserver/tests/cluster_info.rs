//! What a joining node reads before it has credentials: kube-public/cluster-info, and a
//! serving certificate valid for the address and names it was told.

use keelson_testing::process::run_ok;
use keelson_testing::Apiserver;
use std::process::Command;

/// GET of `url` with curl trusting only `ca_file`, resolving `host` to 127.0.0.1.
fn curl_verified(ca_file: &std::path::Path, host: &str, port: u16, path: &str) -> (bool, String) {
    let url = format!("https://{host}:{port}{path}");
    let out = Command::new("curl")
        .args(["-sS", "-m", "10", "--cacert"])
        .arg(ca_file)
        .args(["--resolve", &format!("{host}:{port}:127.0.0.1"), &url])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// kubeadm's --ca-cert-hash of a CA file, computed as its documentation does it:
/// sha256 of the DER SubjectPublicKeyInfo.
fn ca_cert_hash(ca_file: &std::path::Path) -> String {
    let script = "openssl x509 -pubkey -noout -in \"$1\" | openssl pkey -pubin -outform der | openssl dgst -sha256 -hex | sed 's/^.* //'";
    let hex = run_ok(Command::new("sh").args(["-c", script, "sh"]).arg(ca_file));
    format!("sha256:{}", hex.trim())
}

fn sans(s: &Apiserver) -> Vec<String> {
    let pem = std::fs::read(s.dir.path().join("apiserver.crt")).unwrap();
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
    let cert = block.parse_x509().unwrap();
    let ext = cert.subject_alternative_name().unwrap().unwrap();
    ext.value
        .general_names
        .iter()
        .map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => d.to_string(),
            x509_parser::extensions::GeneralName::IPAddress(ip) => {
                let b: [u8; 4] = (*ip).try_into().unwrap_or([0; 4]);
                std::net::Ipv4Addr::from(b).to_string()
            }
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn anyone_reads_cluster_info_and_its_ca_verifies_the_server() {
    let s = Apiserver::start();
    let path = "/api/v1/namespaces/kube-public/configmaps/cluster-info";
    let (code, body) = s.curl("GET", path, None, None, None);
    assert_eq!(code, 200, "{body}");
    let cm: serde_json::Value = serde_json::from_str(&body).unwrap();
    let config: serde_json::Value =
        serde_norway::from_str(cm["data"]["kubeconfig"].as_str().unwrap()).unwrap();
    let cluster = &config["clusters"][0]["cluster"];
    assert_eq!(cluster["server"], format!("https://127.0.0.1:{}", s.port));
    let ca = keelson_apimachinery::base64::decode(
        cluster["certificate-authority-data"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(ca, std::fs::read(s.dir.path().join("ca.crt")).unwrap());
    assert!(
        config["users"].is_null(),
        "cluster-info carries no credentials"
    );
    // The CA from cluster-info is enough to trust the server, as a joining node does.
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &ca).unwrap();
    let (ok, out) = curl_verified(&ca_file, "127.0.0.1", s.port, "/version");
    assert!(ok, "{out}");
    // The hash a join command carries, taken from the data directory's CA, pins this one.
    let pinned = ca_cert_hash(&s.dir.path().join("ca.crt"));
    assert_eq!(ca_cert_hash(&ca_file), pinned);
    assert_eq!(pinned.len(), "sha256:".len() + 64, "{pinned}");
    // Only that object is public.
    for other in [
        "/api/v1/namespaces/kube-public/configmaps",
        "/api/v1/namespaces/kube-system/configmaps/cluster-info",
        "/api/v1/namespaces/kube-public/configmaps/other",
    ] {
        assert_eq!(s.curl("GET", other, None, None, None).0, 401, "{other}");
    }
    assert_eq!(s.curl("DELETE", path, None, None, None).0, 401);
}

#[test]
fn serving_certificate_follows_advertise_address_and_tls_sans() {
    let mut s = Apiserver::start_with(&[
        "--advertise-address",
        "127.0.0.1",
        "--tls-sans",
        "keelson.test,10.11.12.13",
    ]);
    let got = sans(&s);
    for want in [
        "127.0.0.1",
        "keelson.test",
        "10.11.12.13",
        "kubernetes.default.svc",
        "10.96.0.1",
    ] {
        assert!(got.iter().any(|n| n == want), "{want} not in {got:?}");
    }
    let ca_file = s.dir.path().join("ca.crt");
    assert!(curl_verified(&ca_file, "keelson.test", s.port, "/version").0);
    // A changed set of names gets a new certificate from the same CA at the next start.
    s.restart_with(&[
        "--advertise-address",
        "127.0.0.1",
        "--tls-sans",
        "other.test",
    ]);
    let got = sans(&s);
    assert!(got.iter().any(|n| n == "other.test"), "{got:?}");
    assert!(!got.iter().any(|n| n == "keelson.test"), "{got:?}");
    let (ok, out) = curl_verified(&ca_file, "keelson.test", s.port, "/version");
    assert!(!ok && out.contains("keelson.test"), "{out}");
    assert!(curl_verified(&ca_file, "other.test", s.port, "/version").0);
}
