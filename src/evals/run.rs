//! One turn's evals: which run (trigger, `when`), their scores, and where the scores go.

use super::{sampled, Turn};
use crate::audit::AuditEvent;
use crate::delta::{Channel, Delta};
use crate::judge::{self, Subject};
use crate::metrics::{EvalLabels, EvalResultLabels, Metrics};
use crate::policy::evals::{Eval, EvalCheck, ReferenceCheck, References, Trigger};
use crate::policy::{Direction, Policy};
use std::borrow::Cow;
use std::sync::Arc;

/// What an eval found.
enum Scored {
    Score {
        score: f64,
        reason: Option<String>,
    },
    /// Nothing to judge (an answer check on a turn blocked before the call).
    NotApplicable,
    Error(String),
}

/// Runs every eval of the turn's policy that selects it, at once.
pub(super) async fn evaluate(turn: Arc<Turn>, metrics: &Metrics) {
    let selected = |e: &Eval| triggers(e.trigger, &turn);
    run_selected(&turn, metrics, selected, None).await;
}

/// Runs the turn's evals `selected` picks whose `when` holds, at once, and records their
/// scores; with `lost`, each records that error instead of a score.
async fn run_selected(
    turn: &Arc<Turn>,
    metrics: &Metrics,
    selected: impl Fn(&Eval) -> bool,
    lost: Option<&str>,
) {
    let names: Vec<&str> = tool_names(turn);
    let mut runs = tokio::task::JoinSet::new();
    for (i, e) in turn.policy.evals().iter().enumerate() {
        if !selected(e) {
            continue;
        }
        if let Some(why) = lost {
            record(turn, metrics, e, Scored::Error(why.to_owned()));
            continue;
        }
        if e.when.holds(names.iter().copied()) {
            let turn = Arc::clone(turn);
            runs.spawn(async move {
                let scored = score(i, &turn).await;
                (i, scored)
            });
        }
    }
    while let Some(done) = runs.join_next().await {
        match done {
            Ok((i, scored)) => record(turn, metrics, &turn.policy.evals()[i], scored),
            Err(e) => tracing::error!(error = %e, "an eval's task failed"),
        }
    }
}

fn triggers(trigger: Trigger, turn: &Turn) -> bool {
    let mut calls = turn.answer.iter().flat_map(|a| a.tool_calls.iter());
    match trigger {
        Trigger::EveryTurn => true,
        Trigger::WorkflowStep => calls.any(|(n, _)| n == "workflow__transition"),
        Trigger::SampleTurns(p) => sampled(&turn.session, turn.turn_index, p),
        // Session-level: run when the session ends ([`evaluate_session`]).
        Trigger::SampleSessions(_) | Trigger::SessionComplete => false,
    }
}

/// Runs the evals a session's end selects (`on_session_complete`; `sample_sessions` when the
/// session is sampled) over its last turn, whose spend is the session's. `lost`: the last
/// turn was not kept, and each such eval reports that error instead.
pub(super) async fn evaluate_session(turn: Arc<Turn>, metrics: &Metrics, lost: Option<&str>) {
    let selected = |e: &Eval| match e.trigger {
        Trigger::SessionComplete => true,
        Trigger::SampleSessions(p) => sampled(&turn.session, 0, p),
        _ => false,
    };
    run_selected(&turn, metrics, selected, lost).await;
}

/// The tools called in the turn's session: the request's history and the answer's.
fn tool_names(turn: &Turn) -> Vec<&str> {
    turn.conversation
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.name.as_str()))
        .chain(
            turn.answer
                .iter()
                .flat_map(|a| a.tool_calls.iter().map(|(n, _)| n.as_str())),
        )
        .collect()
}

