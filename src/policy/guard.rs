//! The exchange guard ([`ExchangeGuard`]): one exchange's BeforeCall, then the per-answer
//! state of OnChunk and AfterCall — its channels and choices, the hold-back position and the
//! redactions — for a streamed answer or a whole one alike. In `guard/`: the text channels
//! (`channels`), tool calls (`calls`) and budgets (`budgets`).

mod budgets;
mod calls;
mod channels;
mod escaped;
mod identifiers;
mod redaction;

#[cfg(test)]
pub(super) use redaction::insert_redaction;
pub use redaction::Redaction;

use channels::ChannelState;

use super::json_args::FieldWatcher;
use super::tools::{CallRecord, ToolHistory};
use super::types::Target;
use super::types::{Finding, Phase};
use super::verdict::{whole_hit, Reported};
use super::Policy;
use crate::config::Price;
use crate::delta::{Channel, Delta};
use crate::evals::Spend;
use crate::scan::Hit;
use std::sync::Arc;

/// Identifies one text channel of a response for the hold-back: an index into the guard's
/// channel table.
pub type ChannelId = usize;

#[derive(Debug, Default)]
pub(super) struct ChoiceState {
    choice: u32,
    output_chars: u64,
    /// Output text, kept only when a whole-text check needs it.
    text: String,
    /// Strings of the answer no decoder models, kept for judged checks: a judge sees them too
    /// (fail closed), apart from the answer text. One string per JSON path or tool call (its
    /// pieces joined as they streamed), in order of first appearance.
    pub(super) other_text: Vec<(Unmodelled, String)>,
}

/// Where an unmodelled string comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unmodelled {
    /// A JSON path no decoder models (`Channel::Other`).
    Path(u32),
    /// The arguments of tool call number `n`, which never started (no name).
    Args(u32),
}

impl ChoiceState {
    /// Appends a piece of the unmodelled string at `path`.
    pub(super) fn push_other(&mut self, path: Unmodelled, text: &str) {
        match self.other_text.iter_mut().find(|(p, _)| *p == path) {
            Some((_, t)) => t.push_str(text),
            None => self.other_text.push((path, text.to_owned())),
        }
    }

    /// Every unmodelled string, one per line.
    fn other(&self) -> String {
        let texts: Vec<&str> = self.other_text.iter().map(|(_, t)| t.as_str()).collect();
        texts.join("\n")
    }
}

/// Text kept per channel for matched-text audit lines: matches are reported within a few
/// hundred bytes of where they end, so this covers every span the scanner reports.
const RECENT_TEXT: usize = 1024;

/// A tool call of the response.
#[derive(Debug)]
struct ResponseCall {
    choice: u32,
    index: u32,
    record: CallRecord,
    /// Watches the arguments for `tool_args_excluded_session`, when one names this tool.
    watcher: Option<FieldWatcher>,
}

/// The per-response state of OnChunk and AfterCall: scanner states per channel, counters per
/// choice, the tool calls. Owned by the stream, so no locks.
#[derive(Debug)]
pub struct ExchangeGuard {
    policy: Arc<Policy>,
    chunk_phase: Phase,
    channels: Vec<ChannelState>,
    /// Where each (choice, channel) is in `channels`: an answer may open thousands (a tool
    /// call each, a choice each), and a lookup per delta must not scan them all.
    channel_index: std::collections::HashMap<(u32, Channel), ChannelId>,
    choices: Vec<ChoiceState>,
    /// Tool calls of the request's history.
    history: ToolHistory,
    /// Tool calls of this response, in the order they started.
    calls: Vec<ResponseCall>,
    /// (input, output) tokens, as last reported.
    usage: (Option<u64>, Option<u64>),
    /// The part of the input a prompt cache wrote or read (priced apart).
    cache: crate::delta::CacheTokens,
    price: Option<Price>,
    /// The spend in USD when known without a price (an eval's session total).
    known_cost_usd: Option<f64>,
    /// What the exchange's session had spent before it, when the proxy tracks it
    /// (`cost_budget` validators read the session's totals).
    session_before: Option<Spend>,
    /// `latency_budget` validators already reported.
    latency_fired: Vec<u32>,
    /// Messages of rules that fired, by validator.
    notes: Vec<(u32, String)>,
    /// Spans to mask, per channel in order of their starts, overlapping ones merged.
    redactions: Vec<Redaction>,
    /// Redactions not yet reported ([`ExchangeGuard::take_findings`]).
    redacted: Vec<Finding>,
    /// Keep recent channel text so findings can carry what matched (`audit.include_match`).
    keep_matches: bool,
    /// Keep each channel's whole text to verify repeats ([`Delta::Repeat`]), up to this many
    /// bytes over all channels (0: not kept).
    full_text_limit: usize,
    /// Bytes of whole text kept so far.
    full_text_kept: usize,
    /// (validator, matched text) of span hits since the last judgement.
    matches: Vec<(u32, String)>,
    hits: Vec<Hit>,
    reported: Reported,
    /// Monitor-mode findings not yet reported ([`ExchangeGuard::take_findings`]).
    findings: Vec<Finding>,
    /// Hashes of the identifier-shaped values checked so far ([`ExchangeGuard::check_identifier`]).
    identifiers_checked: Vec<u64>,
    /// The choices the answer may hold ([`ExchangeGuard::expect_choices`]; unbounded until told).
    choices_expected: u32,
}

