//! An MCP server's SSE stream (a POST's answer or the GET stream) relayed event by event:
//! each event's data is one JSON-RPC message, read and checked whole before a byte of it
//! leaves (the SSE framer finds events however the bytes are split). A message that fails is
//! replaced by the JSON-RPC error for its id (or, a notification, not relayed); keep-alives and
//! events without data pass. An event that is not JSON-RPC, too large or cut short ends the
//! stream, with an error for every request of the client still waiting.

use super::check::{Checker, Refusal, Verdict};
use super::reply::ServerReplies;
use crate::protocol::mcp::codes;
use crate::protocol::mcp::content::{Texts, MAX_TOKEN};
use crate::protocol::mcp::jsonrpc;
use crate::proxy::offload;
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

/// The longest `retry:` relayed (milliseconds, as digits).
const MAX_RETRY_DIGITS: usize = 10;

/// An SSE event id the client may keep: 1 to [`MAX_TOKEN`] bytes of printable ASCII (the
/// SDKs' ids are stream ids, counters and UUIDs); `None`: not one.
fn event_id(raw: &[u8]) -> Option<&str> {
    let ok = (1..=MAX_TOKEN).contains(&raw.len()) && raw.iter().all(u8::is_ascii_graphic);
    ok.then(|| std::str::from_utf8(raw).ok()).flatten()
}

/// The longest event id read as structure ([`is_structure_id`]).
const MAX_STRUCTURE_ID: usize = 128;

/// An event id of the shape the SDKs give (stream ids, counters, UUIDs, timestamps: up to
/// [`MAX_STRUCTURE_ID`] bytes of ASCII letters, digits and `. _ : / -`) is structure, not text:
/// a word or phrase check that happens to match a random id must not replace the event. It is
/// still an identifier the secret and PII patterns read (no position is exempt); one they flag
/// is not relayed. Any other id guardwire relays is checked as text with its event's message.
fn is_structure_id(id: &str) -> bool {
    id.len() <= MAX_STRUCTURE_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:/_-".contains(&b))
}

pub struct McpStream {
    upstream: Option<UpstreamBody>,
    /// The server's bytes into the UTF-8 text the events are read from.
    text: crate::proxy::charset::Transcoder,
    /// The checking side; `None` while a large check runs off the async worker ([`Checking`]).
    relay: Option<Box<Relay>>,
    checking: Option<Checking>,
    out: VecDeque<Bytes>,
    idle: Duration,
    idle_timer: Pin<Box<tokio::time::Sleep>>,
    /// Where the errors for the server's blocked requests go.
    replies: ServerReplies,
    /// Keeps the exchange counted in flight until the stream ends.
    _permit: InFlight,
    /// Whose checks they are, for the blocking pool's turns.
    tenant: offload::Tenant,
}

/// A check of events on the blocking pool (`offload.rs`): the relay comes back with them
/// checked; `None`: it panicked there.
type Checking = Pin<Box<dyn Future<Output = Option<Box<Relay>>> + Send>>;

/// What reads, checks and rewrites the server's events, without I/O: it can move to the
/// blocking pool and back.
struct Relay {
    framer: SseFramer,
    checker: Checker,
    out: VecDeque<Bytes>,
    max_frame: usize,
    /// The stream is over (an error ended it): nothing more is read from the server.
    ended: bool,
}

impl McpStream {
    pub fn new(
        upstream: UpstreamBody,
        text: crate::proxy::charset::Transcoder,
        checker: Checker,
        (max_frame, idle): (usize, Duration),
        permit: InFlight,
        replies: ServerReplies,
        tenant: offload::Tenant,
    ) -> McpStream {
        McpStream {
            upstream: Some(upstream),
            text,
            relay: Some(Box::new(Relay {
                framer: SseFramer::new(max_frame),
                checker,
                out: VecDeque::new(),
                max_frame,
                ended: false,
            })),
            checking: None,
            out: VecDeque::new(),
            idle,
            idle_timer: Box::pin(tokio::time::sleep(idle)),
            replies,
            _permit: permit,
            tenant,
        }
    }

