//! Node IPAM against a real keelson-apiserver: the controller manager with --allocate-node-cidrs
//! gives Nodes created with kubectl their pod CIDRs, keeps them across its own restart, frees
//! them with the Node, and says so with Events when it cannot.

use std::process::Command;
use std::time::Duration;

use keelson_testing::{binary, free_port, metric_sum, run, Apiserver, ChildGuard, Component};

/// The controller manager with --allocate-node-cidrs, and where its /metrics is.
fn controller_manager(api: &Apiserver, flags: &[&str]) -> (ChildGuard, String) {
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut cmd = Command::new(binary("keelson-controller-manager"));
    cmd.arg("--kubeconfig")
        .arg(api.kubeconfig_of(Component::ControllerManager))
        .args(["--metrics-bind-address", &metrics])
        .arg("--allocate-node-cidrs")
        .args(flags);
    let log = api.dir.path().join("controller-manager.log");
    (ChildGuard::spawn_logged(&mut cmd, &log), metrics)
}

/// A sample of the controller manager's /metrics, once it answers.
fn metric(addr: &str, name: &str) -> Option<f64> {
    let url = format!("http://{addr}/metrics");
    let text = run(Command::new("curl").args(["-sf", "-m", "2", &url])).ok()?;
    Some(metric_sum(&text, name))
}

fn log(api: &Apiserver) -> String {
    std::fs::read_to_string(api.dir.path().join("controller-manager.log")).unwrap_or_default()
}

fn create_node(api: &Apiserver, name: &str, spec: &str) {
    let yaml = format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\nspec: {spec}\n");
    api.apply(&yaml);
}

/// spec.podCIDR and spec.podCIDRs of a Node, once it has a podCIDR.
fn pod_cidr(api: &Apiserver, name: &str) -> Result<String, String> {
    let out = api.kubectl_cmd().run(&[
        "get",
        "node",
        name,
        "-o",
        "jsonpath={.spec.podCIDR} {.spec.podCIDRs}",
    ])?;
    match out.split_once(' ') {
        Some((cidr, list)) if !cidr.is_empty() => {
            assert_eq!(list, format!("[\"{cidr}\"]"), "podCIDRs of {name}");
            Ok(cidr.to_string())
        }
        _ => Err(format!("{name} has no podCIDR yet ({out:?})\n{}", log(api))),
    }
}

fn wait_pod_cidr(api: &Apiserver, name: &str) -> String {
    keelson_testing::eventually("a pod CIDR", Duration::from_secs(30), || {
        pod_cidr(api, name)
    })
}

/// The reasons of the Events about a Node.
fn event_reasons(api: &Apiserver, node: &str) -> String {
    let path = format!(
        "jsonpath={{range .items[?(@.involvedObject.name==\"{node}\")]}}{{.type}}/{{.reason}}: {{.message}}{{\"\\n\"}}{{end}}"
    );
    api.kubectl_ok(&["get", "events", "-A", "-o", &path])
}

fn wait_event(api: &Apiserver, node: &str, want: &str) -> String {
    keelson_testing::eventually(want, Duration::from_secs(30), || {
        let events = event_reasons(api, node);
        events
            .lines()
            .find(|l| l.starts_with(want))
            .map(String::from)
            .ok_or_else(|| format!("events of {node}: {events:?}\n{}", log(api)))
    })
}

fn in_cluster_cidr(cidr: &str) -> bool {
    let Some(third) = cidr
        .strip_prefix("10.244.")
        .and_then(|r| r.strip_suffix(".0/24"))
    else {
        return false;
    };
    third.parse::<u8>().is_ok()
}

#[test]
fn nodes_get_distinct_cidrs_that_survive_a_restart() {
    let api = Apiserver::start();
    let (mut cm, metrics) = controller_manager(&api, &[]);
    for n in ["n1", "n2", "n3"] {
        create_node(&api, n, "{}");
    }
    // A Node that brought its own CIDR from outside the range keeps it, with a warning.
    create_node(
        &api,
        "outside",
        "{podCIDR: 192.168.7.0/24, podCIDRs: [192.168.7.0/24]}",
    );
    let mut cidrs: Vec<String> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| wait_pod_cidr(&api, n))
        .collect();
    for c in &cidrs {
        assert!(in_cluster_cidr(c), "{c} is a /24 of 10.244.0.0/16");
    }
    let mut distinct = cidrs.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "distinct: {cidrs:?}");
    let warning = wait_event(&api, "outside", "Warning/PodCIDROutOfRange");
    assert!(warning.contains("192.168.7.0/24"), "{warning}");
    assert_eq!(pod_cidr(&api, "outside").unwrap(), "192.168.7.0/24");
    keelson_testing::eventually("metrics of 3 blocks", Duration::from_secs(10), || {
        let got = (
            metric(&metrics, "keelson_nodeipam_cidrs_in_use "),
            metric(&metrics, "keelson_nodeipam_cidr_allocations_total "),
        );
        (got == (Some(3.0), Some(3.0)))
            .then_some(())
            .ok_or(format!("in use, allocations: {got:?}"))
    });

    // A new controller manager knows what the Nodes hold before it hands out anything.
    cm.terminate(Duration::from_secs(5));
    drop(cm);
    let _cm = controller_manager(&api, &[]);
    create_node(&api, "n4", "{}");
    let n4 = wait_pod_cidr(&api, "n4");
    assert!(in_cluster_cidr(&n4), "{n4}");
    assert!(!cidrs.contains(&n4), "n4 got {n4}, already used: {cidrs:?}");
    cidrs.push(n4);
    std::thread::sleep(Duration::from_secs(1));
    for (n, c) in ["n1", "n2", "n3", "n4"].iter().zip(&cidrs) {
        assert_eq!(&pod_cidr(&api, n).unwrap(), c, "{n} keeps its CIDR");
    }
}

#[test]
fn a_full_range_says_so_and_a_deleted_nodes_cidr_is_reused() {
    let api = Apiserver::start();
    // Two /24 blocks only.
    let _cm = controller_manager(&api, &["--cluster-cidr", "10.244.0.0/23"]);
    create_node(&api, "a", "{}");
    create_node(&api, "b", "{}");
    let a = wait_pod_cidr(&api, "a");
    let b = wait_pod_cidr(&api, "b");
    assert_ne!(a, b);
    create_node(&api, "c", "{}");
    let full = wait_event(&api, "c", "Warning/CIDRNotAvailable");
    assert!(full.contains("10.244.0.0/23"), "{full}");
    assert!(
        pod_cidr(&api, "c").is_err(),
        "c has no CIDR while the range is full"
    );
    let described = api.kubectl_ok(&["describe", "node", "c"]);
    assert!(described.contains("CIDRNotAvailable"), "{described}");

    api.kubectl_ok(&["delete", "node", "a"]);
    let c = wait_pod_cidr(&api, "c");
    assert_eq!(c, a, "c gets the block a held");
    assert_eq!(pod_cidr(&api, "b").unwrap(), b);
}

#[test]
fn a_node_mask_shorter_than_the_cluster_prefix_is_refused_at_start() {
    let api = Apiserver::start();
    let out = Command::new(binary("keelson-controller-manager"))
        .arg("--kubeconfig")
        .arg(api.kubeconfig_of(Component::ControllerManager))
        .args(["--allocate-node-cidrs", "--node-cidr-mask-size", "12"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "--node-cidr-mask-size 12 must be between the --cluster-cidr prefix length 16 and 32"
        ),
        "{stderr}"
    );
}
