//! Checks on tool calls: which tools the model calls, in which order, with which arguments,
//! and what the tools answered.
//!
//! A proxy sees one model call at a time, while an agent's *turn* spans several: the model asks
//! for tools, the client runs them and calls again with the results. So the view is:
//! - **turn**: the tool calls in the request's history after its last user message, plus this
//!   response's calls (per choice). A turn *ends* with a response that calls no tool.
//! - **session**: every tool call in the request's history, plus this response's.
//!
//! Each check is judged at the earliest moment its verdict is certain:
//! - *BeforeCall*, from the history alone (tool results, calls already made);
//! - *call start*, before any argument of the call is released (a forbidden tool, a count
//!   maximum, an anti-pattern or a repeat completed by this call);
//! - *end of the response*, on the complete arguments of its calls;
//! - *end of the turn*, for what must have happened during it (`tools_called`, sequences…).
//!   Responses that call tools leave these checks open for the turn's later responses.

use crate::delta::{Conversation, Role};
use serde_json::{Map, Value};

mod args;
pub mod tally;
pub mod workflow;

pub(crate) use args::parse_args;
pub use args::{args_match, json_equal, value_excluded};
pub use tally::{CallTally, Earlier};

/// Which calls a check looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Turn,
    Session,
}

/// A tool check of a pack, with its params validated.
#[derive(Debug, Clone)]
pub enum ToolCheck {
    /// `tools_called`: each tool called at least `min_calls` times.
    Called {
        names: Vec<String>,
        min_calls: u64,
        scope: Scope,
    },
    /// `tools_not_called`: none of these tools is called.
    NotCalled { names: Vec<String>, scope: Scope },
    /// `tool_args`: `tool` is called, and every call of it has the expected arguments.
    Args {
        tool: String,
        expected: Map<String, Value>,
        scope: Scope,
    },
    /// `tool_calls_with_args`: a call of `tool` in the turn has the expected arguments and its
    /// result includes every pattern (case-insensitive).
    CallsWithArgs {
        tool: String,
        expected: Map<String, Value>,
        result_includes: Vec<String>,
    },
    /// `tool_call_count`: calls in the turn (of `tool`, or of any tool).
    Count {
        tool: Option<String>,
        min: Option<u64>,
        max: Option<u64>,
    },
    /// `tool_call_sequence`: these tools are called in this order (other calls may come between).
    Sequence { tools: Vec<String> },
    /// `tool_call_chain`: these tools are called in this order, one right after the other.
    Chain { tools: Vec<String> },
    /// `tool_anti_pattern`: none of these call sequences happens back to back.
    AntiPattern { patterns: Vec<AntiPattern> },
    /// `tool_no_repeat`: no tool (of `tools`, or any) called more than `max_repeats` times in a
    /// row.
    NoRepeat {
        tools: Vec<String>,
        max_repeats: u64,
    },
    /// `tool_efficiency`: at most `max_calls` calls, `max_errors` failed results and a failure
    /// rate of `max_error_rate` in the turn.
    Efficiency {
        max_calls: Option<u64>,
        max_errors: Option<u64>,
        max_error_rate: Option<f64>,
    },
    /// `no_tool_errors`: no tool result of the turn reports a failure.
    NoErrors,
    /// `tool_result_includes`: every result (of `tool`, or of any) in the turn includes every
    /// pattern, case-insensitively.
    ResultIncludes {
        tool: Option<String>,
        patterns: Vec<String>,
    },
    /// `tool_result_matches`: every result (of `tool`, or of any) in the turn matches.
    ResultMatches {
        tool: Option<String>,
        regex: regex_automata::meta::Regex,
    },
    /// `tool_args_excluded_session`: no call of `tool` in the session has any of these
    /// argument values. Checked on the arguments as they stream.
    ArgsExcluded {
        tool: String,
        excluded: Map<String, Value>,
    },
    /// `agent_response_contains`: a result of a call of `agent` (agents are tools) in the
    /// session contains every pattern (case-sensitive, as PromptKit).
    AgentResponseContains {
        agent: String,
        patterns: Vec<String>,
    },
    /// `skill_activated`: each skill activated (a `skill__activate` call naming it whose result
    /// is not an error) at least `min_calls` times in the session.
    SkillActivated { names: Vec<String>, min_calls: u64 },
    /// `skill_not_activated`: none of these skills is activated.
    SkillNotActivated { names: Vec<String> },
    /// `skill_activation_order`: the session's skill activations include this order.
    SkillOrder { sequence: Vec<String> },
    /// The workflow checks, on the transitions a proxy sees (`workflow` module).
    Workflow(workflow::WorkflowCheck),
    /// `invariant_fields_preserved`: a field of `tool`'s arguments, once sent, is in every later
    /// call of `tool` in the session.
    FieldsPreserved { tool: String, fields: Vec<String> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct AntiPattern {
    pub sequence: Vec<String>,
    pub message: Option<String>,
}

/// A tool call as the checks see it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallRecord {
    pub name: String,
    /// The complete arguments (JSON text); for a streaming call, what arrived so far.
    pub args: String,
    /// The result the client sent back, for calls of the history.
    pub result: Option<String>,
    pub result_is_error: bool,
    /// The request message that made the call (its index); the answer's calls come after
    /// every message (`usize::MAX`). Calls of one message are made together.
    pub message: usize,
}

/// The tool calls of a request's history, oldest first; `turn_start` is the index of the first
/// call of the current turn. A bounded history (an MCP session's) keeps only its latest calls:
/// the ones before them are counted in `forgotten`, of the same turn as the first kept call
/// when `turn_start` is 0.
#[derive(Debug, Clone, Default)]
pub struct ToolHistory {
    pub calls: Vec<CallRecord>,
    pub turn_start: usize,
    pub forgotten: CallTally,
}

impl ToolHistory {
    pub fn of(conversation: &Conversation) -> ToolHistory {
        let last_user = conversation
            .messages
            .iter()
            .rposition(|m| m.role == Role::User);
        let mut h = ToolHistory::default();
        let mut ids: Vec<(String, usize)> = Vec::new();
        for (i, m) in conversation.messages.iter().enumerate() {
            if last_user == Some(i) {
                h.turn_start = h.calls.len() + m.tool_calls.len();
            }
            for c in &m.tool_calls {
                if let Some(id) = &c.id {
                    ids.push((id.clone(), h.calls.len()));
                }
                h.calls.push(CallRecord {
                    name: c.name.clone(),
                    args: c.arguments.clone(),
                    result: None,
                    result_is_error: false,
                    message: i,
                });
            }
            if m.role == Role::Tool {
                // By id; else (Gemini answers by name) the oldest unanswered call of that name.
                let target = m.tool_call_id.as_deref().and_then(|id| {
                    ids.iter()
                        .find(|(i, _)| i == id)
                        .map(|(_, k)| *k)
                        .or_else(|| {
                            h.calls
                                .iter()
                                .position(|c| c.result.is_none() && c.name == id)
                        })
                });
                if let Some(k) = target {
                    h.calls[k].result = Some(m.text.join("\n"));
                    h.calls[k].result_is_error = m.is_error;
                }
            }
        }
        h
    }

