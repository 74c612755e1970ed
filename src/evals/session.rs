//! Sessions for the evals. What a session is depends on the surface: on LLM routes the
//! `evals.session_header` value, else the conversation's opening; on A2A routes the message's
//! `contextId`; on MCP routes the `Mcp-Session-Id` (a call without one is a session of its
//! own). When a policy has session-level evals (`on_session_complete`, `sample_sessions`) or
//! sums the session's spend (`cost_budget`), each of its turns is recorded in the state
//! backend ([`crate::state::eval_sessions`]): its spend is added to the session's, and it
//! becomes the session's last turn. A session ends when its client says so — the
//! `evals.session_end_header` on a request, an MCP `DELETE` — or once it has idled for
//! `evals.session_idle_ms`; its session evals then run once, on whichever replica claims it,
//! over its last turn (which carries the conversation: clients resend it with every turn) and
//! the session's spend.

use super::{run, Fired, Spend, Turn};
use crate::audit::Audit;
use crate::delta::Conversation;
use crate::judge::{Answer, JudgeEnv};
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::state::eval_sessions::{Ended, Last, SessionRef, Spent, MAX_LAST_TURN_BYTES};
use crate::state::State;
use std::sync::Arc;
use std::time::Duration;

/// How often a replica looks for sessions that idled past their end.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// Sessions claimed per round trip.
const SWEEP_BATCH: usize = 64;

/// What a session's evals run with besides its last turn: taken from the request that ended
/// it, or — when it idled — from the running config by its route and key.
#[derive(Clone)]
pub struct SessionContext {
    pub policy: Arc<Policy>,
    pub env: JudgeEnv,
    pub audit: Arc<Audit>,
    pub keep_reasons: bool,
    pub route: &'static str,
    pub protocol: &'static str,
    pub key_id: Option<&'static str>,
    pub session: String,
}

impl SessionContext {
    /// The context of the session `session` of a request's seed.
    pub fn of_seed(seed: &super::EvalSeed, session: String) -> SessionContext {
        SessionContext {
            policy: Arc::clone(&seed.policy),
            env: seed.env.clone(),
            audit: Arc::clone(&seed.audit),
            keep_reasons: seed.keep_reasons,
            route: seed.route,
            protocol: seed.protocol,
            key_id: seed.key_id,
            session,
        }
    }

    /// A turn's context.
    pub fn of(turn: &Turn) -> SessionContext {
        SessionContext {
            policy: Arc::clone(&turn.policy),
            env: turn.env.clone(),
            audit: Arc::clone(&turn.audit),
            keep_reasons: turn.keep_reasons,
            route: turn.route,
            protocol: turn.protocol,
            key_id: turn.key_id,
            session: turn.session.clone(),
        }
    }

    fn session_ref(&self) -> SessionRef {
        SessionRef {
            route: self.route.to_owned(),
            key_id: self.key_id.map(str::to_owned),
            session: self.session.clone(),
        }
    }
}

/// Finds a session's context in the running config (the proxy implements it): `None` when its
/// route or key is gone.
pub trait SessionResolver: Send + Sync {
    fn resolve(&self, route: &str, key_id: Option<&str>, session: &str) -> Option<SessionContext>;
}

/// A session's last turn as the store keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
struct LastTurn {
    conversation: Conversation,
    answer: Option<Answer>,
    blocked: bool,
    fired: Vec<Fired>,
    turn_index: usize,
    request_id: String,
    elapsed_ms: u64,
}

impl From<Spend> for Spent {
    fn from(s: Spend) -> Spent {
        Spent {
            input_tokens: s.input_tokens,
            output_tokens: s.output_tokens,
            micro_usd: s.cost_usd.map(crate::state::micro_usd),
        }
    }
}

impl From<Spent> for Spend {
    fn from(s: Spent) -> Spend {
        Spend {
            input_tokens: s.input_tokens,
            output_tokens: s.output_tokens,
            cost_usd: s.micro_usd.map(|m| m as f64 / 1e6),
        }
    }
}

/// The state backend, as the evals' workers use it.
pub(super) struct Sessions {
    pub state: Arc<State>,
    pub idle_ms: u64,
}

