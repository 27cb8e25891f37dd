//! Which Ingresses are ours, and what they mean for nginx: servers, locations, upstreams.
//! Pure: cluster objects in, a sorted `Model` out, so the rendered text is deterministic.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{HTTPIngressPath, Ingress, IngressClass};

use crate::endpoints::Resolver;
pub use crate::endpoints::Target;
pub use crate::inputs::{key, Inputs};
use crate::retry;
use crate::tls::{self, Cert};

pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// The class annotation that predates spec.ingressClassName; still set by old manifests.
pub const LEGACY_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
pub use keelson_apimachinery::well_known::SERVICE_NAME_LABEL;
/// ingress-nginx's name for the request body limit; rendered as `client_max_body_size`.
pub const BODY_SIZE_ANNOTATION: &str = "nginx.ingress.kubernetes.io/proxy-body-size";
/// ingress-nginx's switch for the HTTP-to-HTTPS redirect of TLS hosts (on unless "false").
pub const SSL_REDIRECT_ANNOTATION: &str = "nginx.ingress.kubernetes.io/ssl-redirect";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Match {
    Exact,
    /// Kubernetes Prefix: element-wise on `/`; the path is kept without a trailing slash.
    Prefix,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub kind: Match,
    pub path: String,
    pub target: Target,
    /// `namespace/name` of the Ingress the rule came from (a comment in the config).
    pub ingress: String,
    pub body_size: Option<String>,
    /// Retry and connect settings from the Ingress's annotations: (nginx directive, value).
    pub proxy: Vec<(&'static str, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    /// None: the default server (rules without host, and every unknown Host).
    pub host: Option<String>,
    pub locations: Vec<Location>,
    /// Requests matching no location.
    pub fallback: Target,
    /// File name (under the conf dir's certs/) of the certificate for HTTPS, if any.
    pub tls: Option<String>,
    /// Plain HTTP requests get a 308 to HTTPS (TLS hosts, unless an Ingress of the host opts out).
    pub ssl_redirect: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    pub name: String,
    pub endpoints: Vec<SocketAddr>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    /// The default server first, then hosts in order.
    pub servers: Vec<Server>,
    pub upstreams: Vec<Upstream>,
    /// Certificate files the servers refer to, sorted by file name.
    pub certs: Vec<Cert>,
    /// `(namespace, name)` of every Ingress handled, sorted.
    pub handled: Vec<(String, String)>,
    /// What was left out and why, for the log (sorted; logged when it changes, not every sync).
    pub problems: Vec<String>,
    /// Ingresses left out whole: a value nginx must not be given. Not in `handled`.
    pub rejected: Vec<Rejection>,
}

/// An Ingress left out of the configuration, and why (for its Event, the log and the metric).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub ingress: (String, String),
    /// The Event reason: `BadConfig` (a value check) or `RejectedByNginx` (`nginx -t`).
    pub reason: &'static str,
    pub message: String,
}

pub const REASON_BAD_CONFIG: &str = "BadConfig";
pub const REASON_REJECTED_BY_NGINX: &str = "RejectedByNginx";

/// True when `ing` belongs to the controller named `controller` (an IngressClass spec.controller).
pub fn is_handled(ing: &Ingress, classes: &[Arc<IngressClass>], controller: &str) -> bool {
    let ours = |c: &IngressClass| {
        c.spec.as_ref().and_then(|s| s.controller.as_deref()) == Some(controller)
    };
    let named = ing
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.clone())
        .or_else(|| {
            let a = ing.metadata.annotations.as_ref()?;
            a.get(LEGACY_CLASS_ANNOTATION).cloned()
        });
    match named {
        Some(name) => classes
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(name.as_str()) && ours(c)),
        None => classes.iter().any(|c| {
            let default = c
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION));
            ours(c) && default.map(String::as_str) == Some("true")
        }),
    }
}

/// Builds the model from all watched objects.
pub fn build(inputs: &Inputs, controller: &str) -> Model {
    build_only(inputs, controller, |_| true)
}

/// The model of the handled Ingresses for which `keep(&(namespace, name))` holds: the others
/// are left out as if they did not exist (the controller tests Ingresses on their own this way).
pub fn build_only(
    inputs: &Inputs,
    controller: &str,
    keep: impl Fn(&(String, String)) -> bool,
) -> Model {
    let mut ingresses: Vec<&Ingress> = inputs
        .ingresses
        .iter()
        .map(|i| i.as_ref())
        .filter(|i| is_handled(i, &inputs.classes, controller) && keep(&key(i)))
        .collect();
    // Older rules win conflicts in ingress-nginx; here the order is by namespace/name, which is
    // stable across restarts and needs no timestamps.
    ingresses.sort_by_key(|i| key(i));
    let mut rejected = Vec::new();
    ingresses.retain(|ing| match check_values(ing) {
        Ok(()) => true,
        Err(message) => {
            rejected.push(Rejection {
                ingress: key(ing),
                reason: REASON_BAD_CONFIG,
                message,
            });
            false
        }
    });
    let resolver = Resolver::new(inputs);
    let mut builder = ModelBuilder::default();
    builder.servers.entry(None).or_default();
    for ing in &ingresses {
        builder.add_ingress(ing, &resolver);
    }
    let mut problems = builder.problems;
    let (host_certs, certs) = tls::certs(&ingresses, &inputs.secrets, &mut problems);
    problems.sort();
    problems.dedup();
    Model {
        servers: builder
            .servers
            .into_iter()
            .map(|(host, b)| {
                let tls = host.as_ref().and_then(|h| host_certs.get(h)).cloned();
                b.finish(host, tls)
            })
            .collect(),
        certs,
        upstreams: builder
            .upstreams
            .into_iter()
            .map(|(name, endpoints)| Upstream { name, endpoints })
            .collect(),
        handled: ingresses.iter().map(|i| key(i)).collect(),
        problems,
        rejected,
    }
}

