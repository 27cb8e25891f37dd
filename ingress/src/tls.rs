//! spec.tls: which host is served over HTTPS with which kubernetes.io/tls Secret. Pure: the
//! certificate and key travel in the model; the nginx side writes them before `nginx -t`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::Ingress;
use keelson_apimachinery::hash::fnv1a_64;

use crate::inputs::key;

pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cert {
    /// `<namespace>_<secret>-<content hash>.pem`: a renewed certificate gets a new name, so the
    /// config text changes and nginx reloads it.
    pub file: String,
    /// tls.crt then tls.key (PEM), which nginx reads from one file.
    pub pem: String,
}

/// host -> certificate file name, and the files those names refer to (sorted by name).
pub fn certs(
    ingresses: &[&Ingress],
    secrets: &[Arc<Secret>],
    problems: &mut Vec<String>,
) -> (BTreeMap<String, String>, Vec<Cert>) {
    let mut hosts = BTreeMap::new();
    let mut files = BTreeMap::new();
    for ing in ingresses {
        let (ns, name) = key(ing);
        for t in ing.spec.iter().flat_map(|s| s.tls.iter().flatten()) {
            let Some(secret) = t.secret_name.as_deref() else {
                continue;
            };
            let Some(cert) = lookup(secrets, &ns, secret) else {
                problems.push(format!("{ns}/{name}: Secret {secret:?} is no {TLS_SECRET_TYPE} Secret with tls.crt and tls.key in PEM; its hosts are served over HTTP only"));
                continue;
            };
            for h in t.hosts.iter().flatten() {
                hosts.entry(h.clone()).or_insert_with(|| cert.file.clone());
            }
            files.insert(cert.file.clone(), cert);
        }
    }
    files.retain(|f, _| hosts.values().any(|v| v == f));
    (hosts, files.into_values().collect())
}

fn lookup(secrets: &[Arc<Secret>], ns: &str, name: &str) -> Option<Cert> {
    let s = secrets.iter().find(|s| {
        s.metadata.namespace.as_deref() == Some(ns) && s.metadata.name.as_deref() == Some(name)
    })?;
    if s.type_.as_deref() != Some(TLS_SECRET_TYPE) {
        return None;
    }
    let data = s.data.as_ref()?;
    let pem = |k: &str| {
        let text = std::str::from_utf8(&data.get(k)?.0).ok()?;
        text.contains("-----BEGIN ")
            .then(|| text.trim_end().to_string())
    };
    let pem = format!("{}\n{}\n", pem("tls.crt")?, pem("tls.key")?);
    let stem: String = format!("{ns}_{name}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    Some(Cert {
        file: format!("{stem}-{:016x}.pem", fnv1a_64(pem.as_bytes())),
        pem,
    })
}