    pub fn turn(&self) -> &[CallRecord] {
        &self.calls[self.turn_start.min(self.calls.len())..]
    }

    /// The forgotten calls of the turn and of the session.
    pub fn earlier(&self) -> Earlier<'_> {
        Earlier {
            turn: match self.turn_start {
                0 => &self.forgotten,
                _ => &tally::NOTHING,
            },
            session: &self.forgotten,
        }
    }
}

/// A check's outcome where it can fail to decide (arguments that are not JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    /// The check could not be evaluated; the validator's `on_error` decides.
    Error,
}

impl Outcome {
    fn of(violated: bool) -> Outcome {
        if violated {
            Outcome::Fail
        } else {
            Outcome::Pass
        }
    }
}

impl ToolCheck {
    /// True for checks that read call arguments (the guard then keeps them).
    pub fn needs_args(&self) -> bool {
        matches!(
            self,
            ToolCheck::Args { .. }
                | ToolCheck::CallsWithArgs { .. }
                | ToolCheck::ArgsExcluded { .. }
                | ToolCheck::SkillActivated { .. }
                | ToolCheck::SkillNotActivated { .. }
                | ToolCheck::SkillOrder { .. }
                | ToolCheck::FieldsPreserved { .. }
        )
    }

    /// Why an MCP session cannot judge this check, if it cannot: MCP has no end of a turn (a
    /// session just stops), and guardwire reads tool results there as text, not as a call's
    /// outcome. Such checks are refused on MCP routes when the config loads, rather than
    /// never firing.
    pub fn unjudged_on_mcp(&self) -> Option<&'static str> {
        const TURN_END: &str = "it is judged at the end of a turn, and an MCP session has none";
        const RESULTS: &str =
            "it reads tool results as a call's outcome, and on MCP guardwire reads them as text";
        match self {
            ToolCheck::Called { .. }
            | ToolCheck::Sequence { .. }
            | ToolCheck::Chain { .. }
            | ToolCheck::CallsWithArgs { .. }
            | ToolCheck::AgentResponseContains { .. }
            | ToolCheck::SkillActivated { .. }
            | ToolCheck::SkillOrder { .. } => Some(TURN_END),
            ToolCheck::Count { min: Some(_), .. } => {
                Some("its `min` is judged at the end of a turn, and an MCP session has none")
            }
            ToolCheck::Args { .. } => Some(
                "that the tool is called at all is judged at the end of a turn, and an MCP session has none",
            ),
            ToolCheck::NoErrors | ToolCheck::ResultIncludes { .. } | ToolCheck::ResultMatches { .. } => {
                Some(RESULTS)
            }
            // The workflow's state is the result of its last answered transition.
            ToolCheck::Workflow(_) => Some(
                "it reads the workflow's state from the transitions' results, and on MCP guardwire reads them as text",
            ),
            ToolCheck::Efficiency {
                max_errors,
                max_error_rate,
                ..
            } if max_errors.is_some() || max_error_rate.is_some() => Some(RESULTS),
            _ => None,
        }
    }

    /// BeforeCall: what the history alone decides.
    pub fn before_call(&self, h: &ToolHistory) -> Outcome {
        let turn = h.turn();
        fn results<'a>(
            turn: &'a [CallRecord],
            tool: &'a Option<String>,
        ) -> impl Iterator<Item = &'a str> {
            turn.iter()
                .filter(move |c| tool.as_deref().is_none_or(|t| t == c.name))
                .filter_map(|c| c.result.as_deref())
        }
        match self {
            ToolCheck::NotCalled {
                names,
                scope: Scope::Session,
            } => Outcome::of(
                h.calls.iter().any(|c| names.contains(&c.name))
                    || h.forgotten.may_have_called(names),
            ),
            ToolCheck::ArgsExcluded { tool, excluded } => worst(
                h.calls
                    .iter()
                    .filter(|c| c.name == *tool)
                    .map(|c| args_excluded(&c.args, excluded)),
            ),
            ToolCheck::NoErrors => Outcome::of(turn.iter().any(|c| c.result_is_error)),
            ToolCheck::SkillNotActivated { names } => {
                let all: Vec<&CallRecord> = h.calls.iter().collect();
                skills_activated(&all, names)
            }
            ToolCheck::Workflow(w) => {
                let all: Vec<&CallRecord> = h.calls.iter().collect();
                Outcome::of(w.history_violated(&all))
            }
            ToolCheck::FieldsPreserved { tool, fields } => {
                let all: Vec<&CallRecord> = h.calls.iter().collect();
                fields_dropped(&all, tool, fields, &h.forgotten)
            }
            ToolCheck::ResultIncludes { tool, patterns } => {
                Outcome::of(results(turn, tool).any(|r| {
                    let r = r.to_lowercase();
                    !patterns.iter().all(|p| r.contains(&p.to_lowercase()))
                }))
            }
            ToolCheck::ResultMatches { tool, regex } => {
                Outcome::of(results(turn, tool).any(|r| !regex.is_match(r)))
            }
            ToolCheck::Efficiency {
                max_errors,
                max_error_rate,
                ..
            } => {
                let answered = turn.iter().filter(|c| c.result.is_some()).count() as u64;
                let errors = turn.iter().filter(|c| c.result_is_error).count() as u64;
                Outcome::of(
                    max_errors.is_some_and(|m| errors > m)
                        || max_error_rate
                            .is_some_and(|r| answered > 0 && errors as f64 / answered as f64 > r),
                )
            }
            _ => Outcome::Pass,
        }
    }

    /// A call starts: `turn` and `session` end with it, `earlier` holds what their history
    /// forgot before them. Its arguments are not known yet. (A session-scoped
    /// `tools_not_called` also needs only the new call: the history was judged BeforeCall.)
    pub fn on_call_start(
        &self,
        turn: &[&CallRecord],
        session: &[&CallRecord],
        earlier: Earlier<'_>,
    ) -> bool {
        let Some(call) = turn.last() else {
            return false;
        };
        match self {
            ToolCheck::Workflow(w) => w.call_denied(session),
            ToolCheck::NotCalled { names, .. } => names.contains(&call.name),
            ToolCheck::Count {
                tool,
                max: Some(max),
                ..
            } => count(turn, tool.as_deref()) + earlier.turn.count(tool.as_deref()) > *max,
            ToolCheck::AntiPattern { patterns } => patterns
                .iter()
                .any(|p| ends_with(turn, &p.sequence, earlier.turn)),
            ToolCheck::NoRepeat { tools, max_repeats } => {
                let kept = turn
                    .iter()
                    .rev()
                    .take_while(|c| c.name == call.name)
                    .count();
                // A run that spans every kept call goes on among the forgotten ones.
                let run = kept as u64
                    + match kept == turn.len() {
                        true => earlier.turn.run_of(&call.name),
                        false => 0,
                    };
                (tools.is_empty() || tools.contains(&call.name)) && run > *max_repeats
            }
            ToolCheck::Efficiency {
                max_calls: Some(max),
                ..
            } => turn.len() as u64 + earlier.turn.calls() > *max,
            _ => false,
        }
    }

    /// The anti-pattern a call completed, for its message.
    pub fn anti_pattern_hit(
        &self,
        turn: &[&CallRecord],
        earlier: Earlier<'_>,
    ) -> Option<&AntiPattern> {
        match self {
            ToolCheck::AntiPattern { patterns } => patterns
                .iter()
                .find(|p| ends_with(turn, &p.sequence, earlier.turn)),
            _ => None,
        }
    }

    /// End of the response: the complete arguments of its calls (`calls`; the session's
    /// calls end with them, after what `earlier` forgot).
    pub fn on_response_calls(
        &self,
        calls: &[&CallRecord],
        session: &[&CallRecord],
        earlier: Earlier<'_>,
    ) -> Outcome {
        match self {
            ToolCheck::SkillNotActivated { names } => skills_activated(calls, names),
            ToolCheck::FieldsPreserved { tool, fields } if !calls.is_empty() => {
                fields_dropped(session, tool, fields, earlier.session)
            }
            ToolCheck::Args { tool, expected, .. } => {
                worst(calls.iter().filter(|c| c.name == *tool).map(|c| {
                    match args_match(&c.args, expected) {
                        Some(true) => Outcome::Pass,
                        Some(false) => Outcome::Fail,
                        None => Outcome::Error,
                    }
                }))
            }
            ToolCheck::ArgsExcluded { tool, excluded } => worst(
                calls
                    .iter()
                    .filter(|c| c.name == *tool)
                    .map(|c| args_excluded(&c.args, excluded)),
            ),
            _ => Outcome::Pass,
        }
    }

    /// End of the turn (a response without tool calls).
    pub fn on_turn_end(
        &self,
        turn: &[&CallRecord],
        session: &[&CallRecord],
        earlier: Earlier<'_>,
    ) -> bool {
        let scoped = |scope: &Scope| match scope {
            Scope::Turn => turn,
            Scope::Session => session,
        };
        let forgotten = |scope: &Scope| match scope {
            Scope::Turn => earlier.turn,
            Scope::Session => earlier.session,
        };
        let names = |calls: &[&CallRecord]| -> Vec<String> {
            calls.iter().map(|c| c.name.clone()).collect()
        };
        match self {
            ToolCheck::Called {
                names: tools,
                min_calls,
                scope,
            } => tools.iter().any(|t| {
                count(scoped(scope), Some(t)) + forgotten(scope).count(Some(t)) < *min_calls
            }),
            ToolCheck::Count {
                tool,
                min: Some(min),
                ..
            } => count(turn, tool.as_deref()) + earlier.turn.count(tool.as_deref()) < *min,
            ToolCheck::Sequence { tools } => !is_subsequence(&names(turn), tools),
            ToolCheck::Chain { tools } => !names(turn).windows(tools.len()).any(|w| w == tools),
            ToolCheck::Args {
                tool,
                expected,
                scope,
            } => !scoped(scope)
                .iter()
                .any(|c| c.name == *tool && args_match(&c.args, expected) == Some(true)),
            ToolCheck::CallsWithArgs {
                tool,
                expected,
                result_includes,
            } => !turn.iter().any(|c| {
                c.name == *tool
                    && args_match(&c.args, expected) == Some(true)
                    && c.result.as_deref().is_some_and(|r| {
                        let r = r.to_lowercase();
                        result_includes
                            .iter()
                            .all(|p| r.contains(&p.to_lowercase()))
                    })
            }),
            ToolCheck::AgentResponseContains { agent, patterns } => !session.iter().any(|c| {
                c.name == *agent
                    && c.result
                        .as_deref()
                        .is_some_and(|r| patterns.iter().all(|p| r.contains(p.as_str())))
            }),
            ToolCheck::SkillActivated { names, min_calls } => {
                let active: Vec<String> = skill_names(session, true).collect();
                names
                    .iter()
                    .any(|n| (active.iter().filter(|a| *a == n).count() as u64) < *min_calls)
            }
            ToolCheck::SkillOrder { sequence } => {
                let order: Vec<String> = skill_names(session, false).collect();
                order.is_empty() || !is_subsequence(&order, sequence)
            }
            ToolCheck::Workflow(w) => w.turn_end_violated(session),
            _ => false,
        }
    }
}