    pub fn is_end(&self) -> bool {
        self.upstream.is_none() && self.out.is_empty() && self.checking.is_none()
    }

    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        loop {
            if let Some(b) = self.out.pop_front() {
                return Poll::Ready(Some(b));
            }
            if let Some(checking) = self.checking.as_mut() {
                // The server is not read meanwhile: its events wait in the socket.
                let Poll::Ready(back) = checking.as_mut().poll(cx) else {
                    return Poll::Pending;
                };
                self.checking = None;
                match back {
                    Some(relay) => self.settle(relay),
                    None => {
                        // The checker is gone with the check: nothing more can be checked,
                        // nor the client's waiting requests answered.
                        self.upstream = None;
                        self.out.push_back(Bytes::from_static(
                            b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32011,\"message\":\"guardwire could not check the MCP server's stream\"}}\n\n",
                        ));
                    }
                }
                continue;
            }
            let Some(up) = self.upstream.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(up).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        let deadline = tokio::time::Instant::now() + self.idle;
                        self.idle_timer.as_mut().reset(deadline);
                        let data = self.text.push(data);
                        self.ingest(&data);
                    }
                }
                Poll::Ready(Some(Err(_))) => self.end(Refusal::new(
                    codes::UPSTREAM,
                    "the MCP server's stream failed",
                )),
                Poll::Ready(None) => {
                    // A character cut short by the end is U+FFFD in the event it ends (an
                    // unfinished one, below).
                    let tail = self.text.finish();
                    if !tail.is_empty() {
                        self.ingest(&tail);
                    }
                    // An event the server did not finish is never released.
                    if let Some(relay) = self.relay.as_mut() {
                        let _ = relay.framer.finish();
                    }
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

    /// Feeds bytes of the upstream body; complete events are checked (here, or off the async
    /// worker when they are large) and queued.
    fn ingest(&mut self, data: &Bytes) {
        let Some(mut relay) = self.relay.take() else {
            return;
        };
        let Some(frames) = relay.frames(data) else {
            return self.settle(relay);
        };
        let work = frames.iter().map(|f| offload::work(&f.raw)).sum();
        if !offload::is_large(work) {
            relay.check(frames);
            return self.settle(relay);
        }
        self.checking = Some(Box::pin(offload::check(work, self.tenant, move || {
            relay.check(frames);
            relay
        })));
    }

    /// The relay is back from its work: its events go out, its answers to the server's
    /// blocked requests are sent.
    fn settle(&mut self, mut relay: Box<Relay>) {
        self.out.append(&mut relay.out);
        let replies = std::mem::take(&mut relay.checker.server_replies);
        if !replies.is_empty() {
            self.replies.send(replies);
        }
        if relay.ended {
            self.upstream = None;
        }
        self.relay = Some(relay);
    }

    /// Ends the stream (the server failed or stalled).
    fn end(&mut self, why: Refusal) {
        if let Some(mut relay) = self.relay.take() {
            relay.end(why);
            self.settle(relay);
        }
        self.upstream = None;
    }
}

impl Relay {
    /// The complete events in `data`; `None`: the stream ended (an event too large).
    fn frames(&mut self, data: &Bytes) -> Option<Vec<SseFrame>> {
        let mut frames = Vec::new();
        let pushed = self.framer.push(data, &mut frames);
        // The framer bounds what it buffers; an event that came whole in one read is measured
        // here.
        if pushed.is_err() || frames.iter().any(|f| f.raw.len() > self.max_frame) {
            self.end(Refusal::new(
                codes::UNCHECKABLE,
                "the MCP server sent an event larger than limits.max_frame_bytes",
            ));
            return None;
        }
        Some(frames)
    }

    fn check(&mut self, frames: Vec<SseFrame>) {
        for f in frames {
            if self.ended {
                return;
            }
            self.frame(f);
        }
    }

