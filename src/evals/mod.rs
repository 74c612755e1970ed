//! Production evals (a pack's `evals:`), run off the request path.
//!
//! When an exchange ends (its answer released or blocked, or its request blocked before the
//! call) and its policy has evals, the exchange hands a [`Turn`] to the [`EvalQueue`]: a
//! bounded queue that never blocks traffic (a full queue drops the turn and counts it). Workers
//! take turns in order and run each eval whose trigger and `when` select the turn; every score
//! becomes metrics (`guardwire_eval_score`, `guardwire_eval_results_total`, and the eval's own
//! `metric:`) and an audit line. An eval never changes a response.
//!
//! What a proxy knows of sessions: the session is the `evals.session_header` request header
//! when sent, else the conversation's opening (its messages up to the first user message, which
//! clients resend with every turn); a turn is one request and its answer, numbered by the
//! assistant messages before it.

mod run;
pub mod session;

pub use run::{check_turn, detail_line, score_reference};
pub use session::{SessionContext, SessionResolver};

use crate::audit::Audit;
use crate::budget::{Budget, Held};
use crate::config::{EvalsConfig, Price};
use crate::delta::{Conversation, Role};
use crate::judge::{Answer, JudgeEnv};
use crate::metrics::Metrics;
use crate::policy::Policy;
use std::sync::{Arc, OnceLock};
use tokio::sync::mpsc;

/// A validator that fired on the exchange (for `guardrail_triggered`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fired {
    /// Its index in the exchange's policy.
    pub validator: u32,
    /// On the request (BeforeCall), else on the answer.
    pub on_input: bool,
}

/// One exchange, as the evals see it.
pub struct Turn {
    /// The exchange's policy: its evals, and the validators `fired` indexes.
    pub policy: Arc<Policy>,
    /// What judged evals call with (the evals' own gates).
    pub env: JudgeEnv,
    /// Where result lines go.
    pub audit: Arc<Audit>,
    /// Audit lines carry judges' reasons (`audit.include_match`).
    pub keep_reasons: bool,
    pub conversation: Arc<Conversation>,
    /// `None` when the request was blocked before the call (or no answer was read).
    pub answer: Option<Answer>,
    /// An enforced validator stopped the exchange.
    pub blocked: bool,
    /// The validators that fired on the exchange, each once.
    pub fired: Vec<Fired>,
    /// The session id sampling hashes (`session_of`), and the turn's number in it.
    pub session: String,
    pub turn_index: usize,
    /// The `route` label, its protocol, and the request's identity for audit lines.
    pub route: &'static str,
    pub protocol: &'static str,
    pub request_id: String,
    pub key_id: Option<&'static str>,
    /// From the request's arrival to the exchange's end (`latency_budget`).
    pub elapsed_ms: u64,
    /// What the turn spent — once recorded in its session, what the session spent up to it
    /// (`cost_budget`).
    pub spend: Spend,
    /// The client ended its session with this turn (`evals.session_end_header`).
    pub ends_session: bool,
}

/// Tokens and their price, as `cost_budget` reads them: a turn's, or its session's so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spend {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// `None` without a price for the model, or without both token counts.
    pub cost_usd: Option<f64>,
}

impl Spend {
    /// Nothing spent.
    pub const NOTHING: Spend = Spend {
        input_tokens: Some(0),
        output_tokens: Some(0),
        cost_usd: Some(0.0),
    };

    /// This and `other` together; a sum is unknown once either part is.
    pub fn plus(self, other: Spend) -> Spend {
        let tokens = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
        Spend {
            input_tokens: tokens(self.input_tokens, other.input_tokens),
            output_tokens: tokens(self.output_tokens, other.output_tokens),
            cost_usd: self.cost_usd.zip(other.cost_usd).map(|(a, b)| a + b),
        }
    }

