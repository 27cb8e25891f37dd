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
    let (moved, seen) = watch::channel(());
    let moved = Arc::new(moved);
    let both = async {
        tokio::join!(copy(ar, bw, moved.clone()), copy(br, aw, moved.clone()));
    };
    tokio::select! {
        () = both => {},
        () = watchdog(seen, idle) => tracing::info!(?idle, "closing an idle streaming connection"),
    }
}

/// Returns once `idle` passed without a change on `seen` (the relay's activity); never, once
/// every sender is gone (the relay itself ended).
pub async fn watchdog(mut seen: watch::Receiver<()>, idle: Duration) {
    loop {
        match tokio::time::timeout(idle, seen.changed()).await {
            Ok(Ok(())) => continue,
            Ok(Err(_)) => std::future::pending::<()>().await,
            Err(_) => return,
        }
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
/// bytes back as binary messages; both directions at once.
pub async fn websocket(ws: WebSocket, rt: RuntimeStream, idle: Duration) {
    let (mut sink, mut source) = ws.split();
    let (mut rd, mut wr) = tokio::io::split(rt.io);
    let (moved, seen) = watch::channel(());
    let input = async {
        while let Some(Ok(msg)) = source.next().await {
            match msg {
                Message::Binary(b) => {
                    moved.send_replace(());
                    if wr.write_all(&b).await.is_err() {
                        break;
                    }
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    let output = async {
        let mut chunk = vec![0u8; 32 * 1024];
        while let Ok(n @ 1..) = rd.read(&mut chunk).await {
            moved.send_replace(());
            let data = Bytes::copy_from_slice(chunk.get(..n).unwrap_or_default());
            if sink.send(Message::Binary(data)).await.is_err() {
                break;
            }
        }
    };
    tokio::select! {
        () = input => {},
        () = output => {},
        () = watchdog(seen, idle) => tracing::info!(?idle, "closing an idle port-forward"),
    }
    let _ = sink.send(Message::Close(None)).await;
    let _ = wr.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::duplex;

    #[tokio::test(start_paused = true)]
    async fn relay_copies_both_ways_and_ends_after_the_idle_timeout() {
        let (client, a) = duplex(1024);
        let (b, runtime) = duplex(1024);
        let relay = tokio::spawn(relay(a, b, Duration::from_secs(10)));
        let (mut client, mut runtime) = (client, runtime);
        // Traffic every 6 s keeps it open past the 10 s timeout.
        for round in 0..3u8 {
            tokio::time::sleep(Duration::from_secs(6)).await;
            client.write_all(&[round]).await.unwrap();
            let mut byte = [0u8; 1];
            runtime.read_exact(&mut byte).await.unwrap();
            assert_eq!(byte, [round]);
            runtime.write_all(b"x").await.unwrap();
            client.read_exact(&mut byte).await.unwrap();
        }
        assert!(!relay.is_finished(), "closed while bytes moved");
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert!(relay.is_finished(), "still open after 11 s without a byte");
        // Both sides see the end.
        let mut rest = Vec::new();
        assert_eq!(client.read_to_end(&mut rest).await.unwrap(), 0);
        assert_eq!(runtime.read_to_end(&mut rest).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn relay_ends_when_both_sides_closed() {
        let (mut client, a) = duplex(1024);
        let (b, mut runtime) = duplex(1024);
        let relay = tokio::spawn(relay(a, b, Duration::from_secs(3600)));
        client.write_all(b"request").await.unwrap();
        client.shutdown().await.unwrap();
        let mut got = Vec::new();
        runtime.read_to_end(&mut got).await.unwrap();
        assert_eq!(
            got, b"request",
            "the client's half-close reaches the runtime"
        );
        runtime.write_all(b"answer").await.unwrap();
        runtime.shutdown().await.unwrap();
        let mut back = Vec::new();
        client.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"answer");
        relay.await.unwrap();
    }
}
