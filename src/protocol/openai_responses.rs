//! OpenAI Responses API (`POST /v1/responses`).
//!
//! Every stream frame is `event: <type>` + data with the same `type` and a `sequence_number`.
//! Checked text: `response.output_text.delta`, `response.refusal.delta`,
//! `response.function_call_arguments.delta` (per output item) and reasoning text deltas.
//! `response.completed` / `.incomplete` / `.failed` end the stream; `error` is the provider's
//! in-band error. Function call items are announced by `response.output_item.added`, before any
//! argument byte.

use super::documents::{Documents, StoredKind};
use super::frame_template::FrameTemplate;
use super::residual::Structural;
use super::{text_delta as text, DecodeError, FrameKind, ParsedRequest, Protocol, StreamDecoder};
use super::{ProtocolId, Provider};
use crate::delta::{Channel, Conversation, Delta, Message, Role, ToolSpec};
use crate::error::GatewayError;
use bytes::Bytes;
use serde::Deserialize;
use std::borrow::Cow;

pub struct OpenAiResponses;

mod request;
mod skim_event;
use request::{item_message, Input, Request};

// ---- stream events and whole responses ----

#[derive(Deserialize, Default)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    output_index: Option<u32>,
    /// With `output_index`, the part a delta builds (`summary_index` for a reasoning summary's).
    #[serde(default)]
    content_index: Option<u32>,
    #[serde(default)]
    summary_index: Option<u32>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    delta: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    arguments: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    input: Option<Cow<'a, str>>,
    /// `response.code_interpreter_call_code.done`'s code (elsewhere, as in `error` events, a
    /// `code` that is no string is left to the fallback).
    #[serde(borrow, default, deserialize_with = "super::lenient_opt_str")]
    code: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    part: Option<OutputContent<'a>>,
    #[serde(borrow, default)]
    item: Option<OutputItem<'a>>,
    #[serde(borrow, default)]
    response: Option<WholeResponse<'a>>,
}

#[derive(Deserialize, Default)]
struct OutputItem<'a> {
    #[serde(
        rename = "type",
        borrow,
        default,
        deserialize_with = "super::borrow_opt_str"
    )]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    arguments: Option<Cow<'a, str>>,
    /// A custom tool call's free-form input (its arguments).
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    input: Option<Cow<'a, str>>,
    /// A code interpreter call's code (its arguments).
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    code: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Vec<OutputContent<'a>>,
    #[serde(borrow, default)]
    summary: Vec<OutputContent<'a>>,
}

#[derive(Deserialize, Default)]
struct OutputContent<'a> {
    #[serde(
        rename = "type",
        borrow,
        default,
        deserialize_with = "super::borrow_opt_str"
    )]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    refusal: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct WholeResponse<'a> {
    #[serde(borrow, default)]
    output: Vec<OutputItem<'a>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    status: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

fn usage_delta<'a>(u: Usage) -> Delta<'a> {
    Delta::Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache: None,
    }
}

/// A repeated text of channel `channel` ending at the channel's latest position.
fn repeat(channel: Channel, text: Option<Cow<'_, str>>) -> Option<Delta<'_>> {
    text.filter(|t| !t.is_empty()).map(|text| Delta::Repeat {
        choice: 0,
        channel,
        text,
        start: None,
    })
}

fn part_repeat(part: OutputContent<'_>) -> Option<Delta<'_>> {
    match part.kind.as_deref() {
        Some("refusal") => repeat(Channel::Refusal, part.refusal),
        Some("reasoning_text") => repeat(Channel::Reasoning, part.text),
        _ => repeat(Channel::Content, part.text),
    }
}

/// Output items that are tool calls: function calls and MCP calls (JSON arguments, on the
/// call's [`Channel::ToolArgs`]), custom tool calls (free-form `input`) and code interpreter
/// calls (`code`), both on its [`Channel::ToolInput`].
fn is_call(kind: Option<&str>) -> bool {
    matches!(
        kind,
        Some("function_call" | "custom_tool_call" | "mcp_call" | CODE_INTERPRETER_CALL)
    )
}

const CODE_INTERPRETER_CALL: &str = "code_interpreter_call";

/// The tool name under which guardwire's tool checks see the built-in code interpreter.
pub const CODE_INTERPRETER: &str = "code_interpreter";

impl<'a> OutputItem<'a> {
    /// A call's arguments and their channel: JSON arguments, or a custom tool call's
    /// free-form input or a code interpreter call's code (read as they come, not as JSON).
    fn call_args(&mut self, index: u32) -> (Channel, Option<Cow<'a, str>>) {
        match self.kind.as_deref() {
            Some("custom_tool_call") => (Channel::ToolInput(index), self.input.take()),
            Some(CODE_INTERPRETER_CALL) => (Channel::ToolInput(index), self.code.take()),
            _ => (Channel::ToolArgs(index), self.arguments.take()),
        }
    }

    /// The call's tool name (the code interpreter's calls have none of their own).
    fn call_name(&mut self) -> Cow<'a, str> {
        match self.kind.as_deref() {
            Some(CODE_INTERPRETER_CALL) => Cow::Borrowed(CODE_INTERPRETER),
            _ => self.name.take().unwrap_or(Cow::Borrowed("")),
        }
    }
}

/// The texts an output item repeats (a finished message, call or reasoning item).
fn item_repeats<'a>(mut item: OutputItem<'a>, index: u32, out: &mut Vec<Delta<'a>>) {
    match item.kind.as_deref() {
        Some("message") => out.extend(item.content.into_iter().filter_map(part_repeat)),
        kind if is_call(kind) => {
            let (channel, args) = item.call_args(index);
            out.extend(repeat(channel, args))
        }
        Some("reasoning") => out.extend(
            item.summary
                .into_iter()
                .chain(item.content)
                .filter_map(|c| repeat(Channel::Reasoning, c.text)),
        ),
        _ => {}
    }
}

