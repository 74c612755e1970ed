//! OpenAI Chat Completions (`POST /v1/chat/completions`), also spoken by Azure OpenAI, vLLM and
//! most OpenAI-compatible servers.
//!
//! Stream frames are `data: <chunk>` with no `event:` lines, ending with `data: [DONE]`.
//! Text, refusals, reasoning (`reasoning_content` / `reasoning`, as compatible servers send it)
//! and tool-call argument fragments of *every* choice become deltas.

use super::documents::{self, Documents, StoredKind};
use super::residual::Structural;
use super::skim::{Holes, Unsure};
use super::{DecodeError, FrameKind, ParsedRequest, Protocol, StreamDecoder};
use super::{ProtocolId, Provider};
use crate::delta::{Channel, Conversation, Delta, Message, Role, ToolCall, ToolSpec};
use crate::error::GatewayError;
use fast::skim_chunk;
use pieces::CallPieces;
use serde::Deserialize;
use std::borrow::Cow;
use template::Template;

pub struct OpenAiChat;

// ---- requests ----

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    messages: Vec<RequestMessage>,
    #[serde(default)]
    tools: Vec<RequestTool>,
    /// Predicted Outputs: text the model is given to reuse in its answer, so input it reads.
    #[serde(default)]
    prediction: Option<Prediction>,
    /// How many choices the answer holds.
    #[serde(default)]
    n: Option<serde_json::Value>,
    /// Web search by the model (search models): pages the model reads and no check does.
    #[serde(default)]
    web_search_options: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Prediction {
    #[serde(default)]
    content: Option<Content>,
}

/// The texts of a message's content (at `path`): a string, or its parts' texts, refusals and
/// inline text documents (other documents and stored files are noted in `docs`).
fn content_texts(
    content: Option<Content>,
    text: &mut Vec<String>,
    path: &str,
    docs: &mut Documents,
) -> Result<(), GatewayError> {
    match content {
        Some(Content::Text(t)) => text.push(t),
        Some(Content::Parts(parts)) => {
            for (i, p) in parts.into_iter().enumerate() {
                text.extend(p.text);
                text.extend(p.refusal);
                if let Some(file) = p.file {
                    let at = format!("{path}[{i}].file");
                    if let Some(data) = file.file_data {
                        let at = format!("{at}.file_data");
                        // A data URL, or bare base64 typed by the file name's extension.
                        let read = if documents::is_data_url(&data) {
                            docs.data_url(&data, &at)?
                        } else {
                            let media_type =
                                documents::media_type_of_name(file.filename.as_deref());
                            docs.base64(media_type, &data, &at)?
                        };
                        text.extend(read);
                    } else if file.file_id.is_some() {
                        docs.stored(StoredKind::File, format!("{at}.file_id"));
                    }
                }
            }
        }
        None => {}
    }
    Ok(())
}

#[derive(Deserialize)]
struct RequestMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Vec<RequestToolCall>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
struct ContentPart {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    /// A document: inline (`file_data`, a data URL) or uploaded (`file_id`).
    #[serde(default)]
    file: Option<FilePart>,
}

#[derive(Deserialize)]
struct FilePart {
    #[serde(default)]
    file_data: Option<String>,
    #[serde(default)]
    file_id: Option<String>,
    #[serde(default)]
    filename: Option<String>,
}

#[derive(Deserialize)]
struct RequestToolCall {
    #[serde(default)]
    id: Option<String>,
    function: FunctionCall,
}

#[derive(Deserialize)]
struct FunctionCall {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize)]
struct RequestTool {
    #[serde(default)]
    function: Option<ToolFunction>,
}

#[derive(Deserialize)]
struct ToolFunction {
    name: String,
    #[serde(default)]
    description: Option<String>,
}

// ---- stream chunks and whole responses ----

#[derive(Deserialize, Default)]
struct Chunk<'a> {
    /// Inline: a streamed chunk almost always has one choice, and this is built for every event.
    #[serde(borrow, default)]
    choices: smallvec::SmallVec<[ChunkChoice<'a>; 1]>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize, Default)]
struct ChunkChoice<'a> {
    #[serde(default)]
    index: u32,
    #[serde(borrow, default, alias = "message")]
    delta: Option<ChoiceDelta<'a>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct ChoiceDelta<'a> {
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
    /// The legacy single function call (before `tool_calls`): tool call 0.
    #[serde(borrow, default)]
    function_call: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize, Default)]
struct ToolCallDelta<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
    /// A custom tool call (`type: "custom"`): free-form `input` instead of JSON arguments.
    #[serde(borrow, default)]
    custom: Option<CustomDelta<'a>>,
}

#[derive(Deserialize, Default)]
struct CustomDelta<'a> {
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    input: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct FunctionDelta<'a> {
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