/// PromptKit's skill tool: `{"name": <skill>}` activates a skill.
pub const SKILL_TOOL: &str = "skill__activate";

/// The skills `calls` activate, in order: calls of [`SKILL_TOOL`] with a `name` argument;
/// with `ok_only`, not those whose result is an error.
fn skill_names<'a>(
    calls: &'a [&'a CallRecord],
    ok_only: bool,
) -> impl Iterator<Item = String> + 'a {
    calls
        .iter()
        .filter(move |c| c.name == SKILL_TOOL && !(ok_only && c.result_is_error))
        .filter_map(|c| {
            parse_args(&c.args)?
                .get("name")?
                .as_str()
                .map(str::to_owned)
        })
        .filter(|n| !n.is_empty())
}

/// Fails when `calls` activate one of `names`; errs (`on_error` decides) when a skill call's
/// arguments cannot be read.
fn skills_activated(calls: &[&CallRecord], names: &[String]) -> Outcome {
    if skill_names(calls, true).any(|s| names.contains(&s)) {
        return Outcome::Fail;
    }
    let unreadable = calls
        .iter()
        .any(|c| c.name == SKILL_TOOL && !c.result_is_error && parse_args(&c.args).is_none());
    if unreadable {
        Outcome::Error
    } else {
        Outcome::Pass
    }
}

