//! The guard's text channels: their state (scanner, counters, the JSON decoding of arguments,
//! kept text), opening one on first use, the positions the hold-back asks for, and the check
//! that a repeated text is what streamed.

use super::escaped::EscapedReading;
use super::{ChannelId, ExchangeGuard};
use crate::delta::{Channel, Delta};
use crate::policy::json_text::JsonTextDecoder;
use crate::policy::limits::LimitState;
use crate::policy::types::Finding;
use crate::policy::types::Target;
use crate::scan::TextScanState;
use std::sync::Arc;

#[derive(Debug)]
pub(super) struct ChannelState {
    pub(super) choice: u32,
    pub(super) channel: Channel,
    pub(super) target: Target,
    pub(super) scan: TextScanState,
    /// The channel's latest text and the position of its first byte, kept only with
    /// `keep_matches` (at most [`super::RECENT_TEXT`] bytes plus the last delta).
    pub(super) recent: Option<(u64, String)>,
    /// (validator, count) of the length limits (answer and refusal channels).
    pub(super) limits: Vec<(u32, Box<dyn LimitState>)>,
    /// Tool-call arguments: the scanner reads them with JSON escapes resolved (see
    /// `json_text`), while positions (hold-back, hits, redactions) stay in the raw text.
    pub(super) json: Option<Box<JsonTextDecoder>>,
    /// The text read once more with the escapes of JSON held in it resolved, from its first
    /// escape on (`escaped.rs`).
    pub(super) escaped: Option<Box<EscapedReading>>,
    /// All of the channel's text (raw, for arguments), kept when the stream repeats texts, so
    /// that a repeat is checked to be what streamed.
    pub(super) full: Option<String>,
    /// With windowed judged checks: the position up to which judges passed the text (an
    /// answer channel's windows; other output channels stay at 0 until the answer's end).
    pub(super) judged_upto: Option<u64>,
}

impl ChannelState {
    /// Position after the channel's text so far (in the raw text for arguments).
    pub(super) fn pos(&self) -> u64 {
        match &self.json {
            Some(j) => j.raw_len(),
            None => self.scan.pos(),
        }
    }

    /// The channel position of scanner position `pos`.
    pub(super) fn raw_pos(&self, pos: u64) -> u64 {
        match &self.json {
            Some(j) => j.raw_pos(pos),
            None => pos,
        }
    }
}

impl ExchangeGuard {
    /// The stream sends texts again ([`Delta::Repeat`]): keep every channel's text, up to
    /// `limit` bytes in all, so [`ExchangeGuard::repeat_is_verified`] can compare. Before the
    /// first delta. Past the limit the kept text is dropped and every later repeat is
    /// unverified (the caller passes the largest frame it reads: a repeat of more text could
    /// not arrive anyway).
    pub fn keep_full_text(&mut self, limit: usize) {
        self.full_text_limit = limit;
    }

    /// True when the whole text outgrew the limit of [`ExchangeGuard::keep_full_text`].
    pub fn full_text_dropped(&self) -> bool {
        self.full_text_limit > 0 && self.full_text_kept > self.full_text_limit
    }

    /// True when a [`Delta::Repeat`] carries exactly the text its channel streamed at that
    /// place (already checked). Anything else — text that never streamed, or with the full
    /// text not kept — cannot be trusted and must not be released. Other deltas: true.
    pub fn repeat_is_verified(&mut self, delta: &Delta<'_>) -> bool {
        let Delta::Repeat {
            choice,
            channel,
            text,
            start,
        } = delta
        else {
            return true;
        };
        let id = self.channel(*choice, *channel);
        let ch = &self.channels[id];
        let Some(full) = &ch.full else {
            return false;
        };
        let end = ch.pos();
        let start = start.unwrap_or_else(|| end.saturating_sub(text.len() as u64));
        usize::try_from(start)
            .ok()
            .and_then(|s| full.get(s..s.checked_add(text.len())?))
            == Some(&**text)
    }

