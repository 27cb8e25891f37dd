//! Upstream's ServiceAccount admission for new Pods: the pod runs as `default` unless it names
//! a service account, which must exist; unless automounting is turned off (on the pod, else on
//! the service account), it gets the projected volume kube-api-access-<5 random> (a bound
//! token, the cluster CA, the namespace) mounted read-only in every container.

use super::Api;
use crate::object;
use crate::status::{ApiError, ApiResult};
use keelson_apimachinery::well_known::{
    DEFAULT_SERVICE_ACCOUNT, KUBE_API_ACCESS_VOLUME_PREFIX, MIRROR_POD_ANNOTATION,
    ROOT_CA_CONFIGMAP, SERVICE_ACCOUNT_MOUNT_PATH,
};
use serde_json::{json, Value};

/// The token's lifetime the kubelet asks for: upstream's 3607 s (one hour and a few seconds,
/// which marks tokens requested for projected volumes).
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

/// Admits a new Pod in `ns`: sets its service account and adds the token volume.
pub fn admit_pod(api: &Api, ns: &str, pod: &mut Value) -> ApiResult<()> {
    let mirror = pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MIRROR_POD_ANNOTATION))
        .is_some();
    if mirror || !pod.get("spec").is_some_and(Value::is_object) {
        return Ok(());
    }
    let name = match pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
    {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => DEFAULT_SERVICE_ACCOUNT.to_string(),
    };
    object::set_path(pod, &["spec", "serviceAccountName"], json!(name));
    let sa = api.stored("serviceaccounts", ns, &name);
    // A fresh namespace's `default` is made by the controller a moment later: the pod is
    // admitted, and the agent retries its TokenRequest until the account exists.
    if sa.is_none() && name != DEFAULT_SERVICE_ACCOUNT {
        return Err(ApiError::forbidden(
            format!(
                "pods \"{}\" is forbidden: error looking up service account {ns}/{name}: serviceaccount \"{name}\" not found",
                object::name(pod)
            ),
            Some(("", "pods", object::name(pod))),
        ));
    }
    if let Some(sa) = &sa {
        pull_secrets(pod, sa);
    }
    if automount(pod, sa.as_ref()) {
        mount_token(pod);
    }
    Ok(())
}

/// The pod's automountServiceAccountToken, else the service account's, else true.
fn automount(pod: &Value, sa: Option<&Value>) -> bool {
    let on_pod = pod.pointer("/spec/automountServiceAccountToken");
    let on_sa = sa.and_then(|s| s.get("automountServiceAccountToken"));
    on_pod
        .and_then(Value::as_bool)
        .or_else(|| on_sa.and_then(Value::as_bool))
        .unwrap_or(true)
}

/// The service account's imagePullSecrets, for a pod that names none.
fn pull_secrets(pod: &mut Value, sa: &Value) {
    let has = pod
        .pointer("/spec/imagePullSecrets")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let from_sa = sa.get("imagePullSecrets").and_then(Value::as_array);
    if let (false, Some(secrets)) = (has, from_sa) {
        let refs: Vec<Value> = secrets
            .iter()
            .filter_map(|s| s.get("name"))
            .map(|n| json!({ "name": n }))
            .collect();
        object::set_path(pod, &["spec", "imagePullSecrets"], json!(refs));
    }
}

/// Adds the projected volume and mounts it in every container that has nothing mounted at
/// the service-account path already (unless the pod already declares such a volume).
fn mount_token(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let mounted_by_user = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| spec.get(*k).and_then(Value::as_array).into_iter().flatten())
        .all(|c| has_mount_at(c, SERVICE_ACCOUNT_MOUNT_PATH));
    if mounted_by_user {
        return;
    }
    let volume = format!("{KUBE_API_ACCESS_VOLUME_PREFIX}{}", object::random_suffix());
    let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
    if let Some(v) = volumes.as_array_mut() {
        v.push(projected_volume(&volume));
    }
    let mount =
        json!({ "name": volume, "readOnly": true, "mountPath": SERVICE_ACCOUNT_MOUNT_PATH });
    for kind in ["initContainers", "containers", "ephemeralContainers"] {
        let containers = spec.get_mut(kind).and_then(Value::as_array_mut);
        for c in containers.into_iter().flatten() {
            if has_mount_at(c, SERVICE_ACCOUNT_MOUNT_PATH) {
                continue;
            }
            let Some(c) = c.as_object_mut() else { continue };
            let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
            if let Some(m) = mounts.as_array_mut() {
                m.push(mount.clone());
            }
        }
    }
}

fn has_mount_at(container: &Value, path: &str) -> bool {
    container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .is_some_and(|ms| {
            ms.iter()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(path))
        })
}

/// The volume as upstream writes it, defaults included.
fn projected_volume(name: &str) -> Value {
    json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                { "serviceAccountToken": { "expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token" } },
                { "configMap": { "name": ROOT_CA_CONFIGMAP, "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
                { "downwardAPI": { "items": [{
                    "path": "namespace",
                    "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.namespace" },
                }] } },
            ],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_in_every_container_except_where_the_user_mounted_something() {
        let mut pod = json!({"spec": {
            "containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"name": "mine", "mountPath": SERVICE_ACCOUNT_MOUNT_PATH}]}],
            "initContainers": [{"name": "i"}],
        }});
        mount_token(&mut pod);
        let volume = &pod["spec"]["volumes"][0];
        let name = volume["name"].as_str().unwrap();
        assert!(
            name.starts_with("kube-api-access-") && name.len() == 21,
            "{name}"
        );
        assert_eq!(
            volume["projected"]["sources"][0]["serviceAccountToken"],
            json!({"expirationSeconds": 3607, "path": "token"})
        );
        let want =
            json!([{"name": name, "readOnly": true, "mountPath": SERVICE_ACCOUNT_MOUNT_PATH}]);
        assert_eq!(pod["spec"]["containers"][0]["volumeMounts"], want);
        assert_eq!(pod["spec"]["initContainers"][0]["volumeMounts"], want);
        assert_eq!(
            pod["spec"]["containers"][1]["volumeMounts"][0]["name"],
            "mine"
        );
        assert_eq!(
            pod["spec"]["containers"][1]["volumeMounts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn automount_from_the_pod_then_the_service_account() {
        let pod = |v: Value| json!({"spec": {"automountServiceAccountToken": v}});
        let sa = |v: Value| json!({"automountServiceAccountToken": v});
        assert!(automount(&pod(json!(null)), None));
        assert!(!automount(&pod(json!(null)), Some(&sa(json!(false)))));
        assert!(automount(&pod(json!(true)), Some(&sa(json!(false)))));
        assert!(!automount(&pod(json!(false)), Some(&sa(json!(true)))));
    }
}
