//! First-start PKI: a CA and a serving certificate in the data directory, and the admin
//! kubeconfig that the machine's kubectl uses as it is.

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub struct Pki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

fn read(path: &Path) -> Result<String, CertError> {
    std::fs::read_to_string(path).map_err(|source| CertError::Io {
        path: path.into(),
        source,
    })
}

/// Writes a file readable by root only (keys and tokens), atomically.
pub fn write_private(path: &Path, content: &str) -> Result<(), CertError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let io = |source| CertError::Io {
        path: path.into(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(content.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// The CA's parameters: the issuer of every certificate signed with the data directory's CA key.
pub fn ca_params() -> Result<CertificateParams, CertError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "keelson-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2036, 1, 1);
    Ok(params)
}

/// Loads the CA and serving certificate from `dir`, creating them on first start. A serving
/// certificate that lacks one of `sans` is issued again from the same CA.
pub fn ensure(dir: &Path, sans: &[String]) -> Result<Pki, CertError> {
    let (ca_crt, ca_key) = (dir.join("ca.crt"), dir.join("ca.key"));
    if !ca_crt.exists() || !ca_key.exists() {
        let key = KeyPair::generate()?;
        let cert = ca_params()?.self_signed(&key)?;
        write_private(&ca_key, &key.serialize_pem())?;
        write_private(&ca_crt, &cert.pem())?;
    }
    let ca_pem = read(&ca_crt)?;
    let ca_key = KeyPair::from_pem(&read(&ca_key)?)?;
    let (crt, key, sans_file) = (
        dir.join("apiserver.crt"),
        dir.join("apiserver.key"),
        dir.join("apiserver.sans"),
    );
    let want = sans.join(",");
    let have = std::fs::read_to_string(&sans_file).unwrap_or_default();
    if !crt.exists() || !key.exists() || have != want {
        // The issuer is rebuilt from the same parameters: same subject, same key.
        let issuer = Issuer::new(ca_params()?, ca_key);
        let leaf_key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "keelson-apiserver");
        for s in sans {
            let san = match s.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(s.clone().try_into()?),
            };
            params.subject_alt_names.push(san);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_after = rcgen::date_time_ymd(2035, 1, 1);
        let cert = params.signed_by(&leaf_key, &issuer)?;
        write_private(&key, &leaf_key.serialize_pem())?;
        write_private(&crt, &cert.pem())?;
        write_private(&sans_file, &want)?;
    }
    Ok(Pki {
        ca_pem,
        cert_pem: read(&crt)?,
        key_pem: read(&key)?,
    })
}

/// The user the API server is on the agents' port (kubeadm's name for it).
pub const KUBELET_CLIENT_USER: &str = "kube-apiserver-kubelet-client";

/// The API server's client certificate and key files for the agents' port (pods/log): the
/// data directory's apiserver-kubelet-client.crt/.key, issued by its CA on first start.
pub fn ensure_kubelet_client(dir: &Path) -> Result<(PathBuf, PathBuf), CertError> {
    let (crt, key) = (
        dir.join("apiserver-kubelet-client.crt"),
        dir.join("apiserver-kubelet-client.key"),
    );
    if !crt.exists() || !key.exists() {
        let (cert_pem, key_pem) = issue_client(dir, KUBELET_CLIENT_USER)?;
        write_private(&key, &key_pem)?;
        write_private(&crt, &cert_pem)?;
    }
    Ok((crt, key))
}

/// A client certificate (PEM) and its key for `user` (CN, no groups), signed by the data
/// directory's CA (`ensure` made it).
fn issue_client(dir: &Path, user: &str) -> Result<(String, String), CertError> {
    let ca_key = KeyPair::from_pem(&read(&dir.join("ca.key"))?)?;
    // The issuer is rebuilt from the same parameters: same subject, same key.
    let issuer = Issuer::new(ca_params()?, ca_key);
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, user);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.not_after = rcgen::date_time_ymd(2035, 1, 1);
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The admin kubeconfig: cluster, user (bearer token) and context all named "keelson".
pub fn kubeconfig(server: &str, ca_pem: Option<&str>, token: &str) -> String {
    let cluster = match ca_pem {
        Some(ca) => format!(
            "    certificate-authority-data: {}\n",
            base64::engine::general_purpose::STANDARD.encode(ca)
        ),
        None => String::new(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: keelson\n  cluster:\n    server: {server}\n{cluster}users:\n- name: admin\n  user:\n    token: {token}\ncontexts:\n- name: keelson\n  context:\n    cluster: keelson\n    user: admin\ncurrent-context: keelson\n"
    )
}

/// The files of a local etcd member's PKI (`keelson-apiserver etcd-pki`, as kubeadm makes
/// etcd's): a CA of its own, etcd's serving certificate and the API server's client certificate.
pub struct EtcdPki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// Makes the etcd PKI in `dir` once and keeps it (a restarted etcd must find the same CA):
/// P-256 keys; etcd serves as 127.0.0.1 and localhost (serverAuth and clientAuth, as kubeadm's
/// etcd server certificate); the API server is CN kube-apiserver-etcd-client (clientAuth).
pub fn ensure_etcd_pki(dir: &Path) -> Result<EtcdPki, CertError> {
    let pki = EtcdPki {
        ca: dir.join("ca.crt"),
        server_cert: dir.join("server.crt"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("apiserver-etcd-client.crt"),
        client_key: dir.join("apiserver-etcd-client.key"),
    };
    if std::fs::metadata(&pki.client_cert).is_ok_and(|m| m.len() > 0) {
        return Ok(pki);
    }
    let io = |source| CertError::Io {
        path: dir.into(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
    let etcd_ca = || -> Result<CertificateParams, CertError> {
        let mut p = ca_params()?;
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(DnType::CommonName, "keelson-etcd-ca");
        Ok(p)
    };
    let ca_key = KeyPair::generate()?;
    let ca_cert = etcd_ca()?.self_signed(&ca_key)?;
    write_private(&dir.join("ca.key"), &ca_key.serialize_pem())?;
    let issuer = Issuer::new(etcd_ca()?, ca_key);
    let leaf = |cn: &str, sans: Vec<SanType>, usages: Vec<ExtendedKeyUsagePurpose>| {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.subject_alt_names = sans;
        params.extended_key_usages = usages;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.not_after = rcgen::date_time_ymd(2035, 1, 1);
        let cert = params.signed_by(&key, &issuer)?;
        Ok::<_, CertError>((cert.pem(), key.serialize_pem()))
    };
    let (crt, key) = leaf(
        "keelson-etcd",
        vec![
            SanType::IpAddress(IpAddr::from([127, 0, 0, 1])),
            SanType::DnsName("localhost".try_into()?),
        ],
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    )?;
    write_private(&pki.server_key, &key)?;
    write_private(&pki.server_cert, &crt)?;
    let (crt, key) = leaf(
        "kube-apiserver-etcd-client",
        Vec::new(),
        vec![ExtendedKeyUsagePurpose::ClientAuth],
    )?;
    write_private(&pki.client_key, &key)?;
    // The CA before the client certificate: the latter's presence means the PKI is whole.
    write_private(&pki.ca, &ca_cert.pem())?;
    write_private(&pki.client_cert, &crt)?;
    Ok(pki)
}
