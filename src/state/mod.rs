//! State shared across requests and replicas — one room, one trait per concern, an in-process
//! and a Redis implementation of each.
//!
//! Today's concern is the keys' limits over time ([`LimitStore`]: `rpm_limit`, `tpm_limit`,
//! `max_budget`). A request *reserves* before it is sent (one request, its estimated tokens and
//! cost) and *settles* at its end with what the provider reported; a reservation that is never
//! settled (a replica killed mid-request) expires. The request path never calls a store
//! directly: it takes a [`Reservation`] from [`State::reserve`] and records usage on it; the
//! reservation settles itself when dropped.
//!
//! Another state concern plugs in the same way: a trait of its operations here (its own file),
//! implemented by [`local`] (in process) and [`redis`] (on the same [`redis::Conn`]), reached
//! through [`State`], whose `on_error` and metrics apply to it too.

pub mod eval_sessions;
pub mod limits;
pub mod local;
pub mod redis;
pub mod sessions;

pub use limits::{
    micro_usd, Ask, BudgetLeft, BudgetLimit, Decision, KeyLimits, Limit, Quota, Used, Window,
};

use crate::config::state::{OnStoreError, StateConfig};
use crate::metrics::Metrics;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why a store could not answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("the state store did not answer within {0} ms")]
    Timeout(u64),
    #[error("the state store is unreachable: {0}")]
    Unreachable(String),
    #[error("the state store answered something unexpected: {0}")]
    Protocol(String),
}

pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The keys' limits over time, counted where every replica sees the same counts.
///
/// - requests: a sliding log of the last minute's admissions (exact: at most `rpm` in any
///   60 s);
/// - tokens: a sliding minute of one-second buckets, reservations included (a request is
///   admitted while the window holds less than `tpm` with its reservation, or when the window
///   is empty, so one request larger than the limit is not refused forever);
/// - budget: spend settled plus spend reserved, in a fixed window that starts at first use and
///   lasts `budget_duration` (none: for ever); a request is admitted only when its reservation
///   fits whole.
pub trait LimitStore: Send + Sync {
    /// Admits `ask` for `key` against `limits` and reserves it under `id` for `ttl_ms`, or
    /// refuses it; atomically, so concurrent requests on any replica never pass one check
    /// together.
    fn reserve<'a>(
        &'a self,
        key: &'a str,
        limits: &'a KeyLimits,
        ask: Ask,
        id: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, Decision>;
    /// Replaces reservation `id` by what was `used` (counted even when the reservation has
    /// expired or was never made).
    fn settle<'a>(
        &'a self,
        key: &'a str,
        limits: &'a KeyLimits,
        id: &'a str,
        used: Used,
    ) -> StoreFuture<'a, ()>;
    /// `key`'s counts now, without changing them.
    fn usage<'a>(&'a self, key: &'a str, limits: &'a KeyLimits) -> StoreFuture<'a, Quota>;
    /// Forgets every count of `key` (reservations in flight settle as new usage).
    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()>;
    /// A round trip, for `/readyz`.
    fn ping(&self) -> StoreFuture<'_, ()>;
    /// `memory` or `redis`, for metrics and `/readyz`.
    fn kind(&self) -> &'static str;
}

/// The state room as the proxy holds it: the backend, what to do when it fails, its metrics.
pub struct State {
    limits: Arc<dyn LimitStore>,
    /// MCP sessions' tool calls and removed tools.
    sessions: Arc<dyn sessions::SessionStore>,
    /// The sessions of the session-level evals: their spend, last turn and end.
    eval_sessions: Arc<dyn eval_sessions::EvalSessions>,
    on_error: OnStoreError,
    timeout: Duration,
    reservation_ttl_ms: u64,
    /// Shown by `/readyz` (any password hidden).
    shown_url: Option<String>,
    /// When a `fail_open` pass was last logged (ms since `started`), so a store outage logs
    /// once per interval, not once per request.
    last_fail_open_log: AtomicU64,
    started: Instant,
    metrics: Arc<Metrics>,
}

/// How long a reservation outlives the longest request (`timeouts.total_ms`): time enough for
/// its settlement's round trip.
const RESERVATION_MARGIN_MS: u64 = 5_000;

/// How often a `fail_open` outage is logged.
const FAIL_OPEN_LOG_INTERVAL_MS: u64 = 10_000;

