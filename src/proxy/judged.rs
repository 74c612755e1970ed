//! Awaiting judged checks on the request path: every judged validator of one side (request
//! or answer) asked at once, and their verdicts turned into findings — a score below the
//! threshold fails, an error fails unless the validator fails open. Also the exchange's steps
//! that await them (the request's before the upstream call; a whole answer's); those during the
//! call are in `exchange.rs`, a stream's in `body.rs` and `body/windows.rs`.

use super::request::RequestCtx;
use crate::delta::Conversation;
use crate::error::GatewayError;
use crate::judge::{self, Answer, JudgeEnv, JudgeError, Subject, Verdict};
use crate::metrics::JudgedVerdictLabels;
use crate::policy::judged::JudgedCheck;
use crate::policy::{Finding, Mode, OnError, Phase, Policy};
use std::sync::Arc;
use std::time::Instant;

/// What the judged checks of one side decided.
#[derive(Debug, Default)]
pub struct Judgement {
    /// The first enforced validator that failed (in pack order).
    pub block: Option<Finding>,
    /// Monitor-mode validators that failed.
    pub monitored: Vec<Finding>,
}

impl Judgement {
    pub fn is_empty(&self) -> bool {
        self.block.is_none() && self.monitored.is_empty()
    }
}

impl RequestCtx<'_> {
    /// What judged checks need to make their calls.
    pub fn judge_env(&self) -> JudgeEnv {
        JudgeEnv {
            judges: Arc::clone(&self.rt.judges),
            tenant: self.caller.key_id,
            client: Arc::clone(&self.gw.client),
            metrics: Arc::clone(&self.gw.metrics),
        }
    }

    /// Step 5, BeforeCall's judged checks: those of `parallel` (judged during the upstream
    /// call) or the others (judged before it). Their wait is counted as an external one, not
    /// as the proxy's time, unless it overlaps the upstream's (`parallel`).
    pub async fn judge_input(
        &self,
        conversation: &Arc<Conversation>,
        parallel: bool,
    ) -> Result<(), GatewayError> {
        let started = Instant::now();
        let judgement = judge_all(
            self.judge_env(),
            Arc::clone(self.caller.policy),
            Side::Input { parallel },
            Subject {
                conversation: Arc::clone(conversation),
                answer: None,
            },
            self.rt.config.audit.include_match,
        )
        .await;
        if !parallel {
            self.trace.add_upstream_wait(started.elapsed());
        }
        self.report().monitor(&judgement.monitored);
        match judgement.block {
            Some(finding) => Err(self.report().block(finding)),
            None => Ok(()),
        }
    }

    /// A whole answer's judged checks (once every other check passed): the enforced
    /// validator that failed, if one did.
    pub async fn judge_whole_answer(
        &self,
        answer: Answer,
        conversation: Arc<Conversation>,
    ) -> Result<(), Finding> {
        let judgement = judge_all(
            self.judge_env(),
            Arc::clone(self.caller.policy),
            Side::Output,
            Subject {
                conversation,
                answer: Some(answer),
            },
            self.rt.config.audit.include_match,
        )
        .await;
        self.report().monitor(&judgement.monitored);
        judgement.block.map_or(Ok(()), Err)
    }
}

/// Which judged checks of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The request's: those judged before the call, or (`parallel: true`) during it.
    Input {
        parallel: bool,
    },
    Output,
}

/// Asks every judged check of `side` about `subject` at once (each within its own deadline)
/// and judges the verdicts. Cancelled with the exchange: dropping the future aborts the calls.
pub async fn judge_all(
    env: JudgeEnv,
    policy: Arc<Policy>,
    side: Side,
    subject: Subject,
    keep_reasons: bool,
) -> Judgement {
    let checks: Vec<(u32, Arc<JudgedCheck>)> = match side {
        Side::Input { parallel } => policy
            .judged_input()
            .iter()
            .filter(|(_, c)| c.parallel == parallel)
            .cloned()
            .collect(),
        Side::Output => policy.judged_output().to_vec(),
    };
    let phase = match side {
        Side::Input { .. } => Phase::Input,
        Side::Output => Phase::Response,
    };
    if checks.is_empty() {
        return Judgement::default();
    }
    let subject = Arc::new(subject);
    let mut calls = tokio::task::JoinSet::new();
    for (i, (_, check)) in checks.iter().enumerate() {
        let (env, check, subject) = (env.clone(), Arc::clone(check), Arc::clone(&subject));
        calls.spawn(async move { (i, judge::verdict(&env, &check, &subject).await) });
    }
    let mut results: Vec<Option<Result<Verdict, JudgeError>>> = vec![None; checks.len()];
    while let Some(done) = calls.join_next().await {
        match done {
            Ok((i, r)) => results[i] = Some(r),
            // A panicked call is an error like any other (its slot stays empty).
            Err(e) => tracing::error!(error = %e, "a judged check's task failed"),
        }
    }
    let mut judgement = Judgement::default();
    for ((owner, _), result) in checks.iter().zip(results) {
        let v = policy.validator(*owner);
        let result = result.unwrap_or_else(|| {
            Err(JudgeError::new(
                judge::ErrorKind::Transport,
                "the call's task failed",
            ))
        });
        let (passed, label, reason) = match &result {
            Ok(verdict) => (
                v.threshold.passes(verdict.score),
                if v.threshold.passes(verdict.score) {
                    "pass"
                } else {
                    "fail"
                },
                verdict.reason.clone(),
            ),
            Err(e) => {
                tracing::warn!(validator = %v.label, kind = e.kind.as_str(), error = %e.detail, "judged check got no verdict");
                (v.on_error == OnError::FailOpen, "error", None)
            }
        };
        env.metrics
            .judges
            .verdicts
            .get_or_create(&JudgedVerdictLabels {
                validator: v.label.clone(),
                result: label,
            })
            .inc();
        if passed {
            continue;
        }
        let finding = Finding {
            validator: *owner,
            phase,
            note: None,
            rule: None,
            // The judge's reason may quote the text: only with `audit.include_match`.
            matched: reason.filter(|_| keep_reasons),
        };
        match v.mode {
            Mode::Monitor => judgement.monitored.push(finding),
            _ => {
                if judgement.block.is_none() {
                    judgement.block = Some(finding);
                }
            }
        }
    }
    judgement
}
