//! pods/exec, pods/attach and pods/portforward: the client's upgrade request (WebSocket, or
//! SPDY/3.1 from older clients and kubectl's fallback) is passed on to the agent of the Pod's
//! node (its /exec, /attach and /portForward, over the kubelet client connection pods/log
//! uses), and once both sides switched protocols the bytes are copied both ways. The agent
//! speaks both protocols, so nothing is translated here.

use super::kubelet_client::KubeletClient;
use super::logs;
use super::Call;
use crate::rest::{Api, Target};
use crate::status::{ApiError, ApiResult};
use axum::body::Body;
use axum::response::Response;
use http::{header, HeaderName, StatusCode};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// The request headers that negotiate the upgrade, passed to the agent as they came.
const UPGRADE_HEADERS: [&str; 6] = [
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "x-stream-protocol-version",
];

/// The agent's path for `sub` of the Pod `t` (exec and attach name a container).
fn agent_path(pod: &Value, t: &Target, sub: &str, query: &str) -> ApiResult<String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    let (ns, name) = (&t.namespace, &t.name);
    let path = match sub {
        "exec" | "attach" => {
            let container = logs::container(pod, name, &pairs)?;
            // It becomes a path segment on the agent: only a container name (a DNS label).
            if let Some(why) = keelson_apimachinery::validation::dns1123_label(&container).first() {
                return Err(ApiError::bad_request(format!(
                    "invalid container name \"{container}\": {why}"
                )));
            }
            format!("/{sub}/{ns}/{name}/{container}")
        }
        _ => format!("/portForward/{ns}/{name}"),
    };
    Ok(if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    })
}

/// Connects the client to the agent serving the Pod's `sub` (exec, attach, portforward).
pub async fn connect(
    api: &Api,
    kubelet: &KubeletClient,
    t: &Target,
    sub: &str,
    call: &Call,
) -> ApiResult<Response> {
    let pod = api.get_entry(t)?;
    let phase = pod.obj.pointer("/status/phase").and_then(Value::as_str);
    if let Some(done @ ("Succeeded" | "Failed")) = phase {
        return Err(ApiError::bad_request(format!(
            "cannot {sub} into a container in a completed pod; current phase is {done}"
        )));
    }
    let node = logs::node_of(&pod.obj, &t.name)?;
    let Some(client) = call.head.extensions.get::<OnUpgrade>().cloned() else {
        return Err(ApiError::bad_request(format!(
            "{sub} needs a connection upgrade (WebSocket or SPDY/3.1) over HTTP/1.1"
        )));
    };
    let (addr, port) = logs::kubelet_endpoint(api, node, &t.name)?;
    let path = agent_path(&pod.obj, t, sub, call.query())?;
    let unreachable = |e: String| {
        ApiError::new(
            502,
            "BadGateway",
            format!("error dialing the agent of node {node} at {addr}:{port}: {e}"),
        )
    };
    let tls = kubelet.connect(&addr, port).await.map_err(unreachable)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    tokio::spawn(conn.with_upgrades());
    let mut req = http::Request::builder()
        .method(call.method().clone())
        .uri(&path)
        .header(header::HOST, &addr);
    for name in UPGRADE_HEADERS {
        for value in call.head.headers.get_all(name) {
            req = req.header(name, value);
        }
    }
    let req = req
        .body(Body::empty())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Err(refused(resp).await);
    }
    switch(client, resp)
}

/// The agent's refusal as a Status, with its words.
async fn refused(resp: http::Response<hyper::body::Incoming>) -> ApiError {
    let code = resp.status().as_u16();
    let body = axum::body::to_bytes(Body::new(resp.into_body()), 64 * 1024)
        .await
        .unwrap_or_default();
    let reason = match code {
        400 => "BadRequest",
        403 => "Forbidden",
        404 => "NotFound",
        _ => "InternalError",
    };
    ApiError::new(
        code,
        reason,
        String::from_utf8_lossy(&body).trim().to_string(),
    )
}

/// Answers the client with the agent's 101 and its negotiation headers, then copies bytes
/// between the two upgraded connections until both ends are closed.
fn switch(client: OnUpgrade, resp: http::Response<hyper::body::Incoming>) -> ApiResult<Response> {
    let mut answer = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for (name, value) in resp.headers() {
        if name != header::CONTENT_LENGTH && name != HeaderName::from_static("date") {
            answer = answer.header(name, value);
        }
    }
    tokio::spawn(async move {
        let (client, agent) = match tokio::try_join!(client, hyper::upgrade::on(resp)) {
            Ok(both) => both,
            Err(e) => {
                tracing::debug!(error = %e, "a streaming upgrade did not complete");
                return;
            }
        };
        let (mut client, mut agent) = (TokioIo::new(client), TokioIo::new(agent));
        if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut agent).await {
            tracing::debug!(error = %e, "a streaming connection ended with an error");
        }
    });
    answer
        .body(Body::empty())
        .map_err(|e| ApiError::internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources;
    use serde_json::json;

    fn target(name: &str) -> Target {
        Target {
            res: resources::lookup("", "v1", "pods").unwrap(),
            namespace: "default".into(),
            name: name.into(),
        }
    }

    #[test]
    fn exec_and_attach_name_the_container_port_forward_does_not() {
        let one = json!({"spec": {"containers": [{"name": "app"}]}});
        let q = "command=sh&command=-c&stdout=true";
        assert_eq!(
            agent_path(&one, &target("web"), "exec", q).unwrap(),
            "/exec/default/web/app?command=sh&command=-c&stdout=true"
        );
        assert_eq!(
            agent_path(&one, &target("web"), "attach", "container=app&stdin=true").unwrap(),
            "/attach/default/web/app?container=app&stdin=true"
        );
        assert_eq!(
            agent_path(&one, &target("web"), "portforward", "").unwrap(),
            "/portForward/default/web"
        );
        let two = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let err = agent_path(&two, &target("web"), "exec", "command=ls").unwrap_err();
        assert!(
            err.message.contains("choose one of: [a b]"),
            "{}",
            err.message
        );
    }
}
