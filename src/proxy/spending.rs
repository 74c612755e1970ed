//! What an exchange's usage is counted against when it ends: its key's reservation (limits
//! over time, [`super::quota`]) and its session's spend (`cost_budget` validators read the
//! session's totals: [`super::request::RequestCtx::session_spend`]). Both are kept in the state
//! room ([`crate::state`]); each is a store round trip made as it is dropped, off the answer's
//! path.

use crate::evals::Spend;
use crate::policy::ExchangeGuard;
use crate::state::{Reservation, SessionSpend};
use crate::telemetry::RequestTrace;

/// An exchange's reservation and its part in its session's spend, each settled when dropped.
#[derive(Default)]
pub struct Spending {
    pub reservation: Option<Reservation>,
    pub session: Option<SessionSpend>,
}

impl Spending {
    /// The request is being sent upstream: unless its usage is recorded, its reservation
    /// settles at what it reserved (a client that goes away before the answer).
    pub fn sent(&self) {
        if let Some(r) = &self.reservation {
            r.sent();
        }
    }

    /// The upstream answered without a billed answer (an error status relayed as it is).
    pub fn nothing_billed(&self) {
        if let Some(r) = &self.reservation {
            r.record(Some(0), Some(0), Default::default());
        }
    }

    /// Records the exchange's tokens as counted when it ended (reported, or estimated).
    /// `cut_short`: it ended before its answer did, with the output estimated — its
    /// reservation settles at no less than it reserved (the provider bills what it generated,
    /// not what was relayed).
    pub fn record(&self, guard: &ExchangeGuard, cut_short: bool) {
        let (input, output) = guard.usage();
        let cache = guard.cache_tokens();
        if let Some(r) = &self.reservation {
            r.record(input, output, cache);
            if cut_short {
                r.at_least_reserved();
            }
        }
        if let Some(s) = &self.session {
            s.record(input, output, cache);
        }
    }

    /// Submits the exchange's eval turn. When this exchange adds its spend to its session,
    /// the turn waits for that and carries none of its own: the evals' session totals count
    /// it once, and with it.
    pub fn submit_evals(
        &self,
        seed: crate::evals::EvalSeed,
        guard: &ExchangeGuard,
        trace: &RequestTrace,
    ) {
        let (text, tool_calls) = guard.judged_answer();
        let answer = Some(crate::judge::Answer { text, tool_calls });
        let (blocked, fired) = (trace.was_blocked(), trace.fired());
        match &self.session {
            None => {
                let (usage, cache) = (guard.usage(), guard.cache_tokens());
                seed.submit(answer, blocked, fired, usage, cache, guard.price())
            }
            Some(session) => session.then(Box::new(move || {
                seed.submit_spent(answer, blocked, fired, Spend::NOTHING)
            })),
        }
    }
}
