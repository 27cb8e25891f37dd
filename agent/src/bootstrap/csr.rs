//! The node's CertificateSigningRequests, as the kubelet makes them (its client certificate, and
//! its serving certificate for port 10250), and what their status says. Pure.

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::ByteString;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PKCS_ECDSA_P256_SHA256};

/// The signer that issues kubelet client certificates (the controller manager's csrsigning).
pub const SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// Usages of a node client certificate, as upstream's kubelet asks.
pub const USAGES: [&str; 2] = ["digital signature", "client auth"];
/// The signer that issues kubelet serving certificates (port 10250).
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// Usages of a kubelet serving certificate, as upstream's kubelet asks.
pub const SERVING_USAGES: [&str; 3] = ["digital signature", "key encipherment", "server auth"];
/// The group every node's identity is in.
pub const NODES_GROUP: &str = "system:nodes";

/// A new private key and the PEM CSR signed with it.
pub struct Request {
    /// PKCS#8 PEM of the ECDSA P-256 key; it never leaves the node.
    pub key_pem: String,
    pub csr_pem: String,
}

/// A new ECDSA P-256 key and a CSR for subject CN=system:node:<node>, O=system:nodes.
pub fn request(node: &str) -> Result<Request, rcgen::Error> {
    request_with_names(node, &[])
}

/// The same, asking for `sans` (DNS names and IP addresses) too: the serving certificate's.
pub fn request_with_names(node: &str, sans: &[String]) -> Result<Request, rcgen::Error> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(sans.to_vec())?;
    let mut subject = DistinguishedName::new();
    subject.push(DnType::OrganizationName, NODES_GROUP);
    subject.push(DnType::CommonName, format!("system:node:{node}"));
    params.distinguished_name = subject;
    let csr = params.serialize_request(&key)?;
    Ok(Request {
        key_pem: key.serialize_pem(),
        csr_pem: csr.pem()?,
    })
}

/// The client CertificateSigningRequest object for `csr_pem` named `name`.
pub fn object(name: &str, csr_pem: &str) -> CertificateSigningRequest {
    object_for(name, csr_pem, SIGNER, &USAGES)
}

/// A CertificateSigningRequest for `signer` with `usages`.
pub fn object_for(
    name: &str,
    csr_pem: &str,
    signer: &str,
    usages: &[&str],
) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(csr_pem.as_bytes().to_vec()),
            signer_name: signer.to_string(),
            usages: Some(usages.iter().map(|u| u.to_string()).collect()),
            ..Default::default()
        },
        status: None,
    }
}

/// `node-csr-` and 16 random lowercase hex digits.
pub fn name() -> String {
    format!("node-csr-{:016x}", rand::random::<u64>())
}

/// Where a CSR stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not decided, or approved and not yet signed.
    Pending { approved: bool },
    /// status.certificate, PEM.
    Issued(String),
    /// Denied or Failed: the condition's type, reason and message.
    Refused(String),
}

/// What the CSR's status says: a certificate, a Denied or Failed condition, or still waiting.
pub fn outcome(csr: &CertificateSigningRequest) -> Outcome {
    let status = csr.status.as_ref();
    let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);
    let holds = |c: &&k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition| {
        c.status == "True"
    };
    if let Some(c) = conditions
        .iter()
        .filter(holds)
        .find(|c| c.type_ == "Denied" || c.type_ == "Failed")
    {
        return Outcome::Refused(format!(
            "{} ({}): {}",
            c.type_,
            c.reason.as_deref().unwrap_or(""),
            c.message.as_deref().unwrap_or("")
        ));
    }
    match status.and_then(|s| s.certificate.as_ref()) {
        Some(cert) if !cert.0.is_empty() => {
            Outcome::Issued(String::from_utf8_lossy(&cert.0).into_owned())
        }
        _ => Outcome::Pending {
            approved: conditions
                .iter()
                .filter(holds)
                .any(|c| c.type_ == "Approved"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };
    use x509_parser::prelude::FromDer;

    #[test]
    fn the_request_names_the_node_and_its_group_with_a_p256_key() {
        let req = request("worker-1").unwrap();
        let pem = x509_parser::pem::Pem::iter_from_buffer(req.csr_pem.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(pem.label, "CERTIFICATE REQUEST");
        let (_, csr) =
            x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
                .unwrap();
        csr.verify_signature().expect("signed by its own key");
        let subject = &csr.certification_request_info.subject;
        let cn: Vec<&str> = subject
            .iter_common_name()
            .map(|a| a.as_str().unwrap())
            .collect();
        let o: Vec<&str> = subject
            .iter_organization()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(cn, ["system:node:worker-1"]);
        assert_eq!(o, ["system:nodes"]);
        let spki = &csr.certification_request_info.subject_pki;
        assert_eq!(
            spki.algorithm
                .parameters
                .as_ref()
                .unwrap()
                .as_oid()
                .unwrap(),
            x509_parser::oid_registry::OID_EC_P256
        );
        // The key that goes into the node's file is the CSR's.
        let key = KeyPair::from_pem(&req.key_pem).unwrap();
        assert_eq!(key.public_key_raw(), spki.subject_public_key.data.as_ref());
    }

    #[test]
    fn the_object_asks_the_kubelet_client_signer_for_client_auth() {
        let csr = object("node-csr-abc", "PEM");
        let json = serde_json::to_value(&csr).unwrap();
        assert_eq!(json["metadata"]["name"], "node-csr-abc");
        assert_eq!(
            json["spec"]["signerName"],
            "kubernetes.io/kube-apiserver-client-kubelet"
        );
        assert_eq!(
            json["spec"]["usages"],
            serde_json::json!(["digital signature", "client auth"])
        );
        assert_eq!(json["spec"]["request"], "UEVN", "base64 of the PEM");
        assert_ne!(name(), name());
        assert!(name().starts_with("node-csr-"));
    }

    fn with(conditions: &[(&str, &str)], certificate: Option<&str>) -> CertificateSigningRequest {
        let mut csr = object("n", "PEM");
        csr.status = Some(CertificateSigningRequestStatus {
            certificate: certificate.map(|c| ByteString(c.as_bytes().to_vec())),
            conditions: Some(
                conditions
                    .iter()
                    .map(|(t, s)| CertificateSigningRequestCondition {
                        type_: t.to_string(),
                        status: s.to_string(),
                        reason: Some("Because".into()),
                        message: Some("said so".into()),
                        ..Default::default()
                    })
                    .collect(),
            ),
        });
        csr
    }

    #[test]
    fn outcomes_from_conditions_and_certificate() {
        assert_eq!(
            outcome(&object("n", "PEM")),
            Outcome::Pending { approved: false }
        );
        assert_eq!(
            outcome(&with(&[("Approved", "True")], None)),
            Outcome::Pending { approved: true }
        );
        assert_eq!(
            outcome(&with(&[("Approved", "True")], Some("CERT"))),
            Outcome::Issued("CERT".into())
        );
        assert_eq!(
            outcome(&with(&[("Denied", "True")], None)),
            Outcome::Refused("Denied (Because): said so".into())
        );
        assert_eq!(
            outcome(&with(&[("Approved", "True"), ("Failed", "True")], None)),
            Outcome::Refused("Failed (Because): said so".into())
        );
        assert_eq!(
            outcome(&with(&[("Denied", "False")], None)),
            Outcome::Pending { approved: false }
        );
    }
}
