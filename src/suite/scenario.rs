//! PromptKit scenario files (`guardwire eval --scenario FILE.yaml`): a conversation of user
//! turns, each sent live through guardwire ([`super::live`]) with the conversation so far (every
//! earlier turn and the assistant's answer to it), each answer checked by the turn's
//! `assertions:`. The assertions are compiled by the pack compiler as a pack's `evals:` and run
//! by the evals' own path ([`crate::evals::check_turn`]), so an assertion means what the same
//! type means in a pack; `guardrail_triggered` reads the guard's verdicts on the turn.
//!
//! What guardwire cannot run is refused when the file is read, naming the file and the key:
//! other kinds than `Scenario`, spec keys it does not apply (`fixtures`, `system_template`,
//! `tool_policy`, `required_capabilities`, …), turns of other roles or with `parts`, the
//! catalog types it does not implement, and judged assertions naming a judge the config lacks.
//! Judged assertions (`llm_judge`, `rest_eval`, …) are asked of the config's judges as the
//! packs' evals ask them ([`crate::judge::verdict`]).

use super::cases::CaseResult;
use super::live::{self, Harness, LiveOptions};
use super::observed::{AssertionResult, Observed};
use crate::delta::Conversation;
use crate::evals::Spend;
use crate::judge::{Answer, JudgeEnv, Subject};
use crate::policy::evals::{Eval, EvalCheck};
use crate::policy::judged::CheckRefs;
use crate::policy::judged::JudgedCheck;
use crate::policy::Direction;
use crate::policy::Policy;
use crate::protocol::{self, Protocol};
use serde_json::{json, Map, Value};
use std::path::Path;
use std::sync::Arc;

/// The largest scenario file read.
pub const MAX_SCENARIO_BYTES: u64 = 4 << 20;

/// One scenario, read and its assertions compiled.
pub struct Scenario {
    pub file: String,
    pub name: String,
    pub labels: Vec<String>,
    streaming: bool,
    turns: Vec<Turn>,
    /// `spec.conversation_assertions`: checked once, after the last turn, over the whole
    /// conversation and the run's spend.
    conversation: Option<Assertions>,
}

struct Turn {
    content: String,
    assertions: Assertions,
}

/// A list of assertions, compiled as one pack's evals in the file's order.
struct Assertions {
    policy: Arc<Policy>,
    /// Each assertion's type as written and `message`.
    written: Vec<(String, Option<String>)>,
}

const TOP_KEYS: &[&str] = &["apiVersion", "kind", "metadata", "spec"];
const SPEC_KEYS: &[&str] = &[
    "id",
    "task_type",
    "description",
    "streaming",
    "turns",
    "conversation_assertions",
];
const TURN_KEYS: &[&str] = &["role", "content", "assertions"];
const ASSERTION_KEYS: &[&str] = &["type", "params", "message"];

/// Reads and checks a scenario file: every key known, every assertion compiled.
pub fn load(path: &Path, refs: &CheckRefs) -> Result<Scenario, String> {
    let file = path.display().to_string();
    let size = std::fs::metadata(path)
        .map_err(|e| format!("{file}: {e}"))?
        .len();
    if size > MAX_SCENARIO_BYTES {
        return Err(format!(
            "{file}: a scenario file is at most {MAX_SCENARIO_BYTES} bytes"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{file}: {e}"))?;
    parse_with(&file, &text, refs)
}

fn keys(file: &str, at: &str, v: &Map<String, Value>, known: &[&str]) -> Result<(), String> {
    match v.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(format!(
            "{file}: {at}{k}: not run by guardwire eval (known here: {})",
            known.join(", ")
        )),
    }
}

fn object<'a>(file: &str, at: &str, v: &'a Value) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{file}: {at}: a mapping"))
}

/// Parses a scenario's YAML text (`file` names it in errors).
pub fn parse(file: &str, text: &str) -> Result<Scenario, String> {
    parse_with(file, text, &CheckRefs::default())
}

