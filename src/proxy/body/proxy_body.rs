//! [`ProxyBody`]: every body guardwire answers with, and how hyper polls each kind.

use super::GuardedStream;
use crate::upstream::UpstreamBody;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Every body guardwire answers with.
pub enum ProxyBody {
    /// A body known in full (error answers, checked non-streamed responses).
    Full(Option<Bytes>),
    /// The upstream's body relayed untouched (`passthrough_paths`, upstream error statuses);
    /// cut at the exchange's total deadline by the server's `TrackedBody`.
    Upstream(UpstreamBody),
    Guarded(Box<GuardedStream>),
    /// An MCP server's SSE stream, checked message by message.
    Mcp(Box<crate::proxy::mcp::stream::McpStream>),
}

impl ProxyBody {
    pub fn full(b: impl Into<Bytes>) -> Self {
        ProxyBody::Full(Some(b.into()))
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            ProxyBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ProxyBody::Upstream(inc) => Pin::new(inc).poll_frame(cx),
            ProxyBody::Guarded(g) => g.poll_next(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
            ProxyBody::Mcp(m) => m.poll_next(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(b) => b.is_none(),
            ProxyBody::Upstream(inc) => inc.is_end_stream(),
            ProxyBody::Guarded(g) => {
                !g.reading() && g.out.is_empty() && g.judging.is_none() && g.windows.is_none()
            }
            ProxyBody::Mcp(m) => m.is_end(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            ProxyBody::Full(None) => SizeHint::with_exact(0),
            ProxyBody::Upstream(inc) => inc.size_hint(),
            ProxyBody::Guarded(_) | ProxyBody::Mcp(_) => SizeHint::default(),
        }
    }
}
