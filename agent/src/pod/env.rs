//! Container environment: literal values, fieldRef, resourceFieldRef, configMapKeyRef,
//! secretKeyRef and envFrom, with $(VAR) expansion as the kubelet does it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVarSource, Pod};

use crate::quantity;

/// ConfigMaps and Secrets of the pod's namespace, looked up by the worker before translation.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub config_maps: BTreeMap<String, BTreeMap<String, String>>,
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EnvError {
    #[error("couldn't find key {key} in {kind} {namespace}/{name}")]
    MissingKey {
        kind: &'static str,
        namespace: String,
        name: String,
        key: String,
    },
    #[error("{kind} {namespace}/{name} not found")]
    MissingObject {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("unsupported fieldRef {0}")]
    UnsupportedField(String),
}

/// Names of ConfigMaps and Secrets the container's env refers to.
pub fn referenced(container: &Container) -> (Vec<String>, Vec<String>) {
    let mut cms = Vec::new();
    let mut secrets = Vec::new();
    for e in container.env.iter().flatten() {
        if let Some(from) = &e.value_from {
            if let Some(r) = &from.config_map_key_ref {
                cms.push(r.name.clone());
            }
            if let Some(r) = &from.secret_key_ref {
                secrets.push(r.name.clone());
            }
        }
    }
    for f in container.env_from.iter().flatten() {
        if let Some(r) = &f.config_map_ref {
            cms.push(r.name.clone());
        }
        if let Some(r) = &f.secret_ref {
            secrets.push(r.name.clone());
        }
    }
    (cms, secrets)
}

/// Resolves the environment, in order (later entries may refer to earlier ones with $(NAME)).
pub fn resolve(
    pod: &Pod,
    container: &Container,
    pod_ip: &str,
    host_ip: &str,
    sources: &Sources,
) -> Result<Vec<(String, String)>, EnvError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let mut env: Vec<(String, String)> = Vec::new();
    for f in container.env_from.iter().flatten() {
        let prefix = f.prefix.clone().unwrap_or_default();
        let (kind, name, optional, data) = if let Some(r) = &f.config_map_ref {
            (
                "configmap",
                &r.name,
                r.optional,
                sources.config_maps.get(&r.name),
            )
        } else if let Some(r) = &f.secret_ref {
            ("secret", &r.name, r.optional, sources.secrets.get(&r.name))
        } else {
            continue;
        };
        match data {
            Some(data) => {
                for (k, v) in data {
                    set(&mut env, format!("{prefix}{k}"), v.clone());
                }
            }
            None if optional.unwrap_or(false) => {}
            None => {
                return Err(EnvError::MissingObject {
                    kind,
                    namespace: namespace.clone(),
                    name: name.clone(),
                })
            }
        }
    }
    let at = EnvScope {
        pod,
        container,
        pod_ip,
        host_ip,
        namespace: &namespace,
    };
    for e in container.env.iter().flatten() {
        let value = match &e.value_from {
            None => expand(e.value.as_deref().unwrap_or(""), &env),
            Some(from) => match value_from(&at, from, sources)? {
                Some(v) => v,
                None => continue,
            },
        };
        set(&mut env, e.name.clone(), value);
    }
    Ok(env)
}

/// Sets a variable, in place when it is set already (keeping its position).
fn set(env: &mut Vec<(String, String)>, name: String, value: String) {
    if let Some(slot) = env.iter_mut().find(|(n, _)| *n == name) {
        slot.1 = value;
    } else {
        env.push((name, value));
    }
}

/// What a `valueFrom` may refer to: the pod, the container and their addresses.
struct EnvScope<'a> {
    pod: &'a Pod,
    container: &'a Container,
    pod_ip: &'a str,
    host_ip: &'a str,
    namespace: &'a str,
}

/// A `valueFrom` value; None when it refers to an optional key that is missing (the variable is
/// then not set).
fn value_from(
    at: &EnvScope<'_>,
    from: &EnvVarSource,
    sources: &Sources,
) -> Result<Option<String>, EnvError> {
    let (objects, kind, name, key, optional) = if let Some(f) = &from.field_ref {
        return field(at.pod, &f.field_path, at.pod_ip, at.host_ip).map(Some);
    } else if let Some(r) = &from.resource_field_ref {
        return Ok(Some(resource(at.container, &r.resource)));
    } else if let Some(r) = &from.config_map_key_ref {
        (
            &sources.config_maps,
            "configmap",
            &r.name,
            &r.key,
            r.optional,
        )
    } else if let Some(r) = &from.secret_key_ref {
        (&sources.secrets, "secret", &r.name, &r.key, r.optional)
    } else {
        return Ok(Some(String::new()));
    };
    match lookup(objects, name, key, kind, at.namespace) {
        Ok(v) => Ok(Some(v)),
        Err(_) if optional.unwrap_or(false) => Ok(None),
        Err(e) => Err(e),
    }
}

