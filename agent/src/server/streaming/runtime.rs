//! The connection to the runtime's streaming server: the URL a CRI Exec/Attach/PortForward
//! answered, upgraded to SPDY/3.1 with the stream protocols the client offered.

use axum::body::Body;
use http::{header, HeaderMap, HeaderValue, StatusCode};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::StreamingError;

/// The header naming the remotecommand / portforward protocol versions (upstream's
/// httpstream.HeaderProtocolVersion).
pub const PROTOCOL_VERSION: &str = "X-Stream-Protocol-Version";

/// An upgraded connection to the runtime, and the headers of its 101 answer.
pub struct RuntimeStream {
    pub io: TokioIo<Upgraded>,
    pub headers: HeaderMap,
}

/// Opens `url` (http://127.0.0.1:PORT/exec/TOKEN) and upgrades it to SPDY/3.1, offering
/// `protocols` in X-Stream-Protocol-Version. A refusal comes back with the runtime's words.
pub async fn upgrade(
    url: &str,
    protocols: &[HeaderValue],
) -> Result<RuntimeStream, StreamingError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|_| StreamingError::Runtime(format!("unusable streaming URL {url:?}")))?;
    let authority = uri
        .authority()
        .filter(|_| uri.scheme_str() == Some("http"))
        .ok_or_else(|| StreamingError::Runtime(format!("streaming URL {url:?} is not http://")))?
        .to_string();
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let tcp = TcpStream::connect(&authority)
        .await
        .map_err(|e| StreamingError::Runtime(format!("connect {authority}: {e}")))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| StreamingError::Runtime(e.to_string()))?;
    tokio::spawn(conn.with_upgrades());
    let mut req = http::Request::post(path)
        .header(header::HOST, &authority)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "SPDY/3.1");
    for p in protocols {
        req = req.header(PROTOCOL_VERSION, p);
    }
    let req = req
        .body(Body::empty())
        .map_err(|e| StreamingError::Runtime(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| StreamingError::Runtime(e.to_string()))?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        let status = resp.status();
        let body = axum::body::to_bytes(Body::new(resp.into_body()), 64 * 1024)
            .await
            .unwrap_or_default();
        return Err(StreamingError::Refused(
            status,
            String::from_utf8_lossy(&body).trim().to_string(),
        ));
    }
    let headers = resp.headers().clone();
    let upgraded = hyper::upgrade::on(resp)
        .await
        .map_err(|e| StreamingError::Runtime(e.to_string()))?;
    Ok(RuntimeStream {
        io: TokioIo::new(upgraded),
        headers,
    })
}
