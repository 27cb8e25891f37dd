//! `keelson-apiserver certs check|renew`, as `kubeadm certs check-expiration|renew`: the control
//! plane's certificates in the data directory (and more directories: the components'
//! kubeconfigs, the etcd PKI) with their subject and expiry; renewal reissues each from the CA
//! that signed it (the directory's own ca.crt/ca.key, else the data directory's), with the same
//! key, subject, names and usages. Pure parts in `report` and `reissue`; files here.

pub mod reissue;
pub mod report;

use std::path::{Path, PathBuf};

use crate::certs::{write_private, CertError};
use report::Found;

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {why}")]
    Bad { path: PathBuf, why: String },
    #[error(transparent)]
    Write(#[from] CertError),
}

/// Where a certificate is kept: a .crt beside its .key, or a kubeconfig's user.
#[derive(Clone, Debug)]
pub enum Holder {
    Files { crt: PathBuf, key: PathBuf },
    Kubeconfig(PathBuf),
}

/// A certificate found, with its key (PEM) and the directory's CA, if any.
pub struct Entry {
    pub name: String,
    pub holder: Holder,
    pub cert_pem: String,
    pub key_pem: Option<String>,
    /// ca.crt and ca.key of the directory the certificate is in.
    pub ca: Option<(String, String)>,
}

fn read(path: &Path) -> Result<String, CertsError> {
    std::fs::read_to_string(path).map_err(|source| CertsError::Io {
        path: path.into(),
        source,
    })
}

/// The directory's CA, when it holds both ca.crt and ca.key.
fn dir_ca(dir: &Path) -> Option<(String, String)> {
    let crt = std::fs::read_to_string(dir.join("ca.crt")).ok()?;
    let key = std::fs::read_to_string(dir.join("ca.key")).ok()?;
    Some((crt, key))
}

/// Every certificate in `dirs`: *.crt files (with the same-named .key) and kubeconfigs whose
/// user has client-certificate-data.
pub fn inventory(dirs: &[PathBuf]) -> Result<Vec<Entry>, CertsError> {
    let mut out = Vec::new();
    for dir in dirs {
        let io = |source| CertsError::Io {
            path: dir.clone(),
            source,
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        let ca = dir_ca(dir);
        for path in files {
            let file = path.file_name().unwrap_or_default().to_string_lossy();
            let label = format!(
                "{}/{file}",
                dir.file_name().unwrap_or_default().to_string_lossy()
            );
            if file.ends_with(".crt") {
                let key = path.with_extension("key");
                out.push(Entry {
                    name: label,
                    cert_pem: read(&path)?,
                    key_pem: std::fs::read_to_string(&key).ok(),
                    holder: Holder::Files { crt: path, key },
                    ca: ca.clone(),
                });
            } else if file.ends_with("kubeconfig") {
                let text = read(&path)?;
                if let Some((cert_pem, key_pem)) = report::kubeconfig_pair(&text) {
                    out.push(Entry {
                        name: label,
                        cert_pem,
                        key_pem: Some(key_pem),
                        holder: Holder::Kubeconfig(path),
                        ca: None,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// The expiry table and whether every certificate outlives `within_days`.
pub fn check(dirs: &[PathBuf], within_days: i64, now: i64) -> Result<(String, bool), CertsError> {
    let entries = inventory(dirs)?;
    let found: Vec<Found> = entries
        .iter()
        .map(|e| report::describe(&e.name, &e.cert_pem))
        .collect();
    Ok(report::table(&found, within_days, now))
}

/// Reissues every leaf certificate of `dirs` from its CA (`data_ca`, the data directory's,
/// unless its directory has one); CAs themselves are kept. Lines saying what was done.
pub fn renew(
    dirs: &[PathBuf],
    data_ca: &(String, String),
    now: i64,
) -> Result<Vec<String>, CertsError> {
    let mut lines = Vec::new();
    for e in inventory(dirs)? {
        let bad = |why: String| CertsError::Bad {
            path: match &e.holder {
                Holder::Files { crt, .. } => crt.clone(),
                Holder::Kubeconfig(p) => p.clone(),
            },
            why,
        };
        if reissue::is_ca(&e.cert_pem).map_err(bad)? {
            lines.push(format!("{}: a CA, kept (renew it by hand)", e.name));
            continue;
        }
        let Some(key_pem) = &e.key_pem else {
            lines.push(format!("{}: no key beside it, skipped", e.name));
            continue;
        };
        let (ca_crt, ca_key) = e.ca.as_ref().unwrap_or(data_ca);
        let Some(new) = reissue::reissue(&e.cert_pem, key_pem, ca_crt, ca_key, now).map_err(bad)?
        else {
            lines.push(format!("{}: not signed by its CA, skipped", e.name));
            continue;
        };
        match &e.holder {
            Holder::Files { crt, .. } => write_private(crt, &new)?,
            Holder::Kubeconfig(path) => {
                let text = read(path)?;
                let updated = report::with_certificate(&text, &new).map_err(bad)?;
                write_private(path, &updated)?;
            }
        }
        lines.push(format!("{}: renewed", e.name));
    }
    Ok(lines)
}
