//! Pod volumes on the node: emptyDir, hostPath, configMap and secret (files per key), under
//! `<root>/pods/<uid>/volumes/<name>`; persistentVolumeClaim volumes at their bound volume's
//! directory (`claims`); and the container mounts that point at them. Any other kind is an
//! error, never an empty directory in its place.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{
    Container, DownwardAPIVolumeFile, KeyToPath, Pod, ProjectedVolumeSource, Volume,
};

use super::sub_path::{self, SubPathError};
use super::translate::HostMount;

/// ConfigMap and Secret contents (bytes) of the pod's namespace, and the pod's service-account
/// tokens, looked up by the worker.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    pub config_maps: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    pub secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    pub tokens: BTreeMap<super::tokens::TokenSpec, String>,
    /// Bound claims' directories on this node, by volume name.
    pub claims: BTreeMap<String, super::claims::ClaimDir>,
}

#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("volume {volume}: {kind} {name} not found")]
    Missing {
        volume: String,
        kind: &'static str,
        name: String,
    },
    #[error("volume {volume}: {path}: {source}")]
    Io {
        volume: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("volume {volume}: {message}")]
    Invalid { volume: String, message: String },
    #[error("volume {volume}: its persistentVolumeClaim is not bound to a volume on this node")]
    Unbound { volume: String },
    #[error("volume {volume}: volume type {kind} is not supported by keelson-agent")]
    Unsupported { volume: String, kind: &'static str },
    #[error("volume {volume}: no service-account token was obtained for it")]
    NoToken { volume: String },
    #[error("container {container} mounts volume {volume}, which the pod does not declare")]
    Undeclared { container: String, volume: String },
    #[error("container {container}, volumeMount {volume}: {source}")]
    SubPath {
        container: String,
        volume: String,
        source: SubPathError,
    },
}

pub fn pod_dir(root: &Path, pod: &Pod) -> PathBuf {
    root.join("pods")
        .join(pod.metadata.uid.as_deref().unwrap_or("unknown"))
}

/// Deletes the pod's emptyDirs on disk (already unmounted), as the kubelet tears down the
/// volumes of a pod that ended: an evicted pod gives its disk back.
pub fn remove_empty_dirs(root: &Path, pod: &Pod) {
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    for v in volumes.filter(|v| v.empty_dir.is_some()) {
        let dir = volume_dir(root, pod, &v.name);
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %dir.display(), error = %e, "emptyDir not removed");
            }
        }
    }
}

/// Where the named volume of the pod lives on the node.
pub fn volume_dir(root: &Path, pod: &Pod, name: &str) -> PathBuf {
    pod_dir(root, pod).join("volumes").join(name)
}

/// The host file mounted at a container's terminationMessagePath, per attempt.
pub fn termination_log(root: &Path, pod: &Pod, container: &str, attempt: u32) -> PathBuf {
    pod_dir(root, pod)
        .join("containers")
        .join(container)
        .join(format!("{attempt}.termination-log"))
}

/// Creates the (empty, world-writable) termination-log file and its mount.
pub fn termination_mount(
    root: &Path,
    pod: &Pod,
    container: &Container,
    attempt: u32,
) -> std::io::Result<HostMount> {
    let file = termination_log(root, pod, &container.name, attempt);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::File::create(&file)?;
    // The container may run as any user.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666))?;
    Ok(HostMount {
        container_path: container
            .termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".into()),
        host_path: file.display().to_string(),
        readonly: false,
    })
}

/// The volumes the pod declares.
fn volumes(pod: &Pod) -> &[Volume] {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default()
}

/// Names of ConfigMaps and Secrets the pod's volumes need.
pub fn referenced(pod: &Pod) -> (Vec<String>, Vec<String>) {
    let mut cms = Vec::new();
    let mut secrets = Vec::new();
    for v in volumes(pod) {
        if let Some(cm) = &v.config_map {
            cms.push(cm.name.clone());
        }
        if let Some(s) = &v.secret {
            secrets.extend(s.secret_name.clone());
        }
        for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &src.config_map {
                cms.push(cm.name.clone());
            }
            if let Some(s) = &src.secret {
                secrets.push(s.name.clone());
            }
        }
    }
    (cms, secrets)
}

