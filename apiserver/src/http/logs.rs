//! pods/log: proxied to the kubelet API of the Pod's node (GET /containerLogs/{ns}/{pod}/{c}),
//! streamed through, over a connection made with the API server's kubelet client certificate
//! (`kubelet_client`).

use super::json_response;
use super::kubelet_client::KubeletClient;
use crate::resources;
use crate::rest::{Api, Target};
use crate::status::{ApiError, ApiResult};
use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::Value;

/// Query parameters the kubelet understands, passed through as given.
const PASSED: [&str; 6] = [
    "follow",
    "tailLines",
    "timestamps",
    "previous",
    "sinceSeconds",
    "limitBytes",
];

pub async fn pod_logs(
    api: &Api,
    kubelet: &KubeletClient,
    t: &Target,
    query: &str,
) -> ApiResult<Response> {
    let pod = api.get_entry(t)?;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    let container = container(&pod.obj, &t.name, &pairs)?;
    let node = node_of(&pod.obj, &t.name)?;
    let (addr, port) = kubelet_endpoint(api, node, &t.name)?;
    let q: Vec<(String, String)> = pairs
        .into_iter()
        .filter(|(k, _)| PASSED.contains(&k.as_str()))
        .collect();
    let q = serde_urlencoded::to_string(&q).unwrap_or_default();
    let path = format!("/containerLogs/{}/{}/{container}?{q}", t.namespace, t.name);
    fetch(kubelet, &addr, port, &path).await.map_err(|e| {
        ApiError::new(502, "BadGateway", format!("Get \"https://{addr}:{port}{path}\": {e} (is keelson-agent running on node {node}?)"))
    })
}

/// The node the Pod is bound to.
pub(super) fn node_of<'a>(pod: &'a Value, pod_name: &str) -> ApiResult<&'a str> {
    pod.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!("pod {pod_name} does not have a host assigned"))
        })
}

/// The container asked for, or the Pod's only one.
pub(super) fn container(
    pod: &Value,
    pod_name: &str,
    pairs: &[(String, String)],
) -> ApiResult<String> {
    if let Some((_, c)) = pairs.iter().find(|(k, _)| k == "container") {
        return Ok(c.clone());
    }
    let containers: Vec<&str> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c.get("name")?.as_str()).collect())
        .unwrap_or_default();
    match containers.as_slice() {
        [only] => Ok(only.to_string()),
        _ => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {pod_name}, choose one of: [{}]",
            containers.join(" ")
        ))),
    }
}

/// The node's InternalIP and the port its agent serves the kubelet API on.
pub(super) fn kubelet_endpoint(api: &Api, node: &str, pod_name: &str) -> ApiResult<(String, u16)> {
    let nodes = resources::lookup("", "v1", "nodes")
        .ok_or_else(|| ApiError::internal("nodes are not served"))?;
    let node_obj = api.store.get(&nodes.key("", node)).ok_or_else(|| {
        ApiError::bad_request(format!(
            "node {node} of pod {pod_name} is not registered; no agent serves its logs"
        ))
    })?;
    let addr = node_obj
        .obj
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|x| x.get("type").is_some_and(|t| t == "InternalIP"))
        })
        .and_then(|x| x.get("address")?.as_str())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "node {node} has no InternalIP address to reach its agent"
            ))
        })?;
    // A port outside u16 (a Node is written by its agent, or by anyone allowed to) is not
    // truncated into some other port: the default is used instead.
    let port = node_obj
        .obj
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(10250);
    Ok((addr.to_string(), port))
}

async fn fetch(
    kubelet: &KubeletClient,
    addr: &str,
    port: u16,
    path: &str,
) -> Result<Response, String> {
    let tls = kubelet.connect(addr, port).await?;
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
