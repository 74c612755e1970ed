//! A client connection's TCP socket, closed with a reset (RST) instead of a FIN when guardwire
//! ends the connection because its client does not read (nginx's `reset_timedout_connection`).
//!
//! Closed gracefully with bytes queued that the client will not take (its receive window is
//! zero), a socket stays in the kernel as an orphan: it keeps its send buffer and probes the
//! window for minutes (`net.ipv4.tcp_orphan_retries`), and its FIN waits behind the queued
//! bytes, so the client never learns of the close. Clients that connect and never read could
//! so pin kernel memory long after guardwire ended them. With `SO_LINGER` {on, 0} the close
//! sends a RST and frees the socket at once, and the client's socket gets the error whether
//! it reads or not.
//!
//! [`super::connection::drive`] decides as it ends the connection (the connection's
//! [`Activity`] carries the choice); the socket is reset as it is dropped. A connection that
//! ends otherwise costs one atomic load here, and no system call.

use super::connection::Activity;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The connection's I/O at the bottom (under TLS when there is TLS): the TCP stream as is.
pub struct ClientSocket {
    tcp: TcpStream,
    connection: Arc<Activity>,
}

impl ClientSocket {
    pub fn new(tcp: TcpStream, connection: Arc<Activity>) -> ClientSocket {
        ClientSocket { tcp, connection }
    }
}

impl Drop for ClientSocket {
    fn drop(&mut self) {
        if !self.connection.resets_on_close() {
            return;
        }
        // Linger 0 never blocks the close: the queued bytes are dropped with the socket.
        if let Err(e) = self.tcp.set_zero_linger() {
            tracing::debug!(error = %e, "could not set SO_LINGER 0: the socket closes with a FIN");
        }
    }
}

impl AsyncRead for ClientSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for ClientSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}
