//! Handing ended exchanges to the packs' `evals:` (see `crate::evals`): the seed gathered
//! with the request, submitted when the exchange ends — after a whole answer is released or
//! blocked, when a stream's body is dropped, or when the request is blocked before the call.

use super::request::RequestCtx;
use crate::delta::Conversation;
use crate::evals::{may_select, session_of, turn_index_of, EvalSeed, Spend};
use crate::judge::JudgeEnv;
use crate::protocol::ParsedRequest;
use crate::state::eval_sessions::SessionRef;
use crate::state::SessionSpend;
use http::HeaderMap;
use std::sync::Arc;

impl RequestCtx<'_> {
    /// The exchange's seed for the evals; `None` when its policy has none.
    pub fn eval_seed(
        &self,
        headers: &HeaderMap,
        conversation: &Arc<Conversation>,
        named: Option<&str>,
    ) -> Option<EvalSeed> {
        let mut seed = self.eval_template()?;
        // The session header, else the session the request names (A2A's `contextId`), else
        // the conversation's opening.
        let session = session_of(self.eval_session_header(headers).or(named), conversation);
        if !may_select(&seed.policy, &session, turn_index_of(conversation)) {
            return None;
        }
        seed.conversation = Arc::clone(conversation);
        seed.session = session;
        seed.ends_session = headers
            .get(self.gw.evals.session_end_header())
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() == "1" || v.trim().eq_ignore_ascii_case("true"));
        Some(seed)
    }

    /// The `evals.session_header` value the request sent, if any.
    pub fn eval_session_header<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
        headers
            .get(self.gw.evals.session_header())
            .and_then(|v| v.to_str().ok())
            .filter(|h| !h.is_empty())
    }

    /// A seed whose conversation and session are filled in later (an MCP POST's tool calls
    /// each make a turn of their own); `None` when the policy has no evals.
    pub fn eval_template(&self) -> Option<EvalSeed> {
        let policy = self.caller.policy;
        if policy.evals().is_empty() {
            return None;
        }
        Some(EvalSeed {
            queue: Arc::clone(&self.gw.evals),
            policy: Arc::clone(policy),
            // The evals' own gates: their calls never hold the request path's permits or
            // open its breakers.
            env: JudgeEnv {
                judges: Arc::clone(&self.rt.eval_judges),
                ..self.judge_env()
            },
            audit: Arc::clone(&self.rt.audit),
            keep_reasons: self.rt.config.audit.include_match,
            conversation: Arc::default(),
            session: String::new(),
            route: self.route.name,
            protocol: self.protocol.name(),
            request_id: self.id.to_owned(),
            key_id: self.caller.key_id,
            started: self.started,
            ends_session: false,
        })
    }
}

/// An idle session's context, found in the running config by its route and key: the key's
/// packs, else the route's; `None` when either is gone.
impl crate::evals::SessionResolver for super::Gateway {
    fn resolve(
        &self,
        route: &str,
        key_id: Option<&str>,
        session: &str,
    ) -> Option<crate::evals::SessionContext> {
        let rt = self.runtime();
        let route = rt.routes.iter().find(|r| r.name == route)?;
        let key = match key_id {
            Some(id) => Some(rt.keys.iter().find(|k| k.id == id)?),
            None => None,
        };
        let policy = key.and_then(|k| k.policy.as_ref()).unwrap_or(&route.policy);
        Some(crate::evals::SessionContext {
            policy: Arc::clone(policy),
            env: JudgeEnv {
                judges: Arc::clone(&rt.eval_judges),
                tenant: key.map(|k| k.id),
                client: Arc::clone(&self.client),
                metrics: Arc::clone(&self.metrics),
            },
            audit: Arc::clone(&rt.audit),
            keep_reasons: rt.config.audit.include_match,
            route: route.name,
            protocol: route.protocol.name(),
            key_id: key.map(|k| k.id),
            session: session.to_owned(),
        })
    }
}

impl super::Gateway {
    /// Runs the session evals of the sessions that idle past `evals.session_idle_ms` (each
    /// once over the fleet) until `stop` resolves.
    pub async fn sweep_eval_sessions(self: Arc<Self>, stop: impl std::future::Future<Output = ()>) {
        let evals = Arc::clone(&self.evals);
        evals.sweep_idle_sessions(&*self, stop).await;
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
