//! Start-up: data directory, store, bootstrap objects, admin token, PKI and kubeconfig, then
//! serving (`serve.rs`) until SIGTERM or Ctrl-C.

use crate::allocators::Allocators;
use crate::auth::serviceaccount::{KeyConfig, KeyError, TokenKeys};
use crate::auth::{TokenFileError, Tokens, User};
use crate::certs::{self, CertError};
use crate::http::kubelet_client::{KubeletClient, KubeletClientError};
use crate::http::{router, App};
use crate::options::{FlagError, Options};
use crate::resources;
use crate::rest::{self, Api};
use crate::serve::{self, tls_acceptor, TlsError};
use crate::store::datadir::{self, DataDirError};
use crate::store::{SqliteBackend, Store, StoreError, DB_FILE};
use ipnetwork::Ipv4Network;
use rand::Rng;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    #[error(transparent)]
    Flag(#[from] FlagError),
    #[error("opening the store: {0}")]
    Store(#[from] StoreError),
    #[error(transparent)]
    TokenFile(#[from] TokenFileError),
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error(transparent)]
    ServiceAccountKey(#[from] KeyError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    KubeletClient(#[from] KubeletClientError),
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

pub async fn run(opts: Options) -> Result<(), ServerError> {
    let dir = &opts.data_dir;
    let _lock = datadir::lock(dir)?;
    let net = opts.cluster_ip_range()?;
    let api = open_api(&opts, net).await?;
    // Before serving: Services stored before allocation records existed get theirs.
    crate::allocators::repair::run(&api.store).await;
    tokio::spawn(crate::allocators::repair::every_interval(api.store.clone()));
    crate::rest::custom::keep_up(api.store.clone());
    bootstrap(&api).await;
    crate::policy::reconcile(&api).await;
    let token = admin_token(dir)?;
    let tokens = tokens(&opts, &token)?;
    let mut service_accounts = TokenKeys::load(KeyConfig {
        data_dir: dir,
        signing_key_file: opts.service_account_signing_key_file.as_deref(),
        key_files: &opts.service_account_key_file,
        issuer: opts.service_account_issuer.clone(),
        api_audiences: opts.api_audiences.clone(),
    })?;
    service_accounts.min_expiration_seconds = opts.testing_min_token_expiration_seconds;
    // Bound before the kubeconfig is written, so `--secure-port 0` works: the kubeconfig names
    // the port the kernel chose.
    let addr = SocketAddr::new(opts.bind_address, opts.secure_port);
    let listen_error = |source| ServerError::Listen { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(listen_error)?;
    let port = listener.local_addr().map_err(listen_error)?.port();
    let host = advertised_host(&opts);
    let scheme = if opts.insecure_serve_http {
        "http"
    } else {
        "https"
    };
    let server = format!("{scheme}://{host}:{port}");
    let (tls, ca_pem) =
        kubeconfig_and_tls(&opts, &server, serving_sans(&opts, &host, net), &token)?;
    crate::cluster_info::publish(&api, &server, ca_pem.as_deref()).await;
    let at = crate::kubernetes_service::Endpoint {
        cluster_ip: first_service_ip(net),
        address: host.parse().unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()),
        port,
    };
    let id = crate::kubernetes_service::identity::Identity::load(dir)?;
    crate::kubernetes_service::start(&api, &at, &id).await;
    let kubeconfig = dir.join("admin.kubeconfig");
    datadir::restrict_files(dir)?;
    tracing::info!(%server, kubeconfig = %kubeconfig.display(), "serving");
    let authz = crate::auth::authorize::Authorizer::new(&opts.authorization_mode, &api.store);
    let metrics = crate::metrics::Metrics::default();
    if ca_pem.is_some() {
        certificates_in_use(&metrics, &opts);
    }
    let rotation = crate::audit::Rotation {
        max_bytes: opts.audit_log_maxsize.saturating_mul(1024 * 1024),
        max_backups: opts.audit_log_maxbackup,
    };
    let audit = crate::audit::Audit::start(
        opts.audit_log_path.as_deref(),
        rotation,
        metrics.audit_events.clone(),
        metrics.audit_errors.clone(),
    )?;
    let app = Arc::new(App {
        api,
        tokens,
        service_accounts,
        metrics,
        audit,
        kubelet: kubelet_client(&opts)?,
        authz,
    });
    tokio::spawn(housekeeping(app.clone(), opts.event_ttl));
    if !opts.snapshot_interval.is_zero() {
        let schedule = crate::snapshot::Schedule {
            data_dir: opts.data_dir.clone(),
            dir: (opts.snapshot_dir.clone()).unwrap_or_else(|| opts.data_dir.join("snapshots")),
            interval: opts.snapshot_interval,
            retention: opts.snapshot_retention,
        };
        let etcd = opts.etcd().map(|_| app.api.store.clone());
        let metrics = app.metrics.snapshots.clone();
        tokio::spawn(crate::snapshot::schedule(schedule, etcd, metrics));
    }
    let endpoints = crate::kubernetes_service::keep(app.clone(), at.clone(), id.clone());
    tokio::spawn(endpoints);
    serve::serve(
        listener,
        tls,
        router(app.clone()),
        keelson_daemon::shutdown_signal(),
    )
    .await;
    // Out of the kubernetes endpoints at once; not for long if the storage is away.
    let leave = crate::kubernetes_service::leave(&app.api, &at, &id);
    let _ = tokio::time::timeout(Duration::from_secs(3), leave).await;
    tracing::info!("shutting down");
    Ok(())
}

/// The store, loaded, with the Service allocators over the flags' ranges.
async fn open_api(opts: &Options, net: Ipv4Network) -> Result<Api, ServerError> {
    let ports = opts.node_port_range()?;
    let history = Duration::from_secs(opts.watch_history_seconds);
    let store = match opts.etcd() {
        Some(cfg) => {
            tracing::info!(servers = %cfg.servers.join(","), prefix = %cfg.prefix, "storing objects in etcd");
            crate::store::Store::open_etcd(&cfg, history, opts.watch_cache_size, servable).await?
        }
        None => {
            let backend = SqliteBackend::open(&opts.data_dir.join(DB_FILE))?;
            Store::open(backend, history, opts.watch_cache_size, servable)?
        }
    };
    Ok(Api {
        store,
        alloc: Allocators::new(net, ports),
        admission: rest::admission::Admission {
            not_ready_seconds: opts.default_not_ready_toleration_seconds,
            unreachable_seconds: opts.default_unreachable_toleration_seconds,
        },
    })
}

/// Whether a stored object can be served: a kind is served at its key, and the object is one
/// of that kind (a typed client must be able to decode it).
fn servable(key: &str, obj: &serde_json::Value) -> Result<(), String> {
    let res = resources::RESOURCES
        .iter()
        .find(|r| key.starts_with(&r.key_prefix()));
    let Some(res) = res else {
        // Custom objects (their definitions are loaded after the store): any object with a
        // name under /<group.with.dots>/<plural>/, as their schema checked it when written.
        let group = key.trim_start_matches('/').split('/').next().unwrap_or("");
        if group.contains('.') {
            return match crate::object::name(obj).is_empty() {
                true => Err("not a custom object: no metadata.name".into()),
                false => Ok(()),
            };
        }
        // The ClusterIP and NodePort allocation records are the only other keys stored.
        return crate::allocators::check_record(key, obj);
    };
    if !obj.is_object() || crate::object::name(obj).is_empty() {
        return Err(format!("not a {}: no metadata.name", res.kind));
    }
    (res.decode)(obj).map_err(|c| format!("not a valid {}: {}: {}", res.kind, c.field, c.message))
}

/// For the server's lifetime, a few times per Event TTL (at most every minute): deletes expired
/// Events (unless the TTL is 0) and lets go of foreground-deleted owners left without dependents.
async fn housekeeping(app: Arc<App>, event_ttl: Duration) {
    let every = match event_ttl.is_zero() {
        true => Duration::from_secs(60),
        false => (event_ttl / 4).clamp(Duration::from_millis(250), Duration::from_secs(60)),
    };
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        if !event_ttl.is_zero() {
            let n = rest::expire_events(&app.api, event_ttl).await;
            if n > 0 {
                tracing::debug!(events = n, "expired Events deleted");
            }
        }
        let n = rest::release_foreground_owners(&app.api).await;
        if n > 0 {
            tracing::debug!(
                owners = n,
                "foreground-deleted owners without dependents removed"
            );
        }
    }
}

/// Namespaces every cluster has.
async fn bootstrap(api: &Api) {
    let Some(ns) = resources::lookup("", "v1", "namespaces") else {
        return;
    };
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        if api.store.get(&ns.key("", name)).is_none() {
            let obj = serde_json::json!({ "metadata": { "name": name } });
            if let Err(e) = rest::create(api, ns, "", obj, false).await {
                tracing::warn!(namespace = name, error = %e.message, "bootstrap failed");
            }
        }
    }
    system_priority_classes(api).await;
}

/// The two PriorityClasses every cluster has, as upstream's scheduling post-start hook.
async fn system_priority_classes(api: &Api) {
    let Some(pc) = resources::lookup("scheduling.k8s.io", "v1", "priorityclasses") else {
        return;
    };
    for (name, value) in keelson_apiserver_registry::SYSTEM_PRIORITY_CLASSES {
        if api.store.get(&pc.key("", name)).is_some() {
            continue;
        }
        let description = if *name == "system-node-critical" {
            "Used for system critical pods that must not be moved from their current node."
        } else {
            "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."
        };
        let obj = serde_json::json!({
            "metadata": { "name": name }, "value": value, "description": description,
        });
        // Another API server sharing the store may have made it a moment ago.
        match rest::create(api, pc, "", obj, false).await {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => tracing::warn!(name, error = %e.message, "bootstrap failed"),
        }
    }
}

/// The admin token: kept in the data directory, made on the first start.
fn admin_token(dir: &Path) -> Result<String, CertError> {
    let path = dir.join("admin.token");
    if let Ok(t) = std::fs::read_to_string(&path) {
        if !t.trim().is_empty() {
            return Ok(t.trim().to_string());
        }
    }
    let t: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(40)
        .map(char::from)
        .collect();
    certs::write_private(&path, &t)?;
    Ok(t)
}

/// The --token-auth-file tokens, and the admin token as a member of system:masters.
fn tokens(opts: &Options, admin: &str) -> Result<Tokens, TokenFileError> {
    let mut tokens = match &opts.token_auth_file {
        Some(p) => Tokens::load(p)?,
        None => Tokens::default(),
    };
    let user = User {
        name: "keelson-admin".into(),
        uid: "0".into(),
        groups: vec!["system:masters".into()],
    };
    tokens.insert(admin, user);
    Ok(tokens)
}

/// How pods/log reaches agents: the flags' certificate, else the data directory's (HTTPS
/// only: the plain-HTTP server has no CA).
fn kubelet_client(opts: &Options) -> Result<KubeletClient, KubeletClientError> {
    let data_dir = (!opts.insecure_serve_http).then_some(opts.data_dir.as_path());
    KubeletClient::load(
        opts.kubelet_client_certificate.as_deref(),
        opts.kubelet_client_key.as_deref(),
        data_dir,
    )
}

/// The address clients use: --advertise-address, else the bind address (loopback for any).
fn advertised_host(opts: &Options) -> String {
    match opts.advertise_address {
        Some(a) => a.to_string(),
        None if opts.bind_address.is_unspecified() => "127.0.0.1".into(),
        None => opts.bind_address.to_string(),
    }
}

/// The first address of the service range: the in-cluster "kubernetes" Service's.
fn first_service_ip(net: Ipv4Network) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(u32::from(net.network()).saturating_add(1))
}

