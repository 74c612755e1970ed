//! The frame checker shared by streamed and whole answers: OnChunk over one payload's decoded
//! deltas, noting for each text where its channel now stands (what the hold-back waits for)
//! and, when the policy redacts, where the text sits in the payload (what a redaction
//! rewrites). A stream runs it per SSE frame; a whole answer once, over its body.

use super::redact::{self, TextSpan};
use crate::delta::Delta;
use crate::policy::{ChannelId, Finding, StreamGuard};

/// (channel, position after a payload's text on it): the payload is releasable once every
/// channel is safe up to its position. Inline: a frame almost always carries one channel.
pub type Needs = smallvec::SmallVec<[(ChannelId, u64); 2]>;

/// Why a payload cannot be released.
#[derive(Debug)]
pub enum Stop {
    /// An enforcing validator found a violation.
    Violation(Finding),
    /// The payload repeats text that did not stream before (so it was never checked).
    UnverifiedRepeat,
}

impl From<Finding> for Stop {
    fn from(f: Finding) -> Self {
        Stop::Violation(f)
    }
}

/// Runs OnChunk over `deltas`, decoded from `data`. Stops at the first violation.
pub fn check_payload(
    guard: &mut StreamGuard,
    deltas: &[Delta<'_>],
    data: &[u8],
    needs: &mut Needs,
    spans: &mut Vec<TextSpan>,
) -> Result<(), Stop> {
    let redacts = guard.policy().redacts();
    for d in deltas {
        if !guard.repeat_is_verified(d) {
            return Err(Stop::UnverifiedRepeat);
        }
        let Some((ch, pos)) = guard.on_chunk(d)? else {
            continue;
        };
        match needs.iter_mut().find(|(c, _)| *c == ch) {
            Some(n) => n.1 = pos,
            None => needs.push((ch, pos)),
        }
        if !redacts {
            continue;
        }
        // `pos` may lie past the text (a character split between deltas is waited for).
        let end = guard.channel_end(ch);
        let located = match d {
            Delta::Text { text, .. } => Some((text, end - text.len() as u64)),
            Delta::Repeat { text, start, .. } => Some((
                text,
                start.unwrap_or_else(|| end.saturating_sub(text.len() as u64)),
            )),
            _ => None,
        };
        if let Some((text, start)) = located {
            let taken: Vec<_> = spans.iter().map(|s| s.literal.clone()).collect();
            // Not found cannot happen for a text decoded from this data; an empty literal
            // makes a redaction touching it fail closed on release.
            let (literal, raw) = redact::locate(data, text, &taken).unwrap_or((0..0, false));
            spans.push(TextSpan {
                channel: ch,
                start,
                end: start + text.len() as u64,
                literal,
                raw,
                text: text.to_string(),
            });
        }
    }
    Ok(())
}
