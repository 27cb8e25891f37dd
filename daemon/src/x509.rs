//! Who a client certificate names, as kube-apiserver's and the kubelet's x509 authenticators read
//! it: the user is the subject's CommonName, the groups its Organization values.

use x509_parser::prelude::{FromDer, X509Certificate};

/// The identity in a certificate's subject.
#[derive(Clone, Debug, PartialEq)]
pub struct SubjectIdentity {
    pub user: String,
    pub groups: Vec<String>,
}

/// The identity a DER certificate names; None when it does not parse or has no (or an empty)
/// CommonName. Whether the chain is trusted is the caller's to check.
pub fn subject_identity(der: &[u8]) -> Option<SubjectIdentity> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let subject = cert.subject();
    let user = subject
        .iter_common_name()
        .find_map(|cn| cn.as_str().ok())
        .filter(|n| !n.is_empty())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(String::from)
        .collect();
    Some(SubjectIdentity { user, groups })
}
