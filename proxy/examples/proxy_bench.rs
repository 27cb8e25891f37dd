//! Benchmark driver for scripts/bench.d/proxy.sh (not a test).
//!
//!   proxy_bench render  iptables|nftables N FILE   our full-sync text for N services x 4 endpoints
//!   proxy_bench kube-nft N FILE                    a kube-proxy-nftables-shaped rule set (chain per
//!                                                  service and per endpoint, vmap per service)
//!   proxy_bench k8s-objects N FILE                N Services + EndpointSlices as a List (JSON)
//!   proxy_bench sync iptables|iptables-legacy|nftables N
//!       runs the real backend in the current network namespace: full sync, then a change to one
//!       service; prints one JSON line per figure (run it under `ip netns exec`).

use keelson_testing::median;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keelson_proxy::app::{make_backend, IptablesVariant, ProxyMode};
use keelson_proxy::backend::{RuleBackend, SyncScope};
use keelson_proxy::exec::{CommandRunner, FakeRunner, Runner};
use keelson_proxy::iptables::{render::RenderOptions as IptOptions, IptablesBackend, Variant};
use keelson_proxy::metrics::Metrics;
use keelson_proxy::model::{Endpoint, Protocol, ProxyModel, ServicePort, ServicePortName};
use keelson_proxy::nftables::{render::RenderOptions as NftOptions, NftBackend};
use keelson_proxy::proxier::Proxier;

fn ip(base: Ipv4Addr, offset: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(base) + offset)
}

fn model(n: u32) -> ProxyModel {
    let mut services = BTreeMap::new();
    for i in 0..n {
        let name = ServicePortName {
            namespace: "bench".into(),
            name: format!("svc-{i}"),
            port_name: "http".into(),
            protocol: Protocol::Tcp,
        };
        let endpoints = (0..4)
            .map(|j| Endpoint {
                ip: ip(Ipv4Addr::new(10, 128, 0, 0), i * 4 + j + 1),
                port: 8080,
                ready: true,
                serving: true,
                terminating: false,
                local: false,
            })
            .collect();
        let cluster_ip = ip(Ipv4Addr::new(10, 96, 0, 0), i + 1);
        let port = ServicePort::plain(name.clone(), cluster_ip, 80, endpoints);
        services.insert(name, port);
    }
    ProxyModel {
        node_name: "bench".into(),
        node_ips: vec![Ipv4Addr::new(192, 168, 50, 10)],
        services,
    }
}

/// The same model with one endpoint of the first service replaced.
fn changed(mut m: ProxyModel) -> ProxyModel {
    if let Some(sp) = m.services.values_mut().next() {
        sp.endpoints[3].ip = Ipv4Addr::new(10, 127, 255, 1);
    }
    m
}

fn cidr() -> Option<keelson_proxy::cidr::Ipv4Cidr> {
    "10.128.0.0/9".parse().ok()
}

fn render(backend: &str, n: u32) -> String {
    let m = model(n);
    match backend {
        "iptables" => {
            let b = IptablesBackend::new(
                Box::new(FakeRunner::default()),
                Variant::Nft,
                IptOptions {
                    cluster_cidr: cidr(),
                },
            );
            b.full_sync_text(&m, "").0
        }
        _ => {
            let b = NftBackend::new(
                Box::new(FakeRunner::default()),
                NftOptions {
                    cluster_cidr: cidr(),
                },
            );
            b.full_sync_text(&m, &Default::default(), &[], false).0
        }
    }
}