/// The top-level keys [`Event`] reads (the rest are holes of a stream template).
const EVENT_KEYS: &[&[u8]] = &[
    b"type",
    b"output_index",
    b"content_index",
    b"summary_index",
    b"delta",
    b"text",
    b"refusal",
    b"arguments",
    b"input",
    b"code",
    b"part",
    b"item",
    b"response",
];

#[derive(Default)]
struct ResponsesStream {
    /// Each part's text in one run of its channel's (`runs.rs`): the SDK's snapshots build each
    /// part alone. Answer, refusal, reasoning (a call's arguments have a channel per item).
    runs: [super::runs::Runs<PartKey>; 3],
    /// Parts added so far to each output item (`true`: its reasoning summary's).
    parts_added: std::collections::HashMap<(bool, u32), u32>,
    /// The part added last (output item, index), content parts and summary parts: a delta is
    /// for it, once parts are announced.
    last_added: [Option<(u32, u32)>; 2],
    /// The last text delta event, which the next ones most likely repeat but for their text.
    template: Option<FrameTemplate>,
    /// The last event had no string the decoder did not read or know as structure.
    fully_read: bool,
    /// Its identifier-shaped strings the checks have not seen ([`StreamDecoder::identifiers`]).
    identifiers: Vec<std::ops::Range<usize>>,
}

impl ResponsesStream {
    /// A part added to output item `output` at `index`: the SDK appends it to the item's list
    /// and applies a delta to the part at the delta's index in that list, so a part added
    /// anywhere but at the next place would be another part to the reader than to the checks.
    fn added(&mut self, summary: bool, output: u32, index: u32) -> Result<(), DecodeError> {
        if self.parts_added.len() >= super::runs::MAX_PARTS {
            return Err(DecodeError(format!(
                "an answer of more than {} streamed parts",
                super::runs::MAX_PARTS
            )));
        }
        let next = self.parts_added.entry((summary, output)).or_default();
        if index != *next {
            return Err(DecodeError(format!(
                "a part added at index {index} of output item {output}, not at its place {next}"
            )));
        }
        *next += 1;
        self.last_added[usize::from(summary)] = Some((output, index));
        self.template = None;
        Ok(())
    }

    /// A delta for `part` (output item, content index, summary index) of `kind`: providers
    /// stream one part after another, so once parts are announced a delta is for the one added
    /// last (for the SDK, part 1's delta before part 0's would join texts guardwire read apart).
    fn in_last_part(
        &self,
        list: PartList,
        (output, content, summary): PartKey,
    ) -> Result<(), DecodeError> {
        let (last, at) = match list {
            PartList::Summary => (self.last_added[1], (output, summary)),
            PartList::Content => (self.last_added[0], (output, content)),
            PartList::None => return Ok(()),
        };
        match last {
            Some(last) if last != at => Err(DecodeError(format!(
                "a delta for part {} of output item {}, not for the part added last",
                at.1, at.0
            ))),
            _ => Ok(()),
        }
    }
}

impl StreamDecoder for ResponsesStream {
    fn repeats_text(&self) -> bool {
        true
    }

