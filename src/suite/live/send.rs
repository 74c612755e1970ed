//! One request of a live run through the in-process guardwire, and the answer as its client
//! reads it: the status, then the whole body or the SSE events decoded by the route's protocol
//! (the text of choice 0 assembled, tool calls, usage), and the guard's verdicts from the
//! audit lines of its request id.

use super::Prepared;
use crate::delta::{Channel, Delta};
use crate::protocol::{FrameKind, Protocol};
use crate::sse::SseFramer;
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;

/// What one attempt brought back.
pub(super) enum Reply {
    /// An HTTP answer, read whole (at most the run's byte limit).
    Answer { status: u16, sse: bool, body: Bytes },
    /// No answer: a connection error or an answer cut short on the wire.
    Failed(String),
}

/// Sends `p` to guardwire at `addr` (HTTP/1.1, one connection per attempt) with `request_id`,
/// reading at most `max_bytes` of the answer.
pub(super) async fn send(
    addr: SocketAddr,
    p: &Prepared,
    request_id: &str,
    key: Option<&str>,
    max_bytes: usize,
) -> Reply {
    match try_send(addr, p, request_id, key, max_bytes).await {
        Ok(reply) => reply,
        Err(e) => Reply::Failed(e),
    }
}

async fn try_send(
    addr: SocketAddr,
    p: &Prepared,
    request_id: &str,
    key: Option<&str>,
    max_bytes: usize,
) -> Result<Reply, String> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("cannot connect to the in-process guardwire: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = http::Request::post(p.path.as_str())
        .header(http::header::HOST, addr.to_string())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header("x-request-id", request_id);
    if let Some(key) = key {
        req = req.header(http::header::AUTHORIZATION, format!("Bearer {key}"));
    }
    let req = req
        .body(Full::new(p.body.clone()))
        .map_err(|e| format!("building the request: {e}"))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("sending the request: {e}"))?;
    let status = resp.status().as_u16();
    let sse = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    let mut body = resp.into_body();
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("reading the answer: {e}"))?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > max_bytes {
                return Err(format!(
                    "the answer is larger than {max_bytes} bytes (limits.max_response_bytes)"
                ));
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(Reply::Answer {
        status,
        sse,
        body: buf.freeze(),
    })
}

/// An answer read as its client reads it.
#[derive(Default)]
pub(super) struct Read {
    /// The text of choice 0 (content channel), assembled.
    pub text: String,
    /// The tool calls of choice 0: (index, name, arguments as JSON text).
    pub tool_calls: Vec<(u32, String, String)>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// Why the answer is not a complete one (an error status, an error event, a stream cut
    /// short, something the decoder could not read).
    pub error: Option<String>,
}

impl Read {
    fn take(&mut self, d: &Delta<'_>) {
        match d {
            Delta::Text {
                choice: 0,
                channel: Channel::Content,
                text,
            } => self.text.push_str(text),
            Delta::ToolCallStart {
                choice: 0,
                index,
                name,
                ..
            } => self
                .tool_calls
                .push((*index, name.to_string(), String::new())),
            Delta::Text {
                choice: 0,
                channel: Channel::ToolArgs(n),
                text,
            } => {
                if let Some(call) = self.tool_calls.iter_mut().rev().find(|c| c.0 == *n) {
                    call.2.push_str(text);
                }
            }
            Delta::Usage {
                input_tokens,
                output_tokens,
                ..
            } => {
                self.input_tokens = input_tokens.or(self.input_tokens);
                self.output_tokens = output_tokens.or(self.output_tokens);
            }
            _ => {}
        }
    }
}

/// The longest error message kept from an answer.
const MAX_MESSAGE_CHARS: usize = 300;

/// Reads an answer of `protocol`.
pub(super) fn read(
    protocol: &dyn Protocol,
    status: u16,
    sse: bool,
    body: &[u8],
    max_frame: usize,
) -> Read {
    let mut out = Read::default();
    if !(200..300).contains(&status) {
        out.error = Some(format!("HTTP {status}: {}", error_message(body)));
        return out;
    }
    if !sse {
        let mut deltas = Vec::new();
        match protocol.decode_response(body, &mut deltas) {
            Ok(()) => deltas.iter().for_each(|d| out.take(d)),
            Err(e) => out.error = Some(format!("the answer cannot be decoded: {e}")),
        }
        return out;
    }
    let mut framer = SseFramer::new(max_frame);
    let mut frames = Vec::new();
    if let Err(e) = framer.push(&Bytes::copy_from_slice(body), &mut frames) {
        out.error = Some(format!("the stream cannot be framed: {e}"));
        return out;
    }
    let mut decoder = protocol.stream_decoder();
    let mut terminal = false;
    for frame in &frames {
        let fields = frame.fields();
        let Some(data) = fields.data else { continue };
        let mut deltas = Vec::new();
        match decoder.decode(fields.event, &data, &mut deltas) {
            Ok(FrameKind::Terminal) => terminal = true,
            Ok(FrameKind::UpstreamError) => {
                out.error = Some(format!(
                    "the stream ended with an error event: {}",
                    error_message(&data)
                ));
                return out;
            }
            Ok(FrameKind::Data | FrameKind::Passthrough) => {}
            Err(e) => {
                out.error = Some(format!("an event cannot be decoded: {e}"));
                return out;
            }
        }
        deltas.iter().for_each(|d| out.take(d));
    }
    if framer.buffered() > 0 || !(terminal || decoder.complete_without_terminal()) {
        out.error = Some("the stream ended before its terminal event".into());
    }
    out
}

/// The `message` of a JSON error body (OpenAI, Anthropic and Gemini put it under `error`), or
/// the start of the body; control characters dropped.
fn error_message(body: &[u8]) -> String {
    let v: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let text = v
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .and_then(|m| m.as_str())
        })
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    text.chars()
        .filter(|c| !c.is_control())
        .take(MAX_MESSAGE_CHARS)
        .collect()
}