/// [`parse`], with the names (judges, handlers) the config's packs may refer to: judged
/// assertions name the config's judges.
pub fn parse_with(file: &str, text: &str, refs: &CheckRefs) -> Result<Scenario, String> {
    let doc: Value =
        serde_norway::from_str(text).map_err(|e| format!("{file}: invalid YAML: {e}"))?;
    let top = object(file, "the scenario", &doc)?;
    keys(file, "", top, TOP_KEYS)?;
    match top.get("kind").and_then(Value::as_str) {
        Some("Scenario") => {}
        other => {
            return Err(format!(
                "{file}: kind: {other:?}: guardwire eval runs `kind: Scenario` files"
            ))
        }
    }
    let meta = match top.get("metadata") {
        None => Map::new(),
        Some(m) => object(file, "metadata", m)?.clone(),
    };
    let spec = object(file, "spec", top.get("spec").unwrap_or(&Value::Null))?;
    keys(file, "spec.", spec, SPEC_KEYS)?;
    let name = meta
        .get("name")
        .or_else(|| spec.get("id"))
        .and_then(Value::as_str)
        .unwrap_or(file)
        .to_owned();
    let labels = match meta.get("labels") {
        Some(Value::Object(l)) => l
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_owned)))
            .collect(),
        _ => Vec::new(),
    };
    let streaming = match spec.get("streaming") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(format!("{file}: spec.streaming: true or false")),
    };
    let turns = spec
        .get("turns")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("{file}: spec.turns: a list of user turns"))?;
    let turns = turns
        .iter()
        .enumerate()
        .map(|(i, t)| turn(file, i, t, refs))
        .collect::<Result<Vec<_>, _>>()?;
    let conversation = match spec.get("conversation_assertions") {
        None | Some(Value::Null) => None,
        Some(Value::Array(list)) if !list.is_empty() => Some(assertions(
            file,
            "spec.conversation_assertions",
            list,
            refs,
        )?),
        Some(Value::Array(_)) => None,
        Some(_) => return Err(format!("{file}: spec.conversation_assertions: a list")),
    };
    Ok(Scenario {
        file: file.to_owned(),
        name,
        labels,
        streaming,
        turns,
        conversation,
    })
}

fn turn(file: &str, i: usize, t: &Value, refs: &CheckRefs) -> Result<Turn, String> {
    let at = format!("spec.turns[{i}]");
    let t = object(file, &at, t)?;
    keys(file, &format!("{at}."), t, TURN_KEYS)?;
    match t.get("role").and_then(Value::as_str) {
        Some("user") => {}
        other => {
            return Err(format!(
                "{file}: {at}.role: {other:?}: guardwire eval sends user turns (the assistant's come from the upstream)"
            ))
        }
    }
    let content = t
        .get("content")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{file}: {at}.content: the user's message, a text"))?
        .to_owned();
    let list = match t.get("assertions") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(a)) => &a[..],
        Some(_) => return Err(format!("{file}: {at}.assertions: a list")),
    };
    Ok(Turn {
        content,
        assertions: assertions(file, &format!("{at}.assertions"), list, refs)?,
    })
}

