//! The vocabulary of the keys' limits: what a key may use, what a request asks, what a store
//! answers. Money is counted in micro-USD integers, so every replica and Redis add exactly.

/// A key's limits over time (from `keys[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyLimits {
    /// `rpm_limit`.
    pub rpm: Option<u64>,
    /// `tpm_limit`.
    pub tpm: Option<u64>,
    /// `max_budget` and `budget_duration`.
    pub budget: Option<BudgetLimit>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetLimit {
    pub max_micro_usd: u64,
    /// None: the budget never starts again.
    pub duration_ms: Option<u64>,
}

/// USD as micro-USD, rounded up (a reservation never undercounts by rounding).
pub fn micro_usd(usd: f64) -> u64 {
    if usd.is_finite() && usd > 0.0 {
        (usd * 1e6).ceil().min(u64::MAX as f64 / 2.0) as u64
    } else {
        0
    }
}

/// What one request reserves: one request, its estimated tokens, its estimated cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ask {
    pub tokens: u64,
    pub micro_usd: u64,
}

/// What an exchange used, as settled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Used {
    pub tokens: u64,
    pub micro_usd: u64,
}

/// Which limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    Requests,
    Tokens,
    Budget,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Requests => "rpm_limit",
            Limit::Tokens => "tpm_limit",
            Limit::Budget => "max_budget",
        }
    }
}

/// A sliding-window limit as the rate-limit headers show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub limit: u64,
    pub remaining: u64,
    /// Until the window is empty again.
    pub reset_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLeft {
    pub max_micro_usd: u64,
    pub spent_micro_usd: u64,
    pub reserved_micro_usd: u64,
    /// Until the budget starts again (None: never).
    pub reset_ms: Option<u64>,
}

impl BudgetLeft {
    pub fn remaining_micro_usd(&self) -> u64 {
        self.max_micro_usd
            .saturating_sub(self.spent_micro_usd + self.reserved_micro_usd)
    }
}

/// A key's counts, as a store answered them (after the request's own reservation when it was
/// admitted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    pub requests: Option<Window>,
    pub tokens: Option<Window>,
    pub budget: Option<BudgetLeft>,
}

/// A store's answer to a reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Admitted(Quota),
    Refused {
        limit: Limit,
        /// When a retry could pass (None: not within the budget's life).
        retry_after_ms: Option<u64>,
        quota: Quota,
    },
}

/// The raw counts both backends compute a decision from, so the rule is written once.
pub(super) struct Counts {
    /// Admissions in the last minute, and the oldest and newest of them (ms).
    pub requests: u64,
    pub oldest_request_ms: Option<u64>,
    pub newest_request_ms: Option<u64>,
    /// Tokens in the last minute, and the oldest and newest buckets holding any (s).
    pub tokens: u64,
    pub oldest_token_s: Option<u64>,
    pub newest_token_s: Option<u64>,
    pub spent: u64,
    pub reserved: u64,
    /// When the budget window started (ms), if it has.
    pub budget_start_ms: Option<u64>,
}

pub(super) const MINUTE_MS: u64 = 60_000;

impl Counts {
    /// The quota these counts leave, at `now_ms`.
    pub fn quota(&self, limits: &KeyLimits, now_ms: u64) -> Quota {
        Quota {
            requests: limits.rpm.map(|limit| Window {
                limit,
                remaining: limit.saturating_sub(self.requests),
                reset_ms: self
                    .newest_request_ms
                    .map_or(0, |t| (t + MINUTE_MS).saturating_sub(now_ms)),
            }),
            tokens: limits.tpm.map(|limit| Window {
                limit,
                remaining: limit.saturating_sub(self.tokens),
                reset_ms: self
                    .newest_token_s
                    .map_or(0, |s| ((s + 60) * 1000).saturating_sub(now_ms)),
            }),
            budget: limits.budget.map(|b| BudgetLeft {
                max_micro_usd: b.max_micro_usd,
                spent_micro_usd: self.spent,
                reserved_micro_usd: self.reserved,
                reset_ms: b.duration_ms.map(|d| {
                    self.budget_start_ms
                        .map_or(d, |start| (start + d).saturating_sub(now_ms))
                }),
            }),
        }
    }

    /// Whether `ask` fits, and if not which limit refuses it and when to retry. The budget is
    /// asked first: a spent budget is the answer that does not go away in a minute.
    pub fn refusal(
        &self,
        limits: &KeyLimits,
        ask: Ask,
        now_ms: u64,
    ) -> Option<(Limit, Option<u64>)> {
        if let Some(b) = limits.budget {
            let committed = self.spent + self.reserved;
            if committed >= b.max_micro_usd || committed + ask.micro_usd > b.max_micro_usd {
                let retry = b.duration_ms.map(|d| {
                    self.budget_start_ms
                        .map_or(d, |start| (start + d).saturating_sub(now_ms))
                        .max(1)
                });
                return Some((Limit::Budget, retry));
            }
        }
        if let Some(rpm) = limits.rpm {
            if self.requests >= rpm {
                let retry = self
                    .oldest_request_ms
                    .map_or(1, |t| (t + MINUTE_MS).saturating_sub(now_ms).max(1));
                return Some((Limit::Requests, Some(retry)));
            }
        }
        if let Some(tpm) = limits.tpm {
            if self.tokens > 0 && self.tokens.saturating_add(ask.tokens) > tpm {
                let retry = self
                    .oldest_token_s
                    .map_or(1, |s| ((s + 60) * 1000).saturating_sub(now_ms).max(1));
                return Some((Limit::Tokens, Some(retry)));
            }
        }
        None
    }
}
