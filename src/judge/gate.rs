//! What stands between a judged check and the party it asks: the verdict cache, the circuit
//! breaker, the concurrency limit with its bounded queue, and retries with backoff — all within
//! one deadline per verdict.

use super::{ErrorKind, JudgeError, Verdict};
use crate::config::{BreakerConfig, CacheConfig, RetryConfig};
use crate::metrics::{JudgeErrorLabels, JudgeLabels, Metrics};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// How one attempt failed: retried when `retryable` (connect errors, 429, 5xx) and time is left.
#[derive(Debug)]
pub struct AttemptError {
    pub error: JudgeError,
    pub retryable: bool,
}

impl AttemptError {
    pub fn new(kind: ErrorKind, detail: impl Into<String>, retryable: bool) -> Self {
        AttemptError {
            error: JudgeError::new(kind, detail),
            retryable,
        }
    }
}

/// The gate of one judge, endpoint or handler, shared by every request that asks it.
pub struct Gate {
    /// The `judge` metrics label.
    pub label: String,
    retry: RetryConfig,
    breaker_config: BreakerConfig,
    permits: Semaphore,
    waiting: AtomicUsize,
    max_queue: usize,
    breaker: Mutex<Breaker>,
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

struct Cache {
    entries: HashMap<u64, (Instant, Verdict)>,
    order: VecDeque<u64>,
    max: usize,
    ttl: Duration,
}

impl Gate {
    /// A gate with the judges' default breaker and cache (for endpoints and handlers, which
    /// `judges:` does not configure).
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
            max_concurrency,
            max_queue,
            &CacheConfig::default(),
        )
    }

    pub fn new(
        label: String,
        retry: RetryConfig,
        breaker: BreakerConfig,
        max_concurrency: usize,
        max_queue: usize,
        cache: &CacheConfig,
    ) -> Gate {
        Gate {
            label,
            retry,
            breaker_config: breaker,
            permits: Semaphore::new(max_concurrency.min(Semaphore::MAX_PERMITS)),
            waiting: AtomicUsize::new(0),
            max_queue,
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
    /// cache or by calling `attempt` — retried as the retry policy allows — by `deadline`.
    pub async fn call<F, Fut>(
        &self,
        metrics: &Metrics,
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
        let result = self.call_uncached(metrics, deadline, &mut attempt).await;
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
            let permit = self.acquire(metrics, deadline).await?;
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
                    self.record(metrics, true, trial);
                    return Ok(verdict);
                }
                Err(_) => {
                    self.record(metrics, false, trial);
                    return Err(JudgeError::new(
                        ErrorKind::Timeout,
                        "no verdict before the deadline",
                    ));
                }
                Ok(Err(failed)) => failed,
            };
            self.record(metrics, false, trial);
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

    /// Waits for a concurrency permit in the bounded queue, until `deadline`.
    async fn acquire(
        &self,
        metrics: &Metrics,
        deadline: Instant,
    ) -> Result<tokio::sync::SemaphorePermit<'_>, JudgeError> {
        if let Ok(p) = self.permits.try_acquire() {
            return Ok(p);
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.max_queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(JudgeError::new(
                ErrorKind::Overloaded,
                "the concurrency limit and its queue are full",
            ));
        }
        // Leaves the queue however the wait ends, a cancelled call included.
        let _slot = QueueSlot::enter(self, metrics);
        match tokio::time::timeout_at(deadline, self.permits.acquire()).await {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(_)) => Err(JudgeError::new(ErrorKind::Overloaded, "the gate is closed")),
            Err(_) => Err(JudgeError::new(
                ErrorKind::Timeout,
                "no verdict before the deadline (waiting for the concurrency limit)",
            )),
        }
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

    /// Counts a call's result: `failures` in a row open the breaker; a success closes it.
    /// The trial's own result (and only it) ends the trial.
    fn record(&self, metrics: &Metrics, ok: bool, trial: Option<Trial<'_>>) {
        let mut b = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = trial {
            std::mem::forget(t);
            b.trial_in_flight = false;
        }
        if ok {
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

/// A place in a gate's queue, left on drop (a cancelled wait included).
struct QueueSlot<'a> {
    gate: &'a Gate,
    depth: prometheus_client::metrics::gauge::Gauge,
}

impl<'a> QueueSlot<'a> {
    /// Takes the place already counted in `waiting`.
    fn enter(gate: &'a Gate, metrics: &Metrics) -> QueueSlot<'a> {
        let depth = metrics
            .judges
            .queue_depth
            .get_or_create(&gate.labels())
            .clone();
        depth.inc();
        QueueSlot { gate, depth }
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.depth.dec();
        self.gate.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn gate(max_retries: u32, failures: u32) -> Gate {
        Gate::new(
            "t".into(),
            RetryConfig {
                max_retries,
                base_delay_ms: 1,
                max_delay_ms: 2,
                exponential_base: 2.0,
            },
            BreakerConfig {
                failures,
                open_ms: 60_000,
            },
            2,
            1,
            &CacheConfig {
                entries: 2,
                ttl_ms: 60_000,
            },
        )
    }

    fn verdict(score: f64) -> Verdict {
        Verdict {
            score,
            reason: None,
            label: None,
        }
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[tokio::test]
    async fn retryable_failures_are_tried_again_and_others_are_not() {
        let m = Metrics::new();
        let g = gate(2, 100);
        let mut n = 0;
        let v = g
            .call(&m, None, far(), || {
                n += 1;
                let ok = n == 3;
                async move {
                    if ok {
                        Ok(verdict(0.9))
                    } else {
                        Err(AttemptError::new(ErrorKind::Status, "429", true))
                    }
                }
            })
            .await;
        assert_eq!(v.map(|v| v.score).ok(), Some(0.9));
        assert_eq!(n, 3);
        let mut n = 0;
        let e = g
            .call(&m, None, far(), || {
                n += 1;
                async { Err(AttemptError::new(ErrorKind::Malformed, "x", false)) }
            })
            .await;
        assert_eq!(e.map_err(|e| e.kind).err(), Some(ErrorKind::Malformed));
        assert_eq!(n, 1);
    }

    #[tokio::test]
    async fn the_breaker_opens_after_failures_in_a_row() {
        let m = Metrics::new();
        let g = gate(0, 2);
        for _ in 0..2 {
            let _ = g
                .call(&m, None, far(), || async {
                    Err(AttemptError::new(ErrorKind::Status, "500", true))
                })
                .await;
        }
        let mut called = false;
        let e = g
            .call(&m, None, far(), || {
                called = true;
                async { Ok(verdict(1.0)) }
            })
            .await;
        assert_eq!(e.map_err(|e| e.kind).err(), Some(ErrorKind::CircuitOpen));
        assert!(!called);
    }

    #[tokio::test]
    async fn verdicts_are_cached_by_key_and_the_cache_is_bounded() {
        let m = Metrics::new();
        let g = gate(0, 100);
        for (key, score) in [(1, 0.1), (2, 0.2), (3, 0.3)] {
            g.call(&m, Some(key), far(), || async move { Ok(verdict(score)) })
                .await
                .ok();
        }
        let again = g
            .call(&m, Some(3), far(), || async { Ok(verdict(0.0)) })
            .await;
        assert_eq!(again.map(|v| v.score).ok(), Some(0.3));
        // Key 1 was evicted (two entries at most): asked again.
        let evicted = g
            .call(&m, Some(1), far(), || async { Ok(verdict(0.5)) })
            .await;
        assert_eq!(evicted.map(|v| v.score).ok(), Some(0.5));
    }

    #[tokio::test]
    async fn a_cancelled_trial_frees_the_breaker_for_the_next_call() {
        let m = Metrics::new();
        let g = Gate::new(
            "t".into(),
            RetryConfig {
                max_retries: 0,
                ..RetryConfig::default()
            },
            BreakerConfig {
                failures: 1,
                open_ms: 1,
            },
            2,
            4,
            &CacheConfig {
                entries: 0,
                ttl_ms: 1,
            },
        );
        let _ = g
            .call(&m, None, far(), || async {
                Err(AttemptError::new(ErrorKind::Status, "500", true))
            })
            .await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        // The trial is cancelled mid-call.
        let trial = g.call(&m, None, far(), || async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(verdict(1.0))
        });
        assert!(tokio::time::timeout(Duration::from_millis(20), trial)
            .await
            .is_err());
        // The next call is the trial, and its success closes the breaker.
        let v = g.call(&m, None, far(), || async { Ok(verdict(0.7)) }).await;
        assert_eq!(v.map(|v| v.score).ok(), Some(0.7));
        let v = g.call(&m, None, far(), || async { Ok(verdict(0.6)) }).await;
        assert_eq!(v.map(|v| v.score).ok(), Some(0.6));
    }

    #[tokio::test]
    async fn a_cancelled_wait_leaves_the_queue() {
        let m = Metrics::new();
        let g = Gate::new(
            "t".into(),
            RetryConfig::default(),
            BreakerConfig::default(),
            1,
            1,
            &CacheConfig {
                entries: 0,
                ttl_ms: 1,
            },
        );
        let permit = g.permits.try_acquire().unwrap();
        for _ in 0..3 {
            let waiting = g.call(&m, None, far(), || async { Ok(verdict(1.0)) });
            assert!(tokio::time::timeout(Duration::from_millis(10), waiting)
                .await
                .is_err());
        }
        assert_eq!(g.waiting.load(Ordering::Acquire), 0);
        drop(permit);
        let v = g.call(&m, None, far(), || async { Ok(verdict(1.0)) }).await;
        assert!(v.is_ok());
    }

    #[tokio::test]
    async fn a_deadline_ends_a_slow_attempt() {
        let m = Metrics::new();
        let g = gate(0, 100);
        let e = g
            .call(
                &m,
                None,
                Instant::now() + Duration::from_millis(20),
                || async {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    Ok(verdict(1.0))
                },
            )
            .await;
        assert_eq!(e.map_err(|e| e.kind).err(), Some(ErrorKind::Timeout));
    }

    #[tokio::test]
    async fn over_the_queue_calls_fail_as_overloaded() {
        let m = std::sync::Arc::new(Metrics::new());
        let g = std::sync::Arc::new(gate(0, 100));
        let (tx, rx) = tokio::sync::watch::channel(false);
        let mut holders = Vec::new();
        // Two in flight, one queued: the fourth is turned away.
        for _ in 0..3 {
            let (g, m, rx) = (g.clone(), m.clone(), rx.clone());
            holders.push(tokio::spawn(async move {
                g.call(&m, None, far(), || {
                    let mut rx = rx.clone();
                    async move {
                        let _ = rx.wait_for(|go| *go).await;
                        Ok(verdict(1.0))
                    }
                })
                .await
                .is_ok()
            }));
            tokio::task::yield_now().await;
        }
        while g.waiting.load(Ordering::Acquire) < 1 {
            tokio::task::yield_now().await;
        }
        let e = g.call(&m, None, far(), || async { Ok(verdict(1.0)) }).await;
        assert_eq!(e.map_err(|e| e.kind).err(), Some(ErrorKind::Overloaded));
        tx.send_replace(true);
        drop(rx);
        for h in holders {
            assert!(h.await.unwrap_or(false));
        }
    }
}
