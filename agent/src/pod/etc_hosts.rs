//! The pod's /etc/hosts, as the kubelet manages it: localhost entries, the pod's own address
//! under its hostname (and `<hostname>.<subdomain>.<ns>.svc.<domain>` when spec.subdomain is
//! set, the name a StatefulSet pod has behind its headless Service), then spec.hostAliases.
//! Host-network pods keep the runtime's copy of the node's file.

use super::translate::HostMount;
use super::volumes::pod_dir;
use k8s_openapi::api::core::v1::{Container, Pod};
use std::path::Path;

/// The hostname the pod's sandbox gets: spec.hostname, else the pod's name (63 characters at
/// most, as the kubelet truncates).
fn hostname(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    let name = spec
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default();
    name.chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches(['-', '.'])
        .to_string()
}

/// The file's text for a pod whose sandbox has `pod_ip` (kubelet's managedHostsFileContent).
pub fn render(pod: &Pod, pod_ip: &str, cluster_domain: &str) -> String {
    let mut out = String::from(
        "# Kubernetes-managed hosts file.\n\
         127.0.0.1\tlocalhost\n\
         ::1\tlocalhost ip6-localhost ip6-loopback\n\
         fe00::0\tip6-localnet\n\
         fe00::0\tip6-mcastprefix\n\
         fe00::1\tip6-allnodes\n\
         fe00::2\tip6-allrouters\n",
    );
    let host = hostname(pod);
    let spec = pod.spec.as_ref();
    let subdomain = spec
        .and_then(|s| s.subdomain.as_deref())
        .filter(|s| !s.is_empty());
    match subdomain {
        Some(sub) => {
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            let fqdn = format!("{host}.{sub}.{ns}.svc.{cluster_domain}");
            out.push_str(&format!("{pod_ip}\t{fqdn}\t{host}\n"));
        }
        None => out.push_str(&format!("{pod_ip}\t{host}\n")),
    }
    let aliases = spec
        .and_then(|s| s.host_aliases.as_deref())
        .unwrap_or_default();
    if !aliases.is_empty() {
        out.push_str("\n# Entries added by HostAliases.\n");
        for alias in aliases {
            let names = alias.hostnames.clone().unwrap_or_default().join("\t");
            out.push_str(&format!("{}\t{names}\n", alias.ip));
        }
    }
    out
}

/// Writes the pod's hosts file (when its content changed) and returns its mount for
/// `container`; None for host-network pods, before the sandbox has an address, and for a
/// container that mounts its own /etc/hosts.
pub fn mount(
    root: &Path,
    pod: &Pod,
    container: &Container,
    pod_ip: &str,
    cluster_domain: &str,
) -> std::io::Result<Option<HostMount>> {
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    let own = container
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path.trim_end_matches('/') == "/etc/hosts");
    if host_network || own || pod_ip.is_empty() {
        return Ok(None);
    }
    let dir = pod_dir(root, pod);
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("etc-hosts");
    let text = render(pod, pod_ip, cluster_domain);
    if std::fs::read_to_string(&file).ok().as_deref() != Some(text.as_str()) {
        let tmp = dir.join(".etc-hosts.tmp");
        std::fs::write(&tmp, &text)?;
        std::fs::rename(&tmp, &file)?;
    }
    Ok(Some(HostMount {
        container_path: "/etc/hosts".into(),
        host_path: file.display().to_string(),
        readonly: false,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec_obj = json!({ "containers": [{ "name": "c", "image": "i" }] });
        if let (Some(s), Some(extra)) = (spec_obj.as_object_mut(), spec.as_object()) {
            s.extend(extra.clone());
        }
        serde_json::from_value(json!({
            "metadata": { "name": "web-0", "namespace": "shop", "uid": "u1" },
            "spec": spec_obj,
        }))
        .unwrap()
    }

    const LOCAL: &str = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";

    #[test]
    fn a_pod_with_a_subdomain_has_its_service_name_as_the_kubelet_writes_it() {
        let p = pod(json!({ "hostname": "web-0", "subdomain": "db" }));
        let want = format!("{LOCAL}10.244.0.7\tweb-0.db.shop.svc.cluster.local\tweb-0\n");
        assert_eq!(render(&p, "10.244.0.7", "cluster.local"), want);
    }

    #[test]
    fn a_plain_pod_has_its_name_and_the_host_aliases() {
        let p = pod(json!({ "hostAliases": [
            { "ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"] }] }));
        let want = format!(
            "{LOCAL}10.244.0.7\tweb-0\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"
        );
        assert_eq!(render(&p, "10.244.0.7", "cluster.local"), want);
    }

    #[test]
    fn the_file_is_mounted_unless_host_network_or_the_container_mounts_its_own() {
        let root = tempfile::tempdir().unwrap();
        let p = pod(json!({ "subdomain": "db" }));
        let c = p.spec.as_ref().unwrap().containers[0].clone();
        let m = mount(root.path(), &p, &c, "10.244.0.7", "cluster.local")
            .unwrap()
            .unwrap();
        assert_eq!(m.container_path, "/etc/hosts");
        let text = std::fs::read_to_string(&m.host_path).unwrap();
        assert!(
            text.ends_with("10.244.0.7\tweb-0.db.shop.svc.cluster.local\tweb-0\n"),
            "{text}"
        );
        assert!(mount(root.path(), &p, &c, "", "cluster.local")
            .unwrap()
            .is_none());
        let host = pod(json!({ "hostNetwork": true }));
        assert!(mount(root.path(), &host, &c, "10.0.0.1", "cluster.local")
            .unwrap()
            .is_none());
        let mut own = c.clone();
        own.volume_mounts = Some(vec![serde_json::from_value(
            json!({ "name": "h", "mountPath": "/etc/hosts" }),
        )
        .unwrap()]);
        assert!(mount(root.path(), &p, &own, "10.244.0.7", "cluster.local")
            .unwrap()
            .is_none());
    }
}
