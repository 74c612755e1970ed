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
        Capacity::fair(2, 1),
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
        .call(&m, None, None, far(), || {
            n += 1;
            let ok = n == 3;
            async move {
                if ok {
                    Ok(verdict(0.9))
                } else {
                    Err(AttemptError::judge(ErrorKind::Status, "429", true))
                }
            }
        })
        .await;
    assert_eq!(v.map(|v| v.score).ok(), Some(0.9));
    assert_eq!(n, 3);
    let mut n = 0;
    let e = g
        .call(&m, None, None, far(), || {
            n += 1;
            async { Err(AttemptError::input(ErrorKind::Malformed, "x")) }
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
            .call(&m, None, None, far(), || async {
                Err(AttemptError::judge(ErrorKind::Status, "500", true))
            })
            .await;
    }
    let mut called = false;
    let e = g
        .call(&m, None, None, far(), || {
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
        g.call(
            &m,
            None,
            Some(key),
            far(),
            || async move { Ok(verdict(score)) },
        )
        .await
        .ok();
    }
    let again = g
        .call(&m, None, Some(3), far(), || async { Ok(verdict(0.0)) })
        .await;
    assert_eq!(again.map(|v| v.score).ok(), Some(0.3));
    // Key 1 was evicted (two entries at most): asked again.
    let evicted = g
        .call(&m, None, Some(1), far(), || async { Ok(verdict(0.5)) })
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
        Capacity::fair(2, 4),
        &CacheConfig {
            entries: 0,
            ttl_ms: 1,
        },
    );
    let _ = g
        .call(&m, None, None, far(), || async {
            Err(AttemptError::judge(ErrorKind::Status, "500", true))
        })
        .await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    // The trial is cancelled mid-call.
    let trial = g.call(&m, None, None, far(), || async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(verdict(1.0))
    });
    assert!(tokio::time::timeout(Duration::from_millis(20), trial)
        .await
        .is_err());
    // The next call is the trial, and its success closes the breaker.
    let v = g
        .call(&m, None, None, far(), || async { Ok(verdict(0.7)) })
        .await;
    assert_eq!(v.map(|v| v.score).ok(), Some(0.7));
    let v = g
        .call(&m, None, None, far(), || async { Ok(verdict(0.6)) })
        .await;
    assert_eq!(v.map(|v| v.score).ok(), Some(0.6));
}