    /// A turn's spend: its usage at the model's price (the part of the input a prompt cache
    /// wrote or read, `cache`, at the cache's prices); nothing when it never reached the
    /// provider (`answered` false: blocked before the call).
    pub fn of_turn(
        answered: bool,
        usage: (Option<u64>, Option<u64>),
        cache: crate::delta::CacheTokens,
        price: Option<Price>,
    ) -> Spend {
        if !answered {
            return Spend::NOTHING;
        }
        let cost_usd = match (usage, price) {
            ((Some(i), Some(o)), Some(p)) => Some(p.usd_cached(i, o, cache)),
            _ => None,
        };
        Spend {
            input_tokens: usage.0,
            output_tokens: usage.1,
            cost_usd,
        }
    }
}

impl Turn {
    /// The text it holds (conversation and answer): what it weighs in `evals.max_queue_bytes`.
    pub fn text_bytes(&self) -> usize {
        text_bytes(&self.conversation, self.answer.as_ref())
    }
}

/// The bytes of text in a conversation and its answer.
fn text_bytes(c: &Conversation, answer: Option<&Answer>) -> usize {
    let messages: usize = c
        .read_messages()
        .map(|m| {
            let text: usize = m.text.iter().map(String::len).sum();
            let calls: usize = m
                .tool_calls
                .iter()
                .map(|t| t.id.as_ref().map_or(0, String::len) + t.name.len() + t.arguments.len())
                .sum();
            text + calls
                + m.tool_call_id.as_ref().map_or(0, String::len)
                + m.name.as_ref().map_or(0, String::len)
        })
        .sum();
    let tools: usize = c
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.as_ref().map_or(0, String::len))
        .sum();
    let answer = answer.map_or(0, |a| {
        a.text.len()
            + a.tool_calls
                .iter()
                .map(|(n, a)| n.len() + a.len())
                .sum::<usize>()
    });
    messages + tools + answer
}

/// What the evals need of an exchange, gathered when its request is read; handed over, with
/// the answer, when the exchange ends.
#[derive(Clone)]
pub struct EvalSeed {
    /// Where the turn goes.
    pub queue: Arc<EvalQueue>,
    /// The rest are the [`Turn`]'s fields of the same names.
    pub policy: Arc<Policy>,
    pub env: JudgeEnv,
    pub audit: Arc<Audit>,
    pub keep_reasons: bool,
    pub conversation: Arc<Conversation>,
    pub session: String,
    pub route: &'static str,
    pub protocol: &'static str,
    pub request_id: String,
    pub key_id: Option<&'static str>,
    /// When the request arrived (the turn's `elapsed_ms` counts from here).
    pub started: std::time::Instant,
    /// The request ended its session (`evals.session_end_header`).
    pub ends_session: bool,
}

impl EvalSeed {
    /// Queues the ended exchange: its answer (`None` when blocked before the call), whether an
    /// enforced validator stopped it, the validators that fired, and its usage and price.
    pub fn submit(
        self,
        answer: Option<Answer>,
        blocked: bool,
        fired: Vec<Fired>,
        usage: (Option<u64>, Option<u64>),
        cache: crate::delta::CacheTokens,
        price: Option<Price>,
    ) {
        let spend = Spend::of_turn(answer.is_some(), usage, cache, price);
        self.submit_spent(answer, blocked, fired, spend);
    }

    /// [`EvalSeed::submit`] with what the turn adds to its session's spend.
    pub fn submit_spent(
        self,
        answer: Option<Answer>,
        blocked: bool,
        fired: Vec<Fired>,
        spend: Spend,
    ) {
        let turn = Turn {
            spend,
            ends_session: self.ends_session,
            turn_index: turn_index_of(&self.conversation),
            elapsed_ms: self.started.elapsed().as_millis() as u64,
            policy: self.policy,
            env: self.env,
            audit: self.audit,
            keep_reasons: self.keep_reasons,
            conversation: self.conversation,
            answer,
            blocked,
            fired,
            session: self.session,
            route: self.route,
            protocol: self.protocol,
            request_id: self.request_id,
            key_id: self.key_id,
        };
        let queue = Arc::clone(&self.queue);
        queue.submit(turn);
    }
}

/// The longest session id kept as the client wrote it.
pub const MAX_SESSION_ID_BYTES: usize = 256;

