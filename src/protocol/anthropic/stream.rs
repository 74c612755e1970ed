//! The Anthropic stream decoder: serde_json, and a template of the last text delta event
//! (`frame_template.rs`).

use super::Usage;
use crate::delta::{Channel, Delta};
use crate::protocol::frame_template::FrameTemplate;
use crate::protocol::residual::Structural;
use crate::protocol::{text_delta, DecodeError, FrameKind, StreamDecoder};
use serde::Deserialize;
use std::borrow::Cow;

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    content_block: Option<StartBlock<'a>>,
    #[serde(borrow, default)]
    delta: Option<EventDelta<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    message: Option<MessageStart>,
}

#[derive(Deserialize)]
struct StartBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default, deserialize_with = "crate::protocol::borrow_opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::protocol::borrow_opt_str")]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::protocol::borrow_opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::protocol::borrow_opt_str")]
    name: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct EventDelta<'a> {
    #[serde(
        rename = "type",
        borrow,
        default,
        deserialize_with = "crate::protocol::borrow_opt_str"
    )]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::protocol::borrow_opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::protocol::borrow_opt_str")]
    partial_json: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::protocol::borrow_opt_str")]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::protocol::borrow_opt_str")]
    stop_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct MessageStart {
    #[serde(default)]
    usage: Option<Usage>,
}

/// What each content block index of the current message is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    Tool,
    Thinking,
    Other,
}

/// The top-level keys [`Event`] reads (the rest are holes of a stream template).
const EVENT_KEYS: &[&[u8]] = &[
    b"type",
    b"index",
    b"content_block",
    b"delta",
    b"usage",
    b"message",
];

pub(super) static STRUCTURAL: Structural = Structural {
    keys: &["stop_reason", "stop_sequence", "signature", "service_tier"],
    nested: &[],
    text_keys: &[],
    free: &[],
    schema: None,
};

#[derive(Default)]
pub(super) struct MessagesStream {
    /// What each started block is, by its index (which is its place: blocks start in order).
    blocks: Vec<BlockKind>,
    /// The last text delta event, which the next ones most likely repeat but for their text.
    pub(super) template: Option<FrameTemplate>,
    /// The last event had no string the decoder did not read or know as structure.
    fully_read: bool,
    /// Its identifier-shaped strings the checks have not seen ([`StreamDecoder::identifiers`]).
    identifiers: Vec<std::ops::Range<usize>>,
}

/// Content blocks one streamed answer may open.
pub(super) const MAX_BLOCKS: usize = 16_384;

impl MessagesStream {
    fn kind_of(&self, index: u32) -> BlockKind {
        self.blocks
            .get(index as usize)
            .copied()
            .unwrap_or(BlockKind::Other)
    }
}

impl StreamDecoder for MessagesStream {
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
        if let Some(kind) = FrameTemplate::read(template, data, out, &STRUCTURAL, fully_read, ids) {
            return Ok(kind);
        }
        let ev: Event<'a> = serde_json::from_slice(data)
            .map_err(|e| DecodeError::json("malformed Anthropic event", &e))?;
        match &*ev.kind {
            "content_block_start" => {
                let index = ev.index.unwrap_or(0);
                let Some(block) = ev.content_block else {
                    return Err(DecodeError("content_block_start without a block".into()));
                };
                let kind = match &*block.kind {
                    "text" => BlockKind::Text,
                    "tool_use" | "server_tool_use" => BlockKind::Tool,
                    "thinking" => BlockKind::Thinking,
                    _ => BlockKind::Other,
                };
                // Indexed, and bounded: one answer's blocks cost linear work and bounded
                // memory (an answer past the bound is not checked: fail closed).
                if self.blocks.len() >= MAX_BLOCKS {
                    return Err(DecodeError(format!(
                        "an Anthropic answer with more than {MAX_BLOCKS} content blocks"
                    )));
                }
                // The SDK appends each started block to its list and applies a delta to the
                // block at the delta's `index` in that list: a block started at any index but
                // the next place would be another block to the reader than to the checks.
                if index as usize != self.blocks.len() {
                    return Err(DecodeError(format!(
                        "a content block started at index {index}, not at its place {}",
                        self.blocks.len()
                    )));
                }
                self.blocks.push(kind);
                // Deltas now belong to this block: a template of another block's no longer
                // applies (so every event a template matches is of the block started last).
                self.template = None;
                match kind {
                    BlockKind::Text => out.extend(text_delta(Channel::Content, block.text)),
                    BlockKind::Thinking => {
                        out.extend(text_delta(Channel::Reasoning, block.thinking))
                    }
                    BlockKind::Tool => out.push(Delta::ToolCallStart {
                        choice: 0,
                        index,
                        id: block.id,
                        name: block.name.unwrap_or(Cow::Borrowed("")),
                    }),
                    BlockKind::Other => {}
                }
                Ok(FrameKind::Data)
            }
            "content_block_delta" => {
                let index = ev.index.unwrap_or(0);
                // Providers stream one block after another: a delta for any block but the one
                // started last would join, for the SDK, a text guardwire read elsewhere in its
                // channel (block 1's delta before block 0's). With blocks started in order,
                // each block's deltas are one run of its channel.
                if self.blocks.len().checked_sub(1) != Some(index as usize) {
                    return Err(DecodeError(format!(
                        "a delta for content block {index}, not for the block started last"
                    )));
                }
                let Some(d) = ev.delta else {
                    return Err(DecodeError("content_block_delta without a delta".into()));
                };
                let before = out.len();
                // These three kinds are read without the stream's state: templates.
                let stateless = matches!(
                    d.kind.as_deref(),
                    Some("text_delta" | "input_json_delta" | "thinking_delta")
                );
                match d.kind.as_deref() {
                    Some("text_delta") => out.extend(text_delta(Channel::Content, d.text)),
                    Some("input_json_delta") => {
                        out.extend(text_delta(Channel::ToolArgs(index), d.partial_json))
                    }
                    Some("thinking_delta") => {
                        out.extend(text_delta(Channel::Reasoning, d.thinking))
                    }
                    // signature_delta, citations_delta and future kinds carry no checked text;
                    // a text-bearing delta on a block we know is text is still checked.
                    _ => {
                        if self.kind_of(index) == BlockKind::Text {
                            out.extend(text_delta(Channel::Content, d.text));
                        }
                    }
                }
                if stateless {
                    let deltas = &out[before..];
                    FrameTemplate::record(
                        &mut self.template,
                        data,
                        FrameKind::Data,
                        deltas,
                        EVENT_KEYS,
                    );
                }
                Ok(FrameKind::Data)
            }
            "message_delta" => {
                if let Some(reason) = ev.delta.and_then(|d| d.stop_reason) {
                    out.push(Delta::Finish { choice: 0, reason });
                }
                if let Some(u) = ev.usage {
                    out.push(u.delta());
                }
                Ok(FrameKind::Data)
            }
            "message_start" => {
                if let Some(u) = ev.message.and_then(|m| m.usage) {
                    out.push(u.delta());
                }
                Ok(FrameKind::Data)
            }
            "message_stop" => Ok(FrameKind::Terminal),
            "error" => Ok(FrameKind::UpstreamError),
            // content_block_stop, ping and event types added later pass through.
            _ => Ok(FrameKind::Passthrough),
        }
    }

    fn fully_read(&self) -> bool {
        self.fully_read
    }

    fn identifiers(&self) -> &[std::ops::Range<usize>] {
        &self.identifiers
    }
}
