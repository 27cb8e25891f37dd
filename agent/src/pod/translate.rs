//! Pod spec to CRI configs: PodSandboxConfig and ContainerConfig. Pure.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext};
use keelson_apimachinery::hash::fnv1a_64;
use keelson_proto::runtime::v1 as cri;

use crate::cri::labels;
use crate::pod::container_kind::ContainerKind;
use crate::pod::dns;
use crate::pod::security::{self, NodeSecurity};
use crate::quantity;

/// Node-level settings that shape every pod.
#[derive(Clone, Debug)]
pub struct NodeSettings {
    pub node_name: String,
    pub cgroup_root: String,
    /// Pods' log directories go under here (`<root>/<ns>_<name>_<uid>`).
    pub pod_log_root: String,
    /// Cluster DNS server for dnsPolicy ClusterFirst; none means the node's resolv.conf.
    pub cluster_dns: Vec<String>,
    pub cluster_domain: String,
    pub security: NodeSecurity,
}

pub fn pod_log_dir(settings: &NodeSettings, pod: &Pod) -> String {
    let m = &pod.metadata;
    format!(
        "{}/{}_{}_{}",
        settings.pod_log_root.trim_end_matches('/'),
        m.namespace.as_deref().unwrap_or("default"),
        m.name.as_deref().unwrap_or(""),
        m.uid.as_deref().unwrap_or("")
    )
}

pub fn pod_labels(pod: &Pod, node: &str) -> HashMap<String, String> {
    let m = &pod.metadata;
    let mut l: HashMap<String, String> = m.labels.clone().unwrap_or_default().into_iter().collect();
    l.insert(labels::POD_NAME.into(), m.name.clone().unwrap_or_default());
    l.insert(
        labels::POD_NAMESPACE.into(),
        m.namespace.clone().unwrap_or_default(),
    );
    l.insert(labels::POD_UID.into(), m.uid.clone().unwrap_or_default());
    l.insert(labels::NODE.into(), node.to_string());
    l
}

pub fn sandbox_config(settings: &NodeSettings, pod: &Pod, attempt: u32) -> cri::PodSandboxConfig {
    let m = &pod.metadata;
    let spec = pod.spec.clone().unwrap_or_default();
    let host_network = spec.host_network.unwrap_or(false);
    let hostname = spec
        .hostname
        .clone()
        .unwrap_or_else(|| m.name.clone().unwrap_or_default());
    let mut port_mappings = Vec::new();
    for c in &spec.containers {
        for p in c.ports.iter().flatten() {
            if let Some(host_port) = p.host_port.filter(|hp| *hp > 0) {
                port_mappings.push(cri::PortMapping {
                    protocol: protocol(p.protocol.as_deref()) as i32,
                    container_port: p.container_port,
                    host_port,
                    host_ip: p.host_ip.clone().unwrap_or_default(),
                });
            }
        }
    }
    let security = spec.security_context.clone().unwrap_or_default();
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: m.name.clone().unwrap_or_default(),
            uid: m.uid.clone().unwrap_or_default(),
            namespace: m.namespace.clone().unwrap_or_default(),
            attempt,
        }),
        hostname: match (host_network, fqdn(settings, pod)) {
            (true, _) => String::new(),
            // setHostnameAsFQDN: the whole name, never cut (the runtime refuses one over 64).
            (false, Some(fqdn)) => fqdn,
            (false, None) => truncate_hostname(&hostname),
        },
        log_directory: pod_log_dir(settings, pod),
        dns_config: dns_config(settings, pod),
        port_mappings,
        labels: pod_labels(pod, &settings.node_name),
        annotations: m
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: crate::pod::qos::cgroup_parent(&settings.cgroup_root, pod),
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(security::namespaces(pod)),
                run_as_user: security.run_as_user.map(|value| cri::Int64Value { value }),
                run_as_group: security.run_as_group.map(|value| cri::Int64Value { value }),
                supplemental_groups: supplemental_groups(&security),
                seccomp: Some(security::sandbox_seccomp(&settings.security, pod)),
                // The sandbox is privileged when a container is: the runtime requires it.
                privileged: spec
                    .containers
                    .iter()
                    .chain(spec.init_containers.iter().flatten())
                    .any(privileged),
                ..Default::default()
            }),
            sysctls: security::sysctls(pod),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn privileged(c: &Container) -> bool {
    c.security_context.as_ref().and_then(|s| s.privileged) == Some(true)
}