impl State {
    /// The store `config` names. A Redis store connects lazily (and reconnects): guardwire
    /// starts while it is down, and `on_error` decides meanwhile.
    /// (`per_core_workers`: the `server.runtime: per_core` workers, each with its own
    /// connection; 0 under `work_stealing`.)
    pub fn new(
        config: &StateConfig,
        total_ms: u64,
        per_core_workers: usize,
        metrics: Arc<Metrics>,
    ) -> Result<State, String> {
        let timeout = Duration::from_millis(config.timeout_ms);
        type Stores = (
            Arc<dyn LimitStore>,
            Arc<dyn sessions::SessionStore>,
            Arc<dyn eval_sessions::EvalSessions>,
        );
        let ((limits, sessions, eval_sessions), shown_url): (Stores, _) = match &config.url {
            None => (
                (
                    Arc::new(local::LocalLimits::default()),
                    Arc::new(sessions::LocalSessions::new(
                        config.max_sessions_per_key,
                        config.max_sessions,
                    )),
                    Arc::new(eval_sessions::LocalEvalSessions::new(
                        config.max_sessions_per_key,
                        config.max_sessions,
                        eval_sessions::LOCAL_MAX_BYTES,
                    )),
                ),
                None,
            ),
            Some(url) => {
                let conn = Arc::new(redis::Conn::new(url, timeout, per_core_workers)?);
                (
                    (
                        Arc::new(redis::RedisLimits::new(
                            Arc::clone(&conn),
                            &config.key_prefix,
                        )),
                        Arc::new(sessions::redis::RedisSessions::new(
                            Arc::clone(&conn),
                            &config.key_prefix,
                            config.session_ttl_ms,
                            config.max_sessions_per_key,
                        )),
                        Arc::new(eval_sessions::redis::RedisEvalSessions::new(
                            conn,
                            &config.key_prefix,
                            config.max_sessions_per_key,
                        )),
                    ),
                    Some(crate::config::state::without_password(url)),
                )
            }
        };
        Ok(State {
            limits,
            sessions,
            eval_sessions,
            on_error: config.on_error,
            timeout,
            // A request lives at most `timeouts.total_ms`; its reservation a little longer, so
            // one settled at the very end still finds it.
            reservation_ttl_ms: total_ms.saturating_add(RESERVATION_MARGIN_MS),
            shown_url,
            last_fail_open_log: AtomicU64::new(0),
            started: Instant::now(),
            metrics,
        })
    }

    /// Whether the state lives in a server (`state.url`): each operation a round trip.
    pub fn is_remote(&self) -> bool {
        self.shown_url.is_some()
    }

    /// The backend, for tests and the admin endpoints.
    pub fn limits(&self) -> &dyn LimitStore {
        &*self.limits
    }

