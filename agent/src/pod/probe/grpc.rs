//! gRPC probes as the kubelet runs them: one grpc.health.v1 Health/Check call to the pod's
//! address over plaintext HTTP/2 (a new connection each time), with the probe's `service` ("" by
//! default), within its timeout. SERVING passes; any other status, an error or the timeout fails,
//! worded as the kubelet words it (the event reads "Readiness probe failed: <that>").
//!
//! One difference: a refused connection fails at once ("error: failed to connect service at
//! ..."), where the kubelet's blocking dial retries until its deadline and then reports the
//! timeout.

use std::time::Duration;

use tokio::time::Instant;
use tonic::transport::Endpoint;
use tonic::{Code, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// Why a gRPC probe failed; the text is the kubelet's.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum GrpcFailure {
    #[error(
        "timeout: failed to connect service {addr:?} within {}: context deadline exceeded",
        go_duration(*.timeout)
    )]
    ConnectTimeout { addr: String, timeout: Duration },
    #[error("error: failed to connect service at {addr:?}: {message}")]
    Connect { addr: String, message: String },
    #[error(
        "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {0}"
    )]
    Unimplemented(String),
    #[error("timeout: health rpc did not complete within {}", go_duration(*.0))]
    RpcTimeout(Duration),
    #[error("error: health rpc probe failed: rpc error: code = {code:?} desc = {message}")]
    Rpc { code: Code, message: String },
    #[error("service unhealthy (responded with {0:?})")]
    Unhealthy(String),
}

/// `host:port`, with brackets around an IPv6 address (Go's net.JoinHostPort).
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A whole number of seconds as Go prints a time.Duration: 1s, 59s, 1m0s, 1h1m1s.
pub fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

/// The failure for an RPC that ended with `status` rather than an answer.
pub fn rpc_failure(status: &Status, timeout: Duration) -> GrpcFailure {
    match status.code() {
        Code::Unimplemented => GrpcFailure::Unimplemented(status.message().to_string()),
        Code::DeadlineExceeded => GrpcFailure::RpcTimeout(timeout),
        code => GrpcFailure::Rpc {
            code,
            message: status.message().to_string(),
        },
    }
}

/// Success for SERVING; otherwise the status's protobuf name (or its number when it has none).
pub fn answer(status: i32) -> Result<(), GrpcFailure> {
    match ServingStatus::try_from(status) {
        Ok(ServingStatus::Serving) => Ok(()),
        Ok(other) => Err(GrpcFailure::Unhealthy(other.as_str_name().to_string())),
        Err(_) => Err(GrpcFailure::Unhealthy(status.to_string())),
    }
}

/// An error and its causes, as one line ("transport error: tcp connect error: ...").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}