/// Contents by key, as bytes.
type Files = BTreeMap<String, Vec<u8>>;

/// Creates or refreshes every volume of the pod; returns its host path by volume name.
pub fn prepare(
    root: &Path,
    pod: &Pod,
    objects: &Objects,
) -> Result<BTreeMap<String, PathBuf>, VolumeError> {
    let mut paths = BTreeMap::new();
    for v in volumes(pod) {
        let path = prepare_one(pod, v, &volume_dir(root, pod, &v.name), objects)?;
        apply_fs_group(pod, v, &path)?;
        paths.insert(v.name.clone(), path);
    }
    Ok(paths)
}

/// The pod's fsGroup on the volumes whose ownership the kubelet manages (not hostPath).
fn apply_fs_group(pod: &Pod, v: &Volume, path: &Path) -> Result<(), VolumeError> {
    let security = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let Some(gid) = security.and_then(|s| s.fs_group) else {
        return Ok(());
    };
    let readonly = v.config_map.is_some()
        || v.secret.is_some()
        || v.downward_api.is_some()
        || v.projected.is_some();
    if !(readonly || v.empty_dir.is_some() || v.persistent_volume_claim.is_some()) {
        return Ok(());
    }
    let on_root_mismatch =
        security.and_then(|s| s.fs_group_change_policy.as_deref()) == Some("OnRootMismatch");
    let gid = u32::try_from(gid).unwrap_or(u32::MAX);
    super::volume_fs::set_ownership(path, gid, readonly, on_root_mismatch).map_err(|source| {
        VolumeError::Io {
            volume: v.name.clone(),
            path: format!("{} (fsGroup {gid})", path.display()),
            source,
        }
    })
}

/// Creates or refreshes one volume in `dir` (a hostPath volume is where it points).
fn prepare_one(
    pod: &Pod,
    v: &Volume,
    dir: &Path,
    objects: &Objects,
) -> Result<PathBuf, VolumeError> {
    let io = |path: &Path, source| VolumeError::Io {
        volume: v.name.clone(),
        path: path.display().to_string(),
        source,
    };
    if let Some(hp) = &v.host_path {
        let p = PathBuf::from(&hp.path);
        if matches!(hp.type_.as_deref(), Some("DirectoryOrCreate")) {
            std::fs::create_dir_all(&p).map_err(|e| io(&p, e))?;
        }
        if matches!(hp.type_.as_deref(), Some("FileOrCreate")) && !p.exists() {
            std::fs::File::create(&p).map_err(|e| io(&p, e))?;
        }
        return Ok(p);
    }
    if v.persistent_volume_claim.is_some() {
        return claim_dir(v, objects);
    }
    let written = if let Some(cm) = &v.config_map {
        let data = lookup(
            &v.name,
            "configmap",
            &cm.name,
            &objects.config_maps,
            cm.optional,
        )?;
        fill(dir, data, cm.items.as_deref(), cm.default_mode)
    } else if let Some(s) = &v.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        let data = lookup(&v.name, "secret", &name, &objects.secrets, s.optional)?;
        fill(dir, data, s.items.as_deref(), s.default_mode)
    } else if let Some(d) = &v.downward_api {
        let data = downward_files(pod, d.items.as_deref().unwrap_or(&[]), &v.name)?;
        write_keys(dir, &data, None, d.default_mode.unwrap_or(0o644))
    } else if let Some(p) = &v.projected {
        // Written as the kubelet's atomic writer does: a token refresh swaps every file at once.
        let data = projected_files(pod, p, objects, &v.name)?;
        let mode = u32::try_from(p.default_mode.unwrap_or(0o644) & 0o777).unwrap_or(0o644);
        super::atomic_writer::write(dir, &data, mode)
    } else if let Some(e) = &v.empty_dir {
        match e.medium.as_deref().unwrap_or_default() {
            "" => std::fs::create_dir_all(dir).and_then(|()| {
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
            }),
            "Memory" => {
                let size =
                    super::volume_fs::memory_size(pod, e.size_limit.as_ref().map(|q| q.0.as_str()));
                super::volume_fs::mount_tmpfs(dir, size)
            }
            _ => {
                return Err(VolumeError::Unsupported {
                    volume: v.name.clone(),
                    kind: "emptyDir with a medium other than \"\" or Memory",
                })
            }
        }
    } else {
        return Err(VolumeError::Unsupported {
            volume: v.name.clone(),
            kind: super::claims::unsupported(v).unwrap_or("unknown"),
        });
    };
    written.map_err(|e| io(dir, e))?;
    Ok(dir.to_path_buf())
}

