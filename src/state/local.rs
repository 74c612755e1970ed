//! The in-process backend: one replica's counts, under one lock (each operation is a few
//! steps over at most `rpm_limit` timestamps, 60 buckets and the reservations in flight).

use super::limits::{Ask, Counts, Decision, KeyLimits, Quota, Used, MINUTE_MS};
use super::{LimitStore, StoreFuture};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

#[derive(Default)]
pub struct LocalLimits {
    keys: Mutex<HashMap<String, KeyCounts>>,
}

#[derive(Default)]
struct KeyCounts {
    /// Admission times (ms), oldest first.
    requests: VecDeque<u64>,
    /// (second, tokens), oldest first; tokens may be lowered by a settlement.
    tokens: VecDeque<(u64, i64)>,
    spent: u64,
    reserved: u64,
    budget_start_ms: Option<u64>,
    /// id -> (second of its tokens, tokens, micro-USD, expires at ms).
    reservations: HashMap<String, (u64, u64, u64, u64)>,
}

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl KeyCounts {
    /// Drops what left the windows, expired reservations, and a budget window that ended.
    fn age(&mut self, limits: &KeyLimits, now: u64) {
        while self.requests.front().is_some_and(|&t| t + MINUTE_MS <= now) {
            self.requests.pop_front();
        }
        let sec = now / 1000;
        while self.tokens.front().is_some_and(|&(s, _)| s + 60 <= sec) {
            self.tokens.pop_front();
        }
        let expired: Vec<String> = self
            .reservations
            .iter()
            .filter(|(_, r)| r.3 <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            if let Some((s, tokens, micro, _)) = self.reservations.remove(&id) {
                self.add_tokens_at(s, -(tokens as i64), false);
                self.reserved = self.reserved.saturating_sub(micro);
            }
        }
        if let (Some(b), Some(start)) = (limits.budget, self.budget_start_ms) {
            if b.duration_ms.is_some_and(|d| now >= start + d) {
                self.budget_start_ms = None;
                self.spent = 0;
            }
        }
    }

    /// Adds `n` tokens to second `s`'s bucket (made when `create`, else only if it is still
    /// in the window).
    fn add_tokens_at(&mut self, s: u64, n: i64, create: bool) {
        if let Some(b) = self.tokens.iter_mut().find(|b| b.0 == s) {
            b.1 += n;
        } else if create {
            let at = self.tokens.partition_point(|b| b.0 < s);
            self.tokens.insert(at, (s, n));
        }
    }

    fn counts(&self) -> Counts {
        let mut held = self.tokens.iter().filter(|b| b.1 > 0);
        Counts {
            requests: self.requests.len() as u64,
            oldest_request_ms: self.requests.front().copied(),
            newest_request_ms: self.requests.back().copied(),
            tokens: self.tokens.iter().map(|b| b.1.max(0) as u64).sum(),
            oldest_token_s: held.clone().next().map(|b| b.0),
            newest_token_s: held.next_back().map(|b| b.0),
            spent: self.spent,
            reserved: self.reserved,
            budget_start_ms: self.budget_start_ms,
        }
    }
}

impl LocalLimits {
    fn with_key<T>(&self, key: &str, f: impl FnOnce(&mut KeyCounts) -> T) -> T {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        f(keys.entry(key.to_owned()).or_default())
    }
}

impl LimitStore for LocalLimits {
    fn reserve<'a>(
        &'a self,
        key: &'a str,
        limits: &'a KeyLimits,
        ask: Ask,
        id: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, Decision> {
        let now = now_ms();
        let decision = self.with_key(key, |k| {
            k.age(limits, now);
            if limits.budget.is_some() && k.budget_start_ms.is_none() {
                k.budget_start_ms = Some(now);
            }
            let counts = k.counts();
            if let Some((limit, retry_after_ms)) = counts.refusal(limits, ask, now) {
                return Decision::Refused {
                    limit,
                    retry_after_ms,
                    quota: counts.quota(limits, now),
                };
            }
            let sec = now / 1000;
            if limits.rpm.is_some() {
                k.requests.push_back(now);
            }
            let tokens = if limits.tpm.is_some() { ask.tokens } else { 0 };
            if tokens > 0 {
                k.add_tokens_at(sec, tokens as i64, true);
            }
            let micro = if limits.budget.is_some() {
                ask.micro_usd
            } else {
                0
            };
            k.reserved += micro;
            k.reservations
                .insert(id.to_owned(), (sec, tokens, micro, now + ttl_ms));
            Decision::Admitted(k.counts().quota(limits, now))
        });
        Box::pin(async move { Ok(decision) })
    }

    fn settle<'a>(
        &'a self,
        key: &'a str,
        limits: &'a KeyLimits,
        id: &'a str,
        used: Used,
    ) -> StoreFuture<'a, ()> {
        let now = now_ms();
        self.with_key(key, |k| {
            k.age(limits, now);
            let tracked = limits.tpm.is_some();
            match k.reservations.remove(id) {
                Some((s, tokens, micro, _)) => {
                    if tracked {
                        k.add_tokens_at(s, used.tokens as i64 - tokens as i64, false);
                    }
                    k.reserved = k.reserved.saturating_sub(micro);
                }
                None if tracked && used.tokens > 0 => {
                    k.add_tokens_at(now / 1000, used.tokens as i64, true)
                }
                None => {}
            }
            if limits.budget.is_some() {
                if k.budget_start_ms.is_none() {
                    k.budget_start_ms = Some(now);
                }
                k.spent += used.micro_usd;
            }
        });
        Box::pin(async { Ok(()) })
    }

    fn usage<'a>(&'a self, key: &'a str, limits: &'a KeyLimits) -> StoreFuture<'a, Quota> {
        let now = now_ms();
        let quota = self.with_key(key, |k| {
            k.age(limits, now);
            k.counts().quota(limits, now)
        });
        Box::pin(async move { Ok(quota) })
    }

    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        self.keys
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        Box::pin(async { Ok(()) })
    }

    fn ping(&self) -> StoreFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}
