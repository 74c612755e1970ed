//! One line of a replay file, read into an exchange to check. Two shapes:
//!
//! - a recorded exchange: the request as `"request": {...}` (JSON written into the line) or
//!   as its bytes, `"request_body": "..."` (`request_body_base64` when not UTF-8); the answer,
//!   if any, as `"response": {...}`, or its bytes: `"response_body"` for a whole answer,
//!   `"response_sse"` for a streamed one (the SSE text as the provider sent it), each with a
//!   `_base64` twin — or none (the request alone: BeforeCall only);
//! - an OpenAI-format chat log: `{"id"?, "messages": [...], "tools"?, "model"?}`: the last
//!   `assistant` message is the answer, the messages before it the request (OpenAI chat).
//!
//! The proxy's body capture (`crate::capture`) writes bodies only as strings, so that no body
//! can break its line into records of its own; a line marked as its record
//! (`metadata.captured_by: "guardwire"`) with a body written in as JSON is the format of
//! earlier versions, in which a request could forge records, and is refused.
//!
//! Unknown top-level keys are refused (a misspelt `response` must not replay as a request
//! alone); `metadata` and `tags` are allowed and otherwise ignored.

use crate::protocol::{self, Protocol};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::borrow::Cow;

/// A line's answer, as the upstream sent it.
pub enum Answer<'a> {
    /// No answer recorded: the request's checks only.
    None,
    /// A whole JSON body.
    Whole(Cow<'a, [u8]>),
    /// An SSE body.
    Sse(Vec<u8>),
    /// A provider's error answer (a capture's `upstream_status` outside 2xx): its body as
    /// the proxy checked it, or `None` when the proxy could not read it (the client was
    /// answered with an error of guardwire's).
    Error(Option<Vec<u8>>),
}

/// One exchange to replay.
pub struct Exchange<'a> {
    pub id: String,
    pub route: Option<String>,
    /// The protocol the line names (else the route's).
    pub protocol: Option<&'static dyn Protocol>,
    pub path: Option<String>,
    pub request: Cow<'a, [u8]>,
    pub answer: Answer<'a>,
    /// The client key a capture record says the exchange came with (`metadata.key_id`): its
    /// own packs, when it has them, decide it as they did in the proxy.
    pub key_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    route: Option<String>,
    #[serde(default)]
    protocol: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default, borrow)]
    request: Option<&'a RawValue>,
    #[serde(default, borrow)]
    response: Option<&'a RawValue>,
    #[serde(default)]
    response_sse: Option<String>,
    /// A whole answer's bytes, as text.
    #[serde(default)]
    response_body: Option<String>,
    #[serde(default)]
    request_body: Option<String>,
    #[serde(default)]
    request_body_base64: Option<String>,
    #[serde(default)]
    response_body_base64: Option<String>,
    #[serde(default)]
    response_sse_base64: Option<String>,
    // The chat-log shape.
    #[serde(default)]
    messages: Option<Vec<Value>>,
    #[serde(default)]
    tools: Option<Value>,
    #[serde(default)]
    parallel_tool_calls: Option<Value>,
    #[serde(default)]
    model: Option<String>,
    // Ignored, but for whose record the line says it is.
    #[serde(default)]
    metadata: Option<&'a RawValue>,
    #[serde(default, rename = "tags")]
    _tags: Option<&'a RawValue>,
}

/// The keys a replay line may have, named when a line has another.
const KNOWN_KEYS: &str = "id, route, protocol, path, request, request_body, request_body_base64, response, response_body, response_body_base64, response_sse, response_sse_base64; messages, tools, parallel_tool_calls, model; metadata, tags";

/// `metadata.captured_by`, when the metadata is an object that has it.
#[derive(Deserialize)]
struct CapturedBy<'a> {
    #[serde(default, borrow)]
    captured_by: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    upstream_status: Option<u16>,
    #[serde(default)]
    key_id: Option<String>,
}

/// A body given as text or base64 (`key` names it in errors): its bytes.
fn bytes_of(
    text: Option<String>,
    base64: Option<String>,
    key: &str,
) -> Result<Option<Vec<u8>>, String> {
    use base64::Engine;
    match (text, base64) {
        (Some(t), None) => Ok(Some(t.into_bytes())),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map(Some)
            .map_err(|_| format!("{key}_base64: not base64")),
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(format!("a line has {key} or {key}_base64, not both")),
    }
}

