//! pods/log: proxied to the kubelet API of the Pod's node (GET /containerLogs/{ns}/{pod}/{c}),
//! streamed through. Like kube-apiserver without --kubelet-certificate-authority, the node's
//! serving certificate is not verified.

use super::json_response;
use crate::resources;
use crate::rest::{Api, Target};
use crate::status::{ApiError, ApiResult};
use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use http_body_util::BodyExt;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::sync::Arc;

/// Query parameters the kubelet understands, passed through as given.
const PASSED: [&str; 6] = [
    "follow",
    "tailLines",
    "timestamps",
    "previous",
    "sinceSeconds",
    "limitBytes",
];

pub async fn pod_logs(api: &Api, t: &Target, query: &str) -> ApiResult<Response> {
    let pod = api.get_entry(t)?;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    let containers: Vec<String> = pod.obj["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let container = match pairs
        .iter()
        .find(|(k, _)| k == "container")
        .map(|(_, v)| v.clone())
    {
        Some(c) => c,
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {}, choose one of: [{}]",
                t.name,
                containers.join(" ")
            )))
        }
    };
    let node = pod.obj["spec"]["nodeName"].as_str().unwrap_or("");
    if node.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {} does not have a host assigned",
            t.name
        )));
    }
    let nodes = resources::lookup("", "v1", "nodes").expect("nodes served");
    let node_obj = api.store.get(&nodes.key("", node)).ok_or_else(|| {
        ApiError::bad_request(format!(
            "node {node} of pod {} is not registered; no agent serves its logs",
            t.name
        ))
    })?;
    let addr = node_obj.obj["status"]["addresses"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["type"] == "InternalIP"))
        .and_then(|x| x["address"].as_str())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "node {node} has no InternalIP address to reach its agent"
            ))
        })?
        .to_string();
    let port = node_obj.obj["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .unwrap_or(10250);
    let q: Vec<(String, String)> = pairs
        .into_iter()
        .filter(|(k, _)| PASSED.contains(&k.as_str()))
        .collect();
    let q = serde_urlencoded::to_string(&q).unwrap_or_default();
    let path = format!("/containerLogs/{}/{}/{container}?{q}", t.namespace, t.name);
    fetch(&addr, port as u16, &path).await.map_err(|e| {
        ApiError::new(502, "BadGateway", format!("Get \"https://{addr}:{port}{path}\": {e} (is keelson-agent running on node {node}?)"))
    })
}

async fn fetch(addr: &str, port: u16, path: &str) -> Result<Response, String> {
    let tcp = tokio::net::TcpStream::connect((addr, port))
        .await
        .map_err(|e| e.to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerify))
        .with_no_client_auth();
    let name = ServerName::try_from(addr.to_string()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = http::Request::get(path)
        .header(http::header::HOST, addr)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Ok(json_response(
            StatusCode::from_u16(status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY),
            serde_json::to_vec(
                &ApiError::new(
                    status.as_u16(),
                    "BadRequest",
                    String::from_utf8_lossy(&body).to_string(),
                )
                .to_status(),
            )
            .unwrap_or_default(),
        ));
    }
    let body = Body::new(resp.into_body().map_err(axum::Error::new));
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "text/plain")
        .body(body)
        .map_err(|e| e.to_string())
}

#[derive(Debug)]
struct NoVerify;

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
