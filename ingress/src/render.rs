//! Model -> nginx.conf text. Pure; the same model always gives the same bytes, so the controller
//! reloads nginx only when something that matters changed.

use std::fmt::Write;
use std::net::IpAddr;
use std::path::PathBuf;

use crate::model::{Location, Match, Model, Server, Target, Upstream};
use crate::retry;

/// Where nginx listens and keeps its files.
#[derive(Clone, Debug)]
pub struct RenderOptions {
    pub bind_address: IpAddr,
    pub http_port: u16,
    pub https_port: u16,
    /// nginx's prefix: pid, logs and temp files all live under it.
    pub conf_dir: PathBuf,
}

pub fn render(model: &Model, opts: &RenderOptions) -> String {
    let dir = opts.conf_dir.display();
    let mut out = String::new();
    out.push_str("# Written by keelson-ingress; edits are overwritten.\n");
    out.push_str("worker_processes auto;\n");
    let _ = writeln!(out, "pid {dir}/nginx.pid;");
    let _ = writeln!(out, "error_log {dir}/logs/error.log notice;");
    out.push_str("events {\n    worker_connections 1024;\n}\n\nhttp {\n");
    let _ = writeln!(out, "    access_log {dir}/logs/access.log;");
    for (directive, sub) in [
        ("client_body_temp_path", "body"),
        ("proxy_temp_path", "proxy"),
        ("fastcgi_temp_path", "fastcgi"),
        ("uwsgi_temp_path", "uwsgi"),
        ("scgi_temp_path", "scgi"),
    ] {
        let _ = writeln!(out, "    {directive} {dir}/tmp/{sub};");
    }
    out.push_str(HTTP_COMMON);
    out.push_str(retry::DEFAULTS);
    for u in &model.upstreams {
        upstream(&mut out, u);
    }
    let any_tls = model.servers.iter().any(|s| s.tls.is_some());
    for s in &model.servers {
        server(&mut out, s, opts, any_tls);
    }
    out.push_str("}\n");
    out
}

/// Settings for every proxied request: the headers backends expect behind ingress-nginx.
const HTTP_COMMON: &str = "    server_tokens off;
    server_names_hash_bucket_size 128;
    proxy_http_version 1.1;
    proxy_set_header Connection \"\";
    proxy_set_header Host $host;
    proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_set_header X-Forwarded-Host $host;
";

fn listen_address(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V6(ip) => format!("[{ip}]:{port}"),
        IpAddr::V4(ip) => format!("{ip}:{port}"),
    }
}

fn upstream(out: &mut String, u: &Upstream) {
    let _ = writeln!(out, "\n    upstream {} {{", u.name);
    for e in &u.endpoints {
        let _ = writeln!(out, "        server {e};");
    }
    out.push_str("        keepalive 16;\n    }\n");
}

/// `any_tls`: some host has HTTPS, so the default server takes the HTTPS port too and refuses
/// handshakes for unknown names; otherwise the first TLS host would answer for every name.
fn server(out: &mut String, s: &Server, opts: &RenderOptions, any_tls: bool) {
    let listen = listen_address(opts.bind_address, opts.http_port);
    let ssl = listen_address(opts.bind_address, opts.https_port);
    match &s.host {
        None => {
            let _ = writeln!(
                out,
                "\n    server {{\n        listen {listen} default_server;"
            );
            if any_tls {
                let _ = writeln!(out, "        listen {ssl} ssl default_server;");
                out.push_str("        ssl_reject_handshake on;\n");
            }
            out.push_str("        server_name _;\n");
        }
        Some(h) => {
            let _ = writeln!(out, "\n    server {{\n        listen {listen};");
            let _ = writeln!(out, "        server_name {};", server_name(h));
        }
    }
    if let Some(file) = &s.tls {
        let cert = opts.conf_dir.join("certs").join(file);
        let _ = writeln!(out, "        listen {ssl} ssl;");
        let _ = writeln!(out, "        ssl_certificate {};", cert.display());
        let _ = writeln!(out, "        ssl_certificate_key {};", cert.display());
    }
    if s.ssl_redirect {
        let port = match opts.https_port {
            443 => String::new(),
            p => format!(":{p}"),
        };
        out.push_str("        if ($scheme = http) {\n");
        let _ = writeln!(
            out,
            "            return 308 https://$host{port}$request_uri;"
        );
        out.push_str("        }\n");
    }
    let mut has_root = false;
    for loc in &s.locations {
        has_root |= loc.kind == Match::Prefix && loc.path == "/";
        location(out, loc, s.locations.iter());
    }
    if !has_root {
        out.push_str("        location / {\n");
        target(out, &s.fallback);
        out.push_str("        }\n");
    }
    out.push_str("    }\n");
}

/// A Kubernetes wildcard (`*.example.com`) covers exactly one label; nginx's `*.` would take
/// any number, so it becomes a regex.
fn server_name(host: &str) -> String {
    match host.strip_prefix("*.") {
        Some(rest) => format!("~^[^.]+\\.{}$", rest.replace('.', "\\.")),
        None => host.to_string(),
    }
}

/// Prefix `/foo` becomes `= /foo` plus `/foo/`, so `/foobar` does not match (Kubernetes matches
/// whole path elements). nginx picks `=` first, then the longest prefix: Exact beats Prefix, and
/// the longest Prefix wins, as the Ingress API asks.
fn location<'a>(out: &mut String, loc: &Location, mut all: impl Iterator<Item = &'a Location>) {
    let _ = writeln!(out, "        # {}", loc.ingress);
    let patterns: Vec<String> = match loc.kind {
        Match::Exact => vec![format!("= {}", loc.path)],
        Match::Prefix if loc.path == "/" => vec!["/".into()],
        Match::Prefix => {
            let exact_taken = all.any(|o| o.kind == Match::Exact && o.path == loc.path);
            let mut v = Vec::new();
            if !exact_taken {
                v.push(format!("= {}", loc.path));
            }
            v.push(format!("{}/", loc.path));
            v
        }
    };
    for p in patterns {
        let _ = writeln!(out, "        location {p} {{");
        if let Some(size) = &loc.body_size {
            let _ = writeln!(out, "            client_max_body_size {size};");
        }
        for (directive, value) in &loc.proxy {
            let _ = writeln!(out, "            {directive} {value};");
        }
        target(out, &loc.target);
        out.push_str("        }\n");
    }
}

fn target(out: &mut String, t: &Target) {
    match t {
        Target::Upstream(name) => {
            let _ = writeln!(out, "            proxy_pass http://{name};");
        }
        Target::Unavailable => out.push_str("            return 503;\n"),
        Target::NotFound => out.push_str("            return 404;\n"),
    }
}
