//! Byte-level relays between the client and the runtime's SPDY connection: as is (kubectl's SPDY
//! fallback, and port-forward over SPDY), or unwrapped from WebSocket binary messages (kubectl
//! 1.30+'s port-forward, `SPDY/3.1+portforward.k8s.io`: SPDY frames tunneled through WebSocket).
//! Both end when either side closes, or when no byte moved for the idle timeout.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::runtime::RuntimeStream;

/// The WebSocket subprotocol of SPDY-over-WebSocket port-forward.
pub const PORT_FORWARD_TUNNEL: &str = "SPDY/3.1+portforward.k8s.io";
/// The SPDY protocol port-forward speaks to the runtime.
pub const PORT_FORWARD: &str = "portforward.k8s.io";

/// Copies both ways between `a` and `b` until both directions ended, or `idle` passed with
/// no byte either way.
pub async fn relay<A, B>(a: A, b: B, idle: Duration)
where
    A: AsyncRead + AsyncWrite + Send + 'static,
    B: AsyncRead + AsyncWrite + Send + 'static,
{
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    let (moved, mut seen) = watch::channel(());
    let moved = Arc::new(moved);
    let both = async {
        tokio::join!(copy(ar, bw, moved.clone()), copy(br, aw, moved.clone()));
    };
    let watchdog = async {
        loop {
            match tokio::time::timeout(idle, seen.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => std::future::pending::<()>().await,
                Err(_) => return,
            }
        }
    };
    tokio::select! {
        () = both => {},
        () = watchdog => tracing::info!(?idle, "closing an idle streaming connection"),
    }
}

/// One direction: read, write, note the activity; the writer is shut down at the reader's end.
async fn copy<R, W>(mut from: R, mut to: W, moved: Arc<watch::Sender<()>>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to
            .write_all(buf.get(..n).unwrap_or_default())
            .await
            .is_err()
        {
            break;
        }
        moved.send_replace(());
    }
    let _ = to.shutdown().await;
}

/// Port-forward's SPDY frames from WebSocket binary messages to the runtime, and the runtime's
/// bytes back as binary messages.
pub async fn websocket(ws: WebSocket, rt: RuntimeStream, idle: Duration) {
    let (mut sink, mut source) = ws.split();
    let (mut rd, mut wr) = tokio::io::split(rt.io);
    let mut chunk = vec![0u8; 32 * 1024];
    let timer = tokio::time::sleep(idle);
    tokio::pin!(timer);
    loop {
        tokio::select! {
            msg = source.next() => match msg {
                Some(Ok(Message::Binary(b))) => {
                    if wr.write_all(&b).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            n = rd.read(&mut chunk) => {
                let Ok(n @ 1..) = n else { break };
                let data = Bytes::copy_from_slice(chunk.get(..n).unwrap_or_default());
                if sink.send(Message::Binary(data)).await.is_err() {
                    break;
                }
            },
            () = &mut timer => {
                tracing::info!(?idle, "closing an idle port-forward");
                break;
            },
        }
        timer.as_mut().reset(tokio::time::Instant::now() + idle);
    }
    let _ = sink.send(Message::Close(None)).await;
    let _ = wr.shutdown().await;
}
