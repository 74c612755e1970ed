//! Anthropic Messages (`POST /v1/messages`).
//!
//! Stream frames are `event: <type>` + `data: {"type":"<type>",…}`. Content blocks are numbered;
//! `content_block_start` says what block `index` is (text, tool_use, thinking), so the decoder
//! remembers it to route `content_block_delta`s: `text_delta` → answer text, `input_json_delta`
//! → tool arguments, `thinking_delta` → reasoning. `message_stop` ends the stream.

use super::documents::{Documents, StoredKind};
use super::{text_delta, DecodeError, ParsedRequest, Protocol, StreamDecoder};
use super::{AuthHeader, ProtocolId, Provider};
use crate::delta::{Channel, Conversation, Delta, Message, Role, ToolCall, ToolSpec};
use crate::error::GatewayError;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

pub struct AnthropicMessages;

// ---- requests ----

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    system: Option<Content>,
    #[serde(default)]
    messages: Vec<RequestMessage>,
    #[serde(default)]
    tools: Vec<RequestTool>,
    /// Remote MCP servers the API calls for the model.
    #[serde(default)]
    mcp_servers: Option<Vec<serde::de::IgnoredAny>>,
    /// The code execution container: `skills` are files stored at the provider.
    #[serde(default)]
    container: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RequestMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    /// A `Value`, not raw JSON: blocks sit inside an untagged enum, which buffers its input.
    #[serde(default)]
    input: Option<serde_json::Value>,
    #[serde(default)]
    tool_use_id: Option<String>,
    #[serde(default)]
    is_error: Option<bool>,
    /// tool_result content: a string or blocks.
    #[serde(default)]
    content: Option<Content>,
    /// An image's or a document's bytes: inline, uploaded or by URL.
    #[serde(default)]
    source: Option<Source>,
    /// A file uploaded to the provider (`container_upload` blocks).
    #[serde(default)]
    file_id: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Source {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    data: Option<String>,
}

/// A block's document (`source`, at `path`): its text, or noted in `docs` (images are exempt).
fn source_text(
    b: &mut Block,
    path: &str,
    docs: &mut Documents,
) -> Result<Option<String>, GatewayError> {
    if b.file_id.is_some() {
        docs.stored(StoredKind::File, format!("{path}.file_id"));
    }
    let Some(source) = b.source.take() else {
        return Ok(None);
    };
    if b.kind == "image" {
        return Ok(None);
    }
    let media_type = source.media_type.as_deref();
    Ok(match (source.kind.as_deref(), source.data) {
        (Some("base64"), Some(data)) => {
            docs.base64(media_type, &data, &format!("{path}.source.data"))?
        }
        (Some("text"), Some(data)) => docs.text(media_type, data, &format!("{path}.source")),
        (Some("file"), _) => {
            docs.stored(StoredKind::File, format!("{path}.source.file_id"));
            None
        }
        (Some("url"), _) => {
            docs.stored(StoredKind::Url, format!("{path}.source.url"));
            None
        }
        // Content blocks (`source.content`) are read by the fallback like any blocks.
        (Some("content"), None) => None,
        _ => {
            docs.unreadable(media_type, &format!("{path}.source"));
            None
        }
    })
}

#[derive(Deserialize)]
struct RequestTool {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    /// A server tool's type (`web_search_20250305`, `web_fetch_…`); none for a client tool.
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

/// The texts of `content` (at `path`): a string, or its blocks' texts, thinking, documents
/// and nested content.
fn content_texts(
    content: Content,
    out: &mut Vec<String>,
    path: &str,
    docs: &mut Documents,
) -> Result<(), GatewayError> {
    match content {
        Content::Text(t) => out.push(t),
        Content::Blocks(blocks) => {
            for (i, mut b) in blocks.into_iter().enumerate() {
                let at = format!("{path}[{i}]");
                out.extend(b.text.take());
                out.extend(b.thinking.take());
                out.extend(source_text(&mut b, &at, docs)?);
                if let Some(inner) = b.content {
                    content_texts(inner, out, &format!("{at}.content"), docs)?;
                }
            }
        }
    }
    Ok(())
}

// ---- responses ----

#[derive(Deserialize)]
pub(super) struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    /// Input written to and read from the prompt cache: billed beside `input_tokens`, which
    /// leaves them out.
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl Usage {
    /// The usage as billed: the cache's tokens are input too (priced apart, `CacheTokens`).
    pub(super) fn delta<'a>(&self) -> Delta<'a> {
        let (write, read) = (
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        );
        let cache = (write.is_some() || read.is_some()).then(|| crate::delta::CacheTokens {
            write: write.unwrap_or(0),
            read: read.unwrap_or(0),
        });
        let input = match cache {
            None => self.input_tokens,
            Some(c) => Some(
                self.input_tokens
                    .unwrap_or(0)
                    .saturating_add(c.write)
                    .saturating_add(c.read),
            ),
        };
        Delta::Usage {
            input_tokens: input,
            output_tokens: self.output_tokens,
            cache,
        }
    }
}

#[derive(Deserialize)]
struct WholeMessage<'a> {
    #[serde(borrow, default)]
    content: Vec<WholeBlock<'a>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct WholeBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
}

