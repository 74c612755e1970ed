//! What stands between a judged check and the party it asks: the verdict cache, the circuit
//! breaker, the concurrency limit with its bounded queue shared fairly between client keys,
//! and retries with backoff — all within one deadline per verdict.
//!
//! Tenants are kept apart in three ways. The breaker counts only the judge's own failures
//! ([`Fault::Judge`]: connect errors, timeouts, 429, 5xx), never what a client's content can
//! provoke outright ([`Fault::Input`]: other 4xx, a reply that is not a verdict, a handler that
//! exits non-zero). Some of the judge's own failures can still be provoked: a timeout (an input
//! crafted to make the judge slow, a handler that loops on some input) or a 5xx (an endpoint
//! that crashes on some input) looks exactly like a judge that is down. So each key has a
//! breaker of its own ([`Breakers`]): a key's failures open its own breaker only, and no key
//! can open one for another. The price is that a judge down for everyone is found out by each
//! key with calls, after `breaker.failures` calls of its own. And each key gets a share of the
//! concurrency limit and of the queue ([`Capacity`]), so one key's flood waits behind its own
//! calls, not in front of another key's.

use super::{ErrorKind, JudgeError, Verdict};
use crate::config::{BreakerConfig, CacheConfig, RetryConfig};
use crate::metrics::{JudgeErrorLabels, JudgeLabels, Metrics};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Whose call it is: the client key's id; `None` (no keys configured) is one tenant.
pub type Tenant = Option<&'static str>;

/// Who a failed attempt tells something about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The judge is down, slow or refusing work (connect errors, 429, 5xx, a process that
    /// cannot start): counts towards opening the breaker.
    Judge,
    /// The judge answered, but about this input: a 4xx other than 429 (input too long, say), a
    /// reply without a readable verdict, a handler that exited non-zero or wrote no verdict.
    /// A client's content can provoke each of these, so they never open the shared breaker;
    /// like a verdict, they show the judge is up.
    Input,
}

/// How one attempt failed: retried when `retryable` (connect errors, 429, 5xx) and time is left.
#[derive(Debug)]
pub struct AttemptError {
    pub error: JudgeError,
    pub retryable: bool,
    pub fault: Fault,
}

impl AttemptError {
    /// A failure of the judge itself.
    pub fn judge(kind: ErrorKind, detail: impl Into<String>, retryable: bool) -> Self {
        AttemptError {
            error: JudgeError::new(kind, detail),
            retryable,
            fault: Fault::Judge,
        }
    }

    /// An answer about the input that is no verdict (see [`Fault::Input`]); never retried.
    pub fn input(kind: ErrorKind, detail: impl Into<String>) -> Self {
        AttemptError {
            error: JudgeError::new(kind, detail),
            retryable: false,
            fault: Fault::Input,
        }
    }
}

/// The gate of one judge, endpoint or handler, shared by every request that asks it.
pub struct Gate {
    /// The `judge` metrics label.
    pub label: String,
    retry: RetryConfig,
    breaker_config: BreakerConfig,
    capacity: Capacity,
    slots: Mutex<Slots>,
    breakers: Mutex<Breakers>,
    cache: Option<Mutex<Cache>>,
    jitter: AtomicU64,
}

#[derive(Default)]
struct Breaker {
    failures: u32,
    /// While set and in the future, calls fail at once; once past, one trial call is let through.
    open_until: Option<Instant>,
    trial_in_flight: bool,
}

impl Breaker {
    /// A breaker with nothing to remember is the same as none.
    fn idle(&self) -> bool {
        self.failures == 0 && self.open_until.is_none() && !self.trial_in_flight
    }
}

/// One breaker per tenant. A tenant has an entry only while its breaker remembers something
/// (failures, open, a trial under way), so the map is bounded by the keys with failing calls.
#[derive(Default)]
struct Breakers {
    per_tenant: HashMap<Tenant, Breaker>,
    /// Breakers open: the `circuit_open` gauge is 1 while any is.
    open: usize,
}
struct Cache {
    entries: HashMap<u64, (Instant, Verdict)>,
    order: VecDeque<u64>,
    max: usize,
    ttl: Duration,
}

/// What the breaker makes of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A verdict, or an answer about the input: the judge is up.
    Answered,
    /// The judge's own failure.
    Failed,
}

impl Gate {
    /// A gate with the judges' default breaker and cache (for endpoints and handlers, which
    /// `judges:` does not configure), shared fairly between keys.
    pub fn with_defaults(
        label: String,
        retry: RetryConfig,
        max_concurrency: usize,
        max_queue: usize,
    ) -> Gate {
        Gate::new(
            label,
            retry,
            BreakerConfig::default(),
            Capacity::fair(max_concurrency, max_queue),
            &CacheConfig::default(),
        )
    }

