//! The guard's tool calls: a response's calls as they start, their arguments (kept and watched
//! field by field when a check reads them), and the turn and session as the tool checks see them.

use super::{ExchangeGuard, ResponseCall};
use crate::policy::json_args::FieldWatcher;
use crate::policy::tools::{self, CallRecord, ToolCheck};
use crate::policy::verdict::whole_hit;
use crate::policy::Policy;
use crate::scan::Hit;

impl Policy {
    /// The keys `tool_args_excluded_session` watches in calls of `tool`.
    fn watches_args_of(&self, tool: &str) -> bool {
        self.tools
            .iter()
            .any(|(_, c)| matches!(c, ToolCheck::ArgsExcluded { tool: t, .. } if t == tool))
    }

    fn needs_args(&self) -> bool {
        self.needs_args
    }
}

impl ExchangeGuard {
    /// The answer's tool calls so far.
    pub fn call_count(&self) -> usize {
        self.calls.len()
    }

    /// A tool call starts: checks that a start can violate fire here, before any of its
    /// arguments is released.
    pub(super) fn on_tool_call(&mut self, choice: u32, index: u32, name: &str) {
        let policy = &*self.policy;
        self.calls.push(ResponseCall {
            choice,
            index,
            record: CallRecord {
                name: name.to_owned(),
                message: usize::MAX,
                ..CallRecord::default()
            },
            watcher: policy.watches_args_of(name).then(FieldWatcher::default),
        });
        // Without tool checks nothing reads the views (built per call, they cost n²).
        if policy.tools.is_empty() {
            return;
        }
        let (turn, session) = self.call_views(choice);
        let earlier = self.history.earlier();
        let mut fired = Vec::new();
        for (owner, check) in &policy.tools {
            if check.on_call_start(&turn, &session, earlier) {
                let note = check
                    .anti_pattern_hit(&turn, earlier)
                    .and_then(|p| p.message.clone());
                fired.push((*owner, note));
            }
        }
        drop((turn, session));
        for (owner, note) in fired {
            if let Some(n) = note {
                self.notes.push((owner, n));
            }
            self.hits.push(whole_hit(owner));
        }
    }

    /// Arguments of a response call: kept when a check reads them, and watched field by field
    /// for `tool_args_excluded_session`.
    pub(super) fn on_tool_args(&mut self, choice: u32, index: u32, text: &str) {
        let policy = &*self.policy;
        if !policy.needs_args() {
            return;
        }
        let Some(call) = self
            .calls
            .iter_mut()
            .rev()
            .find(|c| c.choice == choice && c.index == index)
        else {
            // Arguments of a call that never started (no name): judges still see them, with
            // the strings no decoder models (fail closed).
            if policy.keeps_answer {
                super::choice_state(&mut self.choices, choice)
                    .push_other(super::Unmodelled::Args(index), text);
            }
            return;
        };
        call.record.args.push_str(text);
        let Some(watcher) = &mut call.watcher else {
            return;
        };
        let mut fields = Vec::new();
        let name = &call.record.name;
        let watched = |key: &str| {
            policy.tools.iter().any(|(_, c)| {
                matches!(c, ToolCheck::ArgsExcluded { tool, excluded } if tool == name && excluded.contains_key(key))
            })
        };
        watcher.feed(text.as_bytes(), watched, &mut fields);
        for f in fields {
            for (owner, check) in &policy.tools {
                let ToolCheck::ArgsExcluded { tool, excluded } = check else {
                    continue;
                };
                let Some(bad) = excluded.get(&f.key).filter(|_| tool == name) else {
                    continue;
                };
                match f
                    .value
                    .as_deref()
                    .map(serde_json::from_str::<serde_json::Value>)
                {
                    Some(Ok(v)) => {
                        if tools::value_excluded(&v, bad) {
                            self.hits.push(Hit {
                                owner: *owner,
                                start: Some(f.start),
                                end: f.end,
                                rule: None,
                            });
                        }
                    }
                    _ => policy.erred(*owner, &mut self.hits),
                }
            }
        }
    }

    /// The turn's and the session's calls as seen from `choice`, this response's last.
    pub(super) fn call_views(&self, choice: u32) -> (Vec<&CallRecord>, Vec<&CallRecord>) {
        let own = self
            .calls
            .iter()
            .filter(|c| c.choice == choice)
            .map(|c| &c.record);
        let turn = self.history.turn().iter().chain(own.clone()).collect();
        let session = self.history.calls.iter().chain(own).collect();
        (turn, session)
    }
}
