//! One line of a replay file, read into an exchange to check. Two shapes:
//!
//! - a recorded exchange: `{"id", "route"?, "protocol"?, "path"?, "request": {...},
//!   "response": {...}}`, or `"response_sse": "data: ...\n\n..."` for a streamed answer (the
//!   body as the provider sent it), or `"response_body": "..."` for a whole answer that is
//!   not JSON (as text), or none (the request alone: BeforeCall only) — the shape of the
//!   proxy's body capture (`crate::capture`), whose `metadata` a replay ignores;
//! - an OpenAI-format chat log: `{"id"?, "messages": [...], "tools"?, "model"?}`: the last
//!   `assistant` message is the answer, the messages before it the request (OpenAI chat).
//!
//! Unknown top-level keys are refused (a misspelt `response` must not replay as a request
//! alone); `metadata` and `tags` are allowed and ignored.

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
    Sse(String),
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
    /// A whole answer that is not JSON, as text (a capture of a malformed upstream answer).
    #[serde(default)]
    response_body: Option<String>,
    // The chat-log shape.
    #[serde(default)]
    messages: Option<Vec<Value>>,
    #[serde(default)]
    tools: Option<Value>,
    #[serde(default)]
    parallel_tool_calls: Option<Value>,
    #[serde(default)]
    model: Option<String>,
    // Ignored.
    #[serde(default, rename = "metadata")]
    _metadata: Option<&'a RawValue>,
    #[serde(default, rename = "tags")]
    _tags: Option<&'a RawValue>,
}

/// The keys a replay line may have, named when a line has another.
const KNOWN_KEYS: &str = "id, route, protocol, path, request, response, response_sse, response_body; messages, tools, parallel_tool_calls, model; metadata, tags";

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
    if let Some(messages) = l.messages {
        if l.request.is_some()
            || l.response.is_some()
            || l.response_sse.is_some()
            || l.response_body.is_some()
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
        });
    }
    if l.tools.is_some() || l.parallel_tool_calls.is_some() || l.model.is_some() {
        return Err(
            "tools, parallel_tool_calls and model belong to a chat log (messages); a recorded exchange has them in its request".into(),
        );
    }
    let request = l
        .request
        .ok_or("no request (a line has request and response, or messages)")?;
    let answer = match (l.response, l.response_sse, l.response_body) {
        (Some(r), None, None) => Answer::Whole(Cow::Borrowed(r.get().as_bytes())),
        (None, Some(s), None) => Answer::Sse(s),
        (None, None, Some(b)) => Answer::Whole(Cow::Owned(b.into_bytes())),
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
        request: Cow::Borrowed(request.get().as_bytes()),
        answer,
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
}
