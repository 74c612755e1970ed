//! The tool, agent, skill and workflow checks ([`ToolCheck`]): on the turn's or the session's
//! tool calls. One family: every type compiles into the policy's tool checks and shares their
//! capabilities; each type's params are read here.

use super::{non_empty_patterns, Check, CheckDef, CheckType, Kind, Named};
use crate::policy::compiled::Policy;
use crate::policy::pack::params::Params;
use crate::policy::tools::workflow::{AccessRule, WorkflowCheck};
use crate::policy::transcript::TranscriptRule;
use crate::policy::{Scope, ToolCheck, Validator};
use crate::scan::compile_hir;
use serde_json::Value;

pub(in crate::policy) struct ToolType;
pub(in crate::policy) const TOOL: ToolType = ToolType;

impl CheckType for ToolType {
    fn param_aliases(&self, canonical: &str) -> &'static [(&'static str, &'static str)] {
        match canonical {
            // The catalog's names, then PromptKit's handlers'.
            "agent_invoked" | "agent_not_invoked" => &[("agents", "agent_names")],
            "agent_response_contains" => &[("agent", "agent_name"), ("contains", "patterns")],
            // PromptKit's handlers read `tools` when `tool_names` is absent.
            "tools_called"
            | "tools_not_called"
            | "tools_called_session"
            | "tools_not_called_session" => &[("tools", "tool_names")],
            _ => &[],
        }
    }

    fn build(&self, ty: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let canonical = ty.canonical;
        tool_check(canonical, p).map(|check| CheckDef::new(Tool(check)))
    }
}

#[derive(Debug)]
struct Tool(ToolCheck);

impl Check for Tool {
    fn kind(&self) -> Kind {
        Kind::Exchange
    }

    fn compile_exchange(&self, owner: u32, _: &Validator, policy: &mut Policy) {
        policy.tools.push((owner, self.0.clone()));
    }

    /// `tool_args` and `tool_args_session` as assertions: one matching call of the whole
    /// transcript suffices (the validator checks every call of the tool).
    fn transcript(&self) -> Option<TranscriptRule> {
        match &self.0 {
            ToolCheck::Args { tool, expected, .. } => Some(TranscriptRule::ToolArgs {
                tool: tool.clone(),
                expected: expected.clone(),
            }),
            _ => None,
        }
    }
}

/// `tools_called` (and its session form): each of `tool_names` called `min_calls` times.
fn tools_called(p: &mut Params, scope: Scope) -> Result<ToolCheck, String> {
    let names = p.required_string_list("tool_names")?;
    let min_calls = p.u64("min_calls")?.unwrap_or(1);
    if min_calls == 0 {
        return Err("param 'min_calls': must be at least 1".into());
    }
    Ok(ToolCheck::Called {
        names,
        min_calls,
        scope,
    })
}