/// Anthropic: `upstreams.anthropic`.
const PROVIDER: Provider = Provider::new(Some("anthropic"), "anthropic");

/// The Anthropic SDKs' request headers: the API version and beta features they ask for, their
/// telemetry, and their browser opt-in; the key (`x-api-key`, or a Bearer token) only when it
/// is the client's own.
static HEADERS: super::HeaderAllowlist = super::HeaderAllowlist {
    names: &[
        "anthropic-version",
        "anthropic-beta",
        "anthropic-dangerous-direct-browser-access",
    ],
    prefixes: &["x-stainless-"],
    client_account: &["x-api-key", "authorization"],
};

impl Protocol for AnthropicMessages {
    fn id(&self) -> ProtocolId {
        ProtocolId::AnthropicMessages
    }

    fn matches(&self, path: &str) -> bool {
        path == "/v1/messages"
    }

    fn serves(&self, path: &str) -> bool {
        path.ends_with("/messages")
    }

    fn forward_headers(&self) -> &'static super::HeaderAllowlist {
        &HEADERS
    }

    fn auth_header(&self) -> AuthHeader {
        AuthHeader::XApiKey
    }

    fn structural(&self) -> &'static super::residual::Structural {
        &STRUCTURAL
    }

    fn provider(&self) -> Provider {
        PROVIDER
    }

    fn parse_request(&self, body: &[u8], _path: &str) -> Result<ParsedRequest, GatewayError> {
        let req: Request = super::request_json(body)?;
        let mut messages = Vec::new();
        let mut documents = Documents::default();
        if let Some(system) = req.system {
            let mut text = Vec::new();
            content_texts(system, &mut text, "system", &mut documents)?;
            messages.push(Message::text(Role::System, text));
        }
        for (i, m) in req.messages.into_iter().enumerate() {
            let mut text = Vec::new();
            let mut tool_calls = Vec::new();
            let mut tool_call_id = None;
            let mut is_error = false;
            match m.content {
                Some(Content::Text(t)) => text.push(t),
                Some(Content::Blocks(blocks)) => {
                    for (j, mut b) in blocks.into_iter().enumerate() {
                        let at = format!("messages[{i}].content[{j}]");
                        text.extend(source_text(&mut b, &at, &mut documents)?);
                        match b.kind.as_str() {
                            "tool_use" => tool_calls.push(ToolCall {
                                id: b.id,
                                name: b.name.unwrap_or_default(),
                                arguments: b.input.map(|i| i.to_string()).unwrap_or_default(),
                            }),
                            "tool_result" => {
                                tool_call_id = b.tool_use_id;
                                is_error |= b.is_error.unwrap_or(false);
                                if let Some(c) = b.content {
                                    let at = format!("{at}.content");
                                    content_texts(c, &mut text, &at, &mut documents)?;
                                }
                            }
                            _ => {
                                text.extend(b.text);
                                text.extend(b.thinking);
                            }
                        }
                    }
                }
                None => {}
            }
            let role = if tool_call_id.is_some() {
                Role::Tool
            } else {
                Role::parse(&m.role)
            };
            messages.push(Message {
                role,
                text,
                tool_calls,
                tool_call_id,
                is_error,
                name: None,
            });
        }
        for (i, t) in req.tools.iter().enumerate() {
            if let Some(kind) = t
                .kind
                .as_deref()
                .filter(|k| super::documents::hosted_tool_reads(k))
            {
                documents.stored(StoredKind::HostedTool, format!("tools[{i}] ({kind})"));
            }
        }
        if req.mcp_servers.is_some_and(|s| !s.is_empty()) {
            documents.stored(StoredKind::HostedTool, "mcp_servers");
        }
        let skills = req.container.as_ref().and_then(|c| c.get("skills"));
        if skills
            .and_then(|s| s.as_array())
            .is_some_and(|s| !s.is_empty())
        {
            documents.stored(StoredKind::HostedTool, "container.skills");
        }
        // An existing container (its id) holds the files of earlier turns.
        let existing = |c: &serde_json::Value| c.is_string() || c.get("id").is_some();
        if req.container.as_ref().is_some_and(existing) {
            documents.stored(StoredKind::HostedTool, "container");
        }
        let tools = req
            .tools
            .into_iter()
            .filter_map(|t| {
                t.name.map(|name| ToolSpec {
                    name,
                    description: t.description,
                })
            })
            .collect();
        Ok(ParsedRequest {
            session: None,
            stream: req.stream.unwrap_or(false),
            choices: None,
            model: req.model,
            conversation: Conversation { messages, tools },
            unreadable_input: false,
            documents,
        })
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::<MessagesStream>::default()
    }

    fn decode_response<'a>(
        &self,
        body: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<(), DecodeError> {
        let msg: WholeMessage<'a> = serde_json::from_slice(body)
            .map_err(|e| DecodeError::json("malformed Anthropic message", &e))?;
        for (index, block) in msg.content.into_iter().enumerate() {
            let index = index as u32;
            match &*block.kind {
                "text" => out.extend(text_delta(Channel::Content, block.text)),
                "thinking" => out.extend(text_delta(Channel::Reasoning, block.thinking)),
                "tool_use" | "server_tool_use" => {
                    out.push(Delta::ToolCallStart {
                        choice: 0,
                        index,
                        id: block.id,
                        name: block.name.unwrap_or(Cow::Borrowed("")),
                    });
                    if let Some(input) = block.input {
                        out.push(Delta::Text {
                            choice: 0,
                            channel: Channel::ToolArgs(index),
                            text: Cow::Borrowed(input.get()),
                        });
                    }
                }
                _ => {}
            }
        }
        if let Some(reason) = msg.stop_reason {
            out.push(Delta::Finish { choice: 0, reason });
        }
        if let Some(u) = msg.usage {
            out.push(u.delta());
        }
        Ok(())
    }

    fn error_body(&self, err: &GatewayError, _to: &super::ReplyTo) -> Bytes {
        anthropic_error_json(err).into()
    }

    fn stream_error_frame(&self, err: &GatewayError, _to: &super::ReplyTo) -> Bytes {
        format!("event: error\ndata: {}\n\n", anthropic_error_json(err)).into()
    }
}