/// A persistentVolumeClaim volume: its bound volume's directory, made (world-writable, as
/// k3s's local-path helper makes it, since the pod may run as any user) when the volume asks
/// for DirectoryOrCreate.
fn claim_dir(v: &Volume, objects: &Objects) -> Result<PathBuf, VolumeError> {
    let Some(dir) = objects.claims.get(&v.name) else {
        return Err(VolumeError::Unbound {
            volume: v.name.clone(),
        });
    };
    let io = |source| VolumeError::Io {
        volume: v.name.clone(),
        path: dir.path.display().to_string(),
        source,
    };
    if dir.create && !dir.path.exists() {
        std::fs::create_dir_all(&dir.path).map_err(io)?;
        std::fs::set_permissions(&dir.path, std::fs::Permissions::from_mode(0o777)).map_err(io)?;
    }
    if !dir.path.is_dir() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the volume's directory does not exist on this node",
        )));
    }
    Ok(dir.path.clone())
}

/// The named ConfigMap's or Secret's contents: None when it is missing but optional.
fn lookup<'a>(
    volume: &str,
    kind: &'static str,
    name: &str,
    found: &'a BTreeMap<String, Files>,
    optional: Option<bool>,
) -> Result<Option<&'a Files>, VolumeError> {
    match found.get(name) {
        Some(data) => Ok(Some(data)),
        None if optional.unwrap_or(false) => Ok(None),
        None => Err(VolumeError::Missing {
            volume: volume.to_string(),
            kind,
            name: name.to_string(),
        }),
    }
}

/// A configMap or secret volume: a file per key (or listed item); empty when the object is
/// missing but optional.
fn fill(
    dir: &Path,
    data: Option<&Files>,
    items: Option<&[KeyToPath]>,
    mode: Option<i32>,
) -> std::io::Result<()> {
    match data {
        Some(data) => write_keys(dir, data, items, mode.unwrap_or(0o644)),
        None => std::fs::create_dir_all(dir),
    }
}

/// Files of a downwardAPI volume (or projection): pod fields and container resources.
fn downward_files(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    volume: &str,
) -> Result<Files, VolumeError> {
    let invalid = |message: String| VolumeError::Invalid {
        volume: volume.to_string(),
        message,
    };
    let mut files = BTreeMap::new();
    for item in items {
        let value = if let Some(f) = &item.field_ref {
            let map = |m: &Option<BTreeMap<String, String>>| {
                m.iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={v:?}\n"))
                    .collect::<String>()
            };
            match f.field_path.as_str() {
                "metadata.labels" => map(&pod.metadata.labels),
                "metadata.annotations" => map(&pod.metadata.annotations),
                other => {
                    super::env::field(pod, other, "", "").map_err(|e| invalid(e.to_string()))?
                }
            }
        } else if let Some(r) = &item.resource_field_ref {
            let name = r.container_name.clone().unwrap_or_default();
            let container = pod
                .spec
                .iter()
                .flat_map(|s| s.containers.iter())
                .find(|c| c.name == name)
                .ok_or_else(|| {
                    invalid(format!("resourceFieldRef names unknown container {name:?}"))
                })?;
            super::env::resource(container, &r.resource)
        } else {
            continue;
        };
        files.insert(item.path.clone(), value.into_bytes());
    }
    Ok(files)
}

