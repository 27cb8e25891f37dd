//! keelson-scheduler's --config (a KubeSchedulerConfiguration) and its /metrics, against a real
//! keelson-apiserver: profiles by schedulerName with their own plugins and weights, a file it
//! cannot honour refused by field, and per-plugin durations.

mod common;

use common::{node, pod, Cluster};
use keelson_testing::{binary, eventually};
use std::time::Duration;

fn config_file(dir: &std::path::Path, text: &str) -> String {
    let path = dir.join("scheduler-config.yaml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn profiles_choose_plugins_and_weights_by_scheduler_name() {
    let dir = tempfile::tempdir().unwrap();
    // "packer" fills the busiest node (MostAllocated) and ignores the spot taint preference.
    let config = config_file(
        dir.path(),
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: packer
  plugins:
    score:
      disabled: [{name: '*'}]
      enabled: [{name: NodeResourcesFit, weight: 1}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
",
    );
    let nodes = node("busy", &[], "{}", "") + &node("idle", &[], "{}", "");
    let c = Cluster::start(&nodes, &["--config", &config]);
    c.api.apply(
        &pod(
            "load",
            "{}",
            "  nodeSelector: {kubernetes.io/hostname: busy}\n",
        )
        .replace("cpu: 10m", "cpu: '2'"),
    );
    assert_eq!(c.bound("load"), "busy");
    c.api.apply(&pod("spread", "{}", ""));
    assert_eq!(
        c.bound("spread"),
        "idle",
        "the default profile spreads by least allocated"
    );
    c.api
        .apply(&pod("packed", "{}", "  schedulerName: packer\n"));
    assert_eq!(c.bound("packed"), "busy", "the packer profile packs");
    // A Pod for a scheduler no profile names is left alone.
    c.api
        .apply(&pod("other", "{}", "  schedulerName: someone-else\n"));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(c.node_of("other"), "");
}

#[test]
fn a_configuration_it_cannot_honour_is_refused_by_field() {
    let dir = tempfile::tempdir().unwrap();
    for (body, want) in [
        (
            "profiles: [{plugins: {score: {enabled: [{name: NodeResourcesFitt}]}}}]",
            "profiles[0].plugins.score.enabled[0]: plugin \"NodeResourcesFitt\"",
        ),
        (
            "percentageOfNodesToScore: 150",
            "percentageOfNodesToScore: Invalid value: 150",
        ),
        (
            "profiles: [{plugins: {permit: {enabled: [{name: NodeName}]}}}]",
            "profiles[0].plugins.permit",
        ),
    ] {
        let config = config_file(
            dir.path(),
            &format!("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{body}\n"),
        );
        let out = std::process::Command::new(binary("keelson-scheduler"))
            .args(["--config", &config, "--kubeconfig", "/nonexistent"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{body}: accepted");
        assert!(err.contains(want), "{body}: {err}");
    }
}

#[test]
fn metrics_show_attempts_extension_points_and_plugin_durations() {
    let c = Cluster::start(&(node("a", &[], "{}", "") + &node("b", &[], "{}", "")), &[]);
    // Upstream samples one cycle in ten for the per-plugin durations.
    let pods: String = (0..12)
        .map(|i| pod(&format!("p{i}"), "{}", "") + "---\n")
        .collect();
    c.api.apply(&pods);
    for i in 0..12 {
        c.bound(&format!("p{i}"));
    }
    let scheduled =
        "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"}";
    eventually(
        "the scheduler's metrics",
        Duration::from_secs(10),
        || match c.scheduler.metric(scheduled) {
            Some(n) if n >= 12.0 => Ok(()),
            other => Err(format!("{scheduled} = {other:?}")),
        },
    );
    for series in [
        "scheduler_plugin_execution_duration_seconds_count{plugin=\"InterPodAffinity\",extension_point=\"Filter\",status=\"Success\"}",
        "scheduler_plugin_execution_duration_seconds_count{plugin=\"NodeResourcesFit\",extension_point=\"Score\",status=\"Success\"}",
        "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Filter\",status=\"Success\",profile=\"default-scheduler\"}",
        "scheduler_scheduling_attempt_duration_seconds_count{result=\"scheduled\",profile=\"default-scheduler\"}",
    ] {
        let n = c.scheduler.metric(series).unwrap_or(0.0);
        assert!(n >= 1.0, "{series} = {n}");
    }
}
