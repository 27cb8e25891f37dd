//! `keelson-apiserver kubeconfig`: a kubeconfig for one identity (a component, a person), with
//! a client certificate signed by the data directory's CA: CN the user, O the groups, client
//! auth only, valid for a year (as kubeadm issues the components' certificates).

use crate::certs::{self, CertError};
use base64::Engine;
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long an issued certificate is valid.
pub const VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// Backdated a little, so a clock slightly behind the server's still accepts it.
const BACKDATE: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("{}: the data directory has no CA yet (start keelson-apiserver with this --data-dir once)", .path.display())]
    NoCa {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--user must not be empty")]
    NoUser,
    #[error("at most two --group values can be put in a certificate, got {0}")]
    TooManyGroups(usize),
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
}

/// What a kubeconfig is for.
pub struct Identity<'a> {
    pub user: &'a str,
    pub groups: &'a [String],
    /// The API server's URL, e.g. https://10.0.0.1:6443.
    pub server: &'a str,
}

/// Writes the kubeconfig of `id` to `out` (0600), signed by the CA in `data_dir`.
pub fn write(data_dir: &Path, id: &Identity, out: &Path) -> Result<(), KubeconfigError> {
    let text = issue(data_dir, id)?;
    certs::write_private(out, &text)?;
    Ok(())
}

fn read_ca_file(path: PathBuf) -> Result<String, KubeconfigError> {
    std::fs::read_to_string(&path).map_err(|source| KubeconfigError::NoCa { path, source })
}

/// The kubeconfig text: cluster "keelson" with the CA, user `id.user` with its certificate.
pub fn issue(data_dir: &Path, id: &Identity) -> Result<String, KubeconfigError> {
    if id.user.is_empty() {
        return Err(KubeconfigError::NoUser);
    }
    if id.groups.len() > 2 {
        return Err(KubeconfigError::TooManyGroups(id.groups.len()));
    }
    let ca_pem = read_ca_file(data_dir.join("ca.crt"))?;
    let ca_key = KeyPair::from_pem(&read_ca_file(data_dir.join("ca.key"))?)?;
    let issuer = Issuer::new(certs::ca_params()?, ca_key);
    let key = KeyPair::generate()?;
    let cert = client_params(id.user, id.groups)?.signed_by(&key, &issuer)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    Ok(format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: keelson\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {user:?}\n  user:\n    client-certificate-data: {crt}\n    client-key-data: {key}\ncontexts:\n- name: keelson\n  context:\n    cluster: keelson\n    user: {user:?}\ncurrent-context: keelson\n",
        server = id.server,
        ca = b64(&ca_pem),
        user = id.user,
        crt = b64(&cert.pem()),
        key = b64(&key.serialize_pem()),
    ))
}

/// A client certificate's parameters: CN user, one O per group (rcgen keeps one value per
/// attribute type, so a second O goes in under its OID, as the CSR signer does).
fn client_params(user: &str, groups: &[String]) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, user);
    for (i, g) in groups.iter().enumerate() {
        let attr = match i {
            0 => DnType::OrganizationName,
            _ => DnType::CustomDnType(vec![2, 5, 4, 10]),
        };
        params.distinguished_name.push(attr, g.as_str());
    }
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .saturating_sub(BACKDATE);
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + now;
    params.not_after = epoch + now + BACKDATE + VALIDITY;
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_a_client_certificate_of_the_data_dirs_ca() {
        let dir = tempfile::tempdir().unwrap();
        certs::ensure(dir.path(), &["127.0.0.1".into()]).unwrap();
        let groups = vec!["system:nodes".to_string(), "extra".to_string()];
        let id = Identity {
            user: "system:kube-proxy",
            groups: &groups,
            server: "https://127.0.0.1:6443",
        };
        let text = issue(dir.path(), &id).unwrap();
        let cfg: serde_norway::Value = serde_norway::from_str(&text).unwrap();
        let user = &cfg["users"][0];
        assert_eq!(user["name"], "system:kube-proxy");
        let crt = user["user"]["client-certificate-data"].as_str().unwrap();
        let der = base64::engine::general_purpose::STANDARD
            .decode(crt)
            .unwrap();
        let pem = String::from_utf8(der).unwrap();
        let user = crate::auth::x509::user(&pem_to_der(&pem)).unwrap();
        assert_eq!(user.name, "system:kube-proxy");
        assert_eq!(user.groups, groups);
        assert_eq!(
            cfg["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443"
        );
        let too_many = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let id = Identity {
            groups: &too_many,
            ..id
        };
        assert!(matches!(
            issue(dir.path(), &id),
            Err(KubeconfigError::TooManyGroups(3))
        ));
        let empty = tempfile::tempdir().unwrap();
        let err = issue(empty.path(), &Identity { groups: &[], ..id }).unwrap_err();
        assert!(err.to_string().contains("ca.crt"), "{err}");
    }

    fn pem_to_der(pem: &str) -> Vec<u8> {
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap()
    }
}
