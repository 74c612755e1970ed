//! The workflow checks, from what a proxy sees of a PromptKit workflow: the model moves the
//! workflow with `workflow__transition` calls, and each answered call's result names the state
//! it moves to (`{"status": "transition_scheduled", "target_state": "..."}`). The workflow's
//! state is the target of the last answered transition; before any, it is unknown.
//!
//! PromptKit reads these from its engine's own records, which never reach the wire; a
//! transition the client has not answered yet (the answer's own call) has no target yet.

use super::{is_subsequence, CallRecord};
use serde_json::Value;

/// PromptKit's transition tool.
pub const TRANSITION_TOOL: &str = "workflow__transition";

/// A workflow check of a pack, with its params validated.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkflowCheck {
    /// `workflow_complete`: the workflow's state is one of `terminal_states` (a proxy cannot
    /// see the engine's completion flag: the pack names the states that end it).
    Complete { terminal_states: Vec<String> },
    /// `workflow_state_is` (`state_is`): the workflow is in `state`.
    StateIs { state: String },
    /// `workflow_transitioned_to` (`transitioned_to`): some transition went to `state`.
    TransitionedTo { state: String },
    /// `workflow_transition_order`: the transitions' targets include this order.
    TransitionOrder { sequence: Vec<String> },
    /// `workflow_tool_access`: in a state with a rule, only its `allowed` tools are called
    /// (states without a rule, and calls before the first transition, are open).
    ToolAccess { rules: Vec<AccessRule> },
}

/// `workflow_tool_access`: in `state`, only the `allowed` tools.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessRule {
    pub state: String,
    pub allowed: Vec<String>,
}

/// The state an answered transition moved to.
fn target(call: &CallRecord) -> Option<String> {
    if call.name != TRANSITION_TOOL || call.result_is_error {
        return None;
    }
    let result: Value = serde_json::from_str(call.result.as_deref()?.trim()).ok()?;
    result
        .get("target_state")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Every transition's target, in order.
fn targets(calls: &[&CallRecord]) -> Vec<String> {
    calls.iter().filter_map(|c| target(c)).collect()
}

impl WorkflowCheck {
    /// Whether the session's calls (the answer's last) break a rule of access: each call is
    /// checked in the state it was made in — the calls of one message share the state before
    /// it (a transition among them takes effect for the next message), as they did when the
    /// message streamed.
    fn access_denied(rules: &[AccessRule], calls: &[&CallRecord], only_last: bool) -> bool {
        let mut state: Option<String> = None;
        let (mut message, mut next) = (None, None);
        for (i, c) in calls.iter().enumerate() {
            if message != Some(c.message) {
                message = Some(c.message);
                if let Some(t) = next.take() {
                    state = Some(t);
                }
            }
            let judged = !only_last || i + 1 == calls.len();
            if judged && c.name != TRANSITION_TOOL {
                let rule = state
                    .as_deref()
                    .and_then(|s| rules.iter().find(|r| r.state == s));
                if rule.is_some_and(|r| !r.allowed.contains(&c.name)) {
                    return true;
                }
            }
            if let Some(t) = target(c) {
                next = Some(t);
            }
        }
        false
    }

    /// BeforeCall: the history's calls broke a rule of access.
    pub fn history_violated(&self, calls: &[&CallRecord]) -> bool {
        match self {
            WorkflowCheck::ToolAccess { rules } => Self::access_denied(rules, calls, false),
            _ => false,
        }
    }

    /// A call starts (the session's last): it is not allowed in the current state.
    pub fn call_denied(&self, session: &[&CallRecord]) -> bool {
        match self {
            WorkflowCheck::ToolAccess { rules } => Self::access_denied(rules, session, true),
            _ => false,
        }
    }

    /// End of the turn: what the workflow must have reached.
    pub fn turn_end_violated(&self, session: &[&CallRecord]) -> bool {
        let targets = targets(session);
        match self {
            WorkflowCheck::Complete { terminal_states } => {
                targets.last().is_none_or(|s| !terminal_states.contains(s))
            }
            WorkflowCheck::StateIs { state } => targets.last() != Some(state),
            WorkflowCheck::TransitionedTo { state } => !targets.contains(state),
            WorkflowCheck::TransitionOrder { sequence } => {
                targets.is_empty() || !is_subsequence(&targets, sequence)
            }
            WorkflowCheck::ToolAccess { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call, each in a message of its own (in the order made).
    fn call(name: &str, result: Option<&str>) -> CallRecord {
        static MESSAGE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        CallRecord {
            name: name.into(),
            args: String::new(),
            result: result.map(str::to_owned),
            result_is_error: false,
            message: MESSAGE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    fn moved(to: &str) -> CallRecord {
        call(
            TRANSITION_TOOL,
            Some(&format!(
                r#"{{"status":"transition_scheduled","event":"e","target_state":"{to}"}}"#
            )),
        )
    }

    #[test]
    fn states_come_from_answered_transitions() {
        let calls = [
            moved("triage"),
            call("lookup", Some("ok")),
            moved("investigation"),
            call(TRANSITION_TOOL, None),
        ];
        let session: Vec<&CallRecord> = calls.iter().collect();
        let check = |c: WorkflowCheck| c.turn_end_violated(&session);
        assert!(!check(WorkflowCheck::StateIs {
            state: "investigation".into()
        }));
        assert!(check(WorkflowCheck::StateIs {
            state: "triage".into()
        }));
        assert!(!check(WorkflowCheck::TransitionedTo {
            state: "triage".into()
        }));
        assert!(!check(WorkflowCheck::TransitionOrder {
            sequence: vec!["triage".into(), "investigation".into()]
        }));
        assert!(check(WorkflowCheck::TransitionOrder {
            sequence: vec!["investigation".into(), "triage".into()]
        }));
        assert!(check(WorkflowCheck::Complete {
            terminal_states: vec!["resolution".into()]
        }));
        assert!(!check(WorkflowCheck::Complete {
            terminal_states: vec!["investigation".into()]
        }));
        // Nothing answered yet: no state.
        assert!(WorkflowCheck::StateIs { state: "x".into() }.turn_end_violated(&[]));
    }

    #[test]
    fn tools_are_checked_in_the_state_they_are_called_in() {
        let rules = vec![AccessRule {
            state: "triage".into(),
            allowed: vec!["lookup".into()],
        }];
        let access = WorkflowCheck::ToolAccess { rules };
        let (before, in_triage, refund) =
            (call("refund", None), moved("triage"), call("refund", None));
        let lookup = call("lookup", None);
        // Before any transition the workflow is open.
        assert!(!access.call_denied(&[&before]));
        assert!(!access.call_denied(&[&in_triage, &lookup]));
        assert!(access.call_denied(&[&in_triage, &refund]));
        assert!(access.history_violated(&[&before, &in_triage, &refund]));
        assert!(!access.history_violated(&[&before, &in_triage, &lookup]));
        // A state without a rule is open.
        let elsewhere = moved("billing");
        assert!(!access.call_denied(&[&in_triage, &elsewhere, &refund]));
        // A call made in the same message as the transition was made in the state before it:
        // allowed then, allowed when the history comes back.
        let mut sibling = call("refund", Some("ok"));
        sibling.message = in_triage.message;
        assert!(!access.history_violated(&[&before, &in_triage, &sibling]));
        assert!(access.history_violated(&[&before, &in_triage, &refund]));
    }
}
