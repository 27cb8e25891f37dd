//! spec.usages of a CSR: which a client certificate may have, and what they become in X.509.

use rcgen::{ExtendedKeyUsagePurpose, KeyUsagePurpose};
use std::collections::BTreeSet;

pub const DIGITAL_SIGNATURE: &str = "digital signature";
pub const KEY_ENCIPHERMENT: &str = "key encipherment";
pub const CLIENT_AUTH: &str = "client auth";
pub const SERVER_AUTH: &str = "server auth";

/// Upstream's kubelet client usages: exactly {digital signature, client auth}, or those with
/// key encipherment (the form RSA keys used).
pub fn check_kubelet_client(usages: &[String]) -> Result<(), String> {
    let set: BTreeSet<&str> = usages.iter().map(String::as_str).collect();
    let plain = BTreeSet::from([DIGITAL_SIGNATURE, CLIENT_AUTH]);
    let rsa = BTreeSet::from([DIGITAL_SIGNATURE, KEY_ENCIPHERMENT, CLIENT_AUTH]);
    if set == plain || set == rsa {
        return Ok(());
    }
    Err(format!(
        "usages must be [{DIGITAL_SIGNATURE:?}, {CLIENT_AUTH:?}] (with {KEY_ENCIPHERMENT:?} allowed), not {usages:?}"
    ))
}

/// Upstream's kubelet serving usages: exactly {digital signature, server auth}, or those with
/// key encipherment.
pub fn check_kubelet_serving(usages: &[String]) -> Result<(), String> {
    let set: BTreeSet<&str> = usages.iter().map(String::as_str).collect();
    let plain = BTreeSet::from([DIGITAL_SIGNATURE, SERVER_AUTH]);
    let rsa = BTreeSet::from([DIGITAL_SIGNATURE, KEY_ENCIPHERMENT, SERVER_AUTH]);
    if set == plain || set == rsa {
        return Ok(());
    }
    Err(format!(
        "usages must be [{DIGITAL_SIGNATURE:?}, {SERVER_AUTH:?}] (with {KEY_ENCIPHERMENT:?} allowed), not {usages:?}"
    ))
}

/// Upstream's kube-apiserver-client usages: client auth, with digital signature and key
/// encipherment allowed.
pub fn check_apiserver_client(usages: &[String]) -> Result<(), String> {
    if let Some(u) = usages
        .iter()
        .find(|u| ![DIGITAL_SIGNATURE, KEY_ENCIPHERMENT, CLIENT_AUTH].contains(&u.as_str()))
    {
        return Err(format!("invalid usage for client certificate: {u}"));
    }
    if !usages.iter().any(|u| u == CLIENT_AUTH) {
        return Err(format!(
            "missing required usage for client certificate: {CLIENT_AUTH}"
        ));
    }
    Ok(())
}

/// The key usage bits and extended key usages of already checked client usages.
pub fn to_x509(usages: &[String]) -> (Vec<KeyUsagePurpose>, Vec<ExtendedKeyUsagePurpose>) {
    let has = |u: &str| usages.iter().any(|x| x == u);
    let mut key = Vec::new();
    if has(DIGITAL_SIGNATURE) {
        key.push(KeyUsagePurpose::DigitalSignature);
    }
    if has(KEY_ENCIPHERMENT) {
        key.push(KeyUsagePurpose::KeyEncipherment);
    }
    let mut ext = Vec::new();
    if has(SERVER_AUTH) {
        ext.push(ExtendedKeyUsagePurpose::ServerAuth);
    }
    if has(CLIENT_AUTH) {
        ext.push(ExtendedKeyUsagePurpose::ClientAuth);
    }
    (key, ext)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn kubelet_client_usages_are_one_of_two_exact_sets() {
        assert!(check_kubelet_client(&v(&["digital signature", "client auth"])).is_ok());
        assert!(check_kubelet_client(&v(&[
            "client auth",
            "key encipherment",
            "digital signature"
        ]))
        .is_ok());
        assert!(check_kubelet_client(&v(&["client auth"])).is_err());
        assert!(
            check_kubelet_client(&v(&["digital signature", "client auth", "server auth"])).is_err()
        );
        assert!(check_kubelet_client(&[]).is_err());
    }

    #[test]
    fn kubelet_serving_usages_are_one_of_two_exact_sets() {
        let rsa = ["digital signature", "key encipherment", "server auth"];
        assert!(check_kubelet_serving(&v(&rsa)).is_ok());
        assert!(check_kubelet_serving(&v(&["server auth", "digital signature"])).is_ok());
        assert!(check_kubelet_serving(&v(&["server auth"])).is_err());
        assert!(check_kubelet_serving(&v(&["digital signature", "client auth"])).is_err());
        let (_, ext) = to_x509(&v(&rsa));
        assert_eq!(ext, vec![ExtendedKeyUsagePurpose::ServerAuth]);
    }

    #[test]
    fn apiserver_client_usages_need_client_auth_and_nothing_foreign() {
        assert!(check_apiserver_client(&v(&["client auth"])).is_ok());
        assert_eq!(
            check_apiserver_client(&v(&["client auth", "server auth"])).unwrap_err(),
            "invalid usage for client certificate: server auth"
        );
        assert!(check_apiserver_client(&v(&["digital signature"])).is_err());
    }

    #[test]
    fn usages_become_key_usage_bits_and_client_auth() {
        let (key, ext) = to_x509(&v(&[
            "digital signature",
            "key encipherment",
            "client auth",
        ]));
        assert_eq!(
            key,
            vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment
            ]
        );
        assert_eq!(ext, vec![ExtendedKeyUsagePurpose::ClientAuth]);
    }
}
