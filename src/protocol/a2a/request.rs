//! A2A calls as guardwire reads them: the JSON-RPC envelope, the method, and a message's parts
//! (1.0: `text`, `raw` + `mediaType`, `url`, `data`; 0.3: `kind` `text`, `file` with `bytes`
//! or `uri`, `data`).

use crate::delta::{Conversation, Message, Role};
use crate::error::GatewayError;
use crate::protocol::documents::{self, Documents, StoredKind};
use crate::protocol::identifier;
use crate::protocol::mcp::jsonrpc::read_unique;
use crate::protocol::residual::{schema_strings, Place};
use crate::protocol::ParsedRequest;
use serde::Deserialize;
use serde_json::Value;

/// What a method is to guardwire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Sends a message (its parts are checked as input); `stream`: answered with SSE.
    Send { stream: bool },
    /// Reads or acts on a task: nothing to check in the call, the task in the answer.
    Task { stream: bool },
    /// Refused: the reason, said to the client.
    Refused(&'static str),
    /// Not an A2A method guardwire knows: forwarded, its strings read by the fallback.
    Unknown,
}

const PUSH: &str = "push notifications deliver the agent's answers past guardwire, which cannot check them; they are not available through an a2a route";
const EXTENDED_CARD: &str = "the extended agent card names the agent's own URLs, which guardwire cannot rewrite in a call; it is not available through an a2a route";

pub fn method(name: &str) -> Method {
    match name {
        "SendMessage" | "message/send" => Method::Send { stream: false },
        "SendStreamingMessage" | "message/stream" => Method::Send { stream: true },
        "GetTask" | "tasks/get" | "CancelTask" | "tasks/cancel" | "ListTasks" | "tasks/list" => {
            Method::Task { stream: false }
        }
        "SubscribeToTask" | "tasks/resubscribe" => Method::Task { stream: true },
        // Any other spelling of a push-notification method (SDKs differ: `Set…`, singular
        // `List…Config`, 0.3's `tasks/pushNotificationConfig/…`) is refused too.
        n if n.to_ascii_lowercase().contains("pushnotification") => Method::Refused(PUSH),
        "GetExtendedAgentCard" | "agent/getAuthenticatedExtendedCard" => {
            Method::Refused(EXTENDED_CARD)
        }
        _ => Method::Unknown,
    }
}

/// The id an error answer repeats: JSON-RPC's rule, shared with MCP.
pub use crate::protocol::mcp::jsonrpc::reply_to;

#[derive(Deserialize)]
struct Call {
    jsonrpc: Option<String>,
    method: String,
    #[serde(default)]
    params: Option<Value>,
}

/// The call's method, when the body is a JSON-RPC call guardwire can read.
pub fn method_of(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Name<'a> {
        #[serde(borrow)]
        method: std::borrow::Cow<'a, str>,
    }
    serde_json::from_slice::<Name<'_>>(body)
        .ok()
        .map(|n| n.method.into_owned())
}

fn invalid(m: impl Into<String>) -> GatewayError {
    GatewayError::InvalidRequest(m.into())
}

pub fn parse(body: &[u8]) -> Result<ParsedRequest, GatewayError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        return Err(invalid(
            "JSON-RPC batches are not supported on an a2a route; send one call per request",
        ));
    }
    // A key twice, at any depth, is refused as on MCP routes: serde_json keeps the last copy,
    // an agent's reader may take the first, which then went unchecked.
    let value = read_unique(body)
        .map_err(|e| invalid(format!("invalid JSON-RPC request: {}", e.message)))?;
    if let Some(key) = twice_spelled(&value) {
        return Err(invalid(format!(
            "`{key}` is given in both its camelCase and its snake_case spelling; send one"
        )));
    }
    let call: Call = serde_json::from_value(value)
        .map_err(|e| invalid(format!("invalid JSON-RPC request: {e}")))?;
    if call.jsonrpc.as_deref() != Some("2.0") {
        return Err(invalid("a JSON-RPC request must say \"jsonrpc\": \"2.0\""));
    }
    let mut parsed = ParsedRequest::default();
    let known = method(&call.method);
    match known {
        Method::Refused(why) => return Err(invalid(why)),
        Method::Task { stream } => parsed.stream = stream,
        Method::Unknown => {}
        Method::Send { stream } => {
            parsed.stream = stream;
            let params = call
                .params
                .as_ref()
                .ok_or_else(|| invalid("params: a message is required"))?;
            let config = params.get("configuration");
            let push = config.and_then(|c| {
                [
                    "taskPushNotificationConfig",
                    "task_push_notification_config",
                    "pushNotificationConfig",
                    "push_notification_config",
                ]
                .iter()
                .find_map(|k| c.get(*k).filter(|p| !p.is_null()))
            });
            if push.is_some() {
                return Err(invalid(PUSH));
            }
            let message = params
                .get("message")
                .ok_or_else(|| invalid("params.message is required"))?;
            parsed.session = ["contextId", "context_id"]
                .iter()
                .find_map(|k| message.get(*k).and_then(Value::as_str))
                .filter(|c| !c.is_empty())
                .map(str::to_owned);
            let texts = message_texts(message, "params.message", &mut parsed.documents)?;
            parsed.conversation = conversation(texts);
        }
    }
    structure(body, known, &mut parsed.conversation)?;
    Ok(parsed)
}

