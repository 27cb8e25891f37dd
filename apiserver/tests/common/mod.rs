//! What the node-joining tests share: PEM requests and certificates made with rcgen, and CSR
//! manifests.

#![allow(dead_code)]

use base64::Engine;

pub fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// A PEM PKCS#10 request for CN `cn`, O `org`, with a fresh P-256 key.
pub fn request_pem(cn: &str, org: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, org);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

/// A kubelet client CSR manifest named `name`.
pub fn csr_yaml(name: &str, extra_spec: &str) -> String {
    let request = b64(request_pem("system:node:n1", "system:nodes").as_bytes());
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {request}\n  signerName: kubernetes.io/kube-apiserver-client-kubelet\n  usages: [digital signature, client auth]\n{extra_spec}"
    )
}

/// A kubeconfig for `s` whose user is `user_yaml` (the lines under `user:`), in `dir`.
pub fn kubeconfig(
    s: &keelson_testing::Apiserver,
    dir: &std::path::Path,
    name: &str,
    user_yaml: &str,
) -> keelson_testing::Kubectl {
    let ca = std::fs::read(s.dir.path().join("ca.crt")).unwrap();
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: u\n  user:\n{user_yaml}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n",
        s.url(""),
        b64(&ca)
    );
    let path = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&path, text).unwrap();
    keelson_testing::Kubectl::new(path)
}

/// A bootstrap token Secret in kube-system, applied with the admin's kubectl.
pub fn bootstrap_token(s: &keelson_testing::Apiserver, id: &str, secret: &str, fields: &str) {
    s.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bootstrap-token-{id}\n  namespace: kube-system\ntype: bootstrap.kubernetes.io/token\nstringData:\n  token-id: {id}\n  token-secret: {secret}\n{fields}"
    ));
}

/// A client certificate and key (PEM) for CN `cn` and O `orgs`, signed by the server's CA
/// (the data directory's ca.key), or else by an unknown CA of the same name.
pub fn client_cert(
    s: &keelson_testing::Apiserver,
    cn: &str,
    orgs: &[&str],
    cluster_ca: bool,
) -> (String, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, "keelson-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = if cluster_ca {
        let pem = std::fs::read_to_string(s.dir.path().join("ca.key")).unwrap();
        KeyPair::from_pem(&pem).unwrap()
    } else {
        KeyPair::generate().unwrap()
    };
    let issuer = Issuer::new(ca, ca_key);
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    for o in orgs {
        p.distinguished_name.push(DnType::OrganizationName, *o);
    }
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A server whose --token-auth-file knows alice (no groups), alice's kubectl, and the folder
/// holding the token file and her kubeconfig.
pub fn server_knowing_alice() -> (
    keelson_testing::Apiserver,
    keelson_testing::Kubectl,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "alice-token-0123456789,alice,1001\n").unwrap();
    let s =
        keelson_testing::Apiserver::start_with(&["--token-auth-file", tokens.to_str().unwrap()]);
    let alice = kubeconfig(&s, dir.path(), "alice", "    token: alice-token-0123456789");
    (s, alice, dir)
}

/// Binds alice to the ClusterRole `role` in namespace `ns` (RoleBinding `alice-<role>`).
pub fn bind_alice(s: &keelson_testing::Apiserver, ns: &str, role: &str) {
    s.kubectl_ok(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        &format!("alice-{role}"),
        &format!("--clusterrole={role}"),
        "--user=alice",
    ]);
}