/// A client's session id as the evals keep it: as written up to [`MAX_SESSION_ID_BYTES`], a
/// longer one by its SHA-256 (`sha256:…`), so a client cannot make each session it opens hold
/// megabytes (an A2A `contextId`, a header's value).
pub fn bounded_session(id: &str) -> String {
    if id.len() <= MAX_SESSION_ID_BYTES {
        return id.to_owned();
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The session a request belongs to: the session header's value, else a hash of the
/// conversation's opening (every message up to and including the first user message).
pub fn session_of(header: Option<&str>, conversation: &Conversation) -> String {
    if let Some(h) = header.filter(|h| !h.is_empty()) {
        return bounded_session(h);
    }
    let mut hash = Fnv1a::new();
    for m in conversation.read_messages() {
        hash.write(format!("{:?}", m.role).as_bytes());
        for t in &m.text {
            hash.write(&[0]);
            hash.write(t.as_bytes());
        }
        hash.write(&[1]);
        if m.role == Role::User {
            break;
        }
    }
    format!("conv-{:016x}", hash.0)
}

/// Whether some eval of `policy` may select the turn: sampling is decided from the request
/// alone, so a turn no eval samples is not kept (nor queued) at all — unless an eval sums the
/// session's spend, which needs every turn.
pub fn may_select(policy: &Policy, session: &str, turn_index: usize) -> bool {
    use crate::policy::evals::Trigger;
    policy.evals().iter().any(|e| match e.trigger {
        Trigger::SampleTurns(p) => sampled(session, turn_index, p),
        Trigger::SampleSessions(p) => sampled(session, 0, p),
        Trigger::EveryTurn | Trigger::WorkflowStep | Trigger::SessionComplete => true,
    }) || policy.evals().iter().any(|e| e.reads_session_spend())
}

/// The turn's number in its session: the assistant messages before it.
pub fn turn_index_of(conversation: &Conversation) -> usize {
    conversation
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count()
}

/// 64-bit FNV-1a, as PromptKit samples with.
struct Fnv1a(u64);

impl Fnv1a {
    fn new() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// PromptKit's sampling: FNV-1a of the session id followed by the turn index in decimal;
/// sampled when the hash modulo 10,000 is below the percentage × 100.
pub fn sampled(session: &str, turn_index: usize, percentage: f64) -> bool {
    let mut h = Fnv1a::new();
    h.write(session.as_bytes());
    h.write(turn_index.to_string().as_bytes());
    h.0 % 10_000 < (percentage * 100.0) as u64
}

/// The bounded queue turns wait in, and the workers that evaluate them (started with the
/// first turn, on the runtime that submits it).
pub struct EvalQueue {
    config: EvalsConfig,
    metrics: Arc<Metrics>,
    /// Where sessions are kept between turns (`None`: no session evals, in unit tests).
    sessions: Option<Arc<session::Sessions>>,
    /// Turns waiting or being evaluated, with their share of `evals.max_queue_bytes`.
    sender: OnceLock<mpsc::Sender<(Turn, Held)>>,
    bytes: Arc<Budget>,
}

impl EvalQueue {
    /// A queue of `config.max_queue` turns, its workers not started yet; sessions are kept in
    /// `state`.
    pub fn new(
        config: EvalsConfig,
        metrics: Arc<Metrics>,
        state: Option<Arc<crate::state::State>>,
    ) -> EvalQueue {
        let sessions = state.map(|state| {
            Arc::new(session::Sessions {
                state,
                idle_ms: config.session_idle_ms,
            })
        });
        EvalQueue {
            config,
            metrics,
            sessions,
            sender: OnceLock::new(),
            bytes: Budget::new(),
        }
    }

    /// The session header's name.
    pub fn session_header(&self) -> &str {
        &self.config.session_header
    }

    /// How long a session idles before it ends.
    pub fn session_idle_ms(&self) -> u64 {
        self.config.session_idle_ms
    }

    /// The header that ends a session's name.
    pub fn session_end_header(&self) -> &str {
        &self.config.session_end_header
    }

    /// A share of `evals.max_queue_bytes` for a turn of `n` bytes; `None` (and the turn
    /// counted as dropped) when the queue holds too much already.
    fn take_bytes(&self, n: usize) -> Option<Held> {
        let held = self.bytes.take(n, self.config.max_queue_bytes);
        if held.is_none() {
            self.metrics.evals.dropped.inc();
        }
        held
    }

    /// Starts the workers on `runtime` unless they run already (a `per_core` server starts
    /// them on its control thread, so that they stay off the workers' event loops).
    pub fn start_on(&self, runtime: &tokio::runtime::Handle) -> &mpsc::Sender<(Turn, Held)> {
        self.sender.get_or_init(|| {
            let (tx, rx) = mpsc::channel(self.config.max_queue);
            runtime.spawn(work(
                rx,
                self.config.max_concurrency,
                Arc::clone(&self.metrics),
                self.sessions.clone(),
            ));
            tx
        })
    }

    /// Queues a turn; a queue full (in turns or bytes) drops it (counted), never waits. The
    /// workers start with the first turn, on its runtime; outside one (a stream dropped at
    /// shutdown) the turn is dropped.
    pub fn submit(&self, turn: Turn) {
        let Some(held) = self.take_bytes(turn.text_bytes()) else {
            return;
        };
        let sender = match self.sender.get() {
            Some(s) => s,
            None => {
                let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                    self.metrics.evals.dropped.inc();
                    return;
                };
                self.start_on(&runtime)
            }
        };
        // Counted before it can be taken, so the depth never reads below zero.
        self.metrics.evals.queue_depth.inc();
        if sender.try_send((turn, held)).is_err() {
            self.metrics.evals.queue_depth.dec();
            self.metrics.evals.dropped.inc();
        }
    }
}

/// Takes turns in order, at most `concurrency` being evaluated at once; a turn waiting for a
/// slot still counts in the queue's depth, and its bytes until it is evaluated.
async fn work(
    mut rx: mpsc::Receiver<(Turn, Held)>,
    concurrency: usize,
    metrics: Arc<Metrics>,
    sessions: Option<Arc<session::Sessions>>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(concurrency));
    while let Some((turn, held)) = rx.recv().await {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        metrics.evals.queue_depth.dec();
        let metrics = Arc::clone(&metrics);
        let sessions = sessions.clone();
        tokio::spawn(async move {
            let mut turn = turn;
            let Some(sessions) = sessions.filter(|_| turn.policy.tracks_eval_sessions()) else {
                run::evaluate(Arc::new(turn), &metrics).await;
                drop((slot, held));
                return;
            };
            sessions.record(&mut turn).await;
            let turn = Arc::new(turn);
            run::evaluate(Arc::clone(&turn), &metrics).await;
            if turn.ends_session {
                sessions.end(SessionContext::of(&turn), &metrics).await;
            }
            drop((slot, held));
        });
    }
}

impl EvalQueue {
    /// The client ended `session` (an MCP `DELETE`): its session evals run now, on this
    /// replica, whichever recorded its turns.
    pub fn end_session(&self, context: SessionContext) {
        let (Some(sessions), Ok(runtime)) = (&self.sessions, tokio::runtime::Handle::try_current())
        else {
            return;
        };
        if !context.policy.tracks_eval_sessions() {
            return;
        }
        let sessions = Arc::clone(sessions);
        let metrics = Arc::clone(&self.metrics);
        runtime.spawn(async move { sessions.end(context, &metrics).await });
    }

    /// Runs the session evals of every session that idled past `evals.session_idle_ms`, each
    /// once over the fleet, until `stop` resolves; `resolve` finds a session's route and key
    /// in the running config.
    pub async fn sweep_idle_sessions(
        &self,
        resolve: &dyn SessionResolver,
        stop: impl std::future::Future<Output = ()>,
    ) {
        let Some(sessions) = &self.sessions else {
            return;
        };
        let sweep = async {
            let mut every = tokio::time::interval(session::SWEEP_INTERVAL);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                sessions
                    .sweep(resolve, &self.metrics, self.config.max_concurrency)
                    .await;
            }
        };
        tokio::select! {
            () = sweep => {}
            () = stop => {}
        }
    }
}

#[cfg(test)]
mod tests;