/// Files of a projected volume: configMap, secret, downwardAPI and serviceAccountToken sources
/// merged. A token source without a token is an error: never an empty token file.
fn projected_files(
    pod: &Pod,
    p: &ProjectedVolumeSource,
    objects: &Objects,
    volume: &str,
) -> Result<Files, VolumeError> {
    let select = |data: &Files, items: Option<&[KeyToPath]>| -> Files {
        match items {
            Some(items) => items
                .iter()
                .filter_map(|i| data.get(&i.key).map(|v| (i.path.clone(), v.clone())))
                .collect(),
            None => data.clone(),
        }
    };
    let mut files = BTreeMap::new();
    for src in p.sources.iter().flatten() {
        if let Some(cm) = &src.config_map {
            let data = lookup(
                volume,
                "configmap",
                &cm.name,
                &objects.config_maps,
                cm.optional,
            )?;
            files.extend(
                data.map(|d| select(d, cm.items.as_deref()))
                    .unwrap_or_default(),
            );
        }
        if let Some(s) = &src.secret {
            let data = lookup(volume, "secret", &s.name, &objects.secrets, s.optional)?;
            files.extend(
                data.map(|d| select(d, s.items.as_deref()))
                    .unwrap_or_default(),
            );
        }
        if let Some(d) = &src.downward_api {
            files.extend(downward_files(
                pod,
                d.items.as_deref().unwrap_or(&[]),
                volume,
            )?);
        }
        if let Some(t) = &src.service_account_token {
            let spec = super::tokens::TokenSpec::of(t);
            let token = objects
                .tokens
                .get(&spec)
                .ok_or_else(|| VolumeError::NoToken {
                    volume: volume.to_string(),
                })?;
            files.insert(t.path.clone(), token.clone().into_bytes());
        }
    }
    Ok(files)
}

