//! kubectl's WebSocket exec and attach (`v5.channel.k8s.io`, or `v4.channel.k8s.io`) carried over
//! the runtime's SPDY streams, as upstream's API server translates them towards the kubelet.
//! Each WebSocket binary message starts with its channel: 0 stdin, 1 stdout, 2 stderr, 3 error
//! (the final metav1.Status, exit code included), 4 resize, and in v5 255 "close" (the client
//! is done with the stream named by the next byte: stdin's EOF, a FIN on the SPDY side).

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::{Sink, SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use super::runtime::RuntimeStream;
use super::spdy::{self, Frame};
use super::tunnel;

pub const V5: &str = "v5.channel.k8s.io";
pub const V4: &str = "v4.channel.k8s.io";

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// Which streams the exec or attach has (also what the runtime was asked for).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Streams {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// The SPDY stream of each channel: client streams are odd and opened in this order.
fn spdy_stream(channel: u8) -> u32 {
    match channel {
        ERROR => 1,
        STDIN => 3,
        STDOUT => 5,
        STDERR => 7,
        _ => 9,
    }
}

fn channel_of(stream: u32) -> Option<u8> {
    [ERROR, STDIN, STDOUT, STDERR, RESIZE]
        .into_iter()
        .find(|c| spdy_stream(*c) == stream)
}

/// The SYN_STREAMs opening what `streams` asks for (upstream's client opens the error stream
/// first; the runtime waits for exactly these).
pub fn opening(streams: Streams) -> Vec<u8> {
    let mut headers = spdy::Headers::default();
    let wanted = [
        (ERROR, "error", true),
        (STDIN, "stdin", streams.stdin),
        (STDOUT, "stdout", streams.stdout),
        (STDERR, "stderr", streams.stderr && !streams.tty),
        (RESIZE, "resize", streams.tty),
    ];
    wanted
        .into_iter()
        .filter(|(_, _, on)| *on)
        .flat_map(|(c, kind, _)| headers.syn_stream(spdy_stream(c), &[("streamtype", kind)]))
        .collect()
}

/// The SPDY frame for one client message; None for what has no SPDY side (an unknown
/// channel, or close of a stream the client cannot write).
pub fn from_client(msg: &[u8], v5: bool) -> Option<Vec<u8>> {
    let (&channel, data) = msg.split_first()?;
    match channel {
        STDIN | RESIZE if !data.is_empty() => Some(spdy::data(spdy_stream(channel), false, data)),
        CLOSE if v5 && data.first() == Some(&STDIN) => {
            Some(spdy::data(spdy_stream(STDIN), true, &[]))
        }
        _ => None,
    }
}

/// The client message for one runtime DATA frame (stdout, stderr, error).
pub fn to_client(stream: u32, data: &[u8]) -> Option<Vec<u8>> {
    let channel = channel_of(stream).filter(|c| matches!(*c, STDOUT | STDERR | ERROR))?;
    if data.is_empty() {
        return None;
    }
    let mut msg = Vec::with_capacity(1 + data.len());
    msg.push(channel);
    msg.extend_from_slice(data);
    Some(msg)
}

/// Carries one exec or attach until either side ends it or nothing moves for `idle`. The two
/// directions run concurrently (a process blocked writing its output must not stop its input),
/// and frames to the runtime (client input, PING answers) go through one writer.
pub async fn run(ws: WebSocket, rt: RuntimeStream, streams: Streams, v5: bool, idle: Duration) {
    let (mut sink, mut source) = ws.split();
    let (rd, mut wr) = tokio::io::split(rt.io);
    let (frames, mut to_runtime) = mpsc::channel::<Vec<u8>>(64);
    let (moved, seen) = watch::channel(());
    let writer = tokio::spawn(async move {
        if wr.write_all(&opening(streams)).await.is_ok() {
            while let Some(frame) = to_runtime.recv().await {
                if wr.write_all(&frame).await.is_err() {
                    break;
                }
            }
        }
        let _ = wr.write_all(&spdy::goaway()).await;
        let _ = wr.shutdown().await;
    });
    let input = {
        let (frames, moved) = (frames.clone(), &moved);
        async move {
            while let Some(Ok(msg)) = source.next().await {
                match msg {
                    Message::Binary(b) => {
                        moved.send_replace(());
                        if let Some(frame) = from_client(&b, v5) {
                            // Waits while the runtime is slow to take input.
                            if frames.send(frame).await.is_err() {
                                break;
                            }
                        }
                    }
                    Message::Close(_) => break,
                    _ => {}
                }
            }
        }
    };
    let output = output(rd, &mut sink, frames, &moved);
    tokio::select! {
        () = input => {},
        () = output => {},
        () = tunnel::watchdog(seen, idle) => {
            tracing::info!(?idle, "closing an idle exec/attach stream");
        },
    }
    let close = CloseFrame {
        code: 1000,
        reason: "".into(),
    };
    let _ = sink.send(Message::Close(Some(close))).await;
    let _ = writer.await;
}

/// The runtime's frames: stdout, stderr and the final status to the client, PINGs answered.
async fn output<R, S>(
    mut rd: R,
    sink: &mut S,
    frames: mpsc::Sender<Vec<u8>>,
    moved: &watch::Sender<()>,
) where
    R: AsyncRead + Unpin,
    S: Sink<Message> + Unpin,
{
    let mut pending = Vec::new();
    let mut chunk = vec![0u8; 32 * 1024];
    loop {
        let n = match rd.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        moved.send_replace(());
        pending.extend_from_slice(chunk.get(..n).unwrap_or_default());
        loop {
            let (frame, used) = match spdy::parse(&pending) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "bad frame from the runtime's streaming server");
                    return;
                }
            };
            pending.drain(..used);
            let sent = match frame {
                Frame::Data { stream, data, .. } => match to_client(stream, &data) {
                    Some(msg) => sink.send(Message::Binary(Bytes::from(msg))).await.is_ok(),
                    None => true,
                },
                Frame::Control {
                    kind: spdy::PING,
                    payload,
                    ..
                } => frames.send(spdy::ping(&payload)).await.is_ok(),
                Frame::Control { .. } => true,
            };
            if !sent {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_resize_and_v5_close_become_spdy_frames() {
        assert_eq!(
            from_client(b"\x00hi", true),
            Some(spdy::data(3, false, b"hi"))
        );
        let resize = br#"{"Width":80,"Height":24}"#;
        let msg = [&[RESIZE][..], resize].concat();
        assert_eq!(from_client(&msg, true), Some(spdy::data(9, false, resize)));
        assert_eq!(
            from_client(&[CLOSE, STDIN], true),
            Some(spdy::data(3, true, &[]))
        );
        // v4 has no close signal; empty messages, output channels and unknown ones carry nothing.
        assert_eq!(from_client(&[CLOSE, STDIN], false), None);
        assert_eq!(from_client(&[STDIN], true), None);
        assert_eq!(from_client(b"\x01out", true), None);
        assert_eq!(from_client(&[], true), None);
    }

    #[test]
    fn runtime_streams_map_back_to_channels() {
        assert_eq!(to_client(5, b"out"), Some(b"\x01out".to_vec()));
        assert_eq!(to_client(7, b"err"), Some(b"\x02err".to_vec()));
        assert_eq!(to_client(1, b"{}"), Some(b"\x03{}".to_vec()));
        assert_eq!(to_client(3, b"x"), None, "stdin is the client's");
        assert_eq!(to_client(11, b"x"), None);
        assert_eq!(to_client(5, b""), None);
    }

    #[test]
    fn streams_open_in_upstreams_order_and_tty_has_no_stderr() {
        let kinds = |s: Streams| {
            let bytes = opening(s);
            let mut at = 0;
            let mut ids = Vec::new();
            while let Some((Frame::Control { payload, .. }, used)) =
                spdy::parse(&bytes[at..]).unwrap()
            {
                ids.push(u32::from_be_bytes(payload[..4].try_into().unwrap()));
                at += used;
            }
            ids
        };
        let all = Streams {
            stdin: true,
            stdout: true,
            stderr: true,
            tty: false,
        };
        assert_eq!(kinds(all), vec![1, 3, 5, 7]);
        assert_eq!(kinds(Streams { tty: true, ..all }), vec![1, 3, 5, 9]);
        assert_eq!(kinds(Streams::default()), vec![1]);
    }
}