/// Reads one line (`n`: its number from 1, the id of a line without one).
pub fn read(line: &[u8], n: u64) -> Result<Exchange<'_>, String> {
    let l: Line<'_> = serde_json::from_slice(line)
        .map_err(|e| super::line_error(&e, "not a replay line", Some(KNOWN_KEYS)))?;
    let id = super::line_id(l.id, n);
    let protocol = match &l.protocol {
        None => None,
        Some(name) => Some(protocol::by_name(name).ok_or_else(|| {
            format!(
                "protocol {name:?} is not one of: {}",
                protocol::all().map(|p| p.name()).join(", ")
            )
        })?),
    };
    let metadata = l
        .metadata
        .and_then(|m| serde_json::from_str::<CapturedBy<'_>>(m.get()).ok());
    let captured = metadata
        .as_ref()
        .and_then(|m| m.captured_by.as_deref())
        .is_some_and(|by| by == "guardwire");
    let key_id = metadata.as_ref().and_then(|m| m.key_id.clone());
    // A provider's error answer, as guardwire's capture records it.
    let error_status = metadata
        .and_then(|m| m.upstream_status)
        .filter(|status| captured && !(200..300).contains(status));
    if captured && (l.request.is_some() || l.response.is_some()) {
        return Err("a capture record in the format of guardwire before bodies were written as strings: a request could write records of its own into such a file; capture again (docs/capture.md)".into());
    }
    let request_body = bytes_of(l.request_body, l.request_body_base64, "request_body")?;
    let response_body = bytes_of(l.response_body, l.response_body_base64, "response_body")?;
    let response_sse = bytes_of(l.response_sse, l.response_sse_base64, "response_sse")?;
    if let Some(messages) = l.messages {
        if l.request.is_some()
            || request_body.is_some()
            || l.response.is_some()
            || response_sse.is_some()
            || response_body.is_some()
        {
            return Err("a line has either messages (a chat log) or request/response".into());
        }
        if protocol.is_some_and(|p| p.name() != "openai_chat") {
            return Err(
                "a chat log (messages) is OpenAI chat: protocol must be openai_chat".into(),
            );
        }
        let (request, answer) = chat_log(messages, l.tools, l.parallel_tool_calls, l.model);
        return Ok(Exchange {
            id,
            route: l.route,
            protocol: Some(protocol::by_name("openai_chat").ok_or("no openai_chat protocol")?),
            path: l.path,
            request: Cow::Owned(request),
            answer,
            key_id,
        });
    }
    if l.tools.is_some() || l.parallel_tool_calls.is_some() || l.model.is_some() {
        return Err(
            "tools, parallel_tool_calls and model belong to a chat log (messages); a recorded exchange has them in its request".into(),
        );
    }
    let request = match (l.request, request_body) {
        (Some(r), None) => Cow::Borrowed(r.get().as_bytes()),
        (None, Some(b)) => Cow::Owned(b),
        (None, None) => {
            return Err(
                "no request (a line has request or request_body, and a response; or messages)"
                    .into(),
            )
        }
        (Some(_), Some(_)) => {
            return Err("a line has one of request and request_body, not both".into())
        }
    };
    let answer = match (l.response, response_sse, response_body) {
        (None, None, body) if error_status.is_some() => Answer::Error(body),
        (Some(r), None, None) => Answer::Whole(Cow::Borrowed(r.get().as_bytes())),
        (None, Some(s), None) => Answer::Sse(s),
        (None, None, Some(b)) => Answer::Whole(Cow::Owned(b)),
        (None, None, None) => Answer::None,
        _ => {
            return Err(
                "a line has one of response, response_sse and response_body, not several".into(),
            )
        }
    };
    Ok(Exchange {
        id,
        route: l.route,
        protocol,
        path: l.path,
        request,
        answer,
        key_id,
    })
}

/// A chat log as an OpenAI chat request (the messages before the last assistant message)
/// and its whole answer (that message).
fn chat_log(
    mut messages: Vec<Value>,
    tools: Option<Value>,
    parallel: Option<Value>,
    model: Option<String>,
) -> (Vec<u8>, Answer<'static>) {
    let last = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("assistant"));
    let answer = last.map(|i| messages.remove(i));
    // Messages after the answer (a tool result, a next user turn) are not part of this
    // exchange.
    if let Some(i) = last {
        messages.truncate(i);
    }
    let model = model.unwrap_or_else(|| "replay".into());
    let mut request = json!({ "model": model, "messages": messages });
    if let Some(t) = tools {
        request["tools"] = t;
    }
    if let Some(p) = parallel {
        request["parallel_tool_calls"] = p;
    }
    let answer = match answer {
        None => Answer::None,
        Some(message) => {
            let finish = if message.get("tool_calls").is_some() {
                "tool_calls"
            } else {
                "stop"
            };
            let body = json!({
                "id": "replay",
                "object": "chat.completion",
                "model": model,
                "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
            });
            Answer::Whole(Cow::Owned(body.to_string().into_bytes()))
        }
    };
    (request.to_string().into_bytes(), answer)
}