    fn decode<'a>(
        &mut self,
        _event: Option<&[u8]>,
        data: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<FrameKind, DecodeError> {
        self.identifiers.clear();
        let (template, fully_read, ids) = (
            &mut self.template,
            &mut self.fully_read,
            &mut self.identifiers,
        );
        if let Some(kind) =
            FrameTemplate::read(template, data, out, &EVENT_STRUCTURAL, fully_read, ids)
        {
            return Ok(kind);
        }
        let before = out.len();
        let mut part = None;
        let kind = match skim_event::read(data, out, &mut self.identifiers, &mut part) {
            Some((kind, fully_read)) => {
                self.fully_read = fully_read;
                kind
            }
            None => decode_event(data, out, &mut part)?,
        };
        let part = match part {
            Some(PartEvent::Added {
                summary,
                output,
                index,
            }) => {
                self.added(summary, output, index)?;
                None
            }
            Some(PartEvent::Delta(key, list)) => {
                self.in_last_part(list, key)?;
                Some(key)
            }
            None => None,
        };
        // A new run drops the template: a template matches only deltas of the part it was made
        // from (the indexes are no holes), so every event that goes by it is of the current run.
        if let Some(part) = part {
            for d in &out[before..] {
                let slot = match d {
                    Delta::Text { channel, .. } => match channel {
                        Channel::Content => 0,
                        Channel::Refusal => 1,
                        Channel::Reasoning => 2,
                        _ => continue,
                    },
                    _ => continue,
                };
                if self.runs[slot].enter(part)? {
                    self.template = None;
                }
            }
        }
        // Otherwise events are read without per-stream state: one text delta makes a template.
        let deltas = &out[before..];
        FrameTemplate::record(&mut self.template, data, kind, deltas, EVENT_KEYS);
        Ok(kind)
    }

    fn fully_read(&self) -> bool {
        self.fully_read
    }

    fn identifiers(&self) -> &[std::ops::Range<usize>] {
        &self.identifiers
    }
}

/// The keys of Responses answers whose string values are structure, not text.
const KEYS: &[&str] = &[
    "item_id",
    "call_id",
    "obfuscation",
    "encrypted_content",
    "service_tier",
    "previous_response_id",
    "prompt_cache_key",
    "safety_identifier",
    "container_id",
];

/// The request's own settings, echoed in the response object at `$at` — the answer itself
/// (BeforeCall checked them as input): exempt whole (see `residual`).
macro_rules! echoed_settings {
    ($at:expr) => {
        &[
            ($at, "instructions"),
            ($at, "tools"),
            ($at, "tool_choice"),
            ($at, "text"),
            ($at, "metadata"),
            ($at, "prompt"),
            ($at, "reasoning"),
            ($at, "truncation"),
            ($at, "user"),
            ($at, "incomplete_details"),
        ]
    };
}

/// What is structure in a whole answer (see `residual`): the echoed settings at the top.
static STRUCTURAL: Structural = Structural {
    keys: KEYS,
    nested: echoed_settings!(&[]),
    text_keys: &[],
    free: &[],
    schema: None,
};

/// The same in a stream's events: the settings are echoed only under `response` (an event's
/// own top-level `text` or `instructions`, of an event type guardwire does not model, is text).
pub(super) static EVENT_STRUCTURAL: Structural = Structural {
    keys: KEYS,
    nested: echoed_settings!(&["response"]),
    text_keys: &[],
    free: &[],
    schema: None,
};

/// One event, by serde_json.
fn decode_event<'a>(
    data: &'a [u8],
    out: &mut Vec<Delta<'a>>,
    part: &mut Option<PartEvent>,
) -> Result<FrameKind, DecodeError> {
    let ev: Event<'a> = serde_json::from_slice(data)
        .map_err(|e| DecodeError::json("malformed Responses event", &e))?;
    *part = part_of(&ev);
    Ok(event_deltas(ev, out))
}

/// The part of the answer a delta event builds: (`output_index`, `content_index`,
/// `summary_index`).
type PartKey = (u32, u32, u32);

/// Which list of an output item's parts a delta's text builds.
#[derive(Clone, Copy)]
enum PartList {
    Content,
    Summary,
    /// None (a call's arguments, and what is not a part's text).
    None,
}

/// What an event does to the answer's parts.
enum PartEvent {
    /// A `….delta` event builds this part.
    Delta(PartKey, PartList),
    /// A part is added to output item `output` at `index` (`summary`: to its reasoning summary).
    Added {
        summary: bool,
        output: u32,
        index: u32,
    },
}

