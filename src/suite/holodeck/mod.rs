//! `guardwire eval --holodeck agent.yaml`: a HoloDeck agent's `test_cases` sent live through
//! guardwire to the config's upstream (the agent's model, its instructions as the system
//! prompt), its `evaluations` scored on the answers with HoloDeck's rules, and the reports of
//! `--cases`. `agent.rs` reads the file as HoloDeck's models do (`metric.rs` its metrics lists); this runs
//! it.
//!
//! HoloDeck's rules followed here (its `lib/test_runner/executor.py`): a metric's list is the
//! turn's, else the test case's, else the agent's; a metric whose inputs a turn lacks (a
//! ground truth, a retrieval context) is not run on it, nor any metric on an empty answer;
//! a threshold, when given, is the score to reach, and without one the evaluator's own
//! verdict counts (every score passes for BLEU, ROUGE, METEOR and the 1–5 metrics; equality
//! and numeric must match; G-Eval 0.5; RAG metrics their default 0.5); a test passes when
//! every turn was answered and passed every metric. A multi-turn test sends each turn with the
//! conversation so far (the earlier turns and the answers they got).

mod agent;
mod metric;
mod provider;

use super::cases::{Case, CaseResult};
use super::live::{self, LiveOptions};
use super::metrics::{MetricOptions, Scorer};
use super::{EvalError, EvalOptions, Verdict};
use crate::config::Config;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// What `--holodeck` adds to a run's options.
#[derive(Debug, Clone)]
pub struct HolodeckOptions {
    pub agent: PathBuf,
    /// `--timeout`, `--concurrency` were given: they win over the agent's `execution:`
    /// (HoloDeck's CLI > YAML precedence).
    pub timeout_given: bool,
    pub concurrency_given: bool,
}

/// Runs the agent file's tests.
pub fn run(opts: &EvalOptions, h: &HolodeckOptions) -> Result<Verdict, EvalError> {
    let conflicts = [
        ("--replay", opts.replay.is_some()),
        ("--cases", opts.cases.is_some()),
        ("--scenario", !opts.scenarios.is_empty()),
        ("--metric", !opts.metrics.is_empty()),
        ("--metric-file", opts.metric_options.metric_file.is_some()),
    ];
    if let Some((flag, _)) = conflicts.iter().find(|(_, set)| *set) {
        return Err(EvalError::Setup(format!(
            "--holodeck runs the agent file's own test cases and evaluations: not with {flag}"
        )));
    }
    let Some(live) = &opts.live else {
        return Err(EvalError::Setup(
            "--holodeck: a live run's options are missing".into(),
        ));
    };
    if live.model.is_some() {
        return Err(EvalError::Setup(
            "--model: --holodeck sends the agent file's model (model.name)".into(),
        ));
    }
    live.retry.check().map_err(EvalError::Setup)?;
    let config = Config::load(&opts.config).map_err(|e| EvalError::Setup(e.to_string()))?;
    let judges = provider::Judges(
        config
            .judges
            .iter()
            .map(|j| (j.name.as_str(), j.model.as_str()))
            .collect(),
    );
    let plan = agent::load(&h.agent, &judges).map_err(EvalError::Setup)?;
    let metric_options = MetricOptions {
        metric_file: None,
        ..opts.metric_options.clone()
    };
    let mut scorer = Scorer::resolve(&[], &metric_options, Some((plan.metrics.clone(), None)))
        .map_err(EvalError::Setup)?;
    scorer.skip_unmet = true;
    let mut live = live.clone();
    live.model = Some(plan.model.name.clone());
    if let (Some(secs), false) = (plan.llm_timeout, h.timeout_given) {
        live.timeout = Duration::from_secs(secs);
    }
    if let (Some(n), false) = (plan.parallel, h.concurrency_given) {
        live.concurrency = n;
    }
    // The judges judged metrics name, checked (and G-Eval's steps written) before any test.
    scorer
        .attach(&super::runtime(opts, false)?)
        .map_err(EvalError::Setup)?;
    let harness = live::Harness::start(&opts.config).map_err(EvalError::Setup)?;
    let results = run_turns(&harness, &plan, opts.route.as_deref(), &live, &scorer);
    harness.stop();
    let metrics: Vec<_> = scorer.asked.iter().map(|a| a.metric.clone()).collect();
    let verdict = super::report_cases(opts, &h.agent, &results, &metrics)?;
    // HoloDeck's verdict per test: every turn answered and passed every metric it ran.
    let mut passed = 0;
    let mut i = 0;
    for test in &plan.tests {
        let turns = &results[i..i + test.turns.len()];
        i += test.turns.len();
        if turns
            .iter()
            .all(|r| r.pack.is_none() && r.scores.iter().all(|s| s.passed))
        {
            passed += 1;
        }
    }
    println!(
        "\nagent {:?}: {passed} of {} test cases passed (every turn answered and passed every metric it ran)",
        plan.agent,
        plan.tests.len()
    );
    Ok(verdict)
}