/// Fails when a field of `tool`'s arguments present in one call (of `calls`, or forgotten
/// before them) is absent from a later one; errs when a call's arguments cannot be read.
fn fields_dropped(
    calls: &[&CallRecord],
    tool: &str,
    fields: &[String],
    forgotten: &CallTally,
) -> Outcome {
    let (mut seen, mut unreadable) = forgotten.fields_of(tool, fields);
    for c in calls.iter().filter(|c| c.name == tool) {
        let Some(args) = parse_args(&c.args) else {
            unreadable = true;
            continue;
        };
        if seen.iter().any(|f| !args.contains_key(f.as_str())) {
            return Outcome::Fail;
        }
        for f in fields {
            if args.contains_key(f) && !seen.contains(f) {
                seen.push(f.clone());
            }
        }
    }
    if unreadable {
        Outcome::Error
    } else {
        Outcome::Pass
    }
}

/// The worst of several outcomes: any failure fails; else any error errs.
fn worst(outcomes: impl Iterator<Item = Outcome>) -> Outcome {
    let mut out = Outcome::Pass;
    for o in outcomes {
        match o {
            Outcome::Fail => return Outcome::Fail,
            Outcome::Error => out = Outcome::Error,
            Outcome::Pass => {}
        }
    }
    out
}