/// Identifier values an answer remembers as checked; past them, each is scanned every time.
pub(super) const MAX_IDENTIFIERS_REMEMBERED: usize = 64;

impl Policy {
    /// Starts the guard of one exchange: BeforeCall over the request, then OnChunk and
    /// AfterCall over its answer, streamed unless [`ExchangeGuard::answer`] says otherwise.
    /// `history` comes from [`Policy::tool_history`]; `price` is the requested model's.
    pub fn exchange_guard(
        self: &Arc<Self>,
        history: ToolHistory,
        price: Option<Price>,
    ) -> ExchangeGuard {
        ExchangeGuard {
            policy: Arc::clone(self),
            chunk_phase: Phase::Stream,
            channels: Vec::new(),
            channel_index: std::collections::HashMap::new(),
            choices: Vec::new(),
            history,
            calls: Vec::new(),
            usage: (None, None),
            cache: crate::delta::CacheTokens::default(),
            price,
            known_cost_usd: None,
            session_before: None,
            latency_fired: Vec::new(),
            notes: Vec::new(),
            redactions: Vec::new(),
            redacted: Vec::new(),
            keep_matches: false,
            full_text_limit: 0,
            full_text_kept: 0,
            matches: Vec::new(),
            hits: Vec::new(),
            reported: Reported::default(),
            findings: Vec::new(),
            identifiers_checked: Vec::new(),
            choices_expected: u32::MAX,
        }
    }

    /// True when AfterCall needs the response text kept (whole-text checks exist).
    fn keeps_text(&self, target: Target) -> bool {
        !self.checks(target).whole.is_empty() || (target == Target::Output && self.keeps_answer)
    }
}

impl ExchangeGuard {
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// The requested model's price (`cost_budget`), if configured.
    pub fn price(&self) -> Option<Price> {
        self.price
    }

    /// True when something reads this exchange's token counts beyond the count itself: a
    /// price for the model (spend) or a `cost_budget`. Only then does guardwire estimate the
    /// counts a provider did not report (tokenizing every answer costs more than the rest of a
    /// stream's checks).
    pub fn wants_usage(&self) -> bool {
        self.price.is_some() || !self.policy.cost.is_empty()
    }

    /// Findings carry the text that matched (for `audit.include_match`); off by default.
    pub fn keep_matches(&mut self) {
        self.keep_matches = true;
    }

    /// BeforeCall: the input checks over the request's conversation (see
    /// [`Policy::before_call`]). `Err` is the first enforcing violation; monitor-mode findings
    /// wait for [`ExchangeGuard::take_findings`].
    pub fn before_call(
        &mut self,
        conversation: &crate::delta::Conversation,
    ) -> Result<(), Finding> {
        let policy = Arc::clone(&self.policy);
        policy.before_call(
            conversation,
            &self.history,
            &mut self.findings,
            self.keep_matches,
        )?;
        // A session already over a `cost_budget` is not paid for again.
        if let Some(before) = self.session_before {
            self.check_cost_of(before, (Some(0), Some(0)), Some(0.0));
            return self.judge(Phase::Input);
        }
        Ok(())
    }

    /// How the answer comes (streamed unless told otherwise): OnChunk's findings are reported
    /// under the `stream` or the `response` phase. Before the first delta.
    pub fn answer(&mut self, streamed: bool) {
        self.chunk_phase = if streamed {
            Phase::Stream
        } else {
            Phase::Response
        };
    }

    /// The answer holds at most `n` choices (the request's `n`; at least 1): a delta of a
    /// choice past them ends the answer unchecked. guardwire reads each choice's text by its
    /// `index`, as the SDKs' accumulators do; a reader that takes `choices[0]` of each chunk by
    /// position reads the same text only while every index is below what was asked for (with
    /// one choice asked for, every chunk's only choice is index 0).
    pub fn expect_choices(&mut self, n: u32) {
        self.choices_expected = n.max(1);
    }

