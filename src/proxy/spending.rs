//! What an exchange's usage is counted against when it ends: its key's reservation (limits
//! over time, [`super::quota`]) and its session's spend (`cost_budget` validators read the
//! session's totals). Both are kept in the state room ([`crate::state`]); each is a store
//! round trip made as it is dropped, off the answer's path.

use super::request::RequestCtx;
use crate::evals::{session_of, Spend};
use crate::policy::ExchangeGuard;
use crate::protocol::ParsedRequest;
use crate::state::eval_sessions::SessionRef;
use crate::state::{Reservation, SessionSpend};
use crate::telemetry::RequestTrace;
use http::HeaderMap;

/// An exchange's reservation and its part in its session's spend, each settled when dropped.
#[derive(Default)]
pub struct Spending {
    pub reservation: Option<Reservation>,
    pub session: Option<SessionSpend>,
}

impl Spending {
    /// Records the exchange's tokens as counted when it ended (reported, or estimated).
    pub fn record(&self, guard: &ExchangeGuard) {
        let (input, output) = guard.usage();
        if let Some(r) = &self.reservation {
            r.record(input, output);
        }
        if let Some(s) = &self.session {
            s.record(input, output);
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
            None => seed.submit(answer, blocked, fired, guard.usage(), guard.price()),
            Some(session) => session.then(Box::new(move || {
                seed.submit_spent(answer, blocked, fired, Spend::NOTHING)
            })),
        }
    }
}

impl RequestCtx<'_> {
    /// Step 4c, for a policy with `cost_budget` validators: what the request's session (as the
    /// evals name it: the session header, else the session the request names, else the
    /// conversation's opening) has spent so far goes into the guard BeforeCall reads; the
    /// returned handle adds this exchange's spend when it ends. A store that does not answer
    /// leaves the session's spend unknown: the validators' `on_error` decides.
    pub async fn session_spend(
        &self,
        headers: &HeaderMap,
        parsed: &ParsedRequest,
        price: Option<crate::config::Price>,
    ) -> (Option<SessionSpend>, Option<Spend>) {
        if !self.caller.policy.has_cost_budget() {
            return (None, None);
        }
        let named = self
            .eval_session_header(headers)
            .or(parsed.session.as_deref());
        let session = SessionRef {
            route: self.route.name.to_owned(),
            key_id: self.caller.key_id.map(str::to_owned),
            session: session_of(named, &parsed.conversation),
        };
        let idle_ms = self.gw.evals.session_idle_ms();
        match self.gw.state.session_spend(session, idle_ms, price).await {
            Ok(spend) => {
                let before = spend.before().into();
                (Some(spend), Some(before))
            }
            Err(_) => (None, Some(Spend::default())),
        }
    }
}
