//! What stands between a judged check and the party it asks: the verdict cache, the circuit
//! breaker, the concurrency limit with its bounded queue shared fairly between client keys,
//! and retries with backoff — all within one deadline per verdict.
//!
//! Tenants are kept apart in two ways. The breaker counts only the judge's own failures
//! ([`Fault::Judge`]: connect errors, timeouts, 429, 5xx), never what a client's content can
//! provoke ([`Fault::Input`]: other 4xx, a reply that is not a verdict, a handler that exits
//! non-zero), so no key can open it for the others. And each key gets a share of the
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
use tokio::sync::oneshot;
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

/// A gate's concurrency limit and queue, and each key's part of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    pub max_concurrency: usize,
    pub max_queue: usize,
    /// A key's most calls in flight; `None`: a fair share, `max_concurrency` divided by the
    /// keys with calls in flight or waiting, rounded up.
    pub concurrency_per_key: Option<usize>,
    /// A key's most calls waiting; `None`: a fair share of `max_queue`, as above.
    pub queue_per_key: Option<usize>,
}

impl Capacity {
    /// Fair shares of `max_concurrency` and `max_queue`.
    pub fn fair(max_concurrency: usize, max_queue: usize) -> Capacity {
        Capacity {
            max_concurrency,
            max_queue,
            concurrency_per_key: None,
            queue_per_key: None,
        }
    }

    fn concurrency_share(&self, active: usize) -> usize {
        share(self.max_concurrency, self.concurrency_per_key, active)
    }

    fn queue_share(&self, active: usize) -> usize {
        share(self.max_queue, self.queue_per_key, active)
    }
}

fn share(limit: usize, fixed: Option<usize>, active: usize) -> usize {
    fixed
        .unwrap_or_else(|| limit.div_ceil(active.max(1)))
        .max(1)
}

/// The gate of one judge, endpoint or handler, shared by every request that asks it.
pub struct Gate {
    /// The `judge` metrics label.
    pub label: String,
    retry: RetryConfig,
    breaker_config: BreakerConfig,
    capacity: Capacity,
    slots: Mutex<Slots>,
    breaker: Mutex<Breaker>,
    cache: Option<Mutex<Cache>>,
    jitter: AtomicU64,
}

/// The concurrency limit and its queue: a call runs when the limit and its key's share allow,
/// else waits in its key's queue; freed slots go round the keys with waiters in turn.
#[derive(Default)]
struct Slots {
    in_flight: usize,
    waiting: usize,
    /// Keys with calls in flight or waiting (and only those: the shares divide by their number).
    tenants: HashMap<Tenant, TenantSlots>,
    /// Keys with waiters, in the order they are next served.
    turn: VecDeque<Tenant>,
    next_id: u64,
}

#[derive(Default)]
struct TenantSlots {
    in_flight: usize,
    queue: VecDeque<(u64, oneshot::Sender<Grant>)>,
}

/// What a waiting call is told.
#[derive(Debug)]
enum Grant {
    /// A slot, already counted as in flight.
    Run,
    /// The queue was full and a key under its share needed the place.
    PushedOut,
}

