use super::*;
use k8s_openapi::api::core::v1::{PodDNSConfigOption, PodSpec};

const CLUSTER: &[&str] = &["10.96.0.10"];

fn cluster() -> Vec<String> {
    CLUSTER.iter().map(|s| s.to_string()).collect()
}

fn host() -> HostDns {
    HostDns::parse(
        "# written by the installer\nnameserver 192.0.2.53\nnameserver 192.0.2.54 ; second\n\
         search corp.example. lab.example\noptions edns0 attempts:2\n",
    )
}

fn pod(policy: Option<&str>, host_network: bool, custom: Option<PodDNSConfig>) -> Pod {
    Pod {
        metadata: kube::api::ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            dns_policy: policy.map(String::from),
            host_network: Some(host_network),
            dns_config: custom,
            ..Default::default()
        }),
        status: None,
    }
}

fn config(p: &Pod, cluster_dns: &[String]) -> cri::DnsConfig {
    pod_dns_config(cluster_dns, "cluster.local", Some(&host()), p).unwrap()
}

#[test]
fn the_nodes_resolv_conf_is_read_as_the_kubelet_reads_it() {
    assert_eq!(
        host(),
        HostDns {
            servers: vec!["192.0.2.53".into(), "192.0.2.54".into()],
            searches: vec!["corp.example".into(), "lab.example".into()],
            options: vec!["edns0".into(), "attempts:2".into()],
        }
    );
}

#[test]
fn cluster_first_is_the_default_policy_with_the_cluster_search_path_and_ndots_5() {
    let c = config(&pod(None, false, None), &cluster());
    assert_eq!(c.servers, vec!["10.96.0.10"]);
    assert_eq!(
        c.searches,
        vec![
            "shop.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local",
            "corp.example",
            "lab.example"
        ],
        "the node's search domains follow the cluster's"
    );
    assert_eq!(c.options, vec!["ndots:5"]);
}

#[test]
fn host_network_pods_use_the_node_unless_cluster_first_with_host_net() {
    let node = config(&pod(Some("ClusterFirst"), true, None), &cluster());
    assert_eq!(node.servers, vec!["192.0.2.53", "192.0.2.54"]);
    assert_eq!(node.options, vec!["edns0", "attempts:2"]);
    let with = config(
        &pod(Some("ClusterFirstWithHostNet"), true, None),
        &cluster(),
    );
    assert_eq!(with.servers, vec!["10.96.0.10"]);
    assert_eq!(with.searches[0], "shop.svc.cluster.local");
}

#[test]
fn default_is_the_node_and_cluster_first_without_cluster_dns_falls_back_to_it() {
    let default = config(&pod(Some("Default"), false, None), &cluster());
    assert_eq!(default.servers, vec!["192.0.2.53", "192.0.2.54"]);
    assert_eq!(default.searches, vec!["corp.example", "lab.example"]);
    let p = pod(Some("ClusterFirst"), false, None);
    assert_eq!(
        base(&p, false),
        (Base::Host, true),
        "a fallback to warn about"
    );
    assert_eq!(config(&p, &[]), default);
    // An unreadable resolv.conf leaves the runtime's default.
    assert_eq!(pod_dns_config(&[], "cluster.local", None, &p), None);
}

#[test]
fn none_takes_only_the_pods_dns_config_and_options_override_by_name() {
    let custom = PodDNSConfig {
        nameservers: Some(vec!["1.2.3.4".into()]),
        searches: Some(vec!["ns1.svc.cluster-domain.example".into()]),
        options: Some(vec![
            PodDNSConfigOption {
                name: Some("ndots".into()),
                value: Some("2".into()),
            },
            PodDNSConfigOption {
                name: Some("edns0".into()),
                value: None,
            },
        ]),
    };
    let none = config(&pod(Some("None"), false, Some(custom.clone())), &cluster());
    assert_eq!(none.servers, vec!["1.2.3.4"]);
    assert_eq!(none.searches, vec!["ns1.svc.cluster-domain.example"]);
    assert_eq!(none.options, vec!["ndots:2", "edns0"]);

    let merged = config(&pod(None, false, Some(custom)), &cluster());
    assert_eq!(merged.servers, vec!["10.96.0.10", "1.2.3.4"]);
    assert_eq!(
        merged.searches.last().map(String::as_str),
        Some("ns1.svc.cluster-domain.example")
    );
    assert_eq!(merged.options, vec!["ndots:2", "edns0"], "ndots:5 replaced");
}

#[test]
fn limits_3_nameservers_and_32_search_domains_duplicates_dropped() {
    let custom = PodDNSConfig {
        nameservers: Some(vec![
            "10.96.0.10".into(),
            "1.1.1.1".into(),
            "2.2.2.2".into(),
            "3.3.3.3".into(),
        ]),
        searches: Some(
            (0..40)
                .map(|i| format!("d{i}.example"))
                .chain(["svc.cluster.local".into()])
                .collect(),
        ),
        options: None,
    };
    let c = config(&pod(None, false, Some(custom)), &cluster());
    assert_eq!(c.servers, vec!["10.96.0.10", "1.1.1.1", "2.2.2.2"]);
    assert_eq!(c.searches.len(), MAX_SEARCHES);
    assert_eq!(
        c.searches
            .iter()
            .filter(|s| *s == "svc.cluster.local")
            .count(),
        1
    );

    let long = PodDNSConfig {
        searches: Some((0..20).map(|i| format!("{i}{}", "x".repeat(200))).collect()),
        ..Default::default()
    };
    let c = config(&pod(Some("None"), false, Some(long)), &cluster());
    assert!(c.searches.join(" ").len() <= MAX_SEARCH_CHARS);
    assert_eq!(c.searches.len(), 10);
}