    /// True when `choice` is one the request asked for ([`ExchangeGuard::expect_choices`]).
    pub fn choice_expected(&self, choice: u32) -> bool {
        choice < self.choices_expected
    }

    /// True when [`ExchangeGuard::take_findings`] has something to hand over.
    pub fn has_findings(&self) -> bool {
        !(self.findings.is_empty() && self.redacted.is_empty())
    }

    /// Hands what was found since the last call and did not stop the answer — monitor-mode
    /// findings, then redactions — to `report`, and forgets them (their lists keep their
    /// allocation). The verdicts that stop an answer are the `Err`s of the phase methods.
    pub fn take_findings(&mut self, report: impl FnOnce(&[Finding], &[Finding])) {
        if !self.has_findings() {
            return;
        }
        report(&self.findings, &self.redacted);
        self.findings.clear();
        self.redacted.clear();
    }

    /// The text of `channel` between two positions, if still kept.
    fn matched_text(&self, channel: ChannelId, start: u64, end: u64) -> Option<String> {
        let (base, text) = self.channels.get(channel)?.recent.as_ref()?;
        let from = usize::try_from(start.checked_sub(*base)?).ok()?;
        let to = usize::try_from(end.checked_sub(*base)?).ok()?;
        text.get(from..to).map(str::to_owned)
    }

    /// Notes the matched text of the pending span hits of `channel` (those from `from` on).
    fn note_matches(&mut self, channel: ChannelId, from: usize) {
        if !self.keep_matches {
            return;
        }
        for i in from..self.hits.len() {
            let h = self.hits[i];
            if let Some(m) = h.start.and_then(|s| self.matched_text(channel, s, h.end)) {
                self.matches.push((h.owner, m));
            }
        }
    }

    /// Judges the pending hits under `phase`, attaching rule messages (and, when kept, matched
    /// texts) to the findings.
    fn judge(&mut self, phase: Phase) -> Result<(), Finding> {
        let first_new = self.findings.len();
        let verdict = self.policy.judge(
            &mut self.hits,
            phase,
            &mut self.reported,
            &mut self.findings,
        );
        let matches = std::mem::take(&mut self.matches);
        let matched = |v: u32| {
            matches
                .iter()
                .find(|(o, _)| *o == v)
                .map(|(_, m)| m.clone())
        };
        for f in &mut self.findings[first_new..] {
            f.matched = matched(f.validator);
        }
        verdict.map_err(|mut f| {
            f.note = self
                .notes
                .iter()
                .find(|(v, _)| *v == f.validator)
                .map(|(_, n)| n.clone());
            f.matched = matched(f.validator);
            f
        })
    }