    fn frame(&mut self, f: SseFrame) {
        if f.is_inert() {
            // A keep-alive: its comment text is the server's, not relayed; a valid `retry:` is.
            let retry = f.fields().retry.filter(|r| r.len() <= MAX_RETRY_DIGITS);
            self.out.push_back(match retry {
                Some(r) => Bytes::from([b"retry: ", r, b"\n\n"].concat()),
                None => Bytes::from_static(b":\n\n"),
            });
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
        if fields.event.is_some_and(|e| e != b"message") {
            // MCP's events are all `message`; another type is text guardwire does not read.
            self.end(Refusal::new(
                codes::UPSTREAM,
                "the MCP server sent an SSE event type other than 'message'",
            ));
            return;
        }
        let id = match fields.id.map(event_id) {
            None => None,
            Some(Some(id)) => Some(id),
            Some(None) => {
                self.end(Refusal::new(
                    codes::UPSTREAM,
                    format!("the MCP server sent an SSE event id that is not 1 to {MAX_TOKEN} bytes of printable ASCII"),
                ));
                return;
            }
        };
        let retry = fields.retry.filter(|r| {
            !r.is_empty() && r.len() <= MAX_RETRY_DIGITS && r.iter().all(u8::is_ascii_digit)
        });
        // The event is written anew from what was read and checked: the server's comments are
        // not relayed, its id only once checked.
        let event = |id: Option<&str>, data: Option<&[u8]>| -> Bytes {
            let mut out = Vec::with_capacity(64 + data.map_or(0, <[u8]>::len));
            if fields.event.is_some() {
                out.extend_from_slice(b"event: message\n");
            }
            if let Some(id) = id {
                out.extend_from_slice(b"id: ");
                out.extend_from_slice(id.as_bytes());
                out.push(b'\n');
            }
            if let Some(r) = retry {
                out.extend_from_slice(b"retry: ");
                out.extend_from_slice(r);
                out.push(b'\n');
            }
            for line in data.into_iter().flat_map(|d| d.split(|&b| b == b'\n')) {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(line);
                out.push(b'\n');
            }
            out.push(b'\n');
            out.into()
        };
        let data = match &fields.data {
            // An `id:` or `event:` alone (the SDKs' priming event for resumption) or an empty
            // data line carries no message: its id is read on its own.
            Some(d) if !d.iter().all(u8::is_ascii_whitespace) => d.as_ref(),
            blank => {
                let blank = blank.as_deref();
                let checked = id.filter(|id| {
                    let texts = match is_structure_id(id) {
                        true => Texts {
                            identifiers: vec![id.to_string()],
                            ..Texts::default()
                        },
                        false => Texts {
                            modelled: vec![id.to_string()],
                            ..Texts::default()
                        },
                    };
                    self.checker
                        .input(texts, "the server's SSE event id")
                        .is_ok()
                });
                if checked.is_some() || blank.is_some() || id.is_none() {
                    self.out.push_back(event(checked, blank));
                }
                return;
            }
        };
        let messages = match jsonrpc::parse(data) {
            Ok((messages, false)) => messages,
            Ok(_) => {
                self.end(Refusal::new(
                    codes::UPSTREAM,
                    "the MCP server sent an event that is not one JSON-RPC message",
                ));
                return;
            }
            Err(bad) => {
                self.end(Refusal::new(
                    codes::UPSTREAM,
                    format!(
                        "the MCP server sent an event that is not one JSON-RPC message ({})",
                        bad.message
                    ),
                ));
                return;
            }
        };
        let Some(msg) = messages.first() else {
            return;
        };
        // An id of the SDKs' shape meets the secret and PII patterns on its own; one they
        // flag goes, the event is relayed without it.
        let id = id.filter(|id| {
            !is_structure_id(id) || {
                let texts = Texts {
                    identifiers: vec![id.to_string()],
                    ..Texts::default()
                };
                self.checker
                    .input(texts, "the server's SSE event id")
                    .is_ok()
            }
        });
        match self
            .checker
            .server_event(msg, id.filter(|id| !is_structure_id(id)))
        {
            Verdict::Pass => self.out.push_back(event(id, Some(data))),
            // The id is not relayed with a replacement: it may be what failed.
            Verdict::Replace(json) => self.out.push_back(event(None, Some(json.as_bytes()))),
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
            let json = why.json(&id.to_value());
            self.out
                .push_back(format!("event: message\ndata: {json}\n\n").into());
        }
        self.ended = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdk_ids_are_structure_and_others_text() {
        for id in [
            "ev-0",
            "s_7",
            "123-45-6789",
            "0b7c2f1e-5d3a-4c2b-9e8f-1a2b3c4d5e6f",
            "_GET_stream_1732612345678_ab12",
            "2026-11-26T13:00:00.000Z",
            &"a".repeat(MAX_STRUCTURE_ID),
        ] {
            assert!(is_structure_id(id), "{id}");
        }
        for id in [
            "a@b.example",
            "<forbidden>",
            "x+y",
            "caf\u{e9}",
            &"a".repeat(MAX_STRUCTURE_ID + 1),
        ] {
            assert!(!is_structure_id(id), "{id}");
        }
    }
}
