//! `scripts/bench cni`: ADD then DEL of N attachments, keelson-cni beside the reference
//! bridge + host-local plugins in the same run (interleaved, so machine noise hits both).
//! Prints a table and one JSON line per figure. Not a test.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

struct Variant {
    label: &'static str,
    bin: std::path::PathBuf,
    host: TestHost,
    ctrs: Vec<TestHost>,
    conf: Value,
    _data: tempfile::TempDir,
    results: Vec<Value>,
    add: Vec<Duration>,
    del: Vec<Duration>,
}

fn variant(
    label: &'static str,
    bin: &Path,
    plugin: &str,
    ipam: &str,
    n: usize,
    extra: Value,
) -> Variant {
    let data = tempfile::tempdir().expect("tempdir");
    let conf = bridge_conf(
        plugin,
        ipam,
        "kcbench",
        "kcbench0",
        "10.120.0.0/16",
        data.path(),
        extra,
    );
    // The reference plugins speak up to 1.0.0.
    let conf = with(&conf, "cniVersion", json!("1.0.0"));
    Variant {
        label,
        bin: bin.to_path_buf(),
        host: TestHost::create("bh"),
        ctrs: (0..n).map(|i| TestHost::create(&format!("b{i}"))).collect(),
        conf,
        _data: data,
        results: Vec::new(),
        add: Vec::new(),
        del: Vec::new(),
    }
}

fn stats(d: &[Duration]) -> (f64, f64, f64) {
    let mut ms: Vec<f64> = d.iter().map(|x| x.as_secs_f64() * 1000.0).collect();
    ms.sort_by(|a, b| a.total_cmp(b));
    let mean = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
    let pct = |p: f64| ms[((ms.len() as f64 - 1.0) * p).round() as usize];
    (mean, pct(0.5), pct(0.9))
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--bench"))
        .collect();
    let n: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(200);
    let masq = args.iter().any(|a| a == "--masq");
    require_root_and_tools(&["ip", "nsenter"]);
    assert!(
        Path::new("/usr/lib/cni/bridge").is_file(),
        "reference plugins missing: apt-get install containernetworking-plugins"
    );
    eprintln!(
        "cni bench: N={n} ipMasq={masq}; creating {} test namespaces",
        3 * (n + 1)
    );
    let mut variants = variants(n, json!({"ipMasq": masq}));
    warm_up(&mut variants);
    time_adds(&mut variants, n);
    time_dels(&mut variants, n);
    let floor = spawn_floor(n);
    for v in &variants {
        wait_veths(&v.host, 0);
    }
    report(&variants, &floor, n, masq);
}

fn variants(n: usize, extra: Value) -> Vec<Variant> {
    vec![
        variant(
            "keelson-cni",
            &keelson_bin(),
            "keelson-cni",
            "keelson-ipam",
            n,
            extra.clone(),
        ),
        variant(
            "keelson-cni syncDelete",
            &keelson_bin(),
            "keelson-cni",
            "keelson-ipam",
            n,
            with(&extra, "syncDelete", json!(true)),
        ),
        variant(
            "reference bridge+host-local",
            Path::new("/usr/lib/cni/bridge"),
            "bridge",
            "host-local",
            n,
            extra,
        ),
    ]
}

/// Bridge creation and the page cache, outside the timed runs.
fn warm_up(variants: &mut [Variant]) {
    for v in variants {
        let warm = TestHost::create("bw");
        let c = v.conf.to_string();
        for cmd in ["ADD", "DEL"] {
            Call::new(&v.bin, &v.host, cmd, "warm")
                .netns(&warm)
                .run(&c)
                .expect_ok();
        }
    }
}

/// ADD of attachment i for every variant in turn, so machine noise hits all of them alike.
fn time_adds(variants: &mut [Variant], n: usize) {
    for i in 0..n {
        for v in variants.iter_mut() {
            let id = format!("bench-{i}");
            let r = Call::new(&v.bin, &v.host, "ADD", &id)
                .netns(&v.ctrs[i])
                .run(&v.conf.to_string())
                .expect_ok();
            v.add.push(r.elapsed);
            v.results.push(r.json());
        }
    }
}

fn time_dels(variants: &mut [Variant], n: usize) {
    for i in 0..n {
        for v in variants.iter_mut() {
            let id = format!("bench-{i}");
            let c = with(&v.conf, "prevResult", v.results[i].clone()).to_string();
            let r = Call::new(&v.bin, &v.host, "DEL", &id)
                .netns(&v.ctrs[i])
                .run(&c)
                .expect_ok();
            v.del.push(r.elapsed);
        }
    }
}

/// The floor: spawning a process that does nothing, the same way.
fn spawn_floor(n: usize) -> Vec<Duration> {
    let host = TestHost::create("bt");
    (0..n)
        .map(|_| {
            Call::new(Path::new("/bin/true"), &host, "ADD", "x")
                .run("")
                .elapsed
        })
        .collect()
}

/// A table, then one JSON line per figure; ratios are to the reference plugins (the last).
fn report(variants: &[Variant], floor: &[Duration], n: usize, masq: bool) {
    let reference = variants
        .last()
        .map(|v| (stats(&v.add).0, stats(&v.del).0))
        .unwrap_or((1.0, 1.0));
    println!(
        "{:<30} {:>9} {:>9} {:>9} {:>7}   {:>9} {:>9} {:>9} {:>7}",
        "plugin (ms per op)", "ADD mean", "p50", "p90", "ratio", "DEL mean", "p50", "p90", "ratio"
    );
    for v in variants {
        let (a, d) = (stats(&v.add), stats(&v.del));
        println!(
            "{:<30} {:>9.2} {:>9.2} {:>9.2} {:>7.2}   {:>9.2} {:>9.2} {:>9.2} {:>7.2}",
            v.label,
            a.0,
            a.1,
            a.2,
            a.0 / reference.0,
            d.0,
            d.1,
            d.2,
            d.0 / reference.1
        );
    }
    let f = stats(floor);
    println!(
        "{:<30} {:>9.2} {:>9.2} {:>9.2}",
        "process spawn floor", f.0, f.1, f.2
    );
    for v in variants {
        for (op, d, base) in [("add", &v.add, reference.0), ("del", &v.del, reference.1)] {
            let (mean, p50, p90) = stats(d);
            let line = json!({
                "bench": "cni", "figure": format!("{op}_ms"), "plugin": v.label, "n": n, "ip_masq": masq,
                "mean_ms": mean, "p50_ms": p50, "p90_ms": p90, "ratio_to_reference": mean / base, "target_ratio": 0.3
            });
            println!("{line}");
        }
    }
    println!(
        "{}",
        json!({"bench": "cni", "figure": "spawn_floor_ms", "n": n, "mean_ms": f.0, "p50_ms": f.1})
    );
}
