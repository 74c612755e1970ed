//! Token counts guardwire estimates when the upstream reports none (some self-hosted servers,
//! a route with `request_usage: false`, a stream cut before its usage): o200k_base tokens of
//! the answer's text and of the request's conversation, counted only once the exchange ended
//! without them, labelled `source="estimated"` on the token and spend metrics. `cost_budget`
//! reads them like reported ones.

use crate::delta::{Conversation, Delta};
use crate::policy::counters::o200k;
use crate::policy::ExchangeGuard;
use crate::protocol::Protocol;
use bytes::Bytes;

/// Bytes of text tokenized at most per side; a longer text's count is scaled by its bytes.
const MAX_TOKENIZED: usize = 256 * 1024;

/// Bytes of a streamed answer's text kept for an estimate; the rest is counted in bytes only.
pub const MAX_KEPT: usize = 64 * 1024;

/// Which of an exchange's token counts guardwire estimated.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Estimated {
    pub input: bool,
    pub output: bool,
}

/// The request as the client sent it, for an estimate of its input tokens.
#[derive(Clone)]
pub struct RequestCopy {
    pub protocol: &'static dyn Protocol,
    pub body: Bytes,
    pub path: String,
}

impl RequestCopy {
    /// The request's input tokens: its conversation's texts, tool calls and tools.
    pub fn tokens(&self) -> Option<u64> {
        let parsed = self.protocol.parse_request(&self.body, &self.path).ok()?;
        let texts = conversation_texts(&parsed.conversation);
        let total: usize = texts.iter().map(|t| t.len()).sum();
        count(texts.into_iter(), total)
    }
}

fn conversation_texts(c: &Conversation) -> Vec<&str> {
    let mut out = Vec::new();
    for m in c.read_messages() {
        out.extend(m.text.iter().map(String::as_str));
        for call in &m.tool_calls {
            out.push(call.name.as_str());
            out.push(call.arguments.as_str());
        }
    }
    for t in &c.tools {
        out.push(t.name.as_str());
        out.extend(t.description.as_deref());
    }
    out
}

/// o200k_base tokens of `texts` (whose bytes add up to `total_bytes`, which may be more than
/// they hold: text seen but not kept): the first [`MAX_TOKENIZED`] bytes are tokenized, the
/// count scaled to the rest. `None` when the tokenizer cannot load.
pub fn count<'a>(texts: impl Iterator<Item = &'a str>, total_bytes: usize) -> Option<u64> {
    if total_bytes == 0 {
        return Some(0); // without loading the tokenizer
    }
    let bpe = o200k().ok()?;
    let (mut tokenized, mut tokens) = (0usize, 0u64);
    for t in texts {
        if tokenized >= MAX_TOKENIZED {
            break;
        }
        let mut end = t.len().min(MAX_TOKENIZED - tokenized);
        while !t.is_char_boundary(end) {
            end -= 1;
        }
        tokens += bpe.encode_ordinary(&t[..end]).len() as u64;
        tokenized += end;
    }
    if tokenized > 0 && total_bytes > tokenized {
        tokens = (tokens as f64 * total_bytes as f64 / tokenized as f64).round() as u64;
    }
    Some(tokens)
}

/// The texts of an answer's deltas, and their total length.
pub fn answer_texts<'a>(deltas: &'a [Delta<'_>]) -> (Vec<&'a str>, usize) {
    let texts: Vec<&str> = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text { text, .. } => Some(text.as_ref()),
            _ => None,
        })
        .collect();
    let total = texts.iter().map(|t| t.len()).sum();
    (texts, total)
}

/// Fills the counts the provider did not report into `guard` (as a usage delta): `input` and
/// `output` are asked only for a missing one. An answer without text is not estimated (an
/// embedding has no output tokens). Returns what was estimated.
pub fn fill(
    guard: &mut ExchangeGuard,
    input: impl FnOnce() -> Option<u64>,
    output: impl FnOnce() -> Option<u64>,
) -> Estimated {
    if !guard.wants_usage() {
        return Estimated::default();
    }
    let (reported_in, reported_out) = guard.usage();
    let input_tokens = reported_in.is_none().then(input).flatten();
    let output_tokens = reported_out
        .is_none()
        .then(output)
        .flatten()
        .filter(|&n| n > 0);
    if input_tokens.is_some() || output_tokens.is_some() {
        // A usage delta never fails a check.
        let _ = guard.on_chunk(&Delta::Usage {
            input_tokens,
            output_tokens,
            cache: None,
        });
    }
    Estimated {
        input: input_tokens.is_some(),
        output: output_tokens.is_some(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn counts_are_o200k_tokens_scaled_past_the_limit() {
        assert_eq!(count(["one two", " three"].into_iter(), 13), Some(3));
        // Seen twice as much as kept: twice the count.
        assert_eq!(count(["one two three"].into_iter(), 26), Some(6));
        assert_eq!(count(std::iter::empty(), 0), Some(0));
    }
}