fn tool_check(canonical: &str, p: &mut Params) -> Result<ToolCheck, String> {
    match canonical {
        // Agents are tools named after them (PromptKit).
        "agent_invoked" => Ok(ToolCheck::Called {
            names: p.required_string_list("agent_names")?,
            min_calls: 1,
            scope: Scope::Session,
        }),
        "agent_not_invoked" => Ok(ToolCheck::NotCalled {
            names: p.required_string_list("agent_names")?,
            scope: Scope::Session,
        }),
        "agent_response_contains" => {
            let agent = p.required_string("agent_name")?;
            let patterns = match p.take("patterns") {
                None => Vec::new(),
                Some((_, Value::String(one))) => vec![one],
                Some((key, Value::Array(items))) => items
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| format!("param '{key}': must be a string or a list of strings"))
                    })
                    .collect::<Result<_, _>>()?,
                Some((key, _)) => {
                    return Err(format!("param '{key}': must be a string or a list of strings"))
                }
            };
            Ok(ToolCheck::AgentResponseContains { agent, patterns })
        }
        "skill_activated" => {
            let min_calls = p.u64("min_calls")?.unwrap_or(1);
            if min_calls == 0 {
                return Err("param 'min_calls': must be at least 1".into());
            }
            Ok(ToolCheck::SkillActivated {
                names: p.required_string_list("skill_names")?,
                min_calls,
            })
        }
        "skill_not_activated" => Ok(ToolCheck::SkillNotActivated {
            names: p.required_string_list("skill_names")?,
        }),
        "skill_activation_order" => Ok(ToolCheck::SkillOrder {
            sequence: p.required_string_list("sequence")?,
        }),
        "workflow_complete" => Ok(ToolCheck::Workflow(WorkflowCheck::Complete {
            terminal_states: p.string_list("terminal_states")?.filter(|s| !s.is_empty()).ok_or_else(|| {
                "param 'terminal_states': required — the states that end the workflow (a proxy cannot see the workflow engine's completion flag, only the transitions' target states)".to_owned()
            })?,
        })),
        "workflow_state_is" => Ok(ToolCheck::Workflow(WorkflowCheck::StateIs {
            state: p.required_string("state")?,
        })),
        "workflow_transitioned_to" => Ok(ToolCheck::Workflow(WorkflowCheck::TransitionedTo {
            state: p.required_string("state")?,
        })),
        "workflow_transition_order" => Ok(ToolCheck::Workflow(WorkflowCheck::TransitionOrder {
            sequence: p.required_string_list("sequence")?,
        })),
        "workflow_tool_access" => {
            let (key, rules) = p
                .take("rules")
                .ok_or_else(|| "param 'rules': required (a list of {state, allowed})".to_owned())?;
            let Value::Array(rules) = rules else {
                return Err(format!("param '{key}': must be a list of {{state, allowed}}"));
            };
            let rules = rules
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let state = r.get("state").and_then(Value::as_str);
                    let allowed = r.get("allowed").and_then(Value::as_array).and_then(|a| {
                        a.iter().map(|t| t.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>()
                    });
                    match (state, allowed, r.as_object().map(|o| o.len())) {
                        (Some(state), Some(allowed), Some(2)) => Ok(AccessRule {
                            state: state.to_owned(),
                            allowed,
                        }),
                        _ => Err(format!(
                            "param '{key}': entry {i} must be {{state: <name>, allowed: [<tool>, ...]}}"
                        )),
                    }
                })
                .collect::<Result<_, _>>()?;
            Ok(ToolCheck::Workflow(WorkflowCheck::ToolAccess { rules }))
        }
        "invariant_fields_preserved" => Ok(ToolCheck::FieldsPreserved {
            tool: p.required_string("tool")?,
            fields: p.required_string_list("fields")?,
        }),
        "tools_called" => {
            let scope = p.scope()?;
            tools_called(p, scope)
        }
        // PromptKit's `_session` types: `scope: session` by name (and no `scope` param).
        "tools_called_session" => tools_called(p, Scope::Session),
        "tools_not_called_session" => Ok(ToolCheck::NotCalled {
            names: p.required_string_list("tool_names")?,
            scope: Scope::Session,
        }),
        "tool_args_session" => Ok(ToolCheck::Args {
            tool: p.required_string("tool_name")?,
            expected: p.required_object("expected_args")?,
            scope: Scope::Session,
        }),
        "tools_not_called" => Ok(ToolCheck::NotCalled {
            names: p.required_string_list("tool_names")?,
            scope: p.scope()?,
        }),
        "tool_args" => Ok(ToolCheck::Args {
            tool: p.required_string("tool_name")?,
            expected: p.required_object("expected_args")?,
            scope: p.scope()?,
        }),
        "tool_calls_with_args" => Ok(ToolCheck::CallsWithArgs {
            tool: p.required_string("tool_name")?,
            expected: p.object("expected_args")?.unwrap_or_default(),
            result_includes: p.string_list("result_includes")?.unwrap_or_default(),
        }),
        "tool_call_count" => {
            let tool = p.string("tool")?;
            let (min, max) = (p.u64("min")?, p.u64("max")?);
            match (min, max) {
                (None, None) => Err("param 'min' or 'max': at least one is required".into()),
                (Some(lo), Some(hi)) if lo > hi => {
                    Err(format!("param 'min': {lo} is more than max {hi}"))
                }
                _ => Ok(ToolCheck::Count { tool, min, max }),
            }
        }
        "tool_call_sequence" => Ok(ToolCheck::Sequence {
            tools: p.required_string_list("sequence")?,
        }),
        "tool_call_chain" => Ok(ToolCheck::Chain {
            tools: p.required_string_list("chain")?,
        }),
        "tool_anti_pattern" => Ok(ToolCheck::AntiPattern {
            patterns: p.anti_patterns()?,
        }),
        "tool_no_repeat" => {
            let max_repeats = p.u64("max_repeats")?.unwrap_or(1);
            if max_repeats == 0 {
                return Err("param 'max_repeats': must be at least 1".into());
            }
            Ok(ToolCheck::NoRepeat {
                tools: p.string_list("tools")?.unwrap_or_default(),
                max_repeats,
            })
        }
        "tool_efficiency" => {
            let max_calls = p.u64("max_calls")?;
            let max_errors = p.u64("max_errors")?;
            let max_error_rate = p.fraction("max_error_rate")?;
            if max_calls.is_none() && max_errors.is_none() && max_error_rate.is_none() {
                return Err(
                    "param 'max_calls', 'max_errors' or 'max_error_rate': at least one is required"
                        .into(),
                );
            }
            Ok(ToolCheck::Efficiency {
                max_calls,
                max_errors,
                max_error_rate,
            })
        }
        "no_tool_errors" => Ok(ToolCheck::NoErrors),
        "tool_result_includes" => Ok(ToolCheck::ResultIncludes {
            tool: p.string("tool_name")?,
            patterns: non_empty_patterns(p.required_string_list("patterns")?)?,
        }),
        "tool_result_matches" => {
            let tool = p.string("tool_name")?;
            let pattern = p.required_string("pattern")?;
            let hir = compile_hir(&pattern)
                .map_err(|e| format!("param 'pattern': invalid regex: {e}"))?;
            let regex = regex_automata::meta::Regex::builder()
                .build_from_hir(&hir)
                .map_err(|e| format!("param 'pattern': {e}"))?;
            Ok(ToolCheck::ResultMatches { tool, regex })
        }
        "tool_args_excluded_session" => {
            let excluded = p.required_object("excluded_args")?;
            if excluded.is_empty() {
                return Err("param 'excluded_args': must not be empty".into());
            }
            Ok(ToolCheck::ArgsExcluded {
                tool: p.required_string("tool_name")?,
                excluded,
            })
        }
        other => unreachable!("`{other}` is not a tool check"),
    }
}
