//! The Gemini stream decoder: serde_json, and a template of the last text chunk
//! (`frame_template.rs`).

use super::{Response, CODE_EXECUTION, STRUCTURAL};
use crate::delta::{Channel, Delta};
use crate::protocol::frame_template::FrameTemplate;
use crate::protocol::{DecodeError, FrameKind, StreamDecoder};
use std::borrow::Cow;

/// The top-level keys [`Response`] reads, every spelling serde accepts (the rest are holes of
/// a stream template).
const RESPONSE_KEYS: &[&[u8]] = &[b"candidates", b"usageMetadata", b"usage_metadata", b"error"];

/// Per stream: how many function calls each candidate has made, to number them.
#[derive(Default)]
pub(super) struct GeminiStream {
    calls: Vec<(u32, u32)>,
    /// A candidate's `finishReason` was seen: the answer is complete when the body ends.
    finished: bool,
    /// The last chunk that was one text delta, which the next ones most likely repeat but for
    /// their text.
    pub(super) template: Option<FrameTemplate>,
    /// The last chunk had no string the decoder did not read or know as structure.
    fully_read: bool,
    /// Its identifier-shaped strings the checks have not seen ([`StreamDecoder::identifiers`]).
    identifiers: Vec<std::ops::Range<usize>>,
}

impl GeminiStream {
    fn next_call_index(&mut self, candidate: u32) -> u32 {
        match self.calls.iter_mut().find(|(c, _)| *c == candidate) {
            Some((_, n)) => {
                *n += 1;
                *n - 1
            }
            None => {
                self.calls.push((candidate, 1));
                0
            }
        }
    }

    pub(super) fn response_deltas<'a>(&mut self, resp: Response<'a>, out: &mut Vec<Delta<'a>>) {
        for (position, cand) in resp.candidates.into_iter().enumerate() {
            let choice = cand.index.unwrap_or(position as u32);
            for part in cand.content.into_iter().flat_map(|c| c.parts) {
                if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                    let channel = if part.thought == Some(true) {
                        Channel::Reasoning
                    } else {
                        Channel::Content
                    };
                    out.push(Delta::Text {
                        choice,
                        channel,
                        text,
                    });
                }
                if let Some(exec) = part.executable_code {
                    let index = self.next_call_index(choice);
                    out.push(Delta::ToolCallStart {
                        choice,
                        index,
                        id: None,
                        name: Cow::Borrowed(CODE_EXECUTION),
                    });
                    out.extend(exec.code.filter(|c| !c.is_empty()).map(|text| Delta::Text {
                        choice,
                        channel: Channel::ToolInput(index),
                        text,
                    }));
                }
                if let Some(call) = part.function_call {
                    let index = self.next_call_index(choice);
                    out.push(Delta::ToolCallStart {
                        choice,
                        index,
                        id: call.id,
                        name: call.name,
                    });
                    if let Some(args) = call.args {
                        out.push(Delta::Text {
                            choice,
                            channel: Channel::ToolArgs(index),
                            text: Cow::Borrowed(args.get()),
                        });
                    }
                }
            }
            if let Some(reason) = cand.finish_reason {
                out.push(Delta::Finish { choice, reason });
            }
        }
        if let Some(u) = resp.usage_metadata {
            out.push(u.delta());
        }
    }
}

impl StreamDecoder for GeminiStream {
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
        let resp: Response<'a> = serde_json::from_slice(data)
            .map_err(|e| DecodeError::json("malformed Gemini response chunk", &e))?;
        if resp.error.is_some() {
            return Ok(FrameKind::UpstreamError);
        }
        let before = out.len();
        self.response_deltas(resp, out);
        if out[before..]
            .iter()
            .any(|d| matches!(d, Delta::Finish { .. }))
        {
            self.finished = true;
        }
        // One text delta and nothing else: the chunk changed none of the stream's state
        // (calls are numbered by their `ToolCallStart`, the end by its `Finish`).
        let deltas = &out[before..];
        FrameTemplate::record(
            &mut self.template,
            data,
            FrameKind::Data,
            deltas,
            RESPONSE_KEYS,
        );
        Ok(FrameKind::Data)
    }

    fn fully_read(&self) -> bool {
        self.fully_read
    }

    fn identifiers(&self) -> &[std::ops::Range<usize>] {
        &self.identifiers
    }

    /// Gemini streams end with the body; the last chunk carries a `finishReason`.
    fn complete_without_terminal(&self) -> bool {
        self.finished
    }
}

#[cfg(test)]
impl GeminiStream {
    pub(super) fn template(&self) -> Option<&FrameTemplate> {
        self.template.as_ref()
    }
}