/// The pod's supplemental groups and its fsGroup, which every container joins (as upstream).
fn supplemental_groups(security: &PodSecurityContext) -> Vec<i64> {
    let mut groups = security.supplemental_groups.clone().unwrap_or_default();
    groups.extend(security.fs_group.filter(|g| !groups.contains(g)));
    groups
}

/// `<hostname>.<subdomain>.<namespace>.svc.<domain>` for a pod with setHostnameAsFQDN and a
/// subdomain, as the kubelet sets it.
fn fqdn(settings: &NodeSettings, pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let subdomain = spec
        .subdomain
        .as_deref()
        .filter(|_| spec.set_hostname_as_fqdn == Some(true))?;
    let host = spec
        .hostname
        .clone()
        .or_else(|| pod.metadata.name.clone())?;
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    Some(format!(
        "{}.{subdomain}.{ns}.svc.{}",
        truncate_hostname(&host),
        settings.cluster_domain
    ))
}

fn truncate_hostname(name: &str) -> String {
    // Hostnames are at most 63 characters; the kubelet truncates the same way.
    name.chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches(['-', '.'])
        .to_string()
}

fn protocol(p: Option<&str>) -> cri::Protocol {
    match p {
        Some("UDP") => cri::Protocol::Udp,
        Some("SCTP") => cri::Protocol::Sctp,
        _ => cri::Protocol::Tcp,
    }
}

/// The pod's resolv.conf (see `dns`). The node's resolv.conf is read for each sandbox, as the
/// kubelet reads it, so a change there reaches new pods.
fn dns_config(settings: &NodeSettings, pod: &Pod) -> Option<cri::DnsConfig> {
    let (base, fell_back) = dns::base(pod, !settings.cluster_dns.is_empty());
    if fell_back {
        tracing::warn!(
            pod = pod.metadata.name.as_deref().unwrap_or(""),
            "the agent has no --cluster-dns: dnsPolicy ClusterFirst falls back to Default"
        );
    }
    let host = match base {
        dns::Base::None => None,
        _ => dns::HostDns::read(dns::RESOLV_CONF),
    };
    dns::pod_dns_config(
        &settings.cluster_dns,
        &settings.cluster_domain,
        host.as_ref(),
        pod,
    )
}

/// Annotation with the hash of the container's spec when it was created: a running container
/// whose spec changed since (e.g. `kubectl set image`) is restarted.
pub const HASH_ANNOTATION: &str = "io.keelson.container.hash";

/// A stable hash (FNV-1a over the JSON form) of the container spec, so that it survives agent
/// upgrades, unlike std's hasher.
pub fn container_hash(c: &Container) -> String {
    let text = serde_json::to_string(c).unwrap_or_default();
    format!("{:016x}", fnv1a_64(text.as_bytes()))
}

/// A volume mount resolved to a host path.
#[derive(Clone, Debug, PartialEq)]
pub struct HostMount {
    pub container_path: String,
    pub host_path: String,
    pub readonly: bool,
}

pub struct ContainerInput<'a> {
    pub pod: &'a Pod,
    pub container: &'a Container,
    pub kind: ContainerKind,
    /// The container whose process namespace an ephemeral container joins (its target).
    pub target_id: Option<&'a str>,
    pub attempt: u32,
    pub image_ref: &'a str,
    pub env: &'a [(String, String)],
    pub mounts: &'a [HostMount],
    pub node_name: &'a str,
    pub node: &'a NodeSecurity,
    /// The node's memory (MemTotal), for a Burstable container's oom_score_adj.
    pub memory_capacity: u64,
}

pub fn container_config(input: &ContainerInput<'_>) -> cri::ContainerConfig {
    let c = input.container;
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: c.name.clone(),
            attempt: input.attempt,
        }),
        image: Some(cri::ImageSpec {
            image: input.image_ref.to_string(),
            user_specified_image: c.image.clone().unwrap_or_default(),
            ..Default::default()
        }),
        command: expand_all(c.command.as_deref(), input.env),
        args: expand_all(c.args.as_deref(), input.env),
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs: input
            .env
            .iter()
            .map(|(key, value)| cri::KeyValue {
                key: key.clone(),
                value: value.clone().into_bytes(),
            })
            .collect(),
        mounts: input
            .mounts
            .iter()
            .map(|hm| cri::Mount {
                container_path: hm.container_path.clone(),
                host_path: hm.host_path.clone(),
                readonly: hm.readonly,
                ..Default::default()
            })
            .collect(),
        labels: container_labels(input),
        annotations: HashMap::from([
            (
                "io.kubernetes.container.restartCount".to_string(),
                input.attempt.to_string(),
            ),
            (HASH_ANNOTATION.to_string(), container_hash(c)),
        ]),
        log_path: format!("{}/{}.log", c.name, input.attempt),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(cri::LinuxContainerResources {
                oom_score_adj: crate::pod::qos::oom_score_adj(input.pod, c, input.memory_capacity),
                ..resources(c)
            }),
            security_context: Some(security_context(input, c)),
        }),
        ..Default::default()
    }
}