#[derive(Default)]
struct Breaker {
    failures: u32,
    /// While set and in the future, calls fail at once; once past, one trial call is let through.
    open_until: Option<Instant>,
    trial_in_flight: bool,
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

fn overloaded() -> JudgeError {
    JudgeError::new(
        ErrorKind::Overloaded,
        "the concurrency limit and its queue (or this key's share of them) are full",
    )
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
            breaker: Mutex::new(Breaker::default()),
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
            Err(e) => {
                metrics
                    .judges
                    .errors
                    .get_or_create(&JudgeErrorLabels {
                        judge: self.label.clone(),
                        kind: e.kind.as_str(),
                    })
                    .inc();
            }
        }
        result
    }

    async fn call_uncached<F, Fut>(
        &self,
        metrics: &Metrics,
        tenant: Tenant,
        deadline: Instant,
        attempt: &mut F,
    ) -> Result<Verdict, JudgeError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Verdict, AttemptError>>,
    {
        let mut tries = 0u32;
        loop {
            // Held by the breaker's one trial call, if this is it; dropped (a cancelled call)
            // it frees the trial for the next call.
            let trial = self.admit_through_breaker()?;
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
                    self.record(metrics, Outcome::Answered, trial);
                    return Ok(verdict);
                }
                Err(_) => {
                    self.record(metrics, Outcome::Failed, trial);
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
            self.record(metrics, outcome, trial);
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

    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for `tenant` at once, or a place in its queue until `deadline`. Refused when the
    /// tenant's queue holds its share, or the whole queue is full and no key over its share
    /// can give up a place.
    async fn acquire(
        &self,
        metrics: &Metrics,
        tenant: Tenant,
        deadline: Instant,
    ) -> Result<Permit<'_>, JudgeError> {
        let (id, rx) = {
            let mut s = self.slots();
            let s = &mut *s;
            s.tenants.entry(tenant).or_default();
            let active = s.tenants.len();
            let (own_in_flight, own_waiting) = s
                .tenants
                .get(&tenant)
                .map_or((0, 0), |t| (t.in_flight, t.queue.len()));
            if s.in_flight < self.capacity.max_concurrency
                && own_in_flight < self.capacity.concurrency_share(active)
                && own_waiting == 0
            {
                s.start(tenant);
                return Ok(Permit { gate: self, tenant });
            }
            let queue_share = self.capacity.queue_share(active);
            if own_waiting >= queue_share
                || (s.waiting >= self.capacity.max_queue && !s.push_out(queue_share))
            {
                s.forget_if_idle(tenant);
                return Err(overloaded());
            }
            let (tx, rx) = oneshot::channel();
            let id = s.next_id;
            s.next_id = s.next_id.wrapping_add(1);
            if let Some(t) = s.tenants.get_mut(&tenant) {
                if t.queue.is_empty() {
                    s.turn.push_back(tenant);
                }
                t.queue.push_back((id, tx));
            }
            s.waiting += 1;
            (id, rx)
        };
        // Leaves the queue however the wait ends, a cancelled call included.
        let mut slot = QueueSlot::enter(self, metrics, tenant, id, rx);
        let Some(rx) = slot.rx.as_mut() else {
            return Err(overloaded());
        };
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(Grant::Run)) => {
                slot.rx = None;
                Ok(Permit { gate: self, tenant })
            }
            Ok(Ok(Grant::PushedOut)) => Err(overloaded()),
            Ok(Err(_)) => Err(JudgeError::new(ErrorKind::Overloaded, "the gate is closed")),
            Err(_) => Err(JudgeError::new(
                ErrorKind::Timeout,
                "no verdict before the deadline (waiting for the concurrency limit)",
            )),
        }
    }

    /// Gives back `tenant`'s slot and hands free slots to waiters.
    fn release(&self, tenant: Tenant) {
        let mut s = self.slots();
        s.finish(tenant);
        s.settle(tenant, &self.capacity);
    }

    /// Fails at once while the breaker is open; after `open_ms`, lets one trial call through
    /// (the returned guard marks it).
    fn admit_through_breaker(&self) -> Result<Option<Trial<'_>>, JudgeError> {
        let mut b = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
        let Some(until) = b.open_until else {
            return Ok(None);
        };
        if Instant::now() < until || b.trial_in_flight {
            return Err(JudgeError::new(
                ErrorKind::CircuitOpen,
                "the circuit breaker is open after repeated failures",
            ));
        }
        b.trial_in_flight = true;
        Ok(Some(Trial(self)))
    }

    /// Counts a call's outcome: `failures` of the judge's own in a row open the breaker; an
    /// answer (a verdict, or a reply about the input) closes it. The trial's own result (and
    /// only it) ends the trial.
    fn record(&self, metrics: &Metrics, outcome: Outcome, trial: Option<Trial<'_>>) {
        let mut b = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = trial {
            std::mem::forget(t);
            b.trial_in_flight = false;
        }
        if outcome == Outcome::Answered {
            b.failures = 0;
            if b.open_until.take().is_some() {
                drop(b);
                metrics
                    .judges
                    .circuit_open
                    .get_or_create(&self.labels())
                    .set(0);
            }
            return;
        }
        b.failures = b.failures.saturating_add(1);
        if b.failures >= self.breaker_config.failures {
            b.open_until =
                Some(Instant::now() + Duration::from_millis(self.breaker_config.open_ms));
            drop(b);
            metrics
                .judges
                .circuit_open
                .get_or_create(&self.labels())
                .set(1);
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

/// The breaker's trial call. Ended by [`Gate::record`]; dropped before that (the call was
/// cancelled, or found no permit), it frees the trial for the next call.
struct Trial<'a>(&'a Gate);

impl Drop for Trial<'_> {
    fn drop(&mut self) {
        let mut b = self.0.breaker.lock().unwrap_or_else(|e| e.into_inner());
        b.trial_in_flight = false;
    }
}

impl Slots {
    fn start(&mut self, tenant: Tenant) {
        self.in_flight += 1;
        if let Some(t) = self.tenants.get_mut(&tenant) {
            t.in_flight += 1;
        }
    }

    fn finish(&mut self, tenant: Tenant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(t) = self.tenants.get_mut(&tenant) {
            t.in_flight = t.in_flight.saturating_sub(1);
        }
    }