    async fn timed<T>(&self, op: &'static str, fut: StoreFuture<'_, T>) -> Result<T, StoreError> {
        let at = Instant::now();
        let result = match tokio::time::timeout(self.timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::Timeout(self.timeout.as_millis() as u64)),
        };
        self.metrics
            .state
            .observe(self.limits.kind(), op, at.elapsed(), result.is_err());
        result
    }

    /// Step 4b: reserves `ask` for a key with `limits`. `Ok(Err(..))`: refused (429), with the
    /// quota to show. A store that cannot answer: `Err` under `fail_closed` (503), an
    /// uncounted pass under `fail_open`.
    pub async fn reserve(
        self: &Arc<Self>,
        key: &'static str,
        limits: &Arc<KeyLimits>,
        ask: Ask,
        price: Option<crate::config::Price>,
    ) -> Result<Admission, StoreError> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let fut = self
            .limits
            .reserve(key, limits, ask, &id, self.reservation_ttl_ms);
        match self.timed("reserve", fut).await {
            Ok(Decision::Admitted(quota)) => Ok(Admission::Admitted {
                quota,
                reservation: Reservation {
                    state: Arc::clone(self),
                    key,
                    limits: Arc::clone(limits),
                    id,
                    price,
                    asked: ask,
                    used: Mutex::new(Used::default()),
                },
            }),
            Ok(Decision::Refused {
                limit,
                retry_after_ms,
                quota,
            }) => {
                self.metrics.state.refused(limit);
                Ok(Admission::Refused {
                    limit,
                    retry_after_ms,
                    quota,
                })
            }
            Err(e) => match self.on_error {
                OnStoreError::FailClosed => {
                    self.metrics.state.failed_closed();
                    Err(e)
                }
                OnStoreError::FailOpen => {
                    self.metrics.state.failed_open();
                    self.log_fail_open(&e);
                    Ok(Admission::Unchecked)
                }
            },
        }
    }

    fn log_fail_open(&self, e: &StoreError) {
        // 0 means never logged.
        let now = self.started.elapsed().as_millis() as u64 + 1;
        let last = self.last_fail_open_log.load(Ordering::Relaxed);
        if (last == 0 || now >= last + FAIL_OPEN_LOG_INTERVAL_MS)
            && self
                .last_fail_open_log
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                error = %e,
                "state store unavailable: requests of limited keys pass uncounted (state.on_error: fail_open); logged at most every 10 s"
            );
        }
    }

    async fn settle(&self, key: &str, limits: &KeyLimits, id: &str, used: Used) {
        let fut = self.limits.settle(key, limits, id, used);
        if let Err(e) = self.timed("settle", fut).await {
            // The reservation expires on its own; the usage it stood for is not counted.
            tracing::debug!(key, error = %e, "a reservation could not be settled; it expires");
        }
    }

    /// Opens an MCP session's view for an admitted request (see [`sessions::open`]): refused
    /// when the store cannot answer under `fail_closed`.
    pub async fn open_session(
        &self,
        key: sessions::Key,
    ) -> Result<sessions::SessionView, StoreError> {
        let fail_open = self.on_error == OnStoreError::FailOpen;
        let at = Instant::now();
        let view = sessions::open(&self.sessions, key, fail_open).await;
        self.metrics.state.observe(
            self.limits.kind(),
            "session_load",
            at.elapsed(),
            view.is_err(),
        );
        if view.is_err() {
            self.metrics.state.failed_closed();
        }
        view
    }

    /// Adds a turn to its session for the session-level evals; returns the session's spend
    /// with it.
    pub async fn record_eval_turn(
        &self,
        session: &eval_sessions::SessionRef,
        spent: eval_sessions::Spent,
        last: eval_sessions::Last<'_>,
        idle_ms: u64,
    ) -> Result<eval_sessions::Spent, StoreError> {
        let fut = self.eval_sessions.record(session, spent, last, idle_ms);
        self.timed("eval_session_record", fut).await
    }

    /// Step 4c, for a policy with `cost_budget` validators: the session's spend so far, and
    /// the handle that adds this exchange's when it ends. `Err`: the store did not answer (the
    /// validators' `on_error` decides).
    pub async fn session_spend(
        self: &Arc<Self>,
        session: eval_sessions::SessionRef,
        idle_ms: u64,
        price: Option<crate::config::Price>,
    ) -> Result<SessionSpend, StoreError> {
        let before = self
            .timed("session_spent", self.eval_sessions.spent(&session))
            .await?;
        Ok(SessionSpend {
            state: Arc::clone(self),
            session,
            idle_ms,
            price,
            before,
            done: Mutex::new((None, None)),
        })
    }

    /// Claims up to `max` sessions that ended by idling.
    pub async fn claim_idle_sessions(
        &self,
        max: usize,
    ) -> Result<Vec<eval_sessions::Ended>, StoreError> {
        self.timed("eval_session_claim", self.eval_sessions.claim_due(max))
            .await
    }

    /// Claims a session its client ended.
    pub async fn claim_eval_session(
        &self,
        session: &eval_sessions::SessionRef,
    ) -> Result<Option<eval_sessions::Ended>, StoreError> {
        self.timed("eval_session_claim", self.eval_sessions.claim(session))
            .await
    }

    /// A key's counts, for the admin endpoint.
    pub async fn usage(&self, key: &str, limits: &KeyLimits) -> Result<Quota, StoreError> {
        self.timed("usage", self.limits.usage(key, limits)).await
    }

    /// Forgets a key's counts, for the admin endpoint.
    pub async fn reset(&self, key: &str) -> Result<(), StoreError> {
        self.timed("reset", self.limits.reset(key)).await
    }

    /// `/readyz`'s line: the backend, and whether it answers.
    pub async fn readiness(&self) -> (String, bool) {
        let kind = self.limits.kind();
        match self.timed("ping", self.limits.ping()).await {
            Ok(()) => (
                format!(
                    "state: {kind}{} ok",
                    self.shown_url
                        .as_deref()
                        .map(|u| format!(" {u}"))
                        .unwrap_or_default()
                ),
                true,
            ),
            Err(e) => (format!("state: {kind} unavailable ({e})"), false),
        }
    }
}

/// What [`State::reserve`] decided.
pub enum Admission {
    Admitted {
        quota: Quota,
        reservation: Reservation,
    },
    Refused {
        limit: Limit,
        retry_after_ms: Option<u64>,
        quota: Quota,
    },
    /// The store could not answer and `state.on_error` is `fail_open`.
    Unchecked,
}

/// An exchange's part in its session's spend (`cost_budget` validators): what the session had
/// spent before it, and — when dropped — its own spend added to the session (then what was
/// waiting for that, the exchange's eval turn, handed on).
pub struct SessionSpend {
    state: Arc<State>,
    session: eval_sessions::SessionRef,
    idle_ms: u64,
    /// The requested model's price, for the spend of the tokens recorded.
    price: Option<crate::config::Price>,
    before: eval_sessions::Spent,
    /// The exchange's spend once recorded, and what runs after it is added.
    done: Mutex<(Option<eval_sessions::Spent>, Option<AfterSpend>)>,
}

