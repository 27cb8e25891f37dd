//! One HTTP/1.1 GET over a connection the caller opened (and secured as it must): the API
//! server asking an agent for /stats/summary, `keelson-agent join` reading cluster-info.

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

/// Sends `GET path` with `Host: host` (and `Accept`, when given) over `io`; the status and the
/// whole body. Errors are the transport's, as text.
pub async fn get<S>(
    io: S,
    host: &str,
    path: &str,
    accept: Option<&str>,
) -> Result<(http::StatusCode, Bytes), String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut req = http::Request::get(path).header(http::header::HOST, host);
    if let Some(accept) = accept {
        req = req.header(http::header::ACCEPT, accept);
    }
    let req = req
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok((status, body.to_bytes()))
}
