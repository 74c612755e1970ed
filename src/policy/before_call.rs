//! BeforeCall: the checks on the request (its messages and tool-call history) before the
//! provider is called.

use super::tools::ToolHistory;
use super::types::Target;
use super::types::{Finding, Phase};
use super::verdict::{whole_hit, Reported};
use super::Policy;
use crate::delta::Conversation;
use std::borrow::Cow;

impl Policy {
    /// The tool-call history of a request, as the tool checks see it (empty when no validator
    /// needs it).
    pub fn tool_history(&self, conversation: &Conversation) -> ToolHistory {
        if self.tools.is_empty() {
            ToolHistory::default()
        } else {
            ToolHistory::of(conversation)
        }
    }

    /// BeforeCall: checks every text of the request (each message's text parts joined as the
    /// model reads them, and each tool call's arguments in the history) and the tool history.
    /// `Err` carries the first enforcing violation; monitor-mode findings are appended to
    /// `findings`; with `keep_matches` they carry the text that matched. Called through
    /// [`super::ExchangeGuard::before_call`], which keeps those findings with the answer's.
    pub(super) fn before_call(
        &self,
        conversation: &Conversation,
        history: &ToolHistory,
        findings: &mut Vec<Finding>,
        keep_matches: bool,
    ) -> Result<(), Finding> {
        let checks = self.checks(Target::Input);
        let mut matches: Vec<(u32, String)> = Vec::new();
        let mut reported = Reported::default();
        let mut hits = Vec::new();
        let mut all_text = String::new();
        // A message's text parts are one text to the model: scanned as one, joined as
        // `Message::joined_text` says (the words of two parts stay apart, a phrase across two
        // parts is found). Each tool call's arguments are a text of their own.
        // Identifier-shaped values are read by the secret and PII patterns only.
        let (identifiers, messages): (Vec<_>, Vec<_>) = conversation
            .messages
            .iter()
            .partition(|m| m.role == crate::delta::Role::Identifiers);
        self.check_input_identifiers(identifiers.iter().flat_map(|m| &m.text), &mut hits);
        let texts = messages.into_iter().flat_map(|m| {
            let joined: Option<Cow<'_, str>> = match m.text.as_slice() {
                [] => None,
                [one] => Some(Cow::Borrowed(one.as_str())),
                parts => Some(Cow::Owned(crate::delta::join_parts(parts))),
            };
            joined.into_iter().chain(
                m.tool_calls
                    .iter()
                    .map(|c| super::json_text::decode_whole(&c.arguments)),
            )
        });
        for text in texts {
            let text: &str = &text;
            if !checks.scan.is_empty() {
                let before = hits.len();
                let mut st = checks.scan.start();
                checks.scan.feed(&mut st, text, &mut hits, false);
                checks.scan.finish(&mut st, &mut hits, false);
                if keep_matches {
                    for h in &hits[before..] {
                        if let Some(m) = h.start.and_then(|s| text.get(s as usize..h.end as usize))
                        {
                            matches.push((h.owner, m.to_owned()));
                        }
                    }
                }
            }
            let chars = crate::scan::text::char_count(text);
            for &(owner, max) in &checks.max_chars {
                if chars > max {
                    hits.push(whole_hit(owner));
                }
            }
            for (owner, limit) in &checks.limits {
                if limit.exceeded_by(text) {
                    hits.push(whole_hit(*owner));
                }
            }
            if !checks.whole.is_empty() {
                all_text.push_str(text);
                all_text.push('\n');
            }
        }
        let mut lower = None;
        for (owner, check) in &checks.whole {
            if !check.passes(&all_text, &mut lower) {
                hits.push(whole_hit(*owner));
            }
        }
        for (owner, check) in &self.tools {
            self.outcome(*owner, check.before_call(history), &mut hits);
        }
        let first_new = findings.len();
        let verdict = self.judge(&mut hits, Phase::Input, &mut reported, findings);
        let matched = |v: u32| {
            matches
                .iter()
                .find(|(o, _)| *o == v)
                .map(|(_, m)| m.clone())
        };
        for f in &mut findings[first_new..] {
            f.matched = matched(f.validator);
        }
        verdict.map_err(|mut f| {
            f.matched = matched(f.validator);
            f
        })
    }
}