/// `{"type":"error","error":{"type":…,"message":…}}`, which the anthropic SDKs parse.
fn anthropic_error_json(err: &GatewayError) -> String {
    let kind = match err {
        GatewayError::Blocked { .. }
        | GatewayError::InvalidRequest(_)
        | GatewayError::MethodNotAllowed(_)
        | GatewayError::BodyTimeout { .. }
        | GatewayError::UnsupportedMediaType(_)
        | GatewayError::HoldbackExceeded { .. } => "invalid_request_error",
        GatewayError::NotFound(_) => "not_found_error",
        GatewayError::Unauthorized(_) => "authentication_error",
        GatewayError::PayloadTooLarge { .. } => "request_too_large",
        GatewayError::UpstreamTimeout(_) => "timeout_error",
        GatewayError::Overloaded
        | GatewayError::BufferFull
        | GatewayError::ShuttingDown
        | GatewayError::StateUnavailable => "overloaded_error",
        GatewayError::KeyLimit | GatewayError::AddressLimit | GatewayError::RateLimited { .. } => {
            "rate_limit_error"
        }
        GatewayError::Upstream(_)
        | GatewayError::UpstreamIncomplete
        | GatewayError::Internal(_) => "api_error",
    };
    serde_json::json!({"type": "error", "error": {"type": kind, "message": err.to_string()}})
        .to_string()
}

mod stream;
#[cfg(test)]
use stream::MAX_BLOCKS;
use stream::{MessagesStream, STRUCTURAL};
#[cfg(test)]
mod template_tests;
#[cfg(test)]
mod tests;