/// The keys of chat answers that are structure, not text (see `residual`).
static STRUCTURAL: Structural = Structural {
    keys: &[
        "finish_reason",
        "system_fingerprint",
        "service_tier",
        "obfuscation",
    ],
    // Audio answers: the clip itself (base64) is no text; its transcript is.
    nested: &[
        (&["choices", "[]", "delta", "audio"], "data"),
        (&["choices", "[]", "delta", "audio"], "expires_at"),
        (&["choices", "[]", "message", "audio"], "data"),
        (&["choices", "[]", "message", "audio"], "expires_at"),
    ],
    text_keys: &[],
    free: &[],
    schema: None,
};

/// A chunk (or whole response) into `chunk`, by the fast path, else by serde_json. Returns
/// true when every string of `data` is known to be read or structural (the fast path saw no
/// other): then the fallback need not read it again.
/// The holes are those of the fast path (`None` when serde_json read it).
fn parse_chunk<'a>(
    data: &'a [u8],
    chunk: &mut Chunk<'a>,
    what: &str,
) -> Result<(bool, Option<Holes>), DecodeError> {
    match skim_chunk(data, chunk) {
        Ok((unread_text, holes)) => Ok((!unread_text, Some(holes))),
        Err(Unsure) => {
            *chunk = serde_json::from_slice(data)
                .map_err(|e| DecodeError::json(&format!("malformed chat completion{what}"), &e))?;
            Ok((false, None))
        }
    }
}

/// Appends the deltas of one chunk (or of a whole response: `message` instead of `delta`).
/// True when a tool call's `id` came without a name (a later chunk of a call, or no function
/// at all): no delta carries it, so the fallback must read the chunk.
fn chunk_deltas<'a>(chunk: &mut Chunk<'a>, out: &mut Vec<Delta<'a>>) -> bool {
    let mut undelivered_id = false;
    for c in &mut chunk.choices {
        let choice = c.index;
        if let Some(d) = &mut c.delta {
            let texts = [
                (Channel::Reasoning, d.reasoning_content.take()),
                (Channel::Reasoning, d.reasoning.take()),
                (Channel::Refusal, d.refusal.take()),
                (Channel::Content, d.content.take()),
            ];
            for (channel, text) in texts {
                if let Some(text) = text.filter(|t| !t.is_empty()) {
                    out.push(Delta::Text {
                        choice,
                        channel,
                        text,
                    });
                }
            }
            let legacy = d.function_call.take().map(|f| ToolCallDelta {
                index: Some(0),
                function: Some(f),
                ..ToolCallDelta::default()
            });
            let calls = d.tool_calls.take().into_iter().flatten().chain(legacy);
            for (position, call) in calls.enumerate() {
                let index = call.index.unwrap_or(position as u32);
                // A custom tool's free-form input is its arguments, read as it comes (not
                // JSON). A call with both shapes gets both read (the fast path leaves it to
                // serde and the fallback).
                let (function, channel) = match (call.function, call.custom) {
                    (Some(f), _) => (f, Channel::ToolArgs(index)),
                    (None, Some(c)) => (
                        FunctionDelta {
                            name: c.name,
                            arguments: c.input,
                        },
                        Channel::ToolInput(index),
                    ),
                    (None, None) => {
                        undelivered_id |= call.id.is_some();
                        continue;
                    }
                };
                match function.name {
                    Some(name) => out.push(Delta::ToolCallStart {
                        choice,
                        index,
                        id: call.id,
                        name,
                    }),
                    None => undelivered_id |= call.id.is_some(),
                }
                if let Some(args) = function.arguments.filter(|a| !a.is_empty()) {
                    out.push(Delta::Text {
                        choice,
                        channel,
                        text: args,
                    });
                }
            }
        }
        if let Some(reason) = c.finish_reason.take() {
            out.push(Delta::Finish { choice, reason });
        }
    }
    if let Some(u) = chunk.usage.take() {
        out.push(Delta::Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            cache: None,
        });
    }
    undelivered_id
}

#[derive(Default)]
struct ChatStream {
    /// The last frame had no string the decoder did not read or know as structure.
    fully_read: bool,
    /// The last frame was a usage-only chunk.
    usage_only: bool,
    /// The stream's last plain text chunk, which the next ones most likely repeat but for
    /// their text.
    template: Option<Template>,
    /// The last fully read frame's identifier-shaped strings not seen before
    /// ([`StreamDecoder::identifiers`]).
    identifiers: Vec<std::ops::Range<usize>>,
    /// The tool calls' pieces as openai-python joins them ([`CallPieces`]).
    calls: CallPieces,
}