/// The score of the turn's eval number `at`.
async fn score(at: usize, turn: &Arc<Turn>) -> Scored {
    let eval = &turn.policy.evals()[at];
    match &eval.check {
        EvalCheck::Judged(check) => {
            let answer = if eval.validator.direction == Direction::Input {
                None
            } else {
                match &turn.answer {
                    Some(a) => Some(a.clone()),
                    None => return Scored::NotApplicable,
                }
            };
            let subject = Subject {
                conversation: Arc::clone(&turn.conversation),
                answer,
            };
            match judge::verdict(&turn.env, check, &subject).await {
                Ok(v) => Scored::Score {
                    score: v.score,
                    reason: v.reason,
                },
                Err(e) => Scored::Error(format!("{}: {}", e.kind.as_str(), e.detail)),
            }
        }
        EvalCheck::Replay(_) | EvalCheck::Transcript(..) => {
            // A large turn's replay takes milliseconds to seconds: off the async workers, so
            // evals never slow traffic (the evals' concurrency bounds how many run at once).
            if turn.text_bytes() < OFF_WORKER_BYTES {
                return score_deterministic(eval, turn);
            }
            let turn = Arc::clone(turn);
            tokio::task::spawn_blocking(move || {
                score_deterministic(&turn.policy.evals()[at], &turn)
            })
            .await
            .unwrap_or_else(|e| Scored::Error(format!("the eval's task failed: {e}")))
        }
        EvalCheck::Reference(check) => {
            let Some(answer) = &turn.answer else {
                return Scored::NotApplicable;
            };
            // ROUGE-L is quadratic in the tokens (16,384 characters at most): off the async
            // workers.
            let (check, conversation, text) = (
                Arc::clone(check),
                Arc::clone(&turn.conversation),
                answer.text.clone(),
            );
            let scored =
                tokio::task::spawn_blocking(move || score_reference(&check, &conversation, &text))
                    .await;
            match scored {
                Ok(Ok(s)) => Scored::Score {
                    score: s.value,
                    reason: (!s.detail.is_empty()).then(|| detail_line(&s.detail)),
                },
                Ok(Err(e)) => Scored::Error(e),
                Err(e) => Scored::Error(format!("the metric's task failed: {e}")),
            }
        }
        EvalCheck::GuardrailTriggered {
            guardrail,
            should_trigger,
            on_input,
        } => {
            // By its id, its type as written, or the same catalog type under another alias.
            let canonical = crate::policy::catalog::canonical(guardrail);
            let fired = turn.fired.iter().any(|f| {
                let Some(v) = turn.policy.validators().get(f.validator as usize) else {
                    return false;
                };
                (v.type_name == *guardrail
                    || v.id.as_deref() == Some(guardrail.as_str())
                    || canonical == Some(v.canonical))
                    && on_input.is_none_or(|i| i == f.on_input)
            });
            Scored::Score {
                score: if fired == *should_trigger { 1.0 } else { 0.0 },
                reason: None,
            }
        }
    }
}

/// Turns over this many bytes of text are replayed off the async workers.
const OFF_WORKER_BYTES: usize = 64 << 10;

/// A replayed or transcript eval's score: deterministic, synchronous.
fn score_deterministic(eval: &Eval, turn: &Turn) -> Scored {
    match &eval.check {
        EvalCheck::Replay(policy) => {
            if eval.validator.direction != Direction::Input && turn.answer.is_none() {
                return Scored::NotApplicable;
            }
            Scored::Score {
                score: if replay(policy, turn) { 1.0 } else { 0.0 },
                reason: None,
            }
        }
        // An MCP turn is a tool call, not a conversation's answer: the validator's reading.
        EvalCheck::Transcript(_, policy) if turn.protocol == "mcp" => match &turn.answer {
            Some(_) => Scored::Score {
                score: if replay(policy, turn) { 1.0 } else { 0.0 },
                reason: None,
            },
            None => Scored::NotApplicable,
        },
        EvalCheck::Transcript(rule, _) => match &turn.answer {
            Some(answer) => Scored::Score {
                score: rule.score(&turn.conversation, answer),
                reason: None,
            },
            None => Scored::NotApplicable,
        },
        _ => Scored::Error("not a deterministic eval".into()),
    }
}