#[tokio::test]
async fn a_cancelled_wait_leaves_the_queue() {
    let m = Metrics::new();
    let g = Gate::new(
        "t".into(),
        RetryConfig::default(),
        BreakerConfig::default(),
        Capacity::fair(1, 1),
        &CacheConfig {
            entries: 0,
            ttl_ms: 1,
        },
    );
    let permit = g.acquire(&m, None, far()).await.unwrap();
    for _ in 0..3 {
        let waiting = g.call(&m, None, None, far(), || async { Ok(verdict(1.0)) });
        assert!(tokio::time::timeout(Duration::from_millis(10), waiting)
            .await
            .is_err());
    }
    assert_eq!(g.slots().waiting, 0);
    drop(permit);
    let v = g
        .call(&m, None, None, far(), || async { Ok(verdict(1.0)) })
        .await;
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
            g.call(&m, None, None, far(), || {
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
    while g.slots().waiting < 1 {
        tokio::task::yield_now().await;
    }
    let e = g
        .call(&m, None, None, far(), || async { Ok(verdict(1.0)) })
        .await;
    assert_eq!(e.map_err(|e| e.kind).err(), Some(ErrorKind::Overloaded));
    tx.send_replace(true);
    drop(rx);
    for h in holders {
        assert!(h.await.unwrap_or(false));
    }
}

#[tokio::test]
async fn answers_about_the_input_never_open_the_breaker() {
    let m = Metrics::new();
    let g = gate(0, 2);
    for kind in [ErrorKind::Malformed, ErrorKind::Status, ErrorKind::Process] {
        for _ in 0..3 {
            let e = g
                .call(&m, Some("a"), None, far(), || async move {
                    Err(AttemptError::input(kind, "x"))
                })
                .await;
            assert_eq!(e.map_err(|e| e.kind).err(), Some(kind));
        }
    }
    // One failure of the judge's own, then an answer about the input: the row is broken,
    // so a second failure of its own does not open the breaker either.
    for fault in [
        AttemptError::judge(ErrorKind::Transport, "refused", true),
        AttemptError::input(ErrorKind::Malformed, "x"),
        AttemptError::judge(ErrorKind::Status, "503", true),
    ] {
        let mut fault = Some(fault);
        let _ = g
            .call(&m, Some("a"), None, far(), || {
                let f = fault.take();
                async move {
                    Err(f.unwrap_or_else(|| AttemptError::input(ErrorKind::Malformed, "x")))
                }
            })
            .await;
    }
    let v = g
        .call(&m, Some("b"), None, far(), || async { Ok(verdict(0.8)) })
        .await;
    assert_eq!(v.map(|v| v.score).ok(), Some(0.8));
    // Two of the judge's own in a row do: key a's breaker, not b's.
    for _ in 0..2 {
        let _ = g
            .call(&m, Some("a"), None, far(), || async {
                Err(AttemptError::judge(ErrorKind::Status, "500", true))
            })
            .await;
    }
    let e = g
        .call(&m, Some("a"), None, far(), || async { Ok(verdict(0.8)) })
        .await;
    assert_eq!(e.map_err(|e| e.kind).err(), Some(ErrorKind::CircuitOpen));
    let v = g
        .call(&m, Some("b"), None, far(), || async { Ok(verdict(0.8)) })
        .await;
    assert_eq!(v.map(|v| v.score).ok(), Some(0.8));
}

/// A call of `tenant` that runs until `release` fires, reporting when it started.
fn held(
    g: &std::sync::Arc<Gate>,
    m: &std::sync::Arc<Metrics>,
    tenant: Tenant,
    started: tokio::sync::mpsc::UnboundedSender<Tenant>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<Verdict, JudgeError>>,
) {
    let (release, rx) = tokio::sync::oneshot::channel::<()>();
    let (g, m) = (g.clone(), m.clone());
    let task = tokio::spawn(async move {
        let mut rx = Some(rx);
        g.call(&m, tenant, None, far(), || {
            let rx = rx.take();
            let started = started.clone();
            async move {
                let _ = started.send(tenant);
                if let Some(rx) = rx {
                    let _ = rx.await;
                }
                Ok(verdict(1.0))
            }
        })
        .await
    });
    (release, task)
}

async fn until(g: &Gate, what: impl Fn(&Slots) -> bool) {
    while !what(&g.slots()) {
        tokio::task::yield_now().await;
    }
}

fn queued(s: &Slots, tenant: Tenant) -> usize {
    s.tenants.get(&tenant).map_or(0, |t| t.queue.len())
}

#[tokio::test]
async fn a_freed_slot_goes_to_the_key_under_its_share() {
    let m = std::sync::Arc::new(Metrics::new());
    let g = std::sync::Arc::new(Gate::new(
        "t".into(),
        RetryConfig::default(),
        BreakerConfig::default(),
        Capacity::fair(2, 8),
        &CacheConfig {
            entries: 0,
            ttl_ms: 1,
        },
    ));
    let (started, mut starts) = tokio::sync::mpsc::unbounded_channel();
    // Key a alone takes both slots, then floods the queue.
    let (a1, a1_task) = held(&g, &m, Some("a"), started.clone());
    let (_a2, _a2_task) = held(&g, &m, Some("a"), started.clone());
    until(&g, |s| s.in_flight == 2).await;
    let mut flood = Vec::new();
    for _ in 0..3 {
        flood.push(held(&g, &m, Some("a"), started.clone()));
    }
    until(&g, |s| queued(s, Some("a")) == 3).await;
    let (b1, b1_task) = held(&g, &m, Some("b"), started.clone());
    until(&g, |s| queued(s, Some("b")) == 1).await;
    assert_eq!(
        [starts.recv().await, starts.recv().await],
        [Some(Some("a")), Some(Some("a"))]
    );
    // One of a's calls ends: a is at its share (one of two), b below it, so b runs
    // although a queued first.
    a1.send(()).unwrap();
    assert!(a1_task.await.unwrap().is_ok());
    assert_eq!(starts.recv().await, Some(Some("b")));
    assert_eq!(queued(&g.slots(), Some("a")), 3);
    b1.send(()).unwrap();
    assert!(b1_task.await.unwrap().is_ok());
    // b gone, a gets its whole share back.
    until(&g, |s| s.in_flight == 2 && queued(s, Some("a")) == 2).await;
    // One at a time: a2 keeps one slot, the flood takes turns in the other.
    for (release, task) in flood {
        let _ = release.send(());
        assert!(task.await.unwrap().is_ok());
    }
}

#[tokio::test]
async fn a_full_queue_makes_room_for_a_key_under_its_share() {
    let m = std::sync::Arc::new(Metrics::new());
    let g = std::sync::Arc::new(Gate::new(
        "t".into(),
        RetryConfig::default(),
        BreakerConfig::default(),
        Capacity::fair(1, 2),
        &CacheConfig {
            entries: 0,
            ttl_ms: 1,
        },
    ));
    let (started, _starts) = tokio::sync::mpsc::unbounded_channel();
    let (a1, _a1_task) = held(&g, &m, Some("a"), started.clone());
    until(&g, |s| s.in_flight == 1).await;
    let (a2, a2_task) = held(&g, &m, Some("a"), started.clone());
    until(&g, |s| s.waiting == 1).await;
    let (_a3, a3_task) = held(&g, &m, Some("a"), started.clone());
    until(&g, |s| s.waiting == 2).await;
    // Full, and a alone: a's next call is refused.
    let e = g
        .call(&m, Some("a"), None, far(), || async { Ok(verdict(1.0)) })
        .await;
    assert_eq!(e.map_err(|e| e.kind).err(), Some(ErrorKind::Overloaded));
    // b's call takes the place of a's newest.
    let (b1, b1_task) = held(&g, &m, Some("b"), started.clone());
    let pushed_out = a3_task.await.unwrap();
    assert_eq!(
        pushed_out.map_err(|e| e.kind).err(),
        Some(ErrorKind::Overloaded)
    );
    until(&g, |s| queued(s, Some("b")) == 1).await;
    a1.send(()).unwrap();
    a2.send(()).unwrap();
    b1.send(()).unwrap();
    assert!(a2_task.await.unwrap().is_ok());
    assert!(b1_task.await.unwrap().is_ok());
    let s = g.slots();
    assert_eq!((s.in_flight, s.waiting, s.tenants.len()), (0, 0, 0));
}

#[tokio::test]
async fn a_fixed_share_holds_a_key_below_the_limit() {
    let m = std::sync::Arc::new(Metrics::new());
    let g = std::sync::Arc::new(Gate::new(
        "t".into(),
        RetryConfig::default(),
        BreakerConfig::default(),
        Capacity {
            max_concurrency: 4,
            max_queue: 4,
            concurrency_per_key: Some(1),
            queue_per_key: Some(1),
        },
        &CacheConfig {
            entries: 0,
            ttl_ms: 1,
        },
    ));
    let (started, _starts) = tokio::sync::mpsc::unbounded_channel();
    let (a1, a1_task) = held(&g, &m, Some("a"), started.clone());
    until(&g, |s| s.in_flight == 1).await;
    // Room in the limit, none in a's share: a's second call waits, its third is refused.
    let (a2, a2_task) = held(&g, &m, Some("a"), started.clone());
    until(&g, |s| queued(s, Some("a")) == 1).await;
    let e = g
        .call(&m, Some("a"), None, far(), || async { Ok(verdict(1.0)) })
        .await;
    assert_eq!(e.map_err(|e| e.kind).err(), Some(ErrorKind::Overloaded));
    let b = g
        .call(&m, Some("b"), None, far(), || async { Ok(verdict(0.4)) })
        .await;
    assert_eq!(b.map(|v| v.score).ok(), Some(0.4));
    a1.send(()).unwrap();
    a2.send(()).unwrap();
    assert!(a1_task.await.unwrap().is_ok());
    assert!(a2_task.await.unwrap().is_ok());
}

#[tokio::test]
async fn a_keys_failures_open_its_own_breaker_only() {
    let m = Metrics::new();
    let g = gate(0, 2);
    // Key a provokes timeouts (an input the judge is slow on): its breaker opens.
    for _ in 0..2 {
        let e = g
            .call(
                &m,
                Some("a"),
                None,
                Instant::now() + Duration::from_millis(5),
                std::future::pending::<Result<Verdict, AttemptError>>,
            )
            .await;
        assert_eq!(e.map_err(|e| e.kind).err(), Some(ErrorKind::Timeout));
    }
    let a = g
        .call(&m, Some("a"), None, far(), || async { Ok(verdict(1.0)) })
        .await;
    assert_eq!(a.map_err(|e| e.kind).err(), Some(ErrorKind::CircuitOpen));
    let gauge = || m.judges.circuit_open.get_or_create(&g.labels()).get();
    assert_eq!(gauge(), 1);
    // Key b (and a caller without a key) still get verdicts.
    for tenant in [Some("b"), None] {
        let v = g
            .call(&m, tenant, None, far(), || async { Ok(verdict(0.7)) })
            .await;
        assert_eq!(v.map(|v| v.score).ok(), Some(0.7));
    }
    // One failure of b's own does not open b's breaker (its count is its own).
    let _ = g
        .call(&m, Some("b"), None, far(), || async {
            Err(AttemptError::judge(ErrorKind::Status, "500", true))
        })
        .await;
    let v = g
        .call(&m, Some("b"), None, far(), || async { Ok(verdict(0.7)) })
        .await;
    assert!(v.is_ok());
    assert_eq!(
        g.breakers.lock().unwrap().per_tenant.len(),
        1,
        "only a's is remembered"
    );
}