#[derive(Default)]
struct ModelBuilder {
    servers: BTreeMap<Option<String>, ServerBuilder>,
    upstreams: BTreeMap<String, Vec<SocketAddr>>,
    problems: Vec<String>,
}

impl ModelBuilder {
    fn add_ingress(&mut self, ing: &Ingress, resolver: &Resolver<'_>) {
        let (ns, name) = key(ing);
        let Some(spec) = &ing.spec else { return };
        let source = format!("{ns}/{name}");
        let body_size = annotation(ing, BODY_SIZE_ANNOTATION).map(str::to_string);
        let no_ssl_redirect = annotation(ing, SSL_REDIRECT_ANNOTATION) == Some("false");
        // check_values already refused an Ingress with a bad value.
        let proxy = retry::directives(ing).unwrap_or_default();
        let default = spec
            .default_backend
            .as_ref()
            .map(|b| resolver.target(&ns, b, &mut self.upstreams));
        for rule in spec.rules.iter().flatten() {
            let host = rule.host.clone().filter(|h| !h.is_empty());
            if let Some(h) = host.as_deref().filter(|h| !safe_host(h)) {
                self.problems.push(format!(
                    "{source}: host {h:?} has characters nginx cannot take; rule skipped"
                ));
                continue;
            }
            let server = self.servers.entry(host).or_default();
            server.no_ssl_redirect |= no_ssl_redirect;
            if server.fallback.is_none() {
                server.fallback = default.clone();
            }
            for p in rule.http.iter().flat_map(|h| &h.paths) {
                let Some((kind, path)) = path(p, &source, &mut self.problems) else {
                    continue;
                };
                let target = resolver.target(&ns, &p.backend, &mut self.upstreams);
                server.add(Location {
                    kind,
                    path,
                    target,
                    ingress: source.clone(),
                    body_size: body_size.clone(),
                    proxy: proxy.clone(),
                });
            }
        }
        let default_server = self.servers.entry(None).or_default();
        if default_server.fallback.is_none() {
            default_server.fallback = default;
        }
    }
}

fn annotation<'i>(ing: &'i Ingress, name: &str) -> Option<&'i str> {
    ing.metadata
        .annotations
        .as_ref()?
        .get(name)
        .map(String::as_str)
}

/// Annotation values checked as ingress-nginx's annotation validation does, before anything is
/// rendered: an Ingress with a bad value is left out whole (serving it without the setting
/// could drop a limit its owner relies on). nginx -t still judges what passes (e.g. overflow).
fn check_values(ing: &Ingress) -> Result<(), String> {
    if let Some(v) = annotation(ing, BODY_SIZE_ANNOTATION) {
        if !is_nginx_size(v) {
            return Err(format!(
                "{BODY_SIZE_ANNOTATION} {v:?} is not a size like 8m (digits, then k, m or g)"
            ));
        }
    }
    retry::directives(ing).map(drop)
}

/// nginx's size syntax: digits and an optional k, m or g (either case).
fn is_nginx_size(v: &str) -> bool {
    let digits = v.strip_suffix(['k', 'K', 'm', 'M', 'g', 'G']).unwrap_or(v);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// DNS names, with `*.` only as the first label, as the Ingress API allows.
fn safe_host(h: &str) -> bool {
    let name = h.strip_prefix("*.").unwrap_or(h);
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
}

/// Characters a path may have to be written into nginx.conf unquoted and unambiguous.
fn safe_path(p: &str) -> bool {
    p.starts_with('/')
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._~-!*()@:+,=%&".contains(c))
}

/// The match kind and the path as nginx gets it; None (and a problem) for a path it cannot take.
fn path(p: &HTTPIngressPath, source: &str, problems: &mut Vec<String>) -> Option<(Match, String)> {
    let raw = p.path.clone().unwrap_or_else(|| "/".into());
    if !safe_path(&raw) {
        problems.push(format!(
            "{source}: path {raw:?} has characters nginx cannot take; skipped"
        ));
        return None;
    }
    Some(match p.path_type.as_str() {
        "Exact" => (Match::Exact, raw),
        // ImplementationSpecific is Prefix here, as the API leaves it to the controller.
        _ => {
            let trimmed = raw.trim_end_matches('/');
            let path = if trimmed.is_empty() { "/" } else { trimmed };
            (Match::Prefix, path.to_string())
        }
    })
}

#[derive(Default)]
struct ServerBuilder {
    locations: BTreeMap<(Match, String), Location>,
    fallback: Option<Target>,
    no_ssl_redirect: bool,
}

impl ServerBuilder {
    /// The first rule for a (kind, path) wins; later duplicates are dropped.
    fn add(&mut self, loc: Location) {
        self.locations
            .entry((loc.kind, loc.path.clone()))
            .or_insert(loc);
    }

    fn finish(self, host: Option<String>, tls: Option<String>) -> Server {
        Server {
            host,
            ssl_redirect: tls.is_some() && !self.no_ssl_redirect,
            tls,
            locations: self.locations.into_values().collect(),
            fallback: self.fallback.unwrap_or(Target::NotFound),
        }
    }
}
