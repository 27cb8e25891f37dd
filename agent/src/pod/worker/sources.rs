//! The ConfigMaps and Secrets a container's env and the pod's volumes refer to, read from the API.
//! A missing object is left out (env and volumes then say what is missing, or skip it when optional).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use kube::api::Api;

use crate::pod::{env, volumes};

/// Contents by key, as bytes.
type Bytes = BTreeMap<String, Vec<u8>>;

/// An object the container needs could not be read (the container waits with this message).
#[derive(Debug, thiserror::Error)]
#[error("reading {kind} {namespace}/{name}: {source}")]
pub struct SourceError {
    kind: &'static str,
    namespace: String,
    name: String,
    #[source]
    source: kube::Error,
}

/// The objects `container` (env) and `pod` (volumes) refer to: as strings for env, as bytes for
/// volumes.
pub async fn fetch(
    client: &kube::Client,
    pod: &Pod,
    container: &Container,
) -> Result<(env::Sources, volumes::Objects), SourceError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let (mut cms, mut secrets) = env::referenced(container);
    let (vcms, vsecrets) = volumes::referenced(pod);
    cms.extend(vcms);
    secrets.extend(vsecrets);
    cms.sort();
    cms.dedup();
    secrets.sort();
    secrets.dedup();
    let mut env_sources = env::Sources::default();
    let mut objects = volumes::Objects::default();
    let cm_api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for name in cms {
        let found = keelson_daemon::get_opt(&cm_api, &name)
            .await
            .map_err(|source| SourceError {
                kind: "configmap",
                namespace: ns.to_string(),
                name: name.clone(),
                source,
            })?;
        if let Some(cm) = found {
            let (strings, bytes) = config_map_contents(cm);
            env_sources.config_maps.insert(name.clone(), strings);
            objects.config_maps.insert(name, bytes);
        }
    }
    let secret_api: Api<Secret> = Api::namespaced(client.clone(), ns);
    for name in secrets {
        let found = keelson_daemon::get_opt(&secret_api, &name)
            .await
            .map_err(|source| SourceError {
                kind: "secret",
                namespace: ns.to_string(),
                name: name.clone(),
                source,
            })?;
        if let Some(s) = found {
            let bytes = secret_contents(s);
            let strings = bytes
                .iter()
                .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
                .collect();
            env_sources.secrets.insert(name.clone(), strings);
            objects.secrets.insert(name, bytes);
        }
    }
    Ok((env_sources, objects))
}

/// A ConfigMap's `data` (for env) and `data` + `binaryData` (for volumes).
fn config_map_contents(cm: ConfigMap) -> (BTreeMap<String, String>, Bytes) {
    let strings = cm.data.unwrap_or_default();
    let mut bytes: Bytes = strings
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    bytes.extend(
        cm.binary_data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0)),
    );
    (strings, bytes)
}

/// A Secret's `data`, with `stringData` over it (the API server folds it in; a write that did
/// not is still read right).
fn secret_contents(s: Secret) -> Bytes {
    let mut bytes: Bytes = s
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    bytes.extend(
        s.string_data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes())),
    );
    bytes
}
