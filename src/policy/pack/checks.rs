//! The per-type half of a validator: its params checked and turned into a [`CheckDef`].

use super::params::Params;
use crate::policy::judged::{
    go_duration_ms, CheckRefs, ContextSource, ExecCheck, Judged, JudgedCheck, JudgedKind, LlmJudge,
    Reference, RestEval, Scale, Similarity, Window,
};
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
    match canonical {
        "llm_judge" | "llm_judge_session" | "llm_judge_tool_calls" => {
            let judged = match canonical {
                "llm_judge" => Judged::Text,
                "llm_judge_session" => Judged::Session,
                _ => Judged::ToolCalls {
                    tools: p.string_list("tools")?.unwrap_or_default(),
                },
            };
            let judge = judge_name(p.string("judge")?, refs)?;
            let criteria = p.required_string("criteria")?;
            if criteria.trim().is_empty() {
                return Err("param 'criteria': must not be empty".into());
            }
            let scale = scale(p)?;
            let llm = LlmJudge {
                judge,
                criteria,
                rubric: p.string("rubric")?,
                system_prompt: p.string("system_prompt")?,
                model: p.string("model")?,
                evaluation_steps: p.string_list("evaluation_steps")?.unwrap_or_default(),
                scale,
                judged,
            };
            // PromptKit accepts `extra` here and does not use it; so does guardwire.
            p.take("extra");
            judged_check(p, JudgedKind::Llm(llm))
        }
        "faithfulness" | "answer_relevancy" => {
            let context = if canonical == "faithfulness" {
                let tools = p.string_list("context_tools")?;
                let roles = p.string_list("context_roles")?.unwrap_or_default();
                for r in &roles {
                    if !matches!(r.as_str(), "system" | "user" | "assistant" | "tool") {
                        return Err(format!(
                            "param 'context_roles': `{r}` is not one of system, user, assistant, tool"
                        ));
                    }
                }
                let names = p.string_list("context_names")?.unwrap_or_default();
                // By default the context is what the tools returned.
                let tools = match tools {
                    None if roles.is_empty() && names.is_empty() => Some(Vec::new()),
                    other => other,
                };
                Some(ContextSource { tools, roles, names })
            } else {
                None
            };
            let criteria = match p.string("criteria")? {
                Some(c) if c.trim().is_empty() => {
                    return Err("param 'criteria': must not be empty".into())
                }
                Some(c) => c,
                None if context.is_some() => FAITHFULNESS.to_owned(),
                None => ANSWER_RELEVANCY.to_owned(),
            };
            let llm = LlmJudge {
                judge: judge_name(p.string("judge")?, refs)?,
                criteria,
                rubric: p.string("rubric")?,
                system_prompt: p.string("system_prompt")?,
                model: p.string("model")?,
                evaluation_steps: p.string_list("evaluation_steps")?.unwrap_or_default(),
                scale: scale(p)?,
                judged: Judged::Rag { context },
            };
            judged_check(p, JudgedKind::Llm(llm))
        }
        "rest_eval" | "rest_eval_session" | "a2a_eval" | "a2a_eval_session" => {
            let a2a = canonical.starts_with("a2a");
            // A2A: JSON-RPC at `<agent_url>/a2a`, the token as a bearer (PromptKit's client).
            let url = if a2a {
                let agent = p.required_string("agent_url")?;
                format!("{}/a2a", agent.trim_end_matches('/'))
            } else {
                p.required_string("url")?
            };
            let url_key = if a2a { "agent_url" } else { "url" };
            let (base, path_and_query) =
                split_url(&url).map_err(|e| format!("param '{url_key}': {e}"))?;
            let method = match if a2a { None } else { p.string("method")? } {
                None => http::Method::POST,
                Some(m) => http::Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                    .map_err(|_| format!("param 'method': `{m}` is not an HTTP method"))?,
            };
            let mut headers = Vec::new();
            if let Some(token) = a2a.then(|| p.string("auth_token")).transpose()?.flatten() {
                env_refs_allowed("auth_token", &token, refs)?;
                headers.push((http::header::AUTHORIZATION, format!("Bearer {token}")));
            }
            let listed = if a2a { None } else { p.object("headers")? };
            for (name, value) in listed.unwrap_or_default() {
                let header = http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("param 'headers': `{name}` is not a header name"))?;
                if FRAMING_HEADERS.contains(&header.as_str()) {
                    return Err(format!(
                        "param 'headers': `{name}` frames the HTTP message; guardwire sets it"
                    ));
                }
                let Value::String(value) = value else {
                    return Err(format!("param 'headers': `{name}` must be a string"));
                };
                env_refs_allowed("headers", &value, refs)?;
                headers.push((header, value));
            }
            let timeout_ms = match p.take("timeout") {
                None => None,
                Some((key, Value::String(t))) => Some(go_duration_ms(&t).ok_or_else(|| {
                    format!("param '{key}': `{t}` is not a duration such as 30s or 500ms")
                })?),
                Some((key, _)) => {
                    return Err(format!("param '{key}': must be a duration such as \"30s\""))
                }
            };
            let rest = RestEval {
                base,
                path_and_query,
                method,
                headers,
                include_messages: p.bool("include_messages")?.unwrap_or(true),
                include_tool_calls: p.bool("include_tool_calls")?.unwrap_or(false),
                criteria: p.string("criteria")?,
                extra: p.take("extra").map(|(_, v)| v),
                session: canonical.ends_with("_session"),
                a2a,
            };
            let mut check = judged_check(p, JudgedKind::Rest(rest))?;
            if let CheckDef::Judged(c) = &mut check {
                if let (Some(ms), None) = (timeout_ms, c.timeout_ms) {
                    Arc::make_mut(c).timeout_ms = Some(ms);
                }
            }
            Ok(check)
        }
        "cosine_similarity" => {
            let judge = judge_name(p.string("judge")?, refs)?;
            let Some((_, default_model)) = refs.embedders.iter().find(|(n, _)| *n == judge) else {
                return Err(format!(
                    "param 'judge': `{judge}` speaks a protocol without an embeddings endpoint (anthropic_messages); pick an openai_chat, openai_responses or gemini judge"
                ));
            };
            let model = match (p.string("model")?, default_model) {
                (Some(m), _) => m,
                (None, Some(m)) => m.clone(),
                (None, None) => {
                    return Err(format!(
                        "param 'model': required (or set `embedding_model` on the judge `{judge}`)"
                    ))
                }
            };
            let reference = match p.take("reference") {
                Some((_, Value::String(t))) if !t.trim().is_empty() => Reference::Text(t),
                Some((key, Value::Array(items))) if !items.is_empty() => Reference::Vector(
                    items
                        .iter()
                        .map(|v| v.as_f64().filter(|x| x.is_finite()))
                        .collect::<Option<Vec<f64>>>()
                        .ok_or_else(|| format!("param '{key}': a vector must hold numbers only"))?,
                ),
                Some((key, _)) => {
                    return Err(format!(
                        "param '{key}': must be a text or a non-empty list of numbers"
                    ))
                }
                None => return Err("param 'reference': required (a text, or an embedding)".into()),
            };
            judged_check(
                p,
                JudgedKind::Similarity(Similarity {
                    judge,
                    model,
                    reference,
                }),
            )
        }
        "exec" => {
            let mut params = std::mem::take(&mut p.map);
            let timeout_ms = match params.remove("timeout_ms") {
                None => None,
                Some(v) => Some(check_timeout(v.as_u64(), "timeout_ms")?),
            };
            let parallel = match params.remove("parallel") {
                None => false,
                Some(v) => v
                    .as_bool()
                    .ok_or_else(|| "param 'parallel': must be true or false".to_owned())?,
            };
            Ok(CheckDef::Judged(Arc::new(JudgedCheck {
                kind: JudgedKind::Exec(ExecCheck {
                    handler: type_name.to_owned(),
                    params,
                }),
                timeout_ms,
                parallel,
                window: None,
            })))
        }
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