fn part_of(ev: &Event<'_>) -> Option<PartEvent> {
    let output = ev.output_index.unwrap_or(0);
    match &*ev.kind {
        "response.content_part.added" => Some(PartEvent::Added {
            summary: false,
            output,
            index: ev.content_index.unwrap_or(0),
        }),
        "response.reasoning_summary_part.added" => Some(PartEvent::Added {
            summary: true,
            output,
            index: ev.summary_index.unwrap_or(0),
        }),
        kind if kind.ends_with(".delta") => Some(PartEvent::Delta(
            (
                output,
                ev.content_index.unwrap_or(0),
                ev.summary_index.unwrap_or(0),
            ),
            match kind {
                "response.output_text.delta"
                | "response.refusal.delta"
                | "response.reasoning_text.delta" => PartList::Content,
                "response.reasoning_summary_text.delta" => PartList::Summary,
                _ => PartList::None,
            },
        )),
        _ => None,
    }
}

/// The deltas and kind of one event, however it was read (serde_json or [`skim_event`]).
fn event_deltas<'a>(ev: Event<'a>, out: &mut Vec<Delta<'a>>) -> FrameKind {
    let index = ev.output_index.unwrap_or(0);
    match &*ev.kind {
        "response.output_text.delta" => out.extend(text(Channel::Content, ev.delta)),
        "response.refusal.delta" => out.extend(text(Channel::Refusal, ev.delta)),
        "response.function_call_arguments.delta" | "response.mcp_call_arguments.delta" => {
            out.extend(text(Channel::ToolArgs(index), ev.delta))
        }
        "response.custom_tool_call_input.delta" | "response.code_interpreter_call_code.delta" => {
            out.extend(text(Channel::ToolInput(index), ev.delta))
        }
        "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
            out.extend(text(Channel::Reasoning, ev.delta))
        }
        "response.output_item.added" => {
            if let Some(mut item) = ev.item {
                if is_call(item.kind.as_deref()) {
                    let (channel, args) = item.call_args(index);
                    out.push(Delta::ToolCallStart {
                        choice: 0,
                        index,
                        name: item.call_name(),
                        id: item.call_id,
                    });
                    // Arguments announced with the item are checked like streamed ones.
                    out.extend(text(channel, args));
                }
            }
        }
        "response.output_text.done" => out.extend(repeat(Channel::Content, ev.text)),
        "response.refusal.done" => out.extend(repeat(Channel::Refusal, ev.refusal)),
        "response.function_call_arguments.done" | "response.mcp_call_arguments.done" => {
            out.extend(repeat(Channel::ToolArgs(index), ev.arguments))
        }
        "response.custom_tool_call_input.done" => {
            out.extend(repeat(Channel::ToolInput(index), ev.input))
        }
        "response.code_interpreter_call_code.done" => {
            out.extend(repeat(Channel::ToolInput(index), ev.code))
        }
        "response.reasoning_text.done" | "response.reasoning_summary_text.done" => {
            out.extend(repeat(Channel::Reasoning, ev.text))
        }
        "response.content_part.done" => {
            if let Some(part) = ev.part {
                out.extend(part_repeat(part));
            }
        }
        // A finished part of a reasoning summary repeats its text (read as reasoning, so
        // `reasoning: skip` and redaction treat it as the deltas it repeats).
        "response.reasoning_summary_part.done" => out.extend(
            ev.part
                .and_then(|part| repeat(Channel::Reasoning, part.text)),
        ),
        "response.output_item.done" => {
            if let Some(item) = ev.item {
                item_repeats(item, index, out);
            }
        }
        "response.completed" | "response.incomplete" | "response.failed" => {
            if let Some(r) = ev.response {
                // The final object repeats every output text, at its place in the channel.
                let mut offsets: Vec<(Channel, u64)> = Vec::new();
                for (i, item) in r.output.into_iter().enumerate() {
                    let mut texts = Vec::new();
                    item_repeats(item, i as u32, &mut texts);
                    for d in texts {
                        if let Delta::Repeat {
                            choice,
                            channel,
                            text,
                            ..
                        } = d
                        {
                            let k = match offsets.iter().position(|(c, _)| *c == channel) {
                                Some(k) => k,
                                None => {
                                    offsets.push((channel, 0));
                                    offsets.len() - 1
                                }
                            };
                            let start = offsets[k].1;
                            offsets[k].1 += text.len() as u64;
                            out.push(Delta::Repeat {
                                choice,
                                channel,
                                text,
                                start: Some(start),
                            });
                        }
                    }
                }
                if let Some(status) = r.status {
                    out.push(Delta::Finish {
                        choice: 0,
                        reason: status,
                    });
                }
                out.extend(r.usage.map(usage_delta));
            }
            return FrameKind::Terminal;
        }
        "error" => return FrameKind::UpstreamError,
        // Lifecycle events and event types added later pass through.
        _ => return FrameKind::Passthrough,
    }
    FrameKind::Data
}

