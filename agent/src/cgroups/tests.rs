use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::limits::{self, files, Version};
use super::*;

fn container(name: &str, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
    let map = |kv: &[(&str, &str)]| {
        (!kv.is_empty()).then(|| {
            kv.iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect::<BTreeMap<_, _>>()
        })
    };
    Container {
        name: name.into(),
        resources: Some(ResourceRequirements {
            requests: map(requests),
            limits: map(limits),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pod(uid: &str, init: Vec<Container>, containers: Vec<Container>) -> Pod {
    Pod {
        metadata: kube::api::ObjectMeta {
            uid: Some(uid.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            init_containers: (!init.is_empty()).then_some(init),
            containers,
            ..Default::default()
        }),
        status: None,
    }
}

#[test]
fn shares_quota_and_weight_as_the_kubelet_converts_them() {
    assert_eq!(limits::shares(0), 2);
    assert_eq!(limits::shares(100), 102);
    assert_eq!(limits::shares(2000), 2048);
    assert_eq!(limits::shares(1_000_000), 262_144);
    assert_eq!(limits::quota(100), 10_000);
    assert_eq!(limits::quota(5), 1_000, "the kernel's least quota");
    assert_eq!(limits::weight(2), 1);
    assert_eq!(limits::weight(1024), 39);
    assert_eq!(limits::weight(262_144), 10_000);
}

#[test]
fn a_pods_limits_follow_its_qos_class() {
    let guaranteed = pod(
        "g",
        vec![],
        vec![container("a", &[], &[("cpu", "500m"), ("memory", "64Mi")])],
    );
    assert_eq!(
        limits::pod(&guaranteed),
        Limits {
            cpu_shares: Some(512),
            cpu_quota_us: Some(50_000),
            memory_bytes: Some(64 << 20),
            pids: None
        }
    );
    // One container without a memory limit: the pod is not bounded in memory.
    let burstable = pod(
        "b",
        vec![],
        vec![
            container(
                "a",
                &[("cpu", "100m")],
                &[("cpu", "200m"), ("memory", "32Mi")],
            ),
            container("b", &[("cpu", "100m")], &[("cpu", "300m")]),
        ],
    );
    assert_eq!(
        limits::pod(&burstable),
        Limits {
            cpu_shares: Some(204),
            cpu_quota_us: Some(50_000),
            memory_bytes: None,
            pids: None
        }
    );
    let best_effort = pod("e", vec![], vec![container("a", &[], &[])]);
    assert_eq!(limits::pod(&best_effort), limits::best_effort());
}

#[test]
fn init_containers_and_sidecars_count_as_upstream_sums_them() {
    let mut sidecar = container("proxy", &[("cpu", "100m")], &[]);
    sidecar.restart_policy = Some("Always".into());
    // The init container after the sidecar needs 900m + 100m at its peak: more than the
    // regular container (200m) with the sidecar (100m).
    let p = pod(
        "s",
        vec![sidecar, container("setup", &[("cpu", "900m")], &[])],
        vec![container("app", &[("cpu", "200m")], &[])],
    );
    assert_eq!(limits::pod(&p).cpu_shares, Some(limits::shares(1000)));
    let pods = [&p, &pod("e", vec![], vec![container("a", &[], &[])])];
    assert_eq!(
        limits::burstable(pods).cpu_shares,
        Some(1024),
        "BestEffort pods add nothing"
    );
}

#[test]
fn files_for_each_hierarchy() {
    let l = Limits {
        cpu_shares: Some(1024),
        cpu_quota_us: Some(20_000),
        memory_bytes: Some(1 << 30),
        pids: Some(100),
    };
    assert_eq!(
        files(Version::V1, &l),
        [
            ("cpu", "cpu.shares", "1024".to_string()),
            ("cpu", "cpu.cfs_period_us", "100000".into()),
            ("cpu", "cpu.cfs_quota_us", "20000".into()),
            ("memory", "memory.limit_in_bytes", "1073741824".into()),
            ("pids", "pids.max", "100".into()),
        ]
    );
    assert_eq!(
        files(Version::V2, &l),
        [
            ("cpu", "cpu.weight", "39".to_string()),
            ("cpu", "cpu.max", "20000 100000".into()),
            ("memory", "memory.max", "1073741824".into()),
            ("pids", "pids.max", "100".into()),
        ]
    );
}

fn read(path: std::path::PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn on_cgroup_v1_each_controller_has_its_own_tree() {
    let base = tempfile::tempdir().unwrap();
    for c in ["cpu", "memory", "pids"] {
        std::fs::create_dir(base.path().join(c)).unwrap();
    }
    let node = limits::node(2000, Some(4 << 30), None);
    let cg = QosCgroups::new(base.path(), "/keelson/node-a", node);
    cg.ensure_node().unwrap();
    let root = |c: &str| base.path().join(c).join("keelson/node-a");
    assert_eq!(read(root("cpu").join("cpu.shares")), "2048");
    assert_eq!(
        read(root("memory").join("memory.limit_in_bytes")),
        "4294967296"
    );
    assert_eq!(read(root("cpu").join("besteffort/cpu.shares")), "2");
    let g = pod(
        "u1",
        vec![],
        vec![container("a", &[], &[("cpu", "1"), ("memory", "1Gi")])],
    );
    cg.ensure_pod(&g, [&g]).unwrap();
    assert_eq!(read(root("cpu").join("podu1/cpu.cfs_quota_us")), "100000");
    assert_eq!(
        read(root("memory").join("podu1/memory.limit_in_bytes")),
        "1073741824"
    );
    assert_eq!(cg.pod_path("memory", &g), root("memory").join("podu1"));
}

#[test]
fn on_cgroup_v2_the_controllers_are_delegated_down_the_tree() {
    let base = tempfile::tempdir().unwrap();
    std::fs::write(
        base.path().join("cgroup.controllers"),
        "cpuset cpu io memory pids",
    )
    .unwrap();
    let cg = QosCgroups::new(base.path(), "keelson", limits::node(1000, None, Some(5000)));
    let b = pod("u2", vec![], vec![container("a", &[("cpu", "250m")], &[])]);
    cg.ensure_pod(&b, [&b]).unwrap();
    let root = base.path().join("keelson");
    assert_eq!(read(root.join("burstable/podu2/cpu.weight")), "10");
    assert_eq!(read(root.join("burstable/cpu.weight")), "10");
    // Each write of subtree_control enables one more controller: the last one stays here.
    assert_eq!(read(base.path().join("cgroup.subtree_control")), "+pids");
}

#[test]
fn the_sweep_removes_the_cgroups_of_pods_that_are_gone_and_keeps_the_others() {
    let base = tempfile::tempdir().unwrap();
    for c in ["cpu", "memory"] {
        for p in [
            "n/podkept",
            "n/besteffort/podgone/ctr",
            "n/burstable/podgone2",
        ] {
            std::fs::create_dir_all(base.path().join(c).join(p)).unwrap();
        }
    }
    let cg = QosCgroups::new(base.path(), "n", Limits::default());
    let keep = BTreeSet::from(["kept".to_string()]);
    cg.sweep(&keep, &[]);
    for c in ["cpu", "memory"] {
        let n = base.path().join(c).join("n");
        assert!(n.join("podkept").is_dir());
        assert!(!n.join("besteffort/podgone").exists());
        assert!(!n.join("burstable/podgone2").exists());
    }
    cg.remove_pod("kept").unwrap();
    assert!(!base.path().join("cpu/n/podkept").exists());
}