/// The path a protocol's request is parsed under when the line names none (Gemini reads the
/// model and whether it streams from it).
pub fn default_path(protocol: &dyn Protocol, streamed: bool, request: &[u8]) -> String {
    match protocol.name() {
        "openai_chat" => "/v1/chat/completions".into(),
        "openai_responses" => "/v1/responses".into(),
        "anthropic_messages" => "/v1/messages".into(),
        "openai_completions" => "/v1/completions".into(),
        "openai_embeddings" => "/v1/embeddings".into(),
        "gemini" => {
            // Gemini requests do not name their model; a recorded one may (ignored otherwise).
            let model = serde_json::from_slice::<Value>(request)
                .ok()
                .and_then(|v| v.get("model").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| "replay".into());
            let method = if streamed {
                "streamGenerateContent"
            } else {
                "generateContent"
            };
            format!("/v1beta/models/{model}:{method}")
        }
        other => format!("/{other}"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    #[test]
    fn a_chat_log_splits_at_its_last_assistant_message() {
        let line = br#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"},{"role":"assistant","content":"bye"}],"tags":["x"]}"#;
        let ex = read(line, 7).unwrap();
        assert_eq!(ex.id, "line 7");
        let req: Value = serde_json::from_slice(&ex.request).unwrap();
        assert_eq!(req["messages"].as_array().unwrap().len(), 3);
        let Answer::Whole(body) = ex.answer else {
            panic!("no answer")
        };
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["choices"][0]["message"]["content"], "bye");
    }

    #[test]
    fn misspelt_keys_and_mixed_shapes_are_refused() {
        assert!(read(br#"{"request":{},"respone":{}}"#, 1)
            .err()
            .unwrap()
            .contains("respone"));
        assert!(read(br#"{"messages":[],"request":{}}"#, 1).is_err());
        assert!(read(br#"{"request":{},"response":{},"response_sse":""}"#, 1).is_err());
        assert!(read(br#"{"request":{},"protocol":"nope"}"#, 1).is_err());
        assert!(read(br#"{"request":{},"response":{},"response_body":"x"}"#, 1).is_err());
        let ex = read(br#"{"request":{},"response_body":"not json"}"#, 1).unwrap();
        assert!(matches!(ex.answer, Answer::Whole(b) if &*b == b"not json"));
        let ex = read(br#"{"id":42,"request":{"a":1}}"#, 1).unwrap();
        assert_eq!(ex.id, "42");
        assert!(matches!(ex.answer, Answer::None));
    }

    #[test]
    fn bodies_as_strings_and_the_old_capture_format() {
        let ex = read(
            br#"{"request_body":"{\"a\":\n1}","response_sse_base64":"/wo=","metadata":{"captured_by":"guardwire"}}"#,
            1,
        )
        .unwrap();
        assert_eq!(&*ex.request, b"{\"a\":\n1}");
        assert!(matches!(ex.answer, Answer::Sse(b) if b == b"\xff\n"));
        for bad in [
            &br#"{"request":{},"request_body":"{}"}"#[..],
            br#"{"request_body":"{}","request_body_base64":"e30="}"#,
            br#"{"request_body_base64":"not base64!"}"#,
            br#"{"request_body":"{}","response":{},"response_body":"{}"}"#,
            br#"{"messages":[],"request_body":"{}"}"#,
        ] {
            assert!(read(bad, 1).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        // A record of the capture's former format: refused, naming why.
        let old = br#"{"request":{"messages":[]},"response":{},"metadata":{"captured_by":"guardwire","status":200}}"#;
        let e = read(old, 1).err().unwrap();
        assert!(e.contains("capture again"), "{e}");
        // Hand-written lines keep their JSON bodies; metadata of any shape is ignored.
        assert!(read(br#"{"request":{},"metadata":"free text"}"#, 1).is_ok());
        assert!(read(br#"{"request":{},"metadata":{"captured_by":"me"}}"#, 1).is_ok());
    }
}