impl Protocol for OpenAiResponses {
    fn id(&self) -> ProtocolId {
        ProtocolId::OpenAiResponses
    }

    fn matches(&self, path: &str) -> bool {
        path == "/v1/responses"
    }

    fn serves(&self, path: &str) -> bool {
        path.ends_with("/responses")
    }

    fn structural(&self) -> &'static super::residual::Structural {
        &STRUCTURAL
    }

    fn stream_structural(&self) -> &'static super::residual::Structural {
        &EVENT_STRUCTURAL
    }

    fn provider(&self) -> Provider {
        super::openai_chat::PROVIDER
    }

    fn parse_request(&self, body: &[u8], _path: &str) -> Result<ParsedRequest, GatewayError> {
        let req: Request = super::request_json(body)?;
        let mut messages = Vec::new();
        if let Some(i) = req.instructions {
            messages.push(Message::text(Role::System, vec![i]));
        }
        let mut documents = Documents::default();
        match req.input {
            Some(Input::Text(t)) => messages.push(Message::text(Role::User, vec![t])),
            Some(Input::Items(items)) => {
                for (i, item) in items.into_iter().enumerate() {
                    let path = format!("input[{i}]");
                    messages.extend(item_message(item, &path, &mut documents)?);
                }
            }
            None => {}
        }
        if req.previous_response_id.is_some() {
            documents.stored(StoredKind::PreviousResponse, "previous_response_id");
        }
        if req.conversation.is_some() {
            documents.stored(StoredKind::Conversation, "conversation");
        }
        if req.prompt.is_some_and(|p| p.id.is_some()) {
            documents.stored(StoredKind::Prompt, "prompt.id");
        }
        for (i, t) in req.tools.iter().enumerate() {
            let kind = t.kind.as_deref().unwrap_or("function");
            let files = kind == "code_interpreter"
                && super::documents::container_holds_files(t.container.as_ref());
            if files || super::documents::hosted_tool_reads(kind) {
                documents.stored(StoredKind::HostedTool, format!("tools[{i}] ({kind})"));
            }
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
        Box::<ResponsesStream>::default()
    }

    fn decode_response<'a>(
        &self,
        body: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<(), DecodeError> {
        let r: WholeResponse<'a> = serde_json::from_slice(body)
            .map_err(|e| DecodeError::json("malformed response object", &e))?;
        for (index, item) in r.output.into_iter().enumerate() {
            let index = index as u32;
            match item.kind.as_deref() {
                Some("message") => {
                    for c in item.content {
                        match c.kind.as_deref() {
                            Some("refusal") => out.extend(text(Channel::Refusal, c.refusal)),
                            _ => out.extend(text(Channel::Content, c.text)),
                        }
                    }
                }
                kind if is_call(kind) => {
                    let mut item = item;
                    let (channel, args) = item.call_args(index);
                    out.push(Delta::ToolCallStart {
                        choice: 0,
                        index,
                        name: item.call_name(),
                        id: item.call_id,
                    });
                    out.extend(text(channel, args));
                }
                Some("reasoning") => {
                    for c in item.summary.into_iter().chain(item.content) {
                        out.extend(text(Channel::Reasoning, c.text));
                    }
                }
                _ => {}
            }
        }
        if let Some(status) = r.status {
            out.push(Delta::Finish {
                choice: 0,
                reason: status,
            });
        }
        out.extend(r.usage.map(usage_delta));
        Ok(())
    }

    /// An `error` event in both shapes seen in the wild (flat fields and a nested `error`
    /// object), so every openai SDK version finds what it reads.
    fn stream_error_frame(&self, err: &GatewayError, _to: &super::ReplyTo) -> Bytes {
        let (kind, code) = err.type_and_code();
        let message = err.to_string();
        let body = serde_json::json!({
            "type": "error",
            "code": code,
            "message": message,
            "param": null,
            "sequence_number": 0,
            "error": {"type": kind, "code": code, "message": message, "param": null},
        });
        format!("event: error\ndata: {body}\n\n").into()
    }
}

#[cfg(test)]
mod template_tests;
#[cfg(test)]
mod tests;
