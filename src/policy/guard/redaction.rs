//! Redaction (`mode: redact`), the policy's side of it in one place: the spans to mask
//! ([`Redaction`]), the one place they are collected (from the hits of redacting validators,
//! [`ExchangeGuard::take_redactions`]), how a new span merges into the sorted list, and the masks
//! a policy asks for. Applying them to frames and bodies is `proxy/redact.rs`.

use super::{ChannelId, ExchangeGuard};
use crate::policy::types::{Finding, Mode};
use crate::policy::Policy;

/// Adds `new` to `list`, which stays sorted by channel and start with no two spans of a channel
/// overlapping: an overlapping span is merged into the earlier one (whose mask stays). Masking
/// walks the list in this order, and hits arrive in no particular order (each automaton reports
/// its own).
pub(in crate::policy) fn insert_redaction(list: &mut Vec<Redaction>, new: Redaction) {
    let at = list.partition_point(|r| (r.channel, r.start) <= (new.channel, new.start));
    list.insert(at, new);
    // Merge neighbours that now overlap, from just before the new span on.
    let mut i = at.saturating_sub(1);
    while i + 1 < list.len() {
        let (a, b) = (&list[i], &list[i + 1]);
        if a.channel == b.channel && b.start <= a.end {
            let end = a.end.max(b.end);
            list[i].end = end;
            list.remove(i + 1);
        } else if i > at {
            break;
        } else {
            i += 1;
        }
    }
}

/// A span of a response channel's text to replace with `mask` (`mode: redact`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    pub channel: ChannelId,
    pub start: u64,
    pub end: u64,
    pub mask: String,
}

impl Policy {
    /// True when some validator redacts (frames then keep where their text is).
    pub fn redacts(&self) -> bool {
        self.redacts
    }

    /// The mask for a redaction by `validator` of a match of `kind` (a `pii` kind).
    fn mask(&self, validator: u32, kind: Option<&str>) -> String {
        let v = self.validator(validator);
        v.mask
            .clone()
            .unwrap_or_else(|| format!("[REDACTED:{}]", kind.unwrap_or(&v.label)))
    }
}

impl ExchangeGuard {
    /// Moves the pending hits of redacting validators that have a span into the channel's
    /// redactions. (Hits without a span stay and block: nothing to mask.)
    /// (Inline: on the hot path, most deltas have no hit, most policies no redaction.)
    #[inline]
    pub(super) fn take_redactions(&mut self, channel: ChannelId) {
        if self.policy.redacts() && !self.hits.is_empty() {
            self.collect_redactions(channel);
        }
    }

    fn collect_redactions(&mut self, channel: ChannelId) {
        let policy = &*self.policy;
        let mut i = 0;
        while i < self.hits.len() {
            let hit = self.hits[i];
            // Regex hits know their start when the scanner found it (not in tool arguments,
            // which are matched decoded); a hit without one stays and blocks.
            let start = hit.start;
            let (Mode::Redact, Some(start)) = (policy.validator(hit.owner).mode, start) else {
                i += 1;
                continue;
            };
            self.hits.swap_remove(i);
            self.redacted.push(Finding {
                validator: hit.owner,
                phase: self.chunk_phase,
                note: None,
                rule: hit.rule,
                matched: self.matched_text(channel, start, hit.end),
            });
            let end = hit.end.max(start);
            insert_redaction(
                &mut self.redactions,
                Redaction {
                    channel,
                    start,
                    end,
                    mask: policy.mask(hit.owner, hit.rule),
                },
            );
        }
    }

    /// The redactions so far.
    pub fn redactions(&self) -> &[Redaction] {
        &self.redactions
    }
}