/// kube-proxy's nftables layout, as the baseline of the same size.
fn kube_nft(n: u32) -> String {
    let m = model(n);
    let mut out = String::from("add table ip kube-proxy\nflush table ip kube-proxy\n");
    out.push_str("add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }\n");
    out.push_str(
        "add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }\n",
    );
    out.push_str("add chain ip kube-proxy services\n");
    out.push_str("add rule ip kube-proxy nat-prerouting jump services\n");
    out.push_str(
        "add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips\n",
    );
    for (k, sp) in &m.services {
        let svc = format!("service-{}-{}", k.name, k.port_name);
        let _ = writeln!(out, "add chain ip kube-proxy {svc}");
        let mut vmap = Vec::new();
        for (b, ep) in sp.endpoints.iter().enumerate() {
            let epc = format!("endpoint-{}-{}", k.name, ep.ip);
            let _ = writeln!(out, "add chain ip kube-proxy {epc}");
            let _ = writeln!(
                out,
                "add rule ip kube-proxy {epc} ip saddr {} mark set mark or 0x4000",
                ep.ip
            );
            let _ = writeln!(
                out,
                "add rule ip kube-proxy {epc} meta l4proto tcp dnat to {}:{}",
                ep.ip, ep.port
            );
            vmap.push(format!("{b} : goto {epc}"));
        }
        let _ = writeln!(
            out,
            "add rule ip kube-proxy {svc} ip daddr {} tcp dport {} ip saddr != 10.128.0.0/9 mark set mark or 0x4000",
            sp.cluster_ip, sp.port
        );
        let _ = writeln!(
            out,
            "add rule ip kube-proxy {svc} numgen random mod {} vmap {{ {} }}",
            vmap.len(),
            vmap.join(", ")
        );
        let _ = writeln!(
            out,
            "add element ip kube-proxy service-ips {{ {} . tcp . {} : goto {svc} }}",
            sp.cluster_ip, sp.port
        );
    }
    out
}

/// N Services and their EndpointSlices (4 ready endpoints each) as one `kubectl create -f` List.
fn k8s_objects(n: u32) -> String {
    let mut items = Vec::new();
    for i in 0..n {
        items.push(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("svc-{i}"), "namespace": "default"},
            "spec": {"selector": {"app": format!("a{i}")},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
        }));
        let eps: Vec<_> = (0..4)
            .map(|j| {
                serde_json::json!({
                    "addresses": [ip(Ipv4Addr::new(10, 128, 0, 0), i * 4 + j + 1).to_string()],
                    "conditions": {"ready": true}, "nodeName": "node"
                })
            })
            .collect();
        items.push(serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("svc-{i}-x"), "namespace": "default",
                         "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": eps
        }));
    }
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn figure(name: &str, backend: &str, n: u32, value: f64, unit: &str) {
    println!("{{\"bench\":\"proxy\",\"figure\":\"{name}\",\"backend\":\"{backend}\",\"services\":{n},\"value\":{value:.4},\"unit\":\"{unit}\"}}");
}

/// The real backend named on the command line, writing in this network namespace.
fn host_backend(backend: &str) -> Result<Box<dyn RuleBackend>, String> {
    let (mode, variant) = match backend {
        "iptables" => (ProxyMode::Iptables, IptablesVariant::Nft),
        "iptables-legacy" => (ProxyMode::Iptables, IptablesVariant::Legacy),
        _ => (ProxyMode::Nftables, IptablesVariant::Auto),
    };
    make_backend(mode, variant, cidr(), &None).map_err(|e| e.to_string())
}

fn sync(backend: &str, n: u32) -> Result<(), String> {
    let b = host_backend(backend)?;
    let mut p = Proxier::new(b, None, Arc::new(Metrics::new(Duration::from_secs(60))));
    let m = model(n);
    let start = Instant::now();
    let stats = p.sync(m.clone(), true).map_err(|e| e.to_string())?;
    figure("full_sync", backend, n, start.elapsed().as_secs_f64(), "s");
    figure(
        "full_sync_written",
        backend,
        n,
        stats.written as f64,
        "rules_or_elements",
    );
    // One service changes back and forth; the median of the runs is the figure.
    let c = changed(m.clone());
    let mut ours = Vec::new();
    let mut wall = Vec::new();
    let mut written = 0;
    for i in 0..ROUNDS {
        let next = if i % 2 == 0 { c.clone() } else { m.clone() };
        let start = Instant::now();
        let stats = p.sync(next, false).map_err(|e| e.to_string())?;
        wall.push(start.elapsed().as_secs_f64() * 1000.0);
        // Until the kernel had the rules (freeing the old model comes after).
        ours.push(stats.took.as_secs_f64() * 1000.0);
        written = stats.written;
    }
    figure("one_service_change", backend, n, median(ours), "ms");
    figure("one_service_change_wall", backend, n, median(wall), "ms");
    let start = Instant::now();
    let diff = m.changed_services(&c);
    figure(
        "model_diff",
        backend,
        n,
        start.elapsed().as_secs_f64() * 1000.0,
        "ms",
    );
    drop(diff);
    figure(
        "one_service_change_written",
        backend,
        n,
        written as f64,
        "rules_or_elements",
    );
    figure("max_rss", backend, n, rss_kib() as f64 / 1024.0, "MiB");

    raw_change_floor(backend, n, &m)
}