/// Writes one file per key (or per listed item), replacing files of keys that went away.
fn write_keys(
    dir: &Path,
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    mode: i32,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let wanted: Vec<(String, &Vec<u8>, i32)> = match items {
        Some(items) => items
            .iter()
            .filter_map(|i| {
                data.get(&i.key)
                    .map(|v| (i.path.clone(), v, i.mode.unwrap_or(mode)))
            })
            .collect(),
        None => data.iter().map(|(k, v)| (k.clone(), v, mode)).collect(),
    };
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !wanted
            .iter()
            .any(|(p, _, _)| p.split('/').next() == Some(name.as_str()))
        {
            let _ = std::fs::remove_file(entry.path())
                .or_else(|_| std::fs::remove_dir_all(entry.path()));
        }
    }
    for (rel, value, mode) in wanted {
        // Keys are file names; a path with ".." would escape the volume.
        if rel.split('/').any(|part| part == ".." || part.is_empty()) {
            continue;
        }
        let target = dir.join(&rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let tmp = target.with_extension("keelson-tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(value)?;
        f.set_permissions(std::fs::Permissions::from_mode(
            u32::try_from(mode & 0o777).unwrap_or(0o644),
        ))?;
        std::fs::rename(&tmp, &target)?;
    }
    Ok(())
}

/// The container's volumeMounts as host mounts (subPath resolved; configMap and secret read-only).
pub fn mounts_for(
    pod: &Pod,
    container: &Container,
    paths: &BTreeMap<String, PathBuf>,
) -> Result<Vec<HostMount>, VolumeError> {
    let mut mounts = Vec::new();
    for vm in container.volume_mounts.iter().flatten() {
        let Some(path) = paths.get(&vm.name) else {
            return Err(VolumeError::Undeclared {
                container: container.name.clone(),
                volume: vm.name.clone(),
            });
        };
        let volume = volumes(pod).iter().find(|v| v.name == vm.name);
        let read_only_kind = volume.is_some_and(|v| v.config_map.is_some() || v.secret.is_some());
        let read_only_claim = volume
            .and_then(|v| v.persistent_volume_claim.as_ref())
            .is_some_and(|c| c.read_only == Some(true));
        let host = match vm.sub_path.as_deref().filter(|s| !s.is_empty()) {
            Some(sub) => {
                sub_path::resolve(path, sub, !read_only_kind).map_err(|e| VolumeError::SubPath {
                    container: container.name.clone(),
                    volume: vm.name.clone(),
                    source: e,
                })?
            }
            None => path.clone(),
        };
        mounts.push(HostMount {
            container_path: vm.mount_path.clone(),
            host_path: host.display().to_string(),
            readonly: vm.read_only.unwrap_or(false) || read_only_kind || read_only_claim,
        });
    }
    Ok(mounts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ConfigMapVolumeSource, EmptyDirVolumeSource, PodSpec, SecretVolumeSource, Volume,
        VolumeMount,
    };

    /// The ConfigMap "app-config" with these keys, and the Secret "db" with a password.
    fn app_config_and_db(config: &[(&str, &str)]) -> Objects {
        let mut objects = Objects::default();
        objects.config_maps.insert(
            "app-config".into(),
            config
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect(),
        );
        objects.secrets.insert(
            "db".into(),
            BTreeMap::from([("password".into(), b"hunter2".to_vec())]),
        );
        objects
    }

    fn read(paths: &BTreeMap<String, PathBuf>, volume: &str, file: &str) -> String {
        std::fs::read_to_string(paths[volume].join(file)).unwrap()
    }

    #[test]
    fn configmap_and_secret_keys_become_files_and_mounts() {
        let tmp = tempfile::tempdir().unwrap();
        let pod = Pod {
            metadata: kube::api::ObjectMeta {
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                volumes: Some(vec![
                    Volume {
                        name: "cfg".into(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: "app-config".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    Volume {
                        name: "creds".into(),
                        secret: Some(SecretVolumeSource {
                            secret_name: Some("db".into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    Volume {
                        name: "scratch".into(),
                        empty_dir: Some(EmptyDirVolumeSource::default()),
                        ..Default::default()
                    },
                ]),
                containers: vec![Container {
                    name: "app".into(),
                    volume_mounts: Some(vec![
                        VolumeMount {
                            name: "cfg".into(),
                            mount_path: "/etc/app".into(),
                            ..Default::default()
                        },
                        VolumeMount {
                            name: "scratch".into(),
                            mount_path: "/scratch".into(),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        };
        let mut objects = app_config_and_db(&[("color", "blue"), ("size", "L")]);
        let paths = prepare(tmp.path(), &pod, &objects).unwrap();
        assert_eq!(read(&paths, "cfg", "color"), "blue");
        assert_eq!(read(&paths, "creds", "password"), "hunter2");
        assert!(paths["scratch"].is_dir());

        // A key removed from the ConfigMap disappears from the volume on the next sync.
        objects = app_config_and_db(&[("color", "red")]);
        let paths = prepare(tmp.path(), &pod, &objects).unwrap();
        assert_eq!(read(&paths, "cfg", "color"), "red");
        assert!(!paths["cfg"].join("size").exists());

        let mounts = mounts_for(&pod, &pod.spec.as_ref().unwrap().containers[0], &paths).unwrap();
        assert_eq!(mounts.len(), 2);
        assert!(mounts[0].readonly && mounts[0].container_path == "/etc/app");
        assert!(!mounts[1].readonly);

        let missing = prepare(tmp.path(), &pod, &Objects::default()).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "volume cfg: configmap app-config not found"
        );
    }

    #[test]
    fn downward_api_and_projected_volumes() {
        let tmp = tempfile::tempdir().unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u2", "labels": {"app": "web", "tier": "front"}},
            "spec": {
                "containers": [{"name": "app", "resources": {"limits": {"memory": "64Mi"}}}],
                "volumes": [
                    {"name": "info", "downwardAPI": {"items": [
                        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                        {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory"}}
                    ]}},
                    {"name": "all", "projected": {"sources": [
                        {"configMap": {"name": "app-config", "items": [{"key": "color", "path": "conf/color"}]}},
                        {"secret": {"name": "db"}},
                        {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
                    ]}}
                ]
            }
        }))
        .unwrap();
        let objects = app_config_and_db(&[("color", "blue")]);
        let paths = prepare(tmp.path(), &pod, &objects).unwrap();
        assert_eq!(read(&paths, "info", "name"), "web");
        assert_eq!(
            read(&paths, "info", "labels"),
            "app=\"web\"\ntier=\"front\"\n"
        );
        assert_eq!(read(&paths, "info", "mem"), "67108864");
        assert_eq!(read(&paths, "all", "conf/color"), "blue");
        assert_eq!(read(&paths, "all", "password"), "hunter2");
        assert_eq!(read(&paths, "all", "ns"), "shop");
        let missing = prepare(tmp.path(), &pod, &Objects::default()).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "volume all: configmap app-config not found"
        );
    }

    /// subPath "/" once made an emptyDir a read-write mount of the host root.
    #[test]
    fn a_sub_path_out_of_the_volume_fails_the_container_config() {
        let tmp = tempfile::tempdir().unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u3"},
            "spec": {
                "containers": [{"name": "app", "volumeMounts": [
                    {"name": "scratch", "mountPath": "/data", "subPath": "/"}
                ]}],
                "volumes": [{"name": "scratch", "emptyDir": {}}]
            }
        }))
        .unwrap();
        let paths = prepare(tmp.path(), &pod, &Objects::default()).unwrap();
        let container = &pod.spec.as_ref().unwrap().containers[0];
        let err = mounts_for(&pod, container, &paths).unwrap_err();
        assert_eq!(
            err.to_string(),
            "container app, volumeMount scratch: subPath \"/\" must be a relative path"
        );
        let mut ok = container.clone();
        ok.volume_mounts.as_mut().unwrap()[0].sub_path = Some("logs".into());
        let mounts = mounts_for(&pod, &ok, &paths).unwrap();
        let want = paths["scratch"].canonicalize().unwrap().join("logs");
        assert_eq!(mounts[0].host_path, want.display().to_string());
    }
    /// A claim volume is its bound volume's directory, made when asked, the same for every
    /// pod using the claim; without a bound volume it is an error and no directory is made.
    #[test]
    fn claim_volumes_are_the_bound_volumes_directory_never_an_empty_one() {
        let tmp = tempfile::tempdir().unwrap();
        let pod = |uid: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "db", "namespace": "shop", "uid": uid},
                "spec": {"containers": [{"name": "app", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
            }))
            .unwrap()
        };
        let err = prepare(tmp.path(), &pod("p1"), &Objects::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "volume data: its persistentVolumeClaim is not bound to a volume on this node"
        );
        assert!(!pod_dir(tmp.path(), &pod("p1"))
            .join("volumes/data")
            .exists());
        let store = tmp.path().join("storage/pvc-1");
        let mut objects = Objects::default();
        objects.claims.insert(
            "data".into(),
            super::super::claims::ClaimDir {
                path: store.clone(),
                create: true,
            },
        );
        let first = prepare(tmp.path(), &pod("p1"), &objects).unwrap();
        assert_eq!(first["data"], store);
        let mode = std::fs::metadata(&store).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o777);
        std::fs::write(store.join("kept"), "yes").unwrap();
        let second = prepare(tmp.path(), &pod("p2"), &objects).unwrap();
        assert_eq!(
            std::fs::read_to_string(second["data"].join("kept")).unwrap(),
            "yes"
        );
        let nfs: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "x", "uid": "p3"},
            "spec": {"containers": [], "volumes": [{"name": "share", "nfs": {"server": "s", "path": "/"}}]}
        }))
        .unwrap();
        let err = prepare(tmp.path(), &nfs, &Objects::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "volume share: volume type nfs is not supported by keelson-agent"
        );
    }
}