    pub fn new(
        label: String,
        retry: RetryConfig,
        breaker: BreakerConfig,
        capacity: Capacity,
        cache: &CacheConfig,
    ) -> Gate {
        Gate {
            label,
            retry,
            breaker_config: breaker,
            capacity,
            slots: Mutex::new(Slots::default()),
            breakers: Mutex::new(Breakers::default()),
            cache: (cache.entries > 0).then(|| {
                Mutex::new(Cache {
                    entries: HashMap::new(),
                    order: VecDeque::new(),
                    max: cache.entries,
                    ttl: Duration::from_millis(cache.ttl_ms),
                })
            }),
            jitter: AtomicU64::new(std::hash::RandomState::new().build_hasher().finish() | 1),
        }
    }

    fn labels(&self) -> JudgeLabels {
        JudgeLabels {
            judge: self.label.clone(),
        }
    }

    /// A verdict for `key` (a hash of everything the call sends; `None`: not cached), from the
    /// cache or by calling `attempt` — retried as the retry policy allows — by `deadline`,
    /// within `tenant`'s share of the concurrency limit and queue.
    pub async fn call<F, Fut>(
        &self,
        metrics: &Metrics,
        tenant: Tenant,
        key: Option<u64>,
        deadline: Instant,
        mut attempt: F,
    ) -> Result<Verdict, JudgeError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Verdict, AttemptError>>,
    {
        if let Some(v) = key.and_then(|k| self.cached(k)) {
            metrics
                .judges
                .cache_hits
                .get_or_create(&self.labels())
                .inc();
            return Ok(v);
        }
        let result = self
            .call_uncached(metrics, tenant, deadline, &mut attempt)
            .await;
        match &result {
            Ok(v) => {
                if let Some(k) = key {
                    self.remember(k, v);
                }
            }
            Err(e) => self.count_error(metrics, e),
        }
        result
    }

    /// Like [`Gate::call`] for an answer that is not a verdict (a judged metric's list of
    /// verdicts, G-Eval's generated steps): never cached.
    pub async fn call_fresh<T, F, Fut>(
        &self,
        metrics: &Metrics,
        tenant: Tenant,
        deadline: Instant,
        mut attempt: F,
    ) -> Result<T, JudgeError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, AttemptError>>,
    {
        let result = self
            .call_uncached(metrics, tenant, deadline, &mut attempt)
            .await;
        if let Err(e) = &result {
            self.count_error(metrics, e);
        }
        result
    }

    fn count_error(&self, metrics: &Metrics, e: &JudgeError) {
        metrics
            .judges
            .errors
            .get_or_create(&JudgeErrorLabels {
                judge: self.label.clone(),
                kind: e.kind.as_str(),
            })
            .inc();
    }

    async fn call_uncached<T, F, Fut>(
        &self,
        metrics: &Metrics,
        tenant: Tenant,
        deadline: Instant,
        attempt: &mut F,
    ) -> Result<T, JudgeError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, AttemptError>>,
    {
        let mut tries = 0u32;
        loop {
            // Held by the breaker's one trial call, if this is it; dropped (a cancelled call)
            // it frees the trial for the next call.
            let trial = self.admit_through_breaker(tenant)?;
            let permit = self.acquire(metrics, tenant, deadline).await?;
            let started = std::time::Instant::now();
            let outcome = tokio::time::timeout_at(deadline, attempt()).await;
            drop(permit);
            metrics
                .judges
                .calls
                .get_or_create(&self.labels())
                .observe(started.elapsed().as_secs_f64());
            let failed = match outcome {
                Ok(Ok(verdict)) => {
                    self.record(metrics, tenant, Outcome::Answered, trial);
                    return Ok(verdict);
                }
                Err(_) => {
                    self.record(metrics, tenant, Outcome::Failed, trial);
                    return Err(JudgeError::new(
                        ErrorKind::Timeout,
                        "no verdict before the deadline",
                    ));
                }
                Ok(Err(failed)) => failed,
            };
            let outcome = match failed.fault {
                Fault::Judge => Outcome::Failed,
                Fault::Input => Outcome::Answered,
            };
            self.record(metrics, tenant, outcome, trial);
            if !failed.retryable || tries >= self.retry.max_retries {
                return Err(failed.error);
            }
            let delay = self.backoff(tries);
            if Instant::now() + delay >= deadline {
                return Err(failed.error);
            }
            tries += 1;
            metrics.judges.retries.get_or_create(&self.labels()).inc();
            tokio::time::sleep(delay).await;
        }
    }