/// The floor: the same change texts loaded by the tool directly, the same number of times.
fn raw_change_floor(backend: &str, n: u32, m: &ProxyModel) -> Result<(), String> {
    let (program, args, there, back) = change_texts(backend, m)?;
    let runner = CommandRunner::host();
    let mut raw = Vec::new();
    for i in 0..ROUNDS {
        let text = if i % 2 == 0 { &there } else { &back };
        let start = Instant::now();
        let out = runner
            .run(program, &args, Some(text.as_bytes()))
            .map_err(|e| e.to_string())?;
        raw.push(start.elapsed().as_secs_f64() * 1000.0);
        if !out.success() {
            return Err(format!("raw load of the change failed: {}", out.stderr));
        }
    }
    figure("one_service_change_raw", backend, n, median(raw), "ms");
    Ok(())
}

const ROUNDS: usize = 10;

/// The texts partial syncs write for the change and back, captured with a fake runner.
#[allow(clippy::type_complexity)]
fn change_texts(
    backend: &str,
    m: &ProxyModel,
) -> Result<(&'static str, Vec<&'static str>, String, String), String> {
    let fake = FakeRunner::default();
    let (program, args): (&'static str, Vec<&'static str>) = match backend {
        "iptables" => ("iptables-nft-restore", vec!["-w", "5", "--noflush"]),
        "iptables-legacy" => ("iptables-legacy-restore", vec!["-w", "5", "--noflush"]),
        _ => ("nft", vec!["-f", "-"]),
    };
    let mut b: Box<dyn RuleBackend> = if backend.starts_with("iptables") {
        Box::new(IptablesBackend::new(
            Box::new(fake.clone()),
            Variant::Nft,
            IptOptions {
                cluster_cidr: cidr(),
            },
        ))
    } else {
        Box::new(NftBackend::new(
            Box::new(fake.clone()),
            NftOptions {
                cluster_cidr: cidr(),
            },
        ))
    };
    let c = changed(m.clone());
    b.sync(m, &SyncScope::Full).map_err(|e| e.to_string())?;
    let mut texts = Vec::new();
    for (from, to) in [(m, &c), (&c, m)] {
        fake.take_calls();
        b.sync(to, &SyncScope::Partial(from.changed_services(to)))
            .map_err(|e| e.to_string())?;
        let text = fake
            .take_calls()
            .into_iter()
            .map(|c| c.stdin)
            .find(|s| !s.is_empty())
            .ok_or("no change text")?;
        texts.push(text);
    }
    let back = texts.pop().unwrap_or_default();
    let there = texts.pop().unwrap_or_default();
    Ok((program, args, there, back))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let n: u32 = match arg(1).as_str() {
        "kube-nft" | "k8s-objects" => arg(2).parse().unwrap_or(1000),
        _ => arg(3).parse().unwrap_or(1000),
    };
    let result = match arg(1).as_str() {
        "render" => {
            let start = Instant::now();
            let text = render(&arg(2), n);
            eprintln!(
                "rendered {} lines in {:?}",
                text.lines().count(),
                start.elapsed()
            );
            std::fs::write(arg(4), text).map_err(|e| e.to_string())
        }
        "kube-nft" => std::fs::write(arg(3), kube_nft(n)).map_err(|e| e.to_string()),
        "k8s-objects" => std::fs::write(arg(3), k8s_objects(n)).map_err(|e| e.to_string()),
        "sync" => sync(&arg(2), n),
        _ => Err("usage: proxy_bench render|kube-nft|sync ...".to_string()),
    };
    if let Err(e) = result {
        eprintln!("proxy_bench: {e}");
        std::process::exit(1);
    }
}
