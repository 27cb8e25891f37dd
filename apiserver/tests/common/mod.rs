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