/// `rouge1 0.5000, rouge2 0.2500, rougeL 0.5000`.
pub fn detail_line(detail: &[(&str, f64)]) -> String {
    detail
        .iter()
        .map(|(name, v)| format!("{name} {v:.4}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A reference metric's score of `answer` (its text) on a turn whose request is
/// `conversation`: against the pack's reference, or against the request's messages the check
/// selects. The evals' path, also taken by `guardwire eval`'s scenario assertions.
pub fn score_reference(
    check: &ReferenceCheck,
    conversation: &Arc<crate::delta::Conversation>,
    answer: &str,
) -> Result<crate::scoring::text::TextScore, String> {
    let selected;
    let refs: Vec<&str> = match &check.references {
        References::Fixed(texts) => texts.iter().map(String::as_str).collect(),
        References::Request(source) => {
            selected = Subject {
                conversation: Arc::clone(conversation),
                answer: None,
            }
            .context(source);
            if selected.is_empty() {
                return Err(format!(
                    "metric {}: no reference: the request has no message its context_tools, context_roles or context_names select",
                    check.metric.name()
                ));
            }
            selected.iter().map(String::as_str).collect()
        }
    };
    check.metric.score(answer, &refs, "reference")
}

/// Runs a deterministic check's one-validator policy over the recorded turn, as a whole
/// answer goes through BeforeCall, OnChunk and AfterCall: true when it passes.
fn replay(policy: &Arc<Policy>, turn: &Turn) -> bool {
    check_turn(
        policy,
        &turn.conversation,
        turn.answer.as_ref(),
        turn.spend,
        turn.elapsed_ms,
    )
}

/// A deterministic check's one-validator policy over one turn (the request's conversation,
/// the answer, what it — or its session so far — spent, and its time): true when it passes.
/// The evals' path, also taken by `guardwire eval`'s scenario assertions.
pub fn check_turn(
    policy: &Arc<Policy>,
    conversation: &crate::delta::Conversation,
    answer: Option<&crate::judge::Answer>,
    spend: super::Spend,
    elapsed_ms: u64,
) -> bool {
    let mut guard = policy.exchange_guard(policy.tool_history(conversation), None);
    guard.set_known_cost(spend.cost_usd);
    guard.answer(false);
    if guard.before_call(conversation).is_err() {
        return false;
    }
    let Some(answer) = answer else {
        return true;
    };
    let mut deltas = vec![Delta::Text {
        choice: 0,
        channel: Channel::Content,
        text: Cow::Borrowed(&answer.text),
    }];
    for (i, (name, args)) in answer.tool_calls.iter().enumerate() {
        deltas.push(Delta::ToolCallStart {
            choice: 0,
            index: i as u32,
            id: None,
            name: Cow::Borrowed(name),
        });
        deltas.push(Delta::Text {
            choice: 0,
            channel: Channel::ToolArgs(i as u32),
            text: Cow::Borrowed(args),
        });
    }
    deltas.push(Delta::Usage {
        input_tokens: spend.input_tokens,
        output_tokens: spend.output_tokens,
        cache: None,
    });
    deltas.push(Delta::Finish {
        choice: 0,
        reason: Cow::Borrowed(if answer.tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }),
    });
    deltas.iter().all(|d| guard.on_chunk(d).is_ok())
        && guard.after_call().is_ok()
        && guard.check_latency(elapsed_ms).is_ok()
}

fn record(turn: &Turn, metrics: &Metrics, eval: &Eval, scored: Scored) {
    let (score, reason, result) = match scored {
        Scored::NotApplicable => return,
        Scored::Score { score, reason } => {
            let passed = eval.passes(score);
            (Some(score), reason, if passed { "pass" } else { "fail" })
        }
        Scored::Error(e) => {
            tracing::warn!(eval = %eval.id, route = turn.route, request_id = %turn.request_id, error = %e, "eval got no score");
            (None, None, "error")
        }
    };
    let m = &metrics.evals;
    m.results
        .get_or_create(&EvalResultLabels {
            eval: eval.id.clone(),
            route: turn.route,
            result,
        })
        .inc();
    if let Some(score) = score {
        m.scores
            .get_or_create(&EvalLabels {
                eval: eval.id.clone(),
                route: turn.route,
            })
            .observe(score);
        if let Some(metric) = &eval.metric {
            m.declared
                .record(metric, turn.route, score, result == "pass");
        }
    }
    if turn.audit.enabled() {
        turn.audit.record(&AuditEvent {
            ts: crate::audit::now_rfc3339(),
            request_id: &turn.request_id,
            route: turn.route,
            protocol: turn.protocol,
            key_id: turn.key_id,
            validator: &eval.id,
            check: eval.validator.canonical,
            phase: "eval",
            mode: "eval",
            rule: None,
            // A judge's reason may quote the text: only with `audit.include_match`.
            matched: reason.as_deref().filter(|_| turn.keep_reasons),
            score,
            result: Some(result),
        });
    }
}