    /// OnChunk: checks one delta. For text it returns the channel and the channel position the
    /// frame must wait for: [`ExchangeGuard::safe_pos`] passing it. That is the position after
    /// the text, or one past it while the text ends inside a split JSON escape.
    pub fn on_chunk(&mut self, delta: &Delta<'_>) -> Result<Option<(ChannelId, u64)>, Finding> {
        let (choice, channel, text) = match delta {
            Delta::Text {
                choice,
                channel,
                text,
            } => (choice, channel, text),
            Delta::ToolCallStart {
                choice,
                index,
                name,
                ..
            } => {
                self.on_tool_call(*choice, *index, name);
                self.judge(self.chunk_phase)?;
                return Ok(None);
            }
            Delta::Usage {
                input_tokens,
                output_tokens,
                cache,
            } => {
                // Counts so far: a later report raises them, never lowers them (an answer
                // cannot take back what it was billed).
                let most = |old: Option<u64>, new: Option<u64>| old.max(new);
                self.usage.0 = most(self.usage.0, *input_tokens);
                self.usage.1 = most(self.usage.1, *output_tokens);
                if let Some(c) = cache {
                    self.cache.write = self.cache.write.max(c.write);
                    self.cache.read = self.cache.read.max(c.read);
                }
                return Ok(None);
            }
            Delta::Finish { .. } => return Ok(None),
            // Already checked when it streamed: only held back with its channel.
            Delta::Repeat {
                choice, channel, ..
            } => {
                let id = self.channel(*choice, *channel);
                return Ok(Some((id, self.channels[id].pos())));
            }
        };
        let id = self.channel(*choice, *channel);
        if self.full_text_limit > 0 && self.full_text_kept + text.len() > self.full_text_limit {
            // Dropped for good: repeats from now on are unverified and fail closed.
            self.full_text_kept = self.full_text_limit + 1;
            for ch in &mut self.channels {
                ch.full = None;
            }
        }
        let policy = &*self.policy;
        let ch = &mut self.channels[id];
        let checks = policy.checks(ch.target);
        if let Some(full) = &mut ch.full {
            self.full_text_kept += text.len();
            full.push_str(text);
        }
        if let Some((base, recent)) = &mut ch.recent {
            recent.push_str(text);
            if recent.len() > 2 * RECENT_TEXT {
                let mut cut = recent.len() - RECENT_TEXT;
                while !recent.is_char_boundary(cut) {
                    cut += 1;
                }
                recent.drain(..cut);
                *base += cut as u64;
            }
        }
        let first_hit = self.hits.len();
        let decoded = match &mut ch.json {
            None => std::borrow::Cow::Borrowed(&**text),
            Some(json) => json.decode(text),
        };
        // JSON held in the text (a reader parses it): read once more decoded, from the first
        // escape on (`guard/escaped.rs`).
        if ch.escaped.is_none() && escaped::has_escape(&decoded) {
            ch.escaped = Some(Box::new(escaped::EscapedReading::new(
                ch.scan.clone(),
                ch.scan.pos(),
            )));
        }
        // Arguments are matched decoded and kept raw: a regex match's start, found in the
        // decoded text, is not looked for (such a hit blocks instead of redacting).
        let find_spans = ch.json.is_none();
        checks
            .scan
            .feed(&mut ch.scan, &decoded, &mut self.hits, find_spans);
        if let Some(escaped) = &mut ch.escaped {
            escaped.feed(&checks.scan, &decoded, &mut self.hits);
            escaped.prune(&checks.scan);
        }
        let pos = match &mut ch.json {
            None => ch.scan.pos(),
            Some(json) => {
                for h in &mut self.hits[first_hit..] {
                    h.start = h.start.map(|s| json.raw_pos(s));
                    h.end = json.raw_pos(h.end);
                }
                let mut safe = checks.scan.safe_pos(&ch.scan);
                if let Some(escaped) = &ch.escaped {
                    safe = safe.min(escaped.safe_pos(&checks.scan));
                }
                json.prune(safe);
                // A character split between deltas: the frame that began it waits for the rest.
                json.raw_len() + u64::from(json.pending())
            }
        };
        if let Channel::Other(path) = channel {
            if policy.keeps_answer && *path != crate::delta::READ_APART {
                choice_state(&mut self.choices, *choice).push_other(Unmodelled::Path(*path), text);
            }
            // A string value that is a `data:` URL (an A2A file part's `url`, a resource
            // link): the reader who opens it reads its content. (Its hits have no span: they
            // block at this value.)
            let first = self.hits.len();
            policy.data_url_hits(ch.target, text, &mut self.hits);
            for h in &mut self.hits[first..] {
                h.end = pos;
            }
        }
        if ch.target == Target::Output && matches!(channel, Channel::Content | Channel::Refusal) {
            let keep = policy.keeps_text(Target::Output);
            let c = choice_state(&mut self.choices, *choice);
            if !checks.max_chars.is_empty() {
                // Only `max_length` reads the count: without it, no delta pays for counting.
                c.output_chars += crate::scan::text::char_count(text);
            }
            if keep {
                c.text.push_str(text);
            }
            for &(owner, max) in &checks.max_chars {
                if c.output_chars > max {
                    self.hits.push(Hit {
                        owner,
                        start: None,
                        end: pos,
                        rule: None,
                    });
                }
            }
        }
        for (owner, st) in &mut ch.limits {
            if let Some(at) = st.feed(text) {
                self.hits.push(Hit {
                    owner: *owner,
                    start: Some(at),
                    end: at,
                    rule: None,
                });
            }
        }
        if let Channel::ToolArgs(index) | Channel::ToolInput(index) = channel {
            self.on_tool_args(*choice, *index, text);
        }
        self.note_matches(id, first_hit);
        self.take_redactions(id);
        self.judge(self.chunk_phase)?;
        Ok(Some((id, pos)))
    }

    /// The answer as judged checks see it (kept when the policy has any): every choice's text
    /// (answer and refusal, then strings no decoder models), choices apart by a blank line,
    /// and its tool calls as (name, arguments).
    pub fn judged_answer(&self) -> (String, Vec<(String, String)>) {
        let mut choices: Vec<&ChoiceState> = self.choices.iter().collect();
        choices.sort_by_key(|c| c.choice);
        let texts: Vec<String> = choices
            .iter()
            .flat_map(|c| [c.text.clone(), c.other()])
            .filter(|t| !t.is_empty())
            .collect();
        let calls = self
            .calls
            .iter()
            .map(|c| (c.record.name.clone(), c.record.args.clone()))
            .collect();
        (texts.join("\n\n"), calls)
    }