    /// How many channels the answer has opened.
    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }

    /// True when `channel` of `choice` has had text.
    pub fn has_channel(&self, choice: u32, channel: Channel) -> bool {
        self.find_channel(choice, channel).is_some()
    }

    /// The judges passed `channel`'s text up to `pos` (windowed judged checks).
    pub fn judged_up_to(&mut self, channel: ChannelId, pos: u64) {
        if let Some(upto) = &mut self.channels[channel].judged_upto {
            *upto = (*upto).max(pos);
        }
    }

    pub fn find_channel(&self, choice: u32, channel: Channel) -> Option<ChannelId> {
        self.channel_index.get(&(choice, channel)).copied()
    }

    /// The position after the text `channel` has had so far.
    pub fn channel_end(&self, channel: ChannelId) -> u64 {
        self.channels[channel].pos()
    }

    /// Text of `channel` before this position can no longer be part of a violation.
    pub fn safe_pos(&self, channel: ChannelId) -> u64 {
        if self.policy.buffer {
            return 0;
        }
        let ch = &self.channels[channel];
        let scan = &self.policy.checks(ch.target).scan;
        let mut scanned = scan.safe_pos(&ch.scan);
        if let Some(escaped) = &ch.escaped {
            scanned = scanned.min(escaped.safe_pos(scan));
        }
        let mut safe = ch.raw_pos(scanned);
        for (_, st) in &ch.limits {
            safe = safe.min(st.safe_pos());
        }
        if let Channel::ToolArgs(index) = ch.channel {
            let watcher = self
                .calls
                .iter()
                .rev()
                .find(|c| c.choice == ch.choice && c.index == index)
                .and_then(|c| c.watcher.as_ref());
            if let Some(w) = watcher {
                safe = safe.min(w.safe_pos());
            }
        }
        if let Some(upto) = ch.judged_upto {
            safe = safe.min(upto);
        }
        safe
    }

    /// Checks `text`, just fed to `channel` as its latest piece, once more as a value of its
    /// own: begun and ended by a boundary. A channel of unknown strings reads the values of one
    /// path as one streamed text, so a whole value followed (or preceded) by another would lose
    /// the word boundary at its end (its start); this reading restores it. Hits are placed in
    /// the channel's coordinates, so they block or redact as the channel's own would.
    pub fn check_whole_value(&mut self, channel: ChannelId, text: &str) -> Result<(), Finding> {
        let policy = Arc::clone(&self.policy);
        let ch = &self.channels[channel];
        let scan = &policy.checks(ch.target).scan;
        if scan.is_empty() || text.is_empty() {
            return Ok(());
        }
        let base = ch.pos().saturating_sub(text.len() as u64);
        let first_hit = self.hits.len();
        let mut st = scan.start();
        scan.feed(&mut st, text, &mut self.hits, true);
        scan.finish(&mut st, &mut self.hits, true);
        for h in &mut self.hits[first_hit..] {
            h.start = h.start.map(|s| s + base);
            h.end += base;
        }
        self.note_matches(channel, first_hit);
        self.take_redactions(channel);
        self.judge(self.chunk_phase)
    }

    /// The id of `channel` of `choice`, opened (with its checks' state) on first use.
    pub(super) fn channel(&mut self, choice: u32, channel: Channel) -> ChannelId {
        if let Some(i) = self.find_channel(choice, channel) {
            return i;
        }
        let target = if channel.is_output() {
            Target::Output
        } else {
            Target::Reasoning
        };
        let checks = self.policy.checks(target);
        let counted =
            target == Target::Output && matches!(channel, Channel::Content | Channel::Refusal);
        let limits = if counted {
            checks.limits.iter().map(|(v, l)| (*v, l.start())).collect()
        } else {
            Vec::new()
        };
        self.channel_index
            .insert((choice, channel), self.channels.len());
        self.channels.push(ChannelState {
            choice,
            channel,
            target,
            scan: checks.scan.start(),
            limits,
            json: matches!(channel, Channel::ToolArgs(_)).then(Box::default),
            escaped: None,
            full: (self.full_text_limit > 0 && !self.full_text_dropped()).then(String::new),
            recent: self.keep_matches.then(|| (0, String::new())),
            judged_upto: (self.policy.judged_window.is_some() && target == Target::Output)
                .then_some(0),
        });
        self.channels.len() - 1
    }
}