fn lookup(
    objects: &BTreeMap<String, BTreeMap<String, String>>,
    name: &str,
    key: &str,
    kind: &'static str,
    namespace: &str,
) -> Result<String, EnvError> {
    let data = objects.get(name).ok_or_else(|| EnvError::MissingObject {
        kind,
        namespace: namespace.to_string(),
        name: name.to_string(),
    })?;
    data.get(key).cloned().ok_or_else(|| EnvError::MissingKey {
        kind,
        namespace: namespace.to_string(),
        name: name.to_string(),
        key: key.to_string(),
    })
}

pub(crate) fn field(
    pod: &Pod,
    path: &str,
    pod_ip: &str,
    host_ip: &str,
) -> Result<String, EnvError> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let bracket = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_prefix("['"))
            .and_then(|r| r.strip_suffix("']"))
            .map(str::to_string)
    };
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" => pod_ip.to_string(),
        "status.hostIP" | "status.hostIPs" => host_ip.to_string(),
        _ => {
            if let Some(k) = bracket("metadata.labels") {
                meta.labels
                    .as_ref()
                    .and_then(|l| l.get(&k).cloned())
                    .unwrap_or_default()
            } else if let Some(k) = bracket("metadata.annotations") {
                meta.annotations
                    .as_ref()
                    .and_then(|l| l.get(&k).cloned())
                    .unwrap_or_default()
            } else {
                return Err(EnvError::UnsupportedField(path.to_string()));
            }
        }
    })
}

pub(crate) fn resource(container: &Container, name: &str) -> String {
    let res = container.resources.clone().unwrap_or_default();
    let (map, key) = match name.split_once('.') {
        Some(("limits", k)) => (res.limits, k.to_string()),
        Some(("requests", k)) => (res.requests, k.to_string()),
        _ => return String::new(),
    };
    let Some(q) = map.and_then(|m| m.get(&key).cloned()) else {
        return String::new();
    };
    if key == "cpu" {
        // Rounded up to whole cores, as the downward API does with the default divisor.
        quantity::cpu_millis(&q.0)
            .map(|m| ((i128::from(m) + 999) / 1000).to_string())
            .unwrap_or_default()
    } else {
        quantity::bytes(&q.0)
            .map(|b| b.to_string())
            .unwrap_or_default()
    }
}

/// Expands $(NAME) from `env`; $$ escapes a $; unknown references stay as written.
pub fn expand(text: &str, env: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match env.iter().rev().find(|(k, _)| k == name) {
                        Some((_, v)) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ConfigMapKeySelector, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec, SecretKeySelector,
    };

    fn env_var(name: &str, value: Option<&str>, from: Option<EnvVarSource>) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: value.map(str::to_string),
            value_from: from,
        }
    }

    #[test]
    fn resolves_field_configmap_and_secret_refs_with_expansion() {
        let pod = Pod {
            metadata: kube::api::ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("shop".into()),
                labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-a".into()),
                ..Default::default()
            }),
            status: None,
        };
        let field = |p: &str| {
            Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: p.into(),
                    api_version: None,
                }),
                ..Default::default()
            })
        };
        let container = Container {
            name: "c".into(),
            env: Some(vec![
                env_var("POD_NAME", None, field("metadata.name")),
                env_var("POD_IP", None, field("status.podIP")),
                env_var("APP", None, field("metadata.labels['app']")),
                env_var(
                    "COLOR",
                    None,
                    Some(EnvVarSource {
                        config_map_key_ref: Some(ConfigMapKeySelector {
                            name: "cfg".into(),
                            key: "color".into(),
                            optional: None,
                        }),
                        ..Default::default()
                    }),
                ),
                env_var(
                    "PASS",
                    None,
                    Some(EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name: "sec".into(),
                            key: "pw".into(),
                            optional: None,
                        }),
                        ..Default::default()
                    }),
                ),
                env_var(
                    "GREETING",
                    Some("$(POD_NAME) at $(POD_IP) costs $$5 $(NOPE)"),
                    None,
                ),
            ]),
            ..Default::default()
        };
        let sources = Sources {
            config_maps: BTreeMap::from([(
                "cfg".into(),
                BTreeMap::from([("color".into(), "blue".into())]),
            )]),
            secrets: BTreeMap::from([(
                "sec".into(),
                BTreeMap::from([("pw".into(), "hunter2".into())]),
            )]),
        };
        let env = resolve(&pod, &container, "10.244.0.7", "172.31.0.2", &sources).unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("POD_NAME"), Some("web-1"));
        assert_eq!(get("POD_IP"), Some("10.244.0.7"));
        assert_eq!(get("APP"), Some("web"));
        assert_eq!(get("COLOR"), Some("blue"));
        assert_eq!(get("PASS"), Some("hunter2"));
        assert_eq!(
            get("GREETING"),
            Some("web-1 at 10.244.0.7 costs $5 $(NOPE)")
        );

        let missing = Sources::default();
        let err = resolve(&pod, &container, "", "", &missing).unwrap_err();
        assert_eq!(err.to_string(), "configmap shop/cfg not found");
    }
}
