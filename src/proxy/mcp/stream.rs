//! An MCP server's SSE stream (a POST's answer or the GET stream) relayed event by event:
//! each event's data is one JSON-RPC message, read and checked whole before a byte of it
//! leaves (the SSE framer finds events however the bytes are split). A message that fails is
//! replaced by the JSON-RPC error for its id (or, a notification, not relayed); keep-alives and
//! events without data pass. An event that is not JSON-RPC, too large or cut short ends the
//! stream, with an error for every request of the client still waiting.

use super::check::{Checker, Refusal, Verdict};
use crate::protocol::mcp::codes;
use crate::protocol::mcp::jsonrpc;
use crate::proxy::InFlight;
use crate::sse::{SseFrame, SseFramer};
use crate::upstream::UpstreamBody;
use bytes::Bytes;
use http_body::Body;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

pub struct McpStream {
    upstream: Option<UpstreamBody>,
    framer: SseFramer,
    checker: Checker,
    out: VecDeque<Bytes>,
    idle: Duration,
    idle_timer: Pin<Box<tokio::time::Sleep>>,
    max_frame: usize,
    /// Keeps the exchange counted in flight until the stream ends.
    _permit: InFlight,
}

impl McpStream {
    pub fn new(
        upstream: UpstreamBody,
        checker: Checker,
        max_frame: usize,
        idle: Duration,
        permit: InFlight,
    ) -> McpStream {
        McpStream {
            upstream: Some(upstream),
            framer: SseFramer::new(max_frame),
            checker,
            out: VecDeque::new(),
            idle,
            idle_timer: Box::pin(tokio::time::sleep(idle)),
            max_frame,
            _permit: permit,
        }
    }

    pub fn is_end(&self) -> bool {
        self.upstream.is_none() && self.out.is_empty()
    }

    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        loop {
            if let Some(b) = self.out.pop_front() {
                return Poll::Ready(Some(b));
            }
            let Some(up) = self.upstream.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(up).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        let deadline = tokio::time::Instant::now() + self.idle;
                        self.idle_timer.as_mut().reset(deadline);
                        self.ingest(&data);
                    }
                }
                Poll::Ready(Some(Err(_))) => {
                    self.end(Refusal::new(
                        codes::UPSTREAM,
                        "the MCP server's stream failed",
                    ));
                }
                Poll::Ready(None) => {
                    // An event the server did not finish is never released.
                    let _ = self.framer.finish();
                    self.upstream = None;
                }
                Poll::Pending => {
                    if self.idle_timer.as_mut().poll(cx).is_ready() {
                        self.end(Refusal::new(
                            codes::UPSTREAM,
                            "the MCP server's stream stalled",
                        ));
                        continue;
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    /// Feeds bytes of the upstream body; complete events are checked and queued.
    pub fn ingest(&mut self, data: &Bytes) {
        let mut frames = Vec::new();
        let pushed = self.framer.push(data, &mut frames);
        // The framer bounds what it buffers; an event that came whole in one read is measured
        // here.
        if pushed.is_err() || frames.iter().any(|f| f.raw.len() > self.max_frame) {
            self.end(Refusal::new(
                codes::UNCHECKABLE,
                "the MCP server sent an event larger than limits.max_frame_bytes",
            ));
            return;
        }
        for f in frames {
            if self.upstream.is_none() {
                return;
            }
            self.frame(f);
        }
    }

    fn frame(&mut self, f: SseFrame) {
        if f.is_inert() {
            self.out.push_back(f.raw);
            return;
        }
        let fields = f.fields();
        if fields.event == Some(b"endpoint".as_slice()) {
            self.end(Refusal::new(
                codes::INVALID_REQUEST,
                "the MCP server speaks the legacy HTTP+SSE transport (2024-11-05), which guardwire does not proxy; use Streamable HTTP",
            ));
            return;
        }
        if !f.has_only_standard_fields() {
            // Fail closed: a line that is no SSE field (a leading byte-order mark makes `data`
            // one) may still be read as data by a client.
            self.end(Refusal::new(
                codes::UPSTREAM,
                "the MCP server sent an event with a field guardwire cannot read",
            ));
            return;
        }
        let data = match fields.data {
            // An `id:` or `event:` alone (the SDKs' priming event for resumption) or an empty
            // data line carries no message.
            None => None,
            Some(d) if d.iter().all(u8::is_ascii_whitespace) => None,
            Some(d) => Some(d.into_owned()),
        };
        let Some(data) = data else {
            self.out.push_back(f.raw);
            return;
        };
        let messages = match jsonrpc::parse(&data) {
            Ok((messages, false)) => messages,
            _ => {
                self.end(Refusal::new(
                    codes::UPSTREAM,
                    "the MCP server sent an event that is not one JSON-RPC message",
                ));
                return;
            }
        };
        let Some(msg) = messages.first() else {
            return;
        };
        match self.checker.server_message(msg) {
            Verdict::Pass => self.out.push_back(f.raw),
            Verdict::Replace(json) => self.out.push_back(f.with_data(json.as_bytes())),
            Verdict::Drop => {}
        }
    }

    /// Ends the stream: an error for each request of the client still waiting, nothing more
    /// from the server.
    fn end(&mut self, why: Refusal) {
        tracing::warn!(
            request_id = self.checker.trace.request_id(),
            route = self.checker.route,
            reason = %why.message,
            "MCP stream ended"
        );
        for (id, _) in std::mem::take(&mut self.checker.pending) {
            let json = why.json(&id);
            self.out
                .push_back(format!("event: message\ndata: {json}\n\n").into());
        }
        self.upstream = None;
    }
}