/// Compiles the assertions of `list` (at `at` in `file`) as one pack's evals.
fn assertions(
    file: &str,
    at: &str,
    list: &[Value],
    refs: &CheckRefs,
) -> Result<Assertions, String> {
    let mut evals = Vec::new();
    let mut written = Vec::new();
    for (j, a) in list.iter().enumerate() {
        let at = format!("{at}[{j}]");
        let a = object(file, &at, a)?;
        keys(file, &format!("{at}."), a, ASSERTION_KEYS)?;
        let ty = a
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{file}: {at}.type: missing"))?;
        let mut params = match a.get("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return Err(format!("{file}: {at}.params: a mapping")),
        };
        // PromptKit puts an assertion's message among its params.
        let message = a
            .get("message")
            .or_else(|| params.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        params.remove("message");
        evals.push(
            json!({"id": format!("a{j}"), "type": ty, "trigger": "every_turn", "params": params}),
        );
        written.push((ty.to_owned(), message));
    }
    let doc = json!({"name": format!("{file} {at}"), "evals": evals});
    let pack = crate::policy::pack::parse_pack(file, &doc, refs).map_err(|e| {
        // The pack's `evals[j]` is this list's `[j]`.
        let location = e.location.replacen("evals[", &format!("{at}["), 1);
        format!("{file}: {location}{}", e.message)
    })?;
    let policy = Policy::compile_packs(vec![pack]).map_err(|e| format!("{file}: {at}: {e}"))?;
    if policy.evals().len() != written.len() {
        return Err(format!(
            "{file}: {at}: `enabled: false` is not an assertion's key"
        ));
    }
    Ok(Assertions {
        policy: Arc::new(policy),
        written,
    })
}

/// The body of a turn's request for `protocol`: the conversation so far.
fn body(
    protocol: &dyn Protocol,
    model: &str,
    messages: &[Value],
    file: &str,
) -> Result<Value, String> {
    match protocol.name() {
        "openai_chat" => Ok(json!({"model": model, "messages": messages})),
        "anthropic_messages" => {
            Ok(json!({"model": model, "max_tokens": 1024, "messages": messages}))
        }
        other => Err(format!(
            "{file}: scenarios are sent as OpenAI chat or Anthropic messages; the route's protocol is {other}"
        )),
    }
}

/// Runs every scenario live, turn by turn: one result per turn.
pub fn run(
    h: &Harness,
    scenarios: &[Scenario],
    route: Option<&str>,
    opts: &LiveOptions,
) -> Vec<CaseResult> {
    let mut out = Vec::new();
    let env = super::judged::env(h.runtime());
    for s in scenarios {
        run_one(h, &env, s, route, opts, &mut out);
    }
    out
}

/// A judged assertion on a turn: one verdict of the config's judge, asked as the packs' evals
/// ask it (`crate::judge::verdict` on the turn's conversation and, unless the check reads the
/// input only, its answer); it passes as the eval's threshold says.
fn judged(
    h: &Harness,
    env: &Result<JudgeEnv, String>,
    e: &Eval,
    check: &JudgedCheck,
    conversation: &Conversation,
    answer: &Answer,
) -> Result<bool, String> {
    let env = env.as_ref().map_err(|e| format!("no judge client: {e}"))?;
    let subject = Subject {
        conversation: Arc::new(conversation.clone()),
        answer: (e.validator.direction != Direction::Input).then(|| answer.clone()),
    };
    let v = h
        .block_on(crate::judge::verdict(env, check, &subject))
        .map_err(|e| format!("the judge gave no verdict: {e}"))?;
    Ok(e.passes(v.score))
}

fn not_run(s: &Scenario, id: String, input: &str, a: &Assertions, why: String) -> CaseResult {
    CaseResult {
        id,
        tags: s.labels.clone(),
        input: input.to_owned(),
        output: None,
        expected: None,
        pack: Some(why.clone()),
        blocked_span: None,
        scores: Vec::new(),
        observed: Some(Observed {
            error: Some(why.clone()),
            assertions: a
                .written
                .iter()
                .map(|(check, _)| AssertionResult {
                    check: check.clone(),
                    passed: false,
                    message: Some(why.clone()),
                })
                .collect(),
            ..Observed::default()
        }),
    }
}

/// What an answered turn leaves for the assertions: what was observed, the answer, and the
/// request as the proxy read it (by its protocol's parser).
struct Answered {
    obs: Observed,
    answer: Answer,
    conversation: Result<Conversation, String>,
}

fn run_one(
    h: &Harness,
    env: &Result<JudgeEnv, String>,
    s: &Scenario,
    route: Option<&str>,
    opts: &LiveOptions,
    out: &mut Vec<CaseResult>,
) {
    let rt = h.runtime();
    let chat = protocol::by_name("openai_chat");
    let model = opts.model.as_deref().unwrap_or_default();
    let price = rt.config.price(model);
    let mut messages: Vec<Value> = Vec::new();
    let mut stopped: Option<String> = None;
    // Each answered turn's tool calls: the requests carry the answers' text only (no tool
    // runs here, so no results to pair calls with), the transcript rules read the calls too.
    let mut calls: Vec<Vec<(String, String)>> = Vec::new();
    // What the run has spent so far: `cost_budget` reads the conversation's total, as
    // PromptKit sums its messages' costs.
    let mut spent = Spend::NOTHING;
    let mut last: Option<Answered> = None;
    for (i, t) in s.turns.iter().enumerate() {
        let id = format!("{}#turn{}", s.name, i + 1);
        if let Some(why) = &stopped {
            out.push(not_run(s, id, &t.content, &t.assertions, why.clone()));
            continue;
        }
        messages.push(json!({"role": "user", "content": t.content}));
        let route_protocol = match route {
            Some(name) => rt
                .routes
                .iter()
                .find(|r| r.name == name)
                .map(|r| r.protocol),
            None => chat,
        };
        let prepared = route_protocol
            .ok_or_else(|| format!("no route {}", route.unwrap_or("openai_chat")))
            .and_then(|p| body(p, model, &messages, &s.file).map(|b| (p, b)))
            .and_then(|(p, b)| {
                live::prepare_body(rt, route, Some(p), None, b, opts.stream || s.streaming)
            });
        let p = match prepared {
            Ok(p) => p,
            Err(e) => {
                stopped = Some(format!("not run: {e}"));
                out.push(not_run(
                    s,
                    id,
                    &t.content,
                    &t.assertions,
                    format!("not run: {e}"),
                ));
                continue;
            }
        };
        let (obs, answer) = h.send(&p, opts);
        let pack = live::pack_verdict(&obs);
        let answered = obs.error.is_none() || obs.blocked().is_some();
        spent = spent.plus(Spend::of_turn(
            answered,
            (obs.input_tokens, obs.output_tokens),
            Default::default(),
            price,
        ));
        let mut turn = Answered {
            conversation: p
                .protocol
                .parse_request(&p.body, &p.path)
                .map(|r| r.conversation)
                .map_err(|e| e.to_string()),
            obs,
            answer,
        };
        turn.obs.assertions = check_all(h, env, &t.assertions, &turn, &calls, spent);
        if let Some(why) = &pack {
            stopped = Some(format!("not run: turn {} was {why}", i + 1));
        }
        messages.push(json!({"role": "assistant", "content": turn.answer.text}));
        calls.push(turn.answer.tool_calls.clone());
        out.push(CaseResult {
            id,
            tags: s.labels.clone(),
            input: t.content.clone(),
            output: Some(turn.answer.text.clone()),
            expected: None,
            pack,
            blocked_span: None,
            scores: Vec::new(),
            observed: Some(turn.obs.clone()),
        });
        last = Some(turn);
    }
    // The conversation's assertions: once, over the last turn that ran (its request holds
    // the conversation) and the whole run's spend.
    let Some(a) = &s.conversation else {
        return;
    };
    let id = format!("{}#conversation", s.name);
    let input = "(the conversation)";
    match last {
        None => out.push(not_run(
            s,
            id,
            input,
            a,
            stopped.unwrap_or_else(|| "not run: no turn ran".into()),
        )),
        Some(mut turn) => {
            turn.obs.assertions = check_all(
                h,
                env,
                a,
                &turn,
                &calls[..calls.len().saturating_sub(1)],
                spent,
            );
            out.push(CaseResult {
                id,
                tags: s.labels.clone(),
                input: input.into(),
                output: Some(turn.answer.text),
                expected: None,
                pack: None,
                blocked_span: None,
                scores: Vec::new(),
                observed: Some(turn.obs),
            });
        }
    }
}

/// Checks `a`'s assertions on an answered turn: `calls` are the earlier turns' tool calls,
/// `spent` what the run has spent up to and with this turn.
fn check_all(
    h: &Harness,
    env: &Result<JudgeEnv, String>,
    a: &Assertions,
    turn: &Answered,
    calls: &[Vec<(String, String)>],
    spent: Spend,
) -> Vec<AssertionResult> {
    let (obs, answer) = (&turn.obs, &turn.answer);
    a.policy
        .evals()
        .iter()
        .zip(&a.written)
        .map(|(e, (check, message))| {
            // A reference metric's score, for the report.
            let mut scored = None;
            let passed = match (&e.check, &turn.conversation) {
                (
                    EvalCheck::GuardrailTriggered {
                        guardrail,
                        should_trigger,
                        on_input,
                    },
                    _,
                ) => {
                    let canonical = crate::policy::catalog::canonical(guardrail);
                    let fired = obs.verdicts.iter().any(|v| {
                        (v.validator == *guardrail
                            || v.validator.split('#').next() == Some(guardrail.as_str())
                            || canonical == Some(v.check.as_str()))
                            && on_input.is_none_or(|i| i == (v.phase == "input"))
                    });
                    Ok(fired == *should_trigger)
                }
                _ if obs.error.is_some() && obs.blocked().is_none() => Err(format!(
                    "the turn has no answer: {}",
                    obs.error.as_deref().unwrap_or("")
                )),
                (EvalCheck::Replay(policy), Ok(conversation)) => Ok(crate::evals::check_turn(
                    policy,
                    conversation,
                    Some(answer),
                    spent,
                    obs.duration_ms as u64,
                )),
                (_, Err(e)) => Err(format!("the request cannot be read back: {e}")),
                (EvalCheck::Transcript(rule, _), Ok(conversation)) => {
                    let score = rule.score(&with_calls(conversation, calls), answer);
                    if score != 0.0 && score != 1.0 {
                        scored = Some(format!("scored {score:.4}"));
                    }
                    Ok(e.passes(score))
                }
                (EvalCheck::Reference(r), Ok(conversation)) => {
                    crate::evals::score_reference(r, &Arc::new(conversation.clone()), &answer.text)
                        .map(|s| {
                            let mut note = format!("{} scored {:.4}", r.metric.name(), s.value);
                            if !s.detail.is_empty() {
                                note.push_str(&format!(
                                    " ({})",
                                    crate::evals::detail_line(&s.detail)
                                ));
                            }
                            scored = Some(note);
                            e.passes(s.value)
                        })
                }
                (EvalCheck::Judged(check), Ok(conversation)) => {
                    judged(h, env, e, check, conversation, answer)
                }
            };
            AssertionResult {
                check: check.clone(),
                passed: passed.as_ref().is_ok_and(|p| *p),
                message: match passed {
                    Ok(true) => message.clone().or(scored),
                    Ok(false) => Some(match (message, scored) {
                        (Some(m), Some(s)) => format!("{m}: {s}"),
                        (Some(m), None) => m.clone(),
                        (None, Some(s)) => s,
                        (None, None) => "failed".into(),
                    }),
                    Err(e) => Some(e),
                },
            }
        })
        .collect()
}

/// `conversation` with the earlier turns' tool calls on their assistant messages (the n-th
/// assistant message is the n-th turn's answer), as PromptKit's transcript holds them.
fn with_calls(
    conversation: &crate::delta::Conversation,
    calls: &[Vec<(String, String)>],
) -> crate::delta::Conversation {
    let mut c = conversation.clone();
    let answers = c
        .messages
        .iter_mut()
        .filter(|m| m.role == crate::delta::Role::Assistant);
    for (m, turn) in answers.zip(calls) {
        if m.tool_calls.is_empty() {
            m.tool_calls = turn
                .iter()
                .map(|(name, arguments)| crate::delta::ToolCall {
                    id: None,
                    name: name.clone(),
                    arguments: arguments.clone(),
                })
                .collect();
        }
    }
    c
}

#[cfg(test)]
mod tests;