/// Every test's turns, round by round: turn `k` of every test is sent (concurrently) once
/// turn `k - 1` of each has its answer; a turn after one without an answer is not sent and
/// fails. Results in test order, turns in order.
fn run_turns(
    h: &live::Harness,
    plan: &agent::Plan,
    route: Option<&str>,
    opts: &LiveOptions,
    scorer: &Scorer,
) -> Vec<CaseResult> {
    let opts_route = route;
    let rounds = plan.tests.iter().map(|t| t.turns.len()).max().unwrap_or(0);
    // Per test: the conversation so far (None once a turn went unanswered), and its results.
    let mut history: Vec<Option<Vec<(String, String)>>> = vec![Some(Vec::new()); plan.tests.len()];
    let mut results: Vec<Vec<CaseResult>> = (0..plan.tests.len()).map(|_| Vec::new()).collect();
    for k in 0..rounds {
        let mut sent: Vec<usize> = Vec::new();
        let mut cases: Vec<Case> = Vec::new();
        for (t, test) in plan.tests.iter().enumerate() {
            let Some(turn) = test.turns.get(k) else {
                continue;
            };
            let id = turn_id(&test.name, k, test.turns.len());
            match &history[t] {
                Some(earlier) => {
                    cases.push(case(plan, opts_route, &id, turn, earlier));
                    sent.push(t);
                }
                None => results[t].push(CaseResult {
                    id,
                    tags: Vec::new(),
                    input: turn.input.clone(),
                    output: None,
                    expected: turn.ground_truth.clone(),
                    pack: Some("not sent: an earlier turn of this test got no answer".into()),
                    blocked_span: None,
                    scores: Vec::new(),
                    observed: None,
                }),
            }
        }
        for (t, r) in sent
            .into_iter()
            .zip(live::run_cases(h, &cases, opts, scorer))
        {
            let turn = &plan.tests[t].turns[k];
            history[t] = match (history[t].take(), &r.pack, &r.output) {
                (Some(mut h), None, Some(answer)) => {
                    h.push((turn.input.clone(), answer.clone()));
                    Some(h)
                }
                _ => None,
            };
            results[t].push(r);
        }
    }
    results.into_iter().flatten().collect()
}

fn turn_id(name: &str, k: usize, turns: usize) -> String {
    if turns == 1 {
        name.to_owned()
    } else {
        format!("{name} (turn {})", k + 1)
    }
}

/// One turn as a case: the request the agent's model would get — the instructions as the
/// system prompt, the conversation so far, the turn's input, HoloDeck's sampling defaults.
fn case(
    plan: &agent::Plan,
    route: Option<&str>,
    id: &str,
    turn: &agent::PlannedTurn,
    earlier: &[(String, String)],
) -> Case {
    let mut messages: Vec<Value> = Vec::new();
    let anthropic = plan.protocol == "anthropic_messages";
    if !anthropic {
        messages.push(json!({"role": "system", "content": plan.system}));
    }
    for (user, assistant) in earlier {
        messages.push(json!({"role": "user", "content": user}));
        messages.push(json!({"role": "assistant", "content": assistant}));
    }
    messages.push(json!({"role": "user", "content": turn.input}));
    let m = &plan.model;
    let mut body = json!({"model": m.name, "messages": messages});
    if anthropic {
        body["system"] = json!(plan.system);
        // The Messages API requires max_tokens: HoloDeck's default when the file sets none.
        body["max_tokens"] = json!(m.max_tokens.unwrap_or(1000));
    } else if let Some(n) = m.max_tokens {
        body["max_tokens"] = json!(n);
    }
    if let Some(t) = m.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(p) = m.top_p {
        body["top_p"] = json!(p);
    }
    let mut exchange = json!({"id": id, "protocol": plan.protocol, "request": body});
    if let Some(r) = route {
        exchange["route"] = json!(r);
    }
    Case {
        line: 0,
        id: id.to_owned(),
        tags: Vec::new(),
        expected: turn.ground_truth.clone(),
        context: turn.retrieval_context.clone(),
        output: None,
        input: turn.input.clone(),
        answered: false,
        tool_calls: None,
        expected_tools: None,
        trajectory: Default::default(),
        variant_of: None,
        exchange: exchange.to_string().into_bytes(),
        metrics: Some(turn.metrics.clone()),
    }
}