/// What waits for an exchange's spend to be in its session's (its eval turn, submitted so the
/// evals' session total counts it).
pub type AfterSpend = Box<dyn FnOnce() + Send>;

impl SessionSpend {
    /// The session's spend before this exchange.
    pub fn before(&self) -> eval_sessions::Spent {
        self.before
    }

    /// The exchange's tokens as counted when it ended (reported, or estimated; a count it
    /// has not makes the session's unknown), priced at the requested model's price. Nothing
    /// recorded: nothing was spent.
    pub fn record(
        &self,
        input: Option<u64>,
        output: Option<u64>,
        cache: crate::delta::CacheTokens,
    ) {
        let usd = match (input, output, self.price) {
            (Some(i), Some(o), Some(p)) => Some(micro_usd(p.usd_cached(i, o, cache))),
            _ => None,
        };
        self.done.lock().unwrap_or_else(|p| p.into_inner()).0 = Some(eval_sessions::Spent {
            input_tokens: input,
            output_tokens: output,
            micro_usd: usd,
        });
    }

    /// Runs `then` once this exchange's spend is in the session's.
    pub fn then(&self, then: AfterSpend) {
        self.done.lock().unwrap_or_else(|p| p.into_inner()).1 = Some(then);
    }
}

impl Drop for SessionSpend {
    fn drop(&mut self) {
        let (spent, then) =
            std::mem::take(&mut *self.done.lock().unwrap_or_else(|p| p.into_inner()));
        let Some(spent) = spent else {
            if let Some(then) = then {
                then();
            }
            return;
        };
        let (state, session, idle_ms) =
            (Arc::clone(&self.state), self.session.clone(), self.idle_ms);
        // A store round trip: off the answer's path.
        let add = async move {
            let fut = state.eval_sessions.record(
                &session,
                spent,
                eval_sessions::Last::Unchanged,
                idle_ms,
            );
            if let Err(e) = state.timed("session_spend", fut).await {
                // Counted in the store's error metric; the session's total misses this spend.
                tracing::debug!(route = %session.route, error = %e, "an exchange's spend could not be added to its session");
            }
            if let Some(then) = then {
                then();
            }
        };
        // Outside a runtime (a test dropping one) the spend is not added.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(add);
        }
    }
}

/// A request's reservation: settled when dropped, with the usage recorded on it (none
/// recorded: nothing was used — the request failed before the provider charged).
pub struct Reservation {
    state: Arc<State>,
    key: &'static str,
    limits: Arc<KeyLimits>,
    id: String,
    /// The requested model's price, for the spend of the tokens recorded.
    price: Option<crate::config::Price>,
    /// What it reserved: what it settles at once the request was sent and no usage was
    /// recorded (a client that went away before the answer: the provider bills it all).
    asked: Ask,
    used: Mutex<Used>,
}

impl Reservation {
    /// The request is being sent upstream: from now on, unless usage is recorded, it settles
    /// at what it reserved (never at nothing: the provider is paid for it).
    pub fn sent(&self) {
        *self.used.lock().unwrap_or_else(|p| p.into_inner()) = Used {
            tokens: self.asked.tokens,
            micro_usd: self.asked.micro_usd,
        };
    }

    /// The exchange's tokens as counted when it ended (reported, or estimated), priced at the
    /// requested model's price.
    pub fn record(
        &self,
        input: Option<u64>,
        output: Option<u64>,
        cache: crate::delta::CacheTokens,
    ) {
        let (input, output) = (input.unwrap_or(0), output.unwrap_or(0));
        let usd = self
            .price
            .map_or(0.0, |p| p.usd_cached(input, output, cache));
        *self.used.lock().unwrap_or_else(|p| p.into_inner()) = Used {
            tokens: input.saturating_add(output),
            micro_usd: micro_usd(usd),
        };
    }

    /// What is recorded rises to what was reserved, if below it.
    pub fn at_least_reserved(&self) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        used.tokens = used.tokens.max(self.asked.tokens);
        used.micro_usd = used.micro_usd.max(self.asked.micro_usd);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let used = *self.used.lock().unwrap_or_else(|p| p.into_inner());
        let (state, key, limits, id) = (
            Arc::clone(&self.state),
            self.key,
            Arc::clone(&self.limits),
            std::mem::take(&mut self.id),
        );
        // Settling is a store round trip: off the answer's path. Outside a runtime (a test
        // dropping one) the reservation expires instead.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { state.settle(key, &limits, &id, used).await });
        }
    }
}