    /// The strings no decoder models, of every choice (judged with a windowed answer's end).
    pub fn judged_unmodelled(&self) -> String {
        let texts: Vec<String> = self
            .choices
            .iter()
            .map(ChoiceState::other)
            .filter(|t| !t.is_empty())
            .collect();
        texts.join("\n\n")
    }

    /// AfterCall: ends every channel's scan (matches waiting on what follows them are decided)
    /// and runs the whole-response checks.
    pub fn after_call(&mut self) -> Result<(), Finding> {
        self.end_texts()?;
        self.after_texts()
    }

    /// The first half of AfterCall: ends every channel's scan (matches waiting on what
    /// follows them are decided) and judges, without the whole-response and tool checks. For
    /// texts that are no model answer (an MCP client's messages other than a tool call).
    pub fn end_texts(&mut self) -> Result<(), Finding> {
        let policy = Arc::clone(&self.policy);
        for id in 0..self.channels.len() {
            let ch = &mut self.channels[id];
            let first_hit = self.hits.len();
            let scan = &policy.checks(ch.target).scan;
            let find_spans = ch.json.is_none();
            let rest = ch
                .json
                .as_mut()
                .map(|json| json.finish())
                .unwrap_or_default();
            scan.feed(&mut ch.scan, &rest, &mut self.hits, find_spans);
            scan.finish(&mut ch.scan, &mut self.hits, find_spans);
            if let Some(escaped) = &mut ch.escaped {
                escaped.feed(scan, &rest, &mut self.hits);
                escaped.finish(scan, &mut self.hits);
            }
            for h in &mut self.hits[first_hit..] {
                h.start = h.start.map(|s| ch.raw_pos(s));
                h.end = ch.raw_pos(h.end);
            }
            self.note_matches(id, first_hit);
            self.take_redactions(id);
            let ch = &mut self.channels[id];
            for (owner, st) in &mut ch.limits {
                if st.finish() {
                    self.hits.push(whole_hit(*owner));
                }
            }
        }
        let mut fields = Vec::new();
        for call in &mut self.calls {
            if let Some(w) = &mut call.watcher {
                w.finish(&mut fields);
            }
        }
        self.judge(self.chunk_phase)
    }

    /// The second half of AfterCall: the whole-response checks, the tool checks of the turn and
    /// the budgets.
    fn after_texts(&mut self) -> Result<(), Finding> {
        let policy = Arc::clone(&self.policy);
        let output = policy.checks(Target::Output);
        // Every choice that produced anything (choice 0 for an empty answer) is judged.
        for c in &self.calls {
            choice_state(&mut self.choices, c.choice);
        }
        if self.choices.is_empty() {
            self.choices.push(ChoiceState::default());
        }
        let mut hits = Vec::new();
        for c in &self.choices {
            let mut lower = None;
            for (owner, check) in &output.whole {
                if !check.passes(&c.text, &mut lower) {
                    hits.push(whole_hit(*owner));
                }
            }
            // (The views cost choices × calls: only when a tool check reads them.)
            if policy.tools.is_empty() {
                continue;
            }
            let own: Vec<&CallRecord> = self
                .calls
                .iter()
                .filter(|k| k.choice == c.choice)
                .map(|k| &k.record)
                .collect();
            let (turn, session) = self.call_views(c.choice);
            let earlier = self.history.earlier();
            for (owner, check) in &policy.tools {
                let outcome = check.on_response_calls(&own, &session, earlier);
                policy.outcome(*owner, outcome, &mut hits);
                // A response without tool calls ends the agent's turn.
                if own.is_empty() && check.on_turn_end(&turn, &session, earlier) {
                    hits.push(whole_hit(*owner));
                }
            }
        }
        self.hits.append(&mut hits);
        self.check_cost();
        self.judge(Phase::Response)
    }
}

pub(super) fn choice_state(choices: &mut Vec<ChoiceState>, choice: u32) -> &mut ChoiceState {
    // Choices come in order: the one asked for is nearly always the last (from the back, so
    // many choices in order cost one step each).
    let i = match choices.iter().rposition(|c| c.choice == choice) {
        Some(i) => i,
        None => {
            choices.push(ChoiceState {
                choice,
                ..ChoiceState::default()
            });
            choices.len() - 1
        }
    };
    &mut choices[i]
}