impl Sessions {
    /// Records `turn` in its session; its spend becomes the session's so far. A store that
    /// cannot answer leaves the spend unknown (a `cost_budget` eval reports an error, never a
    /// pass on one turn's spend).
    pub async fn record(&self, turn: &mut Turn) {
        let last = serde_json::to_string(&LastTurn {
            conversation: Conversation::clone(&turn.conversation),
            answer: turn.answer.clone(),
            blocked: turn.blocked,
            fired: turn.fired.clone(),
            turn_index: turn.turn_index,
            request_id: turn.request_id.clone(),
            elapsed_ms: turn.elapsed_ms,
        })
        .ok()
        .filter(|j| j.len() <= MAX_LAST_TURN_BYTES);
        let last = last.as_deref().map_or(Last::TooLarge, Last::Kept);
        let session = SessionContext::of(turn).session_ref();
        let recorded = self
            .state
            .record_eval_turn(&session, turn.spend.into(), last, self.idle_ms)
            .await;
        turn.spend = match recorded {
            Ok(total) => total.into(),
            Err(e) => {
                tracing::warn!(route = turn.route, error = %e, "an eval session's turn could not be recorded");
                Spend::default()
            }
        };
    }

    /// The client ended the session: claims it and runs its session evals.
    pub async fn end(&self, context: SessionContext, metrics: &Metrics) {
        match self.state.claim_eval_session(&context.session_ref()).await {
            Ok(Some(ended)) => run_ended(context, ended, metrics).await,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(route = context.route, error = %e, "an ended eval session could not be claimed; it ends when it idles");
            }
        }
    }

    /// Claims the sessions that idled past their end and runs their session evals, at most
    /// `concurrency` sessions at once (a slow judge does not hold the others back).
    pub async fn sweep(
        &self,
        resolve: &dyn SessionResolver,
        metrics: &Arc<Metrics>,
        concurrency: usize,
    ) {
        let mut runs = tokio::task::JoinSet::new();
        loop {
            let batch = match self.state.claim_idle_sessions(SWEEP_BATCH).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::debug!(error = %e, "idle eval sessions could not be claimed");
                    break;
                }
            };
            let full = batch.len() == SWEEP_BATCH;
            for ended in batch {
                let s = &ended.session;
                let Some(context) = resolve.resolve(&s.route, s.key_id.as_deref(), &s.session)
                else {
                    tracing::warn!(route = %s.route, "an eval session ended whose route or key is no longer configured; its session evals do not run");
                    continue;
                };
                while runs.len() >= concurrency.max(1) {
                    runs.join_next().await;
                }
                let metrics = Arc::clone(metrics);
                runs.spawn(async move { run_ended(context, ended, &metrics).await });
            }
            if !full {
                break;
            }
        }
        while runs.join_next().await.is_some() {}
    }
}

/// Runs an ended session's evals over its last turn with the session's spend.
async fn run_ended(context: SessionContext, ended: Ended, metrics: &Metrics) {
    // A session whose turns only added spend (`cost_budget` validators) has no eval turn.
    if ended.turns == 0 {
        return;
    }
    let last: Option<LastTurn> = ended
        .last
        .as_deref()
        .and_then(|j| serde_json::from_str(j).ok());
    let lost = last.is_none().then_some(
        "the session's last turn was larger than the store keeps (1 MiB); its session evals did not run",
    );
    let last = last.unwrap_or(LastTurn {
        conversation: Conversation::default(),
        answer: None,
        blocked: false,
        fired: Vec::new(),
        turn_index: 0,
        request_id: String::new(),
        elapsed_ms: 0,
    });
    let turn = Turn {
        policy: context.policy,
        env: context.env,
        audit: context.audit,
        keep_reasons: context.keep_reasons,
        conversation: Arc::new(last.conversation),
        answer: last.answer,
        blocked: last.blocked,
        fired: last.fired,
        session: context.session,
        turn_index: last.turn_index,
        route: context.route,
        protocol: context.protocol,
        request_id: last.request_id,
        key_id: context.key_id,
        elapsed_ms: last.elapsed_ms,
        spend: ended.spent.into(),
        ends_session: false,
    };
    run::evaluate_session(Arc::new(turn), metrics, lost).await;
}