/// Headers that frame the message or the connection: never taken from a pack.
const FRAMING_HEADERS: [&str; 10] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
];

/// Every `${VAR}` in `value` names a variable the config lets packs read (`pack_env`): a
/// pack cannot send the proxy's other secrets (a provider key) to an endpoint it names.
fn env_refs_allowed(param: &str, value: &str, refs: &CheckRefs) -> Result<(), String> {
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        if !refs.env.iter().any(|e| e == name) {
            return Err(format!(
                "param '{param}': `${{{name}}}` reads an environment variable the config does not let packs read; list it in `pack_env`"
            ));
        }
        rest = &rest[start + 2 + len + 1..];
    }
    Ok(())
}

/// `faithfulness`'s criteria (DeepEval's): no claim beyond the retrieved context.
const FAITHFULNESS: &str = "Every claim in the answer is supported by the retrieved context: nothing in it contradicts the context or adds facts the context does not state. Score 1 when the answer is fully supported, 0 when it is not supported at all.";

/// `answer_relevancy`'s criteria (DeepEval's): the answer is about the question.
const ANSWER_RELEVANCY: &str = "The answer addresses the question directly: its statements are relevant to what was asked, and it does not evade or change the subject. Score 1 when every statement is relevant, 0 when none is.";

/// `scale`: how the judge scores.
fn scale(p: &mut Params) -> Result<Scale, String> {
    match p.string("scale")?.as_deref() {
        None | Some("0-1") => Ok(Scale::Unit),
        Some("1-5") => Ok(Scale::OneToFive),
        Some(other) => Err(format!("param 'scale': `{other}` is not one of 0-1, 1-5")),
    }
}