    /// Hands free slots to waiters: the first key in turn below its share is served and goes
    /// to the back of the turn.
    fn dispatch(&mut self, capacity: &Capacity) {
        while self.in_flight < capacity.max_concurrency {
            let share = capacity.concurrency_share(self.tenants.len());
            let tenants = &self.tenants;
            let Some(pos) = self.turn.iter().position(|t| {
                tenants
                    .get(t)
                    .is_some_and(|t| t.in_flight < share && !t.queue.is_empty())
            }) else {
                return;
            };
            let Some(tenant) = self.turn.remove(pos) else {
                return;
            };
            let Some(t) = self.tenants.get_mut(&tenant) else {
                continue;
            };
            let Some((_, tx)) = t.queue.pop_front() else {
                continue;
            };
            if !t.queue.is_empty() {
                self.turn.push_back(tenant);
            }
            self.waiting = self.waiting.saturating_sub(1);
            // A waiter leaves its queue before it drops its receiver, so this reaches it.
            if tx.send(Grant::Run).is_ok() {
                self.start(tenant);
            }
        }
    }

    /// Frees a place in the full queue for a key under `share`: the key with the longest
    /// queue over its share gives up its newest waiter. False when no key is over it.
    fn push_out(&mut self, share: usize) -> bool {
        let Some((&victim, _)) = self
            .tenants
            .iter()
            .filter(|(_, t)| t.queue.len() > share)
            .max_by_key(|(_, t)| t.queue.len())
        else {
            return false;
        };
        let Some(t) = self.tenants.get_mut(&victim) else {
            return false;
        };
        let Some((_, tx)) = t.queue.pop_back() else {
            return false;
        };
        if t.queue.is_empty() {
            self.turn.retain(|k| *k != victim);
        }
        self.waiting = self.waiting.saturating_sub(1);
        let _ = tx.send(Grant::PushedOut);
        true
    }

    /// Removes a waiter that is still queued (its wait ended otherwise); true if it was.
    fn leave(&mut self, tenant: Tenant, id: u64) -> bool {
        let Some(t) = self.tenants.get_mut(&tenant) else {
            return false;
        };
        let Some(pos) = t.queue.iter().position(|(i, _)| *i == id) else {
            return false;
        };
        t.queue.remove(pos);
        if t.queue.is_empty() {
            self.turn.retain(|k| *k != tenant);
        }
        self.waiting = self.waiting.saturating_sub(1);
        true
    }

    /// After `tenant` gave something back: forgotten if idle (the others' shares grow), and
    /// free slots handed out.
    fn settle(&mut self, tenant: Tenant, capacity: &Capacity) {
        self.forget_if_idle(tenant);
        self.dispatch(capacity);
    }

    /// A key with nothing in flight or waiting no longer counts towards the shares.
    fn forget_if_idle(&mut self, tenant: Tenant) {
        if self
            .tenants
            .get(&tenant)
            .is_some_and(|t| t.in_flight == 0 && t.queue.is_empty())
        {
            self.tenants.remove(&tenant);
        }
    }
}

/// A running call's slot, given back on drop.
struct Permit<'a> {
    gate: &'a Gate,
    tenant: Tenant,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.gate.release(self.tenant);
    }
}

/// A place in a gate's queue, left on drop (a cancelled wait included): still queued, it is
/// removed; granted a slot it did not take (cancelled at that moment), the slot is given back.
struct QueueSlot<'a> {
    gate: &'a Gate,
    tenant: Tenant,
    id: u64,
    /// `None` once the slot was taken.
    rx: Option<oneshot::Receiver<Grant>>,
    depth: prometheus_client::metrics::gauge::Gauge,
}

impl<'a> QueueSlot<'a> {
    /// Takes the place already queued.
    fn enter(
        gate: &'a Gate,
        metrics: &Metrics,
        tenant: Tenant,
        id: u64,
        rx: oneshot::Receiver<Grant>,
    ) -> QueueSlot<'a> {
        let depth = metrics
            .judges
            .queue_depth
            .get_or_create(&gate.labels())
            .clone();
        depth.inc();
        QueueSlot {
            gate,
            tenant,
            id,
            rx: Some(rx),
            depth,
        }
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.depth.dec();
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        let mut s = self.gate.slots();
        // Out of the queue already: granted (the grant still in the channel) or pushed out.
        if !s.leave(self.tenant, self.id) && matches!(rx.try_recv(), Ok(Grant::Run)) {
            s.finish(self.tenant);
        }
        s.settle(self.tenant, &self.gate.capacity);
    }
}

#[cfg(test)]
mod tests;