    /// Fails at once while `tenant`'s breaker is open; after `open_ms`, lets one trial call
    /// through (the returned guard marks it).
    fn admit_through_breaker(&self, tenant: Tenant) -> Result<Option<Trial<'_>>, JudgeError> {
        let mut all = self.breakers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(b) = all.per_tenant.get_mut(&tenant) else {
            return Ok(None);
        };
        let Some(until) = b.open_until else {
            return Ok(None);
        };
        if Instant::now() < until || b.trial_in_flight {
            return Err(JudgeError::new(
                ErrorKind::CircuitOpen,
                "the circuit breaker is open after repeated failures of this key's calls",
            ));
        }
        b.trial_in_flight = true;
        Ok(Some(Trial(self, tenant)))
    }

    /// Counts a call's outcome in `tenant`'s breaker: `failures` of the judge's own in a row
    /// open it; an answer (a verdict, or a reply about the input) closes it. The trial's own
    /// result (and only it) ends the trial.
    fn record(
        &self,
        metrics: &Metrics,
        tenant: Tenant,
        outcome: Outcome,
        trial: Option<Trial<'_>>,
    ) {
        let mut all = self.breakers.lock().unwrap_or_else(|e| e.into_inner());
        let open_before = all.open;
        let b = all.per_tenant.entry(tenant).or_default();
        if let Some(t) = trial {
            std::mem::forget(t);
            b.trial_in_flight = false;
        }
        let mut opened = 0isize;
        if outcome == Outcome::Answered {
            b.failures = 0;
            if b.open_until.take().is_some() {
                opened = -1;
            }
        } else {
            b.failures = b.failures.saturating_add(1);
            if b.failures >= self.breaker_config.failures {
                if b.open_until.is_none() {
                    opened = 1;
                }
                b.open_until =
                    Some(Instant::now() + Duration::from_millis(self.breaker_config.open_ms));
            }
        }
        if b.idle() {
            all.per_tenant.remove(&tenant);
        }
        all.open = all.open.saturating_add_signed(opened);
        let open_now = all.open;
        drop(all);
        if (open_before > 0) != (open_now > 0) {
            metrics
                .judges
                .circuit_open
                .get_or_create(&self.labels())
                .set(i64::from(open_now > 0));
        }
    }

    /// Exponential backoff with equal jitter: half the step, plus a random part of the other half.
    fn backoff(&self, tries: u32) -> Duration {
        let r = &self.retry;
        let step = (r.base_delay_ms as f64 * r.exponential_base.powi(tries as i32))
            .min(r.max_delay_ms as f64);
        // xorshift64: no lock, no extra crate; quality is beside the point here.
        let mut x = self.jitter.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.jitter.store(x, Ordering::Relaxed);
        let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
        Duration::from_secs_f64((step / 2.0 + unit * step / 2.0) / 1000.0)
    }

    fn cached(&self, key: u64) -> Option<Verdict> {
        let mut c = self
            .cache
            .as_ref()?
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let ttl = c.ttl;
        match c.entries.get(&key) {
            Some((at, v)) if at.elapsed() < ttl => Some(v.clone()),
            Some(_) => {
                c.entries.remove(&key);
                None
            }
            None => None,
        }
    }

    fn remember(&self, key: u64, verdict: &Verdict) {
        let Some(cache) = &self.cache else {
            return;
        };
        let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
        if c.entries
            .insert(key, (Instant::now(), verdict.clone()))
            .is_none()
        {
            c.order.push_back(key);
        }
        let Cache {
            entries,
            order,
            max,
            ..
        } = &mut *c;
        while entries.len() > *max {
            let Some(old) = order.pop_front() else { break };
            entries.remove(&old);
        }
        // Keys expired and asked again appear twice; keep the order list near the map's size.
        if order.len() > 2 * *max {
            order.retain(|k| entries.contains_key(k));
        }
    }
}

/// A tenant's breaker's trial call. Ended by [`Gate::record`]; dropped before that (the call
/// was cancelled, or found no permit), it frees the trial for the tenant's next call.
struct Trial<'a>(&'a Gate, Tenant);

impl Drop for Trial<'_> {
    fn drop(&mut self) {
        let mut all = self.0.breakers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = all.per_tenant.get_mut(&self.1) {
            b.trial_in_flight = false;
        }
    }
}

mod slots;

pub use slots::Capacity;
use slots::Slots;

#[cfg(test)]
mod tests;