/// The values at the call's places of structure (ids, kinds, media types, the method), read
/// whatever `unknown_content` says: an identifier-shaped one by the secret and PII patterns, any
/// other as text (a `contextId` that holds a sentence goes to the agent as one).
fn structure(
    body: &[u8],
    known: Method,
    conversation: &mut Conversation,
) -> Result<(), GatewayError> {
    let schema = match known {
        Method::Send { .. } | Method::Task { .. } => &super::schema::CALL_SCHEMA,
        _ => &super::schema::UNKNOWN_CALL_SCHEMA,
    };
    let mut left = Vec::new();
    schema_strings(body, schema, &[], &mut left)
        .map_err(|_| invalid("the request body cannot be read"))?;
    let mut identifiers = Vec::new();
    for l in left {
        let text = || {
            serde_json::from_slice::<String>(&body[l.literal.clone()])
                .map_err(|_| invalid("the request body cannot be read"))
        };
        match l.place {
            Place::Identifier => identifiers.push(text()?),
            Place::Structure => conversation.messages.push(Message::text(
                Role::Other("structure".into()),
                vec![text()?],
            )),
            Place::Text | Place::Unknown => {}
        }
    }
    conversation
        .messages
        .extend(identifier::message(identifiers));
    Ok(())
}

/// The message's text parts as the user's message; with more than one, their concatenation
/// too, so a phrase split between parts is read as the agent reads it.
fn conversation(texts: Vec<String>) -> Conversation {
    let mut messages = Vec::new();
    if texts.len() > 1 {
        messages.push(Message::text(Role::User, vec![texts.concat()]));
    }
    messages.insert(0, Message::text(Role::User, texts));
    Conversation {
        messages,
        tools: Vec::new(),
    }
}

/// The texts of a message's parts: text parts, and inline files read as text (unreadable ones
/// noted in `documents`, files by URL noted as stored content).
fn message_texts(
    message: &Value,
    path: &str,
    documents: &mut Documents,
) -> Result<Vec<String>, GatewayError> {
    let parts = match message.get("parts") {
        Some(Value::Array(parts)) => parts,
        // The SDKs read `null` as no parts.
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(_) => return Err(invalid(format!("{path}.parts must be a list"))),
    };
    let mut texts = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let at = format!("{path}.parts[{i}]");
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            texts.push(text.to_owned());
        }
        // A field by its camelCase or its snake_case name, as the SDKs read it.
        let str_of = |v: &Value, camel: &str, snake: &str| {
            v.get(camel)
                .or_else(|| v.get(snake))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        // 1.0: raw bytes or a URL beside `mediaType` and `filename`.
        if let Some(raw) = part.get("raw").and_then(Value::as_str) {
            let name = str_of(part, "filename", "filename");
            let media = str_of(part, "mediaType", "media_type")
                .or_else(|| documents::media_type_of_name(name.as_deref()).map(str::to_owned));
            if let Some(t) = documents.base64(media.as_deref(), raw, &format!("{at}.raw"))? {
                texts.push(t);
            }
        }
        if part.get("url").and_then(Value::as_str).is_some() {
            documents.stored(StoredKind::Url, format!("{at}.url"));
        }
        // 0.3: `file` with `bytes` or `uri` beside `mimeType` and `name`.
        if let Some(file) = part.get("file") {
            let name = str_of(file, "name", "name");
            let media = str_of(file, "mimeType", "mime_type")
                .or_else(|| documents::media_type_of_name(name.as_deref()).map(str::to_owned));
            if let Some(bytes) = file.get("bytes").and_then(Value::as_str) {
                let path = format!("{at}.file.bytes");
                if let Some(t) = documents.base64(media.as_deref(), bytes, &path)? {
                    texts.push(t);
                }
            }
            if file.get("uri").and_then(Value::as_str).is_some() {
                documents.stored(StoredKind::Url, format!("{at}.file.uri"));
            }
        }
    }
    Ok(texts)
}

/// A field given in both spellings the agent's SDK reads (`mediaType` and `media_type`): the
/// SDK refuses it or keeps one of them, maybe not the one checked. Free-form data (`data`,
/// `metadata`) may name its keys as it likes.
fn twice_spelled(value: &Value) -> Option<String> {
    match value {
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if k.bytes().any(|b| b.is_ascii_uppercase()) {
                let mut snake = String::with_capacity(k.len() + 4);
                for c in k.chars() {
                    if c.is_ascii_uppercase() {
                        snake.push('_');
                    }
                    snake.push(c.to_ascii_lowercase());
                }
                if map.contains_key(&snake) {
                    return Some(k.clone());
                }
            }
            match k.as_str() {
                "data" | "metadata" => None,
                _ => twice_spelled(v),
            }
        }),
        Value::Array(items) => items.iter().find_map(twice_spelled),
        _ => None,
    }
}
