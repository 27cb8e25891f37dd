//! A gRPC health server for test images: grpc.health.v1 (tonic-health's), SERVING while a file
//! exists, NOT_SERVING otherwise. See README.md for the flags.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use tonic_health::ServingStatus;

struct Options {
    port: u16,
    file: PathBuf,
    services: Vec<String>,
}

fn options() -> Result<Options, String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut port = env("GRPC_HEALTH_PORT").unwrap_or_else(|| "9090".into());
    let mut file = env("GRPC_HEALTH_FILE").unwrap_or_else(|| "/tmp/healthy".into());
    let mut services = vec![String::new()];
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--port" => port = value()?,
            "--file" => file = value()?,
            "--service" => services.push(value()?),
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: grpc-health [--port N] [--file PATH] [--service NAME]..."
                ))
            }
        }
    }
    let port = port
        .parse()
        .map_err(|_| format!("--port {port}: not a port number"))?;
    Ok(Options {
        port,
        file: PathBuf::from(file),
        services,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let opts = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("grpc-health: {e}");
            return ExitCode::from(2);
        }
    };
    if !opts.file.exists() {
        if let Err(e) = std::fs::write(&opts.file, b"") {
            eprintln!("grpc-health: creating {}: {e}", opts.file.display());
            return ExitCode::FAILURE;
        }
    }
    let (reporter, service) = tonic_health::server::health_reporter();
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            eprintln!("grpc-health: cannot handle signals");
            return ExitCode::FAILURE;
        }
    };
    let file = opts.file.clone();
    let services = opts.services.clone();
    tokio::spawn(async move {
        let mut last = None;
        loop {
            let healthy = file.exists();
            if last != Some(healthy) {
                let (status, name) = if healthy {
                    (ServingStatus::Serving, "SERVING")
                } else {
                    (ServingStatus::NotServing, "NOT_SERVING")
                };
                for name in &services {
                    reporter.set_service_status(name, status).await;
                }
                println!(
                    "grpc-health: {name} ({} {})",
                    file.display(),
                    if healthy { "exists" } else { "is missing" }
                );
                last = Some(healthy);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, opts.port));
    println!("grpc-health: listening on port {}", opts.port);
    let stop = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    match tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_shutdown(addr, stop)
        .await
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("grpc-health: serving on {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}
