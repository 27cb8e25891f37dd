//! `/metrics/resource`: the summary as the kubelet's resource metrics, in the Prometheus text
//! format, each sample stamped with the time it was measured (ms), as metrics-server expects.
//! Families are in name order and labels in label-name order, as the kubelet's gatherer writes
//! them; a family with no sample is left out.

use std::fmt::Write;

use super::summary::{CpuStats, MemoryStats, Summary, Time};

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    samples: Vec<String>,
}

impl Family {
    fn new(name: &'static str, kind: &'static str, help: &'static str) -> Family {
        Family {
            name,
            kind,
            help,
            samples: Vec::new(),
        }
    }

    fn add(&mut self, labels: &[(&str, &str)], value: f64, at: Option<Time>) {
        let mut line = self.name.to_string();
        if !labels.is_empty() {
            let pairs: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            let _ = write!(line, "{{{}}}", pairs.join(","));
        }
        let _ = write!(line, " {value}");
        if let Some(t) = at {
            let _ = write!(line, " {}", t.millis());
        }
        self.samples.push(line);
    }
}

/// Label values escape backslash, double quote and newline.
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn add_cpu(f: &mut Family, labels: &[(&str, &str)], cpu: Option<&CpuStats>) {
    if let Some((cpu, ns)) = cpu.and_then(|c| Some((c, c.usage_core_nano_seconds?))) {
        f.add(labels, seconds(ns), Some(cpu.time));
    }
}

fn add_memory(f: &mut Family, labels: &[(&str, &str)], mem: Option<&MemoryStats>) {
    if let Some((mem, bytes)) = mem.and_then(|m| Some((m, m.working_set_bytes?))) {
        f.add(labels, bytes as f64, Some(mem.time));
    }
}

/// `runtime_failed`: the containers' usage could not be read (scrape_error 1).
pub fn render(summary: &Summary, runtime_failed: bool) -> String {
    let mut container_cpu = Family::new(
        "container_cpu_usage_seconds_total",
        "counter",
        "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
    );
    let mut container_mem = Family::new(
        "container_memory_working_set_bytes",
        "gauge",
        "[STABLE] Current working set of the container in bytes",
    );
    let mut container_start = Family::new(
        "container_start_time_seconds",
        "gauge",
        "[STABLE] Start time of the container since unix epoch in seconds",
    );
    let mut node_cpu = Family::new(
        "node_cpu_usage_seconds_total",
        "counter",
        "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
    );
    let mut node_mem = Family::new(
        "node_memory_working_set_bytes",
        "gauge",
        "[STABLE] Current working set of the node in bytes",
    );
    let mut pod_cpu = Family::new(
        "pod_cpu_usage_seconds_total",
        "counter",
        "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
    );
    let mut pod_mem = Family::new(
        "pod_memory_working_set_bytes",
        "gauge",
        "[STABLE] Current working set of the pod in bytes",
    );
    // Upstream renamed scrape_error in 1.29 and writes both; scrapers read either.
    let mut resource_scrape_error = Family::new(
        "resource_scrape_error",
        "gauge",
        "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
    );
    let mut scrape_error = Family::new(
        "scrape_error",
        "gauge",
        "[ALPHA] (Deprecated since 1.29.0) 1 if there was an error while getting container metrics, 0 otherwise",
    );

    add_cpu(&mut node_cpu, &[], summary.node.cpu.as_ref());
    add_memory(&mut node_mem, &[], summary.node.memory.as_ref());
    for pod in &summary.pods {
        let (ns, name) = (pod.pod_ref.namespace.as_str(), pod.pod_ref.name.as_str());
        let pod_labels = [("namespace", ns), ("pod", name)];
        add_cpu(&mut pod_cpu, &pod_labels, pod.cpu.as_ref());
        add_memory(&mut pod_mem, &pod_labels, pod.memory.as_ref());
        for c in &pod.containers {
            let labels = [
                ("container", c.name.as_str()),
                ("namespace", ns),
                ("pod", name),
            ];
            add_cpu(&mut container_cpu, &labels, Some(&c.cpu));
            add_memory(&mut container_mem, &labels, Some(&c.memory));
            let start = c.start_time.0 as f64 / 1e9;
            container_start.add(&labels, start, Some(c.start_time));
        }
    }
    let failed = if runtime_failed { 1.0 } else { 0.0 };
    resource_scrape_error.add(&[], failed, None);
    scrape_error.add(&[], failed, None);

    let mut out = String::new();
    for f in [
        container_cpu,
        container_mem,
        container_start,
        node_cpu,
        node_mem,
        pod_cpu,
        pod_mem,
        resource_scrape_error,
        scrape_error,
    ] {
        if f.samples.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        let mut samples = f.samples;
        samples.sort();
        for s in samples {
            out.push_str(&s);
            out.push('\n');
        }
    }
    out
}
