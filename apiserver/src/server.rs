//! Start-up: data directory, PKI and kubeconfig, store, bootstrap objects, and the listener
//! (HTTPS, or plain HTTP behind an explicit flag), until SIGTERM or Ctrl-C.

use crate::alloc::Allocators;
use crate::auth::{Tokens, User};
use crate::http::{router, App};
use crate::options::{port_range, Options};
use crate::rest::{self, Api};
use crate::store::{SqliteBackend, Store};
use crate::{certs, resources};
use anyhow::Context;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rand::Rng;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Serves one connection with the router (HTTP/1.1 and HTTP/2).
async fn serve_conn<I>(io: TokioIo<I>, app: axum::Router)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper_util::service::TowerToHyperService::new(app);
    if let Err(e) = auto::Builder::new(TokioExecutor::new())
        .serve_connection_with_upgrades(io, svc)
        .await
    {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

fn admin_token(dir: &std::path::Path) -> anyhow::Result<String> {
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

/// Namespaces every cluster has.
async fn bootstrap(api: &Api) {
    let ns = resources::lookup("", "v1", "namespaces").expect("namespaces served");
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        if api.store.get(&ns.key("", name)).is_none() {
            let obj = serde_json::json!({ "metadata": { "name": name } });
            if let Err(e) = rest::create(api, ns, "", obj, false).await {
                tracing::warn!(namespace = name, error = %e.message, "bootstrap failed");
            }
        }
    }
}

pub async fn run(opts: Options) -> anyhow::Result<()> {
    let dir = &opts.data_dir;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating --data-dir {}", dir.display()))?;
    let net: ipnetwork::Ipv4Network = opts.service_cluster_ip_range.parse().with_context(|| {
        format!(
            "--service-cluster-ip-range {:?}",
            opts.service_cluster_ip_range
        )
    })?;
    let ports = port_range(&opts.service_node_port_range).map_err(anyhow::Error::msg)?;
    let backend = SqliteBackend::open(&dir.join("store.db")).context("opening the store")?;
    let store = Store::open(
        backend,
        Duration::from_secs(opts.watch_history_seconds),
        opts.watch_cache_size,
    )
    .context("loading the store")?;
    let api = Api {
        store,
        alloc: Allocators::new(net, ports),
    };
    rest::rebuild_allocations(&api);
    bootstrap(&api).await;

    let mut tokens = match &opts.token_auth_file {
        Some(p) => Tokens::load(p)?,
        None => Tokens::default(),
    };
    let token = admin_token(dir)?;
    tokens.insert(
        &token,
        User {
            name: "keelson-admin".into(),
            uid: "0".into(),
            groups: vec!["system:masters".into()],
        },
    );

    let host = opts
        .advertise_address
        .map(|a| a.to_string())
        .unwrap_or_else(|| {
            if opts.bind_address.is_unspecified() {
                "127.0.0.1".into()
            } else {
                opts.bind_address.to_string()
            }
        });
    let scheme = if opts.insecure_serve_http {
        "http"
    } else {
        "https"
    };
    // Bound before the kubeconfig is written, so `--secure-port 0` works: the kubeconfig names the
    // port the kernel chose.
    let listener = TcpListener::bind((opts.bind_address, opts.secure_port))
        .await
        .with_context(|| format!("listening on {}:{}", opts.bind_address, opts.secure_port))?;
    let port = listener.local_addr()?.port();
    let server = format!("{scheme}://{host}:{port}");
    let tls = if opts.insecure_serve_http {
        certs::write_private(
            &dir.join("admin.kubeconfig"),
            &certs::kubeconfig(&server, None, &token),
        )?;
        None
    } else {
        let mut sans = vec![
            "127.0.0.1".to_string(),
            "localhost".into(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            host.clone(),
        ];
        if !opts.bind_address.is_unspecified() {
            sans.push(opts.bind_address.to_string());
        }
        // The first address of the service range is the in-cluster "kubernetes" Service.
        sans.push(std::net::Ipv4Addr::from(u32::from(net.network()) + 1).to_string());
        sans.extend(opts.tls_sans.iter().cloned());
        sans.dedup();
        let pki = certs::ensure(dir, &sans)?;
        certs::write_private(
            &dir.join("admin.kubeconfig"),
            &certs::kubeconfig(&server, Some(&pki.ca_pem), &token),
        )?;
        Some(tls_acceptor(&pki)?)
    };

    let app = Arc::new(App {
        api,
        tokens,
        metrics: Default::default(),
    });
    let router = router(app);
    tracing::info!(%server, kubeconfig = %dir.join("admin.kubeconfig").display(), "serving");
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let (tcp, _) = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => { tracing::warn!(error = %e, "accept failed"); continue; }
            },
        };
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                Some(acc) => match acc.accept(tcp).await {
                    Ok(s) => serve_conn(TokioIo::new(s), router).await,
                    Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
                },
                None => serve_conn(TokioIo::new(tcp), router).await,
            }
        });
    }
    tracing::info!("shutting down");
    Ok(())
}

fn tls_acceptor(pki: &certs::Pki) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    let certs: Vec<_> =
        rustls_pemfile::certs(&mut pki.cert_pem.as_bytes()).collect::<Result<_, _>>()?;
    let key = rustls_pemfile::private_key(&mut pki.key_pem.as_bytes())?
        .ok_or_else(|| anyhow::anyhow!("no private key in apiserver.key"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
