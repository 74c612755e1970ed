//! The per-type half of a validator: its params checked and turned into a [`CheckDef`] (judged
//! types in `judged_checks.rs`).

use super::params::Params;
use crate::policy::judged::CheckRefs;
use crate::policy::structured::{parse_path, PathCheck, SchemaCheck};
use crate::policy::tools::workflow::{AccessRule, WorkflowCheck};
use crate::policy::{CheckDef, Scope, ToolCheck};
use crate::scan::{compile_hir, PiiKind};
use serde_json::Value;
use std::sync::Arc;

pub(super) fn build_check(
    canonical: &str,
    type_name: &str,
    p: &mut Params,
    refs: &CheckRefs,
) -> Result<CheckDef, String> {
    if let Some(judged) = super::judged_checks::build_judged(canonical, type_name, p, refs)? {
        return Ok(judged);
    }
    match canonical {
        "content_excludes" => {
            let patterns = non_empty_patterns(p.required_string_list("patterns")?)?;
            let default_mode = if type_name == "banned_words" {
                "word_boundary"
            } else {
                "substring"
            };
            let word_boundary = match p.string("match_mode")?.as_deref().unwrap_or(default_mode) {
                "substring" => false,
                "word_boundary" => true,
                other => {
                    return Err(format!(
                        "param 'match_mode': `{other}` is not one of substring, word_boundary"
                    ))
                }
            };
            Ok(CheckDef::ContentExcludes {
                patterns,
                word_boundary,
            })
        }
        "regex" => {
            let pattern = p
                .string("pattern")?
                .ok_or_else(|| "param 'pattern': required".to_owned())?;
            let hir = compile_hir(&pattern)
                .map_err(|e| format!("param 'pattern': invalid regex: {e}"))?;
            let expect_match = p.bool("expect_match")?.unwrap_or(true);
            if !expect_match && hir.properties().minimum_len() == Some(0) {
                return Err("param 'pattern': matches the empty string, so forbidding it would block everything".into());
            }
            Ok(if expect_match {
                CheckDef::RequireRegex { pattern, hir }
            } else {
                CheckDef::ForbidRegex { pattern, hir }
            })
        }
        "max_length" => {
            let max_chars = p.u64("max")?;
            let max_tokens = p.u64("max_tokens")?;
            if max_chars.is_none() && max_tokens.is_none() {
                return Err(
                    "param 'max' or 'max_tokens': at least one is required (characters, o200k tokens)"
                        .into(),
                );
            }
            Ok(CheckDef::MaxLength {
                max_chars,
                max_tokens,
            })
        }
        "pii" => {
            let kinds = match p.string_list("types")? {
                None => Vec::new(),
                Some(names) => names
                    .iter()
                    .map(|n| {
                        PiiKind::parse(n).ok_or_else(|| {
                            let known: Vec<&str> = PiiKind::ALL.iter().map(|k| k.name()).collect();
                            format!(
                                "param 'types': unknown kind `{n}` (known: {})",
                                known.join(", ")
                            )
                        })
                    })
                    .collect::<Result<_, _>>()?,
            };
            Ok(CheckDef::Pii { kinds })
        }
        "sentence_count" => Ok(CheckDef::SentenceCount {
            max: p
                .u64("max")?
                .ok_or_else(|| "param 'max': required (sentences)".to_owned())?,
        }),
        "contains" | "contains_any" => Ok(CheckDef::Contains {
            patterns: non_empty_patterns(p.required_string_list("patterns")?)?,
            any: canonical == "contains_any",
        }),
        "min_length" => Ok(CheckDef::MinLength {
            min_chars: p
                .u64("min")?
                .ok_or_else(|| "param 'min': required (characters)".to_owned())?,
        }),
        "json_valid" => Ok(CheckDef::JsonValid),
        // Agents are tools named after them (PromptKit).
        "agent_invoked" => Ok(CheckDef::Tool(ToolCheck::Called {
            names: p.required_string_list("agent_names")?,
            min_calls: 1,
            scope: Scope::Session,
        })),
        "agent_not_invoked" => Ok(CheckDef::Tool(ToolCheck::NotCalled {
            names: p.required_string_list("agent_names")?,
            scope: Scope::Session,
        })),
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
            Ok(CheckDef::Tool(ToolCheck::AgentResponseContains { agent, patterns }))
        }
        "skill_activated" => {
            let min_calls = p.u64("min_calls")?.unwrap_or(1);
            if min_calls == 0 {
                return Err("param 'min_calls': must be at least 1".into());
            }
            Ok(CheckDef::Tool(ToolCheck::SkillActivated {
                names: p.required_string_list("skill_names")?,
                min_calls,
            }))
        }
        "skill_not_activated" => Ok(CheckDef::Tool(ToolCheck::SkillNotActivated {
            names: p.required_string_list("skill_names")?,
        })),
        "skill_activation_order" => Ok(CheckDef::Tool(ToolCheck::SkillOrder {
            sequence: p.required_string_list("sequence")?,
        })),
        "workflow_complete" => Ok(workflow(WorkflowCheck::Complete {
            terminal_states: p.string_list("terminal_states")?.filter(|s| !s.is_empty()).ok_or_else(|| {
                "param 'terminal_states': required — the states that end the workflow (a proxy cannot see the workflow engine's completion flag, only the transitions' target states)".to_owned()
            })?,
        })),
        "workflow_state_is" => Ok(workflow(WorkflowCheck::StateIs {
            state: p.required_string("state")?,
        })),
        "workflow_transitioned_to" => Ok(workflow(WorkflowCheck::TransitionedTo {
            state: p.required_string("state")?,
        })),
        "workflow_transition_order" => Ok(workflow(WorkflowCheck::TransitionOrder {
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
            Ok(workflow(WorkflowCheck::ToolAccess { rules }))
        }
        "invariant_fields_preserved" => Ok(CheckDef::Tool(ToolCheck::FieldsPreserved {
            tool: p.required_string("tool")?,
            fields: p.required_string_list("fields")?,
        })),
        "tools_called" => {
            let names = p.required_string_list("tool_names")?;
            let min_calls = p.u64("min_calls")?.unwrap_or(1);
            if min_calls == 0 {
                return Err("param 'min_calls': must be at least 1".into());
            }
            Ok(CheckDef::Tool(ToolCheck::Called {
                names,
                min_calls,
                scope: p.scope()?,
            }))
        }
        "tools_not_called" => Ok(CheckDef::Tool(ToolCheck::NotCalled {
            names: p.required_string_list("tool_names")?,
            scope: p.scope()?,
        })),
        "tool_args" => Ok(CheckDef::Tool(ToolCheck::Args {
            tool: p.required_string("tool_name")?,
            expected: p.required_object("expected_args")?,
            scope: p.scope()?,
        })),
        "tool_calls_with_args" => Ok(CheckDef::Tool(ToolCheck::CallsWithArgs {
            tool: p.required_string("tool_name")?,
            expected: p.object("expected_args")?.unwrap_or_default(),
            result_includes: p.string_list("result_includes")?.unwrap_or_default(),
        })),
        "tool_call_count" => {
            let tool = p.string("tool")?;
            let (min, max) = (p.u64("min")?, p.u64("max")?);
            match (min, max) {
                (None, None) => Err("param 'min' or 'max': at least one is required".into()),
                (Some(lo), Some(hi)) if lo > hi => {
                    Err(format!("param 'min': {lo} is more than max {hi}"))
                }
                _ => Ok(CheckDef::Tool(ToolCheck::Count { tool, min, max })),
            }
        }
        "tool_call_sequence" => Ok(CheckDef::Tool(ToolCheck::Sequence {
            tools: p.required_string_list("sequence")?,
        })),
        "tool_call_chain" => Ok(CheckDef::Tool(ToolCheck::Chain {
            tools: p.required_string_list("chain")?,
        })),
        "tool_anti_pattern" => Ok(CheckDef::Tool(ToolCheck::AntiPattern {
            patterns: p.anti_patterns()?,
        })),
        "tool_no_repeat" => {
            let max_repeats = p.u64("max_repeats")?.unwrap_or(1);
            if max_repeats == 0 {
                return Err("param 'max_repeats': must be at least 1".into());
            }
            Ok(CheckDef::Tool(ToolCheck::NoRepeat {
                tools: p.string_list("tools")?.unwrap_or_default(),
                max_repeats,
            }))
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
            Ok(CheckDef::Tool(ToolCheck::Efficiency {
                max_calls,
                max_errors,
                max_error_rate,
            }))
        }
        "no_tool_errors" => Ok(CheckDef::Tool(ToolCheck::NoErrors)),
        "tool_result_includes" => Ok(CheckDef::Tool(ToolCheck::ResultIncludes {
            tool: p.string("tool_name")?,
            patterns: non_empty_patterns(p.required_string_list("patterns")?)?,
        })),
        "tool_result_matches" => {
            let tool = p.string("tool_name")?;
            let pattern = p.required_string("pattern")?;
            let hir = compile_hir(&pattern)
                .map_err(|e| format!("param 'pattern': invalid regex: {e}"))?;
            let regex = regex_automata::meta::Regex::builder()
                .build_from_hir(&hir)
                .map_err(|e| format!("param 'pattern': {e}"))?;
            Ok(CheckDef::Tool(ToolCheck::ResultMatches { tool, regex }))
        }
        "tool_args_excluded_session" => {
            let excluded = p.required_object("excluded_args")?;
            if excluded.is_empty() {
                return Err("param 'excluded_args': must not be empty".into());
            }
            Ok(CheckDef::Tool(ToolCheck::ArgsExcluded {
                tool: p.required_string("tool_name")?,
                excluded,
            }))
        }
        "latency_budget" => match p.u64("max_ms")? {
            Some(0) => Err("param 'max_ms': must be more than 0".into()),
            Some(max_ms) => match crate::config::check_duration_ms(max_ms) {
                Ok(()) => Ok(CheckDef::LatencyBudget { max_ms }),
                Err(e) => Err(format!("param 'max_ms': {e}")),
            },
            None => Err("param 'max_ms': required (milliseconds)".into()),
        },
        "cost_budget" => {
            let max_total_tokens = p.u64("max_total_tokens")?;
            let max_cost_usd = p.non_negative("max_cost_usd")?;
            if max_total_tokens.is_none() && max_cost_usd.is_none() {
                return Err(
                    "param 'max_total_tokens' or 'max_cost_usd': at least one is required".into(),
                );
            }
            Ok(CheckDef::CostBudget {
                max_total_tokens,
                max_cost_usd,
            })
        }
        "field_presence" => Ok(CheckDef::FieldPresence {
            fields: non_empty_patterns(p.required_string_list("fields")?)?,
        }),
        "guardrail_triggered" => {
            let guardrail = match p.string("guardrail")? {
                Some(g) => g,
                None => match p.string("validator_type")? {
                    Some(g) => g,
                    None => p.string("validator")?.ok_or_else(|| {
                        "param 'guardrail': required (the type as written, or the id, of a validator)"
                            .to_owned()
                    })?,
                },
            };
            let on_input = match p.string("direction")?.as_deref() {
                None | Some("both") => None,
                Some("input") => Some(true),
                Some("output") => Some(false),
                Some(_) => {
                    return Err("param 'direction': must be one of input, output, both".into())
                }
            };
            Ok(CheckDef::GuardrailTriggered {
                guardrail,
                should_trigger: p.bool("should_trigger")?.unwrap_or(true),
                on_input,
            })
        }
        "json_schema" => {
            let (key, schema) = p
                .take("schema")
                .ok_or_else(|| "param 'schema': required (a JSON Schema object)".to_owned())?;
            let extract = p.extract()?;
            let check = SchemaCheck::compile(&schema, extract)
                .map_err(|e| format!("param '{key}': {e}"))?;
            Ok(CheckDef::JsonSchema(Arc::new(check)))
        }
        "json_path" => {
            let expression = p.required_string("expression")?;
            let path = parse_path(&expression).map_err(|e| format!("param 'expression': {e}"))?;
            let expected = p.take("expected").map(|(_, v)| v);
            let contains = match p.take("contains").map(|(_, v)| v) {
                None => Vec::new(),
                Some(Value::Array(items)) => items,
                Some(one) => vec![one],
            };
            let (min_results, max_results) = (p.u64("min_results")?, p.u64("max_results")?);
            if let (Some(lo), Some(hi)) = (min_results, max_results) {
                if lo > hi {
                    return Err(format!(
                        "param 'min_results': {lo} is more than max_results {hi}"
                    ));
                }
            }
            Ok(CheckDef::JsonPath(Arc::new(PathCheck {
                path,
                expected,
                contains,
                min_results,
                max_results,
                extract: p.extract()?,
            })))
        }
        other => Err(format!(
            "check type `{other}` is in the PromptKit catalog but not supported by guardwire yet"
        )),
    }
}

fn workflow(check: WorkflowCheck) -> CheckDef {
    CheckDef::Tool(ToolCheck::Workflow(check))
}

fn non_empty_patterns(patterns: Vec<String>) -> Result<Vec<String>, String> {
    match patterns.iter().position(String::is_empty) {
        Some(i) => Err(format!("param 'patterns': entry {i} is empty")),
        None => Ok(patterns),
    }
}
