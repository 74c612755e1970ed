//! An upstream response body. Over HTTP/1 it carries its connection and drives it on every poll
//! (see `pool.rs` for why); read to its end, it hands the connection back to the pool.

use super::conn::H1Conn;
use super::h2::StreamSlot;
use super::pool::Pool;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub struct UpstreamBody {
    incoming: Incoming,
    /// The HTTP/1 connection this body arrives on, until the body has ended.
    h1: Option<(H1Conn, Arc<Pool>)>,
    /// The HTTP/2 stream this body arrives on, counted on its connection until the body ends
    /// (a guarded stream may keep the body long after, while its client reads held output).
    h2_stream: Option<StreamSlot>,
    /// Shown every data frame read (the body capture).
    tap: Option<Arc<dyn Tap>>,
}

/// What is shown a body's bytes as they are read (`capture:` records the upstream's answer).
pub trait Tap: Send + Sync {
    fn data(&self, bytes: &[u8]);
}

impl UpstreamBody {
    pub(super) fn h1(incoming: Incoming, conn: H1Conn, pool: Arc<Pool>) -> UpstreamBody {
        UpstreamBody {
            incoming,
            h1: Some((conn, pool)),
            h2_stream: None,
            tap: None,
        }
    }

    pub(super) fn h2(incoming: Incoming, stream: StreamSlot) -> UpstreamBody {
        UpstreamBody {
            incoming,
            h1: None,
            h2_stream: Some(stream),
            tap: None,
        }
    }

    /// Shows `tap` every data frame read from now on.
    pub fn set_tap(&mut self, tap: Arc<dyn Tap>) {
        self.tap = Some(tap);
    }

    /// For a body whose content is complete (the stream's terminal event arrived) but whose end
    /// has not been read yet: reads that end in the background, so the HTTP/1 connection goes
    /// back to the pool rather than being closed. Gives up (closing it) after [`DRAIN_LIMIT`]
    /// bytes or [`DRAIN_TIME`]. Any other body is dropped.
    pub fn finish_in_background(self) {
        if self.h1.is_none() {
            return;
        }
        tokio::spawn(async move {
            let mut body = self;
            let mut drained = 0;
            let read_to_end = async {
                while let Some(Ok(frame)) = body.frame().await {
                    drained += frame.data_ref().map_or(0, Bytes::len);
                    if drained > DRAIN_LIMIT {
                        return;
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_TIME, read_to_end).await;
        });
    }
}

/// Most bytes read after a stream's terminal event to keep its connection.
const DRAIN_LIMIT: usize = 64 * 1024;
/// Longest wait for the end of a body after a stream's terminal event.
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(2);

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        if let Some((conn, _)) = &mut this.h1 {
            conn.drive(cx);
        }
        let polled = Pin::new(&mut this.incoming).poll_frame(cx);
        if let (Poll::Ready(Some(Ok(frame))), Some(tap)) = (&polled, &this.tap) {
            if let Some(data) = frame.data_ref() {
                tap.data(data);
            }
        }
        match &polled {
            Poll::Ready(None) => {
                if let Some((conn, pool)) = this.h1.take() {
                    pool.put_idle(conn);
                }
                this.h2_stream = None;
            }
            // The stream is over (reset or its connection gone): its place is free.
            Poll::Ready(Some(Err(_))) => this.h2_stream = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        // Over HTTP/1 the end is reported only once it was polled, so the connection goes back
        // to the pool rather than being dropped with a body nobody polls again.
        self.h1.is_none() && self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::upstream::conn::{Io, PoolKey};
    use crate::upstream::h2::{handshake, H2Settings};
    use http_body_util::Full;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    /// An HTTP/2 stream's place on its connection is free once its body has ended, while the
    /// body is still held (as a guarded stream holds it until its client has read the output).
    #[tokio::test]
    async fn an_http2_stream_is_given_back_when_its_body_ends() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            let answer = hyper::service::service_fn(|_req| async {
                Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(
                    "the whole answer",
                ))))
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(socket), answer)
                .await;
        });
        let key = Arc::new(PoolKey::new(true, addr.to_string().parse().unwrap()).unwrap());
        let pool = Pool::default();
        let settings = H2Settings {
            stream_window: 65535,
            max_streams: 1,
        };
        let io = Io::Plain(tokio::net::TcpStream::connect(addr).await.unwrap());
        pool.put_h2(&key, handshake(io, settings).await.unwrap());

        let (mut sender, slot) = pool.h2_stream(&key).unwrap();
        let mut req = hyper::Request::new(Full::new(Bytes::new()));
        key.h2_form(&mut req);
        let resp = sender.send_request(req).await.unwrap();
        let mut body = UpstreamBody::h2(resp.into_body(), slot);
        assert!(pool.h2_stream(&key).is_none(), "the one stream is taken");
        let mut read = Vec::new();
        while let Some(frame) = body.frame().await {
            read.extend_from_slice(frame.unwrap().data_ref().unwrap());
        }
        assert_eq!(read, b"the whole answer");
        assert!(
            pool.h2_stream(&key).is_some(),
            "its body ended: the stream is free"
        );
        drop(body);
    }
}
