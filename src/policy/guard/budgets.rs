//! The guard's budgets: `latency_budget` (the deadline to enforce while streaming, and the
//! check of the time elapsed) and `cost_budget` (on the usage the provider reported).

use super::ExchangeGuard;
use crate::evals::Spend;
use crate::policy::types::{Finding, Mode};
use crate::policy::verdict::whole_hit;
use crate::policy::Policy;

impl Policy {
    /// The earliest `latency_budget` in enforce mode: (validator, milliseconds).
    pub fn latency_budget(&self) -> Option<(u32, u64)> {
        self.latency
            .iter()
            .filter(|(v, _)| self.validator(*v).mode == Mode::Enforce)
            .min_by_key(|(_, ms)| *ms)
            .copied()
    }
}

impl ExchangeGuard {
    /// The next `latency_budget` to enforce while streaming: (validator, milliseconds after the
    /// request arrived). Monitor-mode budgets are judged at the end.
    pub fn latency_deadline(&self) -> Option<(u32, u64)> {
        self.policy
            .latency
            .iter()
            .filter(|(v, _)| {
                self.policy.validator(*v).mode == Mode::Enforce && !self.latency_fired.contains(v)
            })
            .min_by_key(|(_, ms)| *ms)
            .copied()
    }

    /// `elapsed_ms` after the request arrived: every `latency_budget` it exceeds fires.
    pub fn check_latency(&mut self, elapsed_ms: u64) -> Result<(), Finding> {
        for &(owner, max) in &self.policy.latency {
            if elapsed_ms > max && !self.latency_fired.contains(&owner) {
                self.latency_fired.push(owner);
                self.hits.push(whole_hit(owner));
            }
        }
        self.judge(self.chunk_phase)
    }

    /// (input, output) tokens as the provider last reported them.
    pub fn usage(&self) -> (Option<u64>, Option<u64>) {
        self.usage
    }

    /// The part of the input tokens a prompt cache wrote or read (priced apart).
    pub fn cache_tokens(&self) -> crate::delta::CacheTokens {
        self.cache
    }

    /// What the reported usage costs in USD, at the requested model's configured price: `None`
    /// without a price or without both token counts.
    pub fn cost_usd(&self) -> Option<f64> {
        if self.known_cost_usd.is_some() {
            return self.known_cost_usd;
        }
        let (Some(input), Some(output), Some(p)) = (self.usage.0, self.usage.1, self.price) else {
            return None;
        };
        Some(p.usd_cached(input, output, self.cache))
    }

    /// The spend `cost_budget` reads, known already (an eval's session total, summed over
    /// turns priced one by one) rather than priced from the usage.
    pub fn set_known_cost(&mut self, usd: Option<f64>) {
        self.known_cost_usd = usd;
    }

    /// What the exchange's session had spent before it (read from the state backend by the
    /// proxy): `cost_budget` reads the session's totals — BeforeCall refuses a session already
    /// over a budget, the end of the response judges the totals with this exchange's usage.
    pub fn set_session_before(&mut self, spent: Spend) {
        self.session_before = Some(spent);
    }

    /// `cost_budget` on the usage the provider reported, added to the session's before it.
    pub(super) fn check_cost(&mut self) {
        let before = self.session_before.unwrap_or(Spend::NOTHING);
        let usd = self.cost_usd();
        self.check_cost_of(before, self.usage, usd);
    }

    /// `cost_budget` on `before` and an exchange's `usage` and spend together; a count it
    /// needs that is unknown is an error (`on_error`).
    pub(super) fn check_cost_of(
        &mut self,
        before: Spend,
        usage: (Option<u64>, Option<u64>),
        usd: Option<f64>,
    ) {
        let policy = &*self.policy;
        let sum = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
        let input = sum(before.input_tokens, usage.0);
        let output = sum(before.output_tokens, usage.1);
        let usd = before.cost_usd.zip(usd).map(|(a, b)| a + b);
        for &(owner, limits) in &policy.cost {
            let (Some(input), Some(output)) = (input, output) else {
                policy.erred(owner, &mut self.hits);
                continue;
            };
            // PromptKit's rule: any count over its maximum fails.
            let over = |max: Option<u64>, n: u64| max.is_some_and(|m| n > m);
            if over(limits.max_input_tokens, input)
                || over(limits.max_output_tokens, output)
                || over(limits.max_total_tokens, input + output)
            {
                self.hits.push(whole_hit(owner));
                continue;
            }
            if let Some(max) = limits.max_cost_usd {
                match usd {
                    Some(usd) => {
                        if usd > max {
                            self.hits.push(whole_hit(owner));
                        }
                    }
                    None => policy.erred(owner, &mut self.hits),
                }
            }
        }
    }
}