/// One Health/Check of `service` at `host:port`, connection and call within `timeout`.
pub async fn check(
    host: &str,
    port: u16,
    service: &str,
    timeout: Duration,
) -> Result<(), GrpcFailure> {
    let addr = join_host_port(host, port);
    let deadline = Instant::now() + timeout;
    let failed = |e: &dyn std::error::Error| GrpcFailure::Connect {
        addr: addr.clone(),
        message: chain(e),
    };
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| failed(&e))?
        .user_agent("keelson-probe/1.0")
        .map_err(|e| failed(&e))?;
    let channel = match tokio::time::timeout_at(deadline, endpoint.connect()).await {
        Err(_) => return Err(GrpcFailure::ConnectTimeout { addr, timeout }),
        Ok(Err(e)) => return Err(failed(&e)),
        Ok(Ok(channel)) => channel,
    };
    let mut request = tonic::Request::new(HealthCheckRequest {
        service: service.to_string(),
    });
    // The server learns the deadline too (grpc-timeout), as from the kubelet's context.
    request.set_timeout(deadline.saturating_duration_since(Instant::now()));
    let mut client = HealthClient::new(channel);
    match tokio::time::timeout_at(deadline, client.check(request)).await {
        Err(_) => Err(GrpcFailure::RpcTimeout(timeout)),
        // The channel's own grpc-timeout timer ends the call with Cancelled at the deadline.
        Ok(Err(_)) if Instant::now() >= deadline => Err(GrpcFailure::RpcTimeout(timeout)),
        Ok(Err(status)) => Err(rpc_failure(&status, timeout)),
        Ok(Ok(response)) => answer(response.into_inner().status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_the_kubelets() {
        let second = Duration::from_secs(1);
        assert_eq!(
            answer(ServingStatus::NotServing as i32)
                .unwrap_err()
                .to_string(),
            r#"service unhealthy (responded with "NOT_SERVING")"#
        );
        assert_eq!(
            answer(ServingStatus::ServiceUnknown as i32)
                .unwrap_err()
                .to_string(),
            r#"service unhealthy (responded with "SERVICE_UNKNOWN")"#
        );
        assert_eq!(
            answer(7).unwrap_err().to_string(),
            r#"service unhealthy (responded with "7")"#
        );
        assert_eq!(answer(ServingStatus::Serving as i32), Ok(()));
        assert_eq!(
            GrpcFailure::ConnectTimeout {
                addr: "10.244.7.5:9090".into(),
                timeout: second
            }
            .to_string(),
            r#"timeout: failed to connect service "10.244.7.5:9090" within 1s: context deadline exceeded"#
        );
        assert_eq!(
            rpc_failure(&Status::unimplemented("unknown service x"), second).to_string(),
            "error: this server does not implement the grpc health protocol \
             (grpc.health.v1.Health): unknown service x"
        );
        assert_eq!(
            rpc_failure(&Status::deadline_exceeded("late"), Duration::from_secs(90)).to_string(),
            "timeout: health rpc did not complete within 1m30s"
        );
        assert_eq!(
            rpc_failure(&Status::not_found("unknown service"), second).to_string(),
            "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service"
        );
    }

    #[test]
    fn durations_and_addresses_print_as_go_does() {
        for (secs, text) in [(1, "1s"), (59, "59s"), (60, "1m0s"), (3661, "1h1m1s")] {
            assert_eq!(go_duration(Duration::from_secs(secs)), text);
        }
        assert_eq!(join_host_port("10.0.0.1", 80), "10.0.0.1:80");
        assert_eq!(join_host_port("fd00::1", 80), "[fd00::1]:80");
    }

    /// A real tonic-health server on loopback: SERVING, NOT_SERVING, an unknown service.
    #[tokio::test]
    async fn a_health_server_is_asked_over_http2() {
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter
            .set_service_status("down", tonic_health::ServingStatus::NotServing)
            .await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        let second = Duration::from_secs(1);
        assert_eq!(check("127.0.0.1", port, "", second).await, Ok(()));
        assert_eq!(
            check("127.0.0.1", port, "down", second).await,
            Err(GrpcFailure::Unhealthy("NOT_SERVING".into()))
        );
        let unknown = check("127.0.0.1", port, "nope", second).await.unwrap_err();
        assert!(
            matches!(
                unknown,
                GrpcFailure::Rpc {
                    code: Code::NotFound,
                    ..
                }
            ),
            "{unknown}"
        );
        server.abort();
    }

    /// Nothing listening: refused at once. A listener that never answers: the timeout.
    #[tokio::test]
    async fn refused_and_silent_servers_fail() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let refused = check("127.0.0.1", port, "", Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(
            refused.to_string().starts_with(&format!(
                "error: failed to connect service at \"127.0.0.1:{port}\": "
            )),
            "{refused}"
        );

        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = silent.local_addr().unwrap().port();
        let held = tokio::spawn(async move {
            let (conn, _) = silent.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
            drop(conn);
        });
        let started = std::time::Instant::now();
        let late = check("127.0.0.1", port, "", Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(late.to_string().starts_with("timeout: "), "{late}");
        assert!(started.elapsed() < Duration::from_secs(3));
        held.abort();
    }
}