/// Names the serving certificate holds: local names, the in-cluster Service names, the
/// advertised and bound addresses, the "kubernetes" ClusterIP and --tls-sans.
fn serving_sans(opts: &Options, host: &str, net: Ipv4Network) -> Vec<String> {
    let mut sans: Vec<String> = [
        "127.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        host,
    ]
    .map(String::from)
    .to_vec();
    if !opts.bind_address.is_unspecified() {
        sans.push(opts.bind_address.to_string());
    }
    sans.push(first_service_ip(net).to_string());
    sans.extend(opts.tls_sans.iter().cloned());
    sans.dedup();
    sans
}

/// The certificates read at start (a renewal on disk takes effect on restart), for /metrics.
fn certificates_in_use(metrics: &crate::metrics::Metrics, opts: &Options) {
    let kubelet_client = opts
        .kubelet_client_certificate
        .clone()
        .unwrap_or_else(|| opts.data_dir.join("apiserver-kubelet-client.crt"));
    for (name, path) in [
        ("serving", opts.data_dir.join("apiserver.crt")),
        ("ca", opts.data_dir.join("ca.crt")),
        ("kubelet-client", kubelet_client),
    ] {
        if let Ok(pem) = std::fs::read(&path) {
            metrics.certificate_in_use(name, &pem);
        }
    }
}

/// Writes admin.kubeconfig for `server`; for HTTPS, first makes sure of the PKI and returns
/// the TLS acceptor of the serving certificate and the CA.
fn kubeconfig_and_tls(
    opts: &Options,
    server: &str,
    sans: Vec<String>,
    token: &str,
) -> Result<(Option<TlsAcceptor>, Option<String>), ServerError> {
    let path = opts.data_dir.join("admin.kubeconfig");
    if opts.insecure_serve_http {
        certs::write_private(&path, &certs::kubeconfig(server, None, token))?;
        return Ok((None, None));
    }
    let pki = certs::ensure(&opts.data_dir, &sans)?;
    certs::write_private(&path, &certs::kubeconfig(server, Some(&pki.ca_pem), token))?;
    let client_ca = match &opts.client_ca_file {
        Some(file) => std::fs::read_to_string(file).map_err(|source| CertError::Io {
            path: file.clone(),
            source,
        })?,
        None => pki.ca_pem.clone(),
    };
    Ok((Some(tls_acceptor(&pki, &client_ca)?), Some(pki.ca_pem)))
}