fn workflow(check: WorkflowCheck) -> CheckDef {
    CheckDef::Tool(ToolCheck::Workflow(check))
}

/// The common params of judged checks, then the check.
fn judged_check(p: &mut Params, kind: JudgedKind) -> Result<CheckDef, String> {
    let window = match p.take("window") {
        None => None,
        Some((_, Value::String(w))) if w == "sentence" => Some(Window::Sentence),
        Some((_, Value::String(w))) if w == "paragraph" => Some(Window::Paragraph),
        Some((_, v)) => match v.as_u64() {
            Some(n) if n > 0 && n <= 1 << 20 => Some(Window::Chars(n as usize)),
            _ => {
                return Err(
                    "param 'window': must be sentence, paragraph or a number of characters (1 to 1048576)"
                        .into(),
                )
            }
        },
    };
    let timeout_ms = match p.u64("timeout_ms")? {
        None => None,
        Some(ms) => Some(check_timeout(Some(ms), "timeout_ms")?),
    };
    Ok(CheckDef::Judged(Arc::new(JudgedCheck {
        kind,
        timeout_ms,
        parallel: p.bool("parallel")?.unwrap_or(false),
        window,
    })))
}

fn check_timeout(ms: Option<u64>, key: &str) -> Result<u64, String> {
    match ms {
        Some(0) | None => Err(format!(
            "param '{key}': must be a whole number of milliseconds, more than 0"
        )),
        Some(ms) => crate::config::check_duration_ms(ms)
            .map(|()| ms)
            .map_err(|e| format!("param '{key}': {e}")),
    }
}

/// The judge a validator asks: the one it names, or the only one configured.
fn judge_name(named: Option<String>, refs: &CheckRefs) -> Result<String, String> {
    match named {
        Some(name) if refs.judges.contains(&name) => Ok(name),
        Some(name) => Err(format!(
            "param 'judge': no judge `{name}` is configured (judges: {})",
            if refs.judges.is_empty() {
                "none".to_owned()
            } else {
                refs.judges.join(", ")
            }
        )),
        None => match refs.judges.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err("no judge is configured: add one under `judges:` in the config".into()),
            many => Err(format!(
                "param 'judge': required when more than one judge is configured ({})",
                many.join(", ")
            )),
        },
    }
}

/// A full URL as the upstream client takes it: base (scheme and host) and path with query.
fn split_url(url: &str) -> Result<(crate::config::BaseUrl, String), String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
        return Err(format!(
            "`{url}` must be an absolute http:// or https:// URL"
        ));
    };
    let base = crate::config::BaseUrl::parse(&format!("{scheme}://{authority}"))?;
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    Ok((
        base,
        if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
    ))
}

fn non_empty_patterns(patterns: Vec<String>) -> Result<Vec<String>, String> {
    match patterns.iter().position(String::is_empty) {
        Some(i) => Err(format!("param 'patterns': entry {i} is empty")),
        None => Ok(patterns),
    }
}