impl StreamDecoder for ChatStream {
    fn decode<'a>(
        &mut self,
        _event: Option<&[u8]>,
        data: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<FrameKind, DecodeError> {
        self.fully_read = false;
        self.usage_only = false;
        self.identifiers.clear();
        self.calls.joined.clear();
        if data.trim_ascii() == b"[DONE]" {
            self.fully_read = true;
            return Ok(FrameKind::Terminal);
        }
        if let Some(template) = &self.template {
            if let Some(text) = template.text(data, &mut self.identifiers) {
                self.fully_read = template.fully_read();
                if !text.is_empty() {
                    out.push(Delta::Text {
                        choice: template.choice(),
                        channel: Channel::Content,
                        text,
                    });
                }
                return Ok(FrameKind::Data);
            }
        }
        let mut chunk = Chunk::default();
        let holes;
        (self.fully_read, holes) = parse_chunk(data, &mut chunk, " chunk")?;
        if self.fully_read {
            // The strings skipped as structure are identifiers the fallback would have read:
            // listed for the secret and PII patterns, or (too many to list) walked after all.
            match holes.as_ref().and_then(|h| h.spans()) {
                Some(spans) => self.identifiers.extend(
                    spans
                        .filter(|&(_, _, marked)| !marked)
                        .map(|(start, end, _)| start..end),
                ),
                None => self.fully_read = false,
            }
        }
        if chunk.error.is_some() {
            return Ok(FrameKind::UpstreamError);
        }
        if let Some(holes) = holes {
            Template::record(&mut self.template, data, &chunk, &holes, self.fully_read);
        }
        self.usage_only = chunk.choices.is_empty() && chunk.usage.is_some();
        self.calls.read(&chunk)?;
        if chunk_deltas(&mut chunk, out) {
            self.fully_read = false;
        }
        Ok(FrameKind::Data)
    }

    fn fully_read(&self) -> bool {
        self.fully_read
    }

    fn identifiers(&self) -> &[std::ops::Range<usize>] {
        &self.identifiers
    }

    fn joined_values(&self) -> &[String] {
        &self.calls.joined
    }

    fn usage_only(&self) -> bool {
        self.usage_only
    }
}

/// OpenAI: `upstreams.openai`, shared by every OpenAI format (Chat, Responses, Completions,
/// Embeddings).
pub const PROVIDER: Provider = Provider::new(Some("openai"), "openai");

/// The OpenAI SDKs' request headers (openai-python, openai-node; Azure's `api-key`), shared by
/// every OpenAI-style protocol.
pub static HEADERS: super::HeaderAllowlist = super::HeaderAllowlist {
    names: &["openai-beta"],
    prefixes: &["x-stainless-"],
    client_account: &[
        "authorization",
        "api-key",
        "openai-organization",
        "openai-project",
    ],
};

impl Protocol for OpenAiChat {
    fn id(&self) -> ProtocolId {
        ProtocolId::OpenAiChat
    }

    fn matches(&self, path: &str) -> bool {
        path == "/v1/chat/completions"
    }

    fn serves(&self, path: &str) -> bool {
        path.ends_with("/chat/completions")
    }

    fn structural(&self) -> &'static Structural {
        &STRUCTURAL
    }

    fn provider(&self) -> Provider {
        PROVIDER
    }

    fn parse_request(&self, body: &[u8], _path: &str) -> Result<ParsedRequest, GatewayError> {
        let req: Request = super::request_json(body)?;
        let mut documents = Documents::default();
        let mut messages: Vec<Message> = req
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                let mut text = Vec::new();
                let path = format!("messages[{i}].content");
                content_texts(m.content, &mut text, &path, &mut documents)?;
                text.extend(m.refusal);
                let is_error = m.tool_call_id.is_some()
                    && text.iter().any(|t| crate::delta::result_reports_error(t));
                Ok(Message {
                    role: Role::parse(&m.role),
                    text,
                    tool_calls: m
                        .tool_calls
                        .into_iter()
                        .map(|c| ToolCall {
                            id: c.id,
                            name: c.function.name,
                            arguments: c.function.arguments,
                        })
                        .collect(),
                    tool_call_id: m.tool_call_id,
                    is_error,
                    name: m.name,
                })
            })
            .collect::<Result<_, GatewayError>>()?;
        if req.web_search_options.is_some() {
            documents.stored(StoredKind::HostedTool, "web_search_options");
        }
        if let Some(prediction) = req.prediction {
            let mut text = Vec::new();
            content_texts(
                prediction.content,
                &mut text,
                "prediction.content",
                &mut documents,
            )?;
            messages.push(Message::text(Role::System, text));
        }
        let tools = req
            .tools
            .into_iter()
            .filter_map(|t| t.function)
            .map(|f| ToolSpec {
                name: f.name,
                description: f.description,
            })
            .collect();
        Ok(ParsedRequest {
            session: None,
            stream: req.stream.unwrap_or(false),
            choices: Some(super::choices_param(req.n.as_ref())),
            model: req.model,
            conversation: Conversation { messages, tools },
            unreadable_input: false,
            documents,
        })
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(ChatStream::default())
    }

    fn usage_on_request(&self) -> bool {
        true
    }

    fn decode_response<'a>(
        &self,
        body: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<(), DecodeError> {
        let mut chunk = Chunk::default();
        parse_chunk(body, &mut chunk, "")?;
        // A whole answer is walked by the fallback whatever it holds.
        let _ = chunk_deltas(&mut chunk, out);
        Ok(())
    }
}

mod fast;
mod pieces;
#[cfg(test)]
pub(crate) mod skim_tests;
mod template;
#[cfg(test)]
mod template_tests;

#[cfg(test)]
mod tests;