/// `$(VAR)` references expanded in a command or its arguments.
fn expand_all(list: Option<&[String]>, env: &[(String, String)]) -> Vec<String> {
    list.unwrap_or_default()
        .iter()
        .map(|s| super::env::expand(s, env))
        .collect()
}

/// The labels the agent finds the container by (pod, container, node, kind).
fn container_labels(input: &ContainerInput<'_>) -> HashMap<String, String> {
    let m = &input.pod.metadata;
    [
        (labels::POD_NAME, m.name.clone().unwrap_or_default()),
        (
            labels::POD_NAMESPACE,
            m.namespace.clone().unwrap_or_default(),
        ),
        (labels::POD_UID, m.uid.clone().unwrap_or_default()),
        (labels::CONTAINER_NAME, input.container.name.clone()),
        (labels::NODE, input.node_name.to_string()),
        (labels::CONTAINER_KIND, input.kind.label().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The container's security context, with the pod's user, group and supplemental groups where
/// the container sets none, and its profiles and /proc paths (`security`).
fn security_context(
    input: &ContainerInput<'_>,
    c: &Container,
) -> cri::LinuxContainerSecurityContext {
    let (node, pod) = (input.node, input.pod);
    let pod_security = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    let security = c.security_context.clone().unwrap_or_default();
    let caps = security.capabilities.clone().unwrap_or_default();
    let (masked_paths, readonly_paths) = security::proc_paths(&security);
    cri::LinuxContainerSecurityContext {
        capabilities: Some(cri::Capability {
            add_capabilities: caps.add.unwrap_or_default(),
            drop_capabilities: caps.drop.unwrap_or_default(),
            ..Default::default()
        }),
        privileged: security.privileged.unwrap_or(false),
        run_as_user: security::run_as_user(pod, c).map(|value| cri::Int64Value { value }),
        run_as_group: security
            .run_as_group
            .or(pod_security.run_as_group)
            .map(|value| cri::Int64Value { value }),
        readonly_rootfs: security.read_only_root_filesystem.unwrap_or(false),
        supplemental_groups: supplemental_groups(&pod_security),
        no_new_privs: security.allow_privilege_escalation == Some(false),
        namespace_options: Some(security::container_namespaces(pod, input.target_id)),
        seccomp: Some(security::container_seccomp(node, pod, c)),
        apparmor: security::container_apparmor(node, pod, c),
        masked_paths,
        readonly_paths,
        ..Default::default()
    }
}

/// CPU and memory limits/requests as cgroup v1 values (CFS quota/period, shares, memory limit).
pub fn resources(c: &Container) -> cri::LinuxContainerResources {
    let res = c.resources.clone().unwrap_or_default();
    let limits = res.limits.unwrap_or_default();
    let requests = res.requests.unwrap_or_default();
    let mut out = cri::LinuxContainerResources::default();
    let cpu_request = requests
        .get("cpu")
        .or(limits.get("cpu"))
        .and_then(|q| quantity::cpu_millis(&q.0));
    // Saturating: a quantity from the pod spec may be far beyond any machine.
    out.cpu_shares = cpu_request.map_or(2, |m| (m.saturating_mul(1024) / 1000).max(2));
    if let Some(limit) = limits.get("cpu").and_then(|q| quantity::cpu_millis(&q.0)) {
        out.cpu_period = 100_000;
        out.cpu_quota = (limit.saturating_mul(100_000) / 1000).max(1000);
    }
    if let Some(mem) = limits.get("memory").and_then(|q| quantity::bytes(&q.0)) {
        out.memory_limit_in_bytes = mem;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerPort, PodSecurityContext, PodSpec, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use std::collections::BTreeMap;

    fn settings() -> NodeSettings {
        NodeSettings {
            node_name: "node-a".into(),
            cgroup_root: "/keelson".into(),
            pod_log_root: "/var/log/pods".into(),
            cluster_dns: vec!["10.96.0.10".into()],
            cluster_domain: "cluster.local".into(),
            security: Default::default(),
        }
    }

    fn pod() -> Pod {
        Pod {
            metadata: kube::api::ObjectMeta {
                name: Some("web".into()),
                namespace: Some("shop".into()),
                uid: Some("u-1".into()),
                labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                security_context: Some(PodSecurityContext {
                    run_as_user: Some(1000),
                    ..Default::default()
                }),
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("busybox".into()),
                    command: Some(vec!["sh".into(), "-c".into()]),
                    args: Some(vec!["echo $(GREETING)".into()]),
                    working_dir: Some("/tmp".into()),
                    ports: Some(vec![ContainerPort {
                        container_port: 80,
                        host_port: Some(8080),
                        ..Default::default()
                    }]),
                    resources: Some(ResourceRequirements {
                        limits: Some(BTreeMap::from([
                            ("cpu".to_string(), Quantity("500m".into())),
                            ("memory".to_string(), Quantity("64Mi".into())),
                        ])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn sandbox_config_carries_identity_dns_ports_and_cgroup() {
        let p = pod();
        let c = sandbox_config(&settings(), &p, 2);
        let meta = c.metadata.unwrap();
        assert_eq!(
            (
                meta.name.as_str(),
                meta.namespace.as_str(),
                meta.uid.as_str(),
                meta.attempt
            ),
            ("web", "shop", "u-1", 2)
        );
        assert_eq!(c.hostname, "web");
        assert_eq!(c.log_directory, "/var/log/pods/shop_web_u-1");
        assert_eq!(
            c.labels.get(labels::POD_UID).map(String::as_str),
            Some("u-1")
        );
        assert_eq!(c.labels.get("app").map(String::as_str), Some("web"));
        let dns = c.dns_config.unwrap();
        assert_eq!(dns.servers, vec!["10.96.0.10"]);
        assert_eq!(dns.searches[0], "shop.svc.cluster.local");
        assert_eq!(c.port_mappings.len(), 1);
        assert_eq!(
            (
                c.port_mappings[0].container_port,
                c.port_mappings[0].host_port
            ),
            (80, 8080)
        );
        // Guaranteed: limits without requests.
        assert_eq!(c.linux.unwrap().cgroup_parent, "/keelson/podu-1");
    }

    #[test]
    fn container_config_carries_command_env_limits_user_and_log_path() {
        let p = pod();
        let env = vec![("GREETING".to_string(), "hi".to_string())];
        let mounts = vec![HostMount {
            container_path: "/data".into(),
            host_path: "/var/lib/x".into(),
            readonly: true,
        }];
        let c = container_config(&ContainerInput {
            pod: &p,
            container: &p.spec.as_ref().unwrap().containers[0],
            kind: ContainerKind::Regular,
            target_id: None,
            attempt: 3,
            image_ref: "sha256:abc",
            env: &env,
            mounts: &mounts,
            node_name: "node-a",
            node: &NodeSecurity::default(),
            memory_capacity: 4 << 30,
        });
        assert_eq!(c.command, vec!["sh", "-c"]);
        assert_eq!(c.args, vec!["echo hi"]);
        assert_eq!(c.working_dir, "/tmp");
        assert_eq!(c.log_path, "app/3.log");
        assert_eq!(c.metadata.unwrap().attempt, 3);
        assert_eq!(c.mounts[0].host_path, "/var/lib/x");
        assert!(c.mounts[0].readonly);
        let linux = c.linux.unwrap();
        let r = linux.resources.unwrap();
        assert_eq!(
            (r.cpu_quota, r.cpu_period, r.cpu_shares),
            (50_000, 100_000, 512)
        );
        assert_eq!(r.memory_limit_in_bytes, 64 << 20);
        assert_eq!(
            linux.security_context.unwrap().run_as_user.unwrap().value,
            1000
        );
    }

    #[test]
    fn cpu_far_beyond_any_machine_saturates() {
        let huge = BTreeMap::from([("cpu".to_string(), Quantity("100T".into()))]);
        let c = Container {
            name: "app".into(),
            resources: Some(ResourceRequirements {
                limits: Some(huge.clone()),
                requests: Some(huge),
                ..Default::default()
            }),
            ..Default::default()
        };
        let r = resources(&c);
        assert_eq!(r.cpu_shares, i64::MAX / 1000);
        assert_eq!(r.cpu_quota, i64::MAX / 1000);
        assert_eq!(
            crate::pod::env::resource(&c, "limits.cpu"),
            "100000000000000"
        );
        let c = Container {
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([(
                    "cpu".to_string(),
                    Quantity(format!("{}m", i64::MAX)),
                )])),
                ..Default::default()
            }),
            ..c
        };
        assert_eq!(
            crate::pod::env::resource(&c, "limits.cpu"),
            "9223372036854776"
        );
    }
}
