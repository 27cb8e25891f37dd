//! A deadline on a connection's first bytes. hyper's header-read timeout covers an HTTP/1
//! request once hyper parses it, but nothing bounds the wait for the bytes that tell HTTP/1 from
//! HTTP/2 (the 24-byte HTTP/2 preface) nor an HTTP/2 preface that never comes: a client that
//! finished the handshake and went silent would hold the connection for ever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// The length of the HTTP/2 preface; every real HTTP/1 request is longer.
const FIRST_BYTES: usize = 24;

/// `io` whose reads fail with `TimedOut` if its first 24 bytes take longer than `timeout`.
pub(crate) struct FirstBytesDeadline<I> {
    io: I,
    read: usize,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<I> FirstBytesDeadline<I> {
    pub(crate) fn new(io: I, timeout: Duration) -> FirstBytesDeadline<I> {
        FirstBytesDeadline {
            io,
            read: 0,
            deadline: Some(Box::pin(tokio::time::sleep(timeout))),
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for FirstBytesDeadline<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        let Some(deadline) = this.deadline.as_mut() else {
            return polled;
        };
        if polled.is_ready() {
            this.read = this
                .read
                .saturating_add(buf.filled().len().saturating_sub(before));
            if this.read >= FIRST_BYTES {
                this.deadline = None;
            }
            return polled;
        }
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no request within the header read timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for FirstBytesDeadline<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