fn count(calls: &[&CallRecord], tool: Option<&str>) -> u64 {
    calls
        .iter()
        .filter(|c| tool.is_none_or(|t| t == c.name))
        .count() as u64
}

/// Whether the calls end with `seq`; a `seq` longer than `calls` begins among the `forgotten`
/// calls before them.
fn ends_with(calls: &[&CallRecord], seq: &[String], forgotten: &CallTally) -> bool {
    let kept = seq.len().min(calls.len());
    let (before, within) = seq.split_at(seq.len() - kept);
    calls[calls.len() - kept..]
        .iter()
        .zip(within)
        .all(|(c, s)| c.name == *s)
        && (before.is_empty() || forgotten.ends_with(before))
}

/// Whether `seq` occurs in `names` in order (other names may come between).
pub(crate) fn is_subsequence(names: &[String], seq: &[String]) -> bool {
    let mut it = names.iter();
    seq.iter().all(|s| it.any(|n| n == s))
}

/// Fail when any excluded key holds its excluded value (a list of values: any of them).
fn args_excluded(args: &str, excluded: &Map<String, Value>) -> Outcome {
    match parse_args(args) {
        None => Outcome::Error,
        Some(parsed) => Outcome::of(
            excluded
                .iter()
                .any(|(k, v)| parsed.get(k).is_some_and(|a| value_excluded(a, v))),
        ),
    }
}
