//! The steps of one exchange up to the call, in order (the answer's steps are in
//! `exchange.rs`):
//!
//! 1. [`target`]: the method is POST and the route has an upstream;
//! 2. [`authenticate`]: the caller's key (when keys are configured) picks the policy;
//! 3. [`RequestCtx::read_body`]: the body, size-limited, within `timeouts.client_body_ms`, its
//!    bytes counted as they arrive against `limits.max_buffered_request_bytes` and the
//!    caller's shares of it (its key's, its client address's);
//! 4. [`RequestCtx::admit`]: an in-flight permit (the key's, then the total), taken only once
//!    the body is in (the client address's share, `Gateway::handle` took before the body);
//! 5. [`RequestCtx::before_call`]: the input checks (BeforeCall), before the provider is paid;
//! 6. [`RequestCtx::upstream_request`]: the request as it goes upstream (path, headers, keys);
//!    [`RequestCtx::send_upstream`] sends it.
//!
//! Every step shares one [`RequestCtx`]: the route, the caller, the request's identity and
//! clock, and where its verdicts are reported. Nothing here knows the response body types of
//! the proxy, so the evals and the judged checks can extend [`RequestCtx`] without an import
//! cycle through `body.rs`.

use super::check::Fallback;
use super::client_address::AddressShare;
use super::report::Reporter;
use super::runtime::{Route, Runtime};
use super::{auth, headers, Gateway, InFlight};
use crate::budget::{BodyHeld, BodyLimits, Budget};
use crate::config::StoredContext;
use crate::delta::Conversation;
use crate::error::GatewayError;
use crate::evals::EvalSeed;
use crate::metrics::{LatencyLabels, StoredContextLabels, TrafficLabels, UpstreamErrorKind};
use crate::policy::tools::ToolHistory;
use crate::policy::{ExchangeGuard, Policy};
use crate::protocol::{self, ParsedRequest, Protocol};
use crate::telemetry::RequestTrace;
use crate::upstream::{UpstreamBase, UpstreamBody, UpstreamError};
use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{header, HeaderValue, Method, Request, Response};
use http_body::Body as _;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A reservation begun before the request's checks ([`RequestCtx::reserve_ahead`]).
pub type ReserveAhead =
    tokio::task::JoinHandle<Result<crate::state::Admission, crate::state::StoreError>>;
use tracing::Instrument;

/// The TCP peer's address of a request, put in its extensions by [`Gateway::handle`].
#[derive(Debug, Clone, Copy)]
pub struct ClientPeer(pub IpAddr);

/// What of the request the answer's judged checks and the evals need: kept only when the
/// policy has some.
pub struct Kept {
    pub conversation: Option<Arc<Conversation>>,
    pub evals: Option<EvalSeed>,
    /// The request as the client sent it: its input tokens are estimated from it when the
    /// provider reports none.
    pub request: super::estimate::RequestCopy,
    /// What an error answer repeats of the request (its JSON-RPC id): the error frame that
    /// ends a stream carries it too.
    pub reply_to: protocol::ReplyTo,
    /// The key's reservation against its limits over time and the session's spend, settled
    /// when the exchange ends with the usage recorded on them.
    pub spending: super::spending::Spending,
}

/// Who a request is from, once its key is checked, and what that decides.
pub struct Caller<'a> {
    pub policy: &'a Arc<Policy>,
    pub key_id: Option<&'static str>,
    pub upstream_key: Option<&'a str>,
    /// Its key's requests in flight and `max_concurrent_requests`, when it has one.
    pub key_limit: Option<(&'a Arc<Budget>, usize)>,
    /// Its key's limits over time, when it has any.
    pub limits: Option<&'a Arc<crate::state::KeyLimits>>,
    /// The client address it came from (the TCP peer's, counted as
    /// [`super::client_address::counted_as`] says), when known.
    pub address: Option<IpAddr>,
}

/// What a request is, by its route and path.
pub enum Target<'a> {
    /// An operation of the route's protocol (or its family, see [`protocol::family`]): checked
    /// in that protocol.
    Checked(&'a UpstreamBase, &'static dyn Protocol),
    /// One of the route's `passthrough_paths`: forwarded unchecked.
    Passthrough(&'a UpstreamBase),
    /// A GET of one of the protocol's discovery documents (an A2A agent card): fetched from
    /// the upstream and served with its URLs rewritten to guardwire's.
    Discovery(&'a UpstreamBase),
}

/// Step 1: the route's upstream is configured; a configured route serves only its protocol's
/// operation (and its `passthrough_paths`); checked requests are POSTs.
pub fn target<'a>(route: &'a Route, req: &Request<Incoming>) -> Result<Target<'a>, GatewayError> {
    let base = route.upstream.as_ref().ok_or_else(|| {
        GatewayError::NotFound(format!(
            "no upstream is configured for {}",
            req.uri().path()
        ))
    })?;
    if route.prefix.is_some() {
        let forwarded = route.forwarded(req.uri().path());
        if route.passthrough.iter().any(|p| *p == forwarded) {
            return Ok(Target::Passthrough(base));
        }
        if req.method() == Method::GET
            && route
                .protocol
                .discovery_paths()
                .contains(&forwarded.as_ref())
        {
            return Ok(Target::Discovery(base));
        }
        // Empty and dot segments are refused: an upstream that merges or resolves them would
        // run another operation than the one the path names here.
        let odd = forwarded
            .split('/')
            .skip(1)
            .any(|seg| seg.is_empty() || seg == "." || seg == "..");
        let Some(&protocol) = protocol::family(route.protocol)
            .iter()
            .find(|p| !odd && p.serves(&forwarded))
        else {
            return Err(GatewayError::NotFound(format!(
                "{} is not an endpoint of this route's protocol ({}); list it in the route's passthrough_paths to forward it unchecked",
                req.uri().path(),
                route.protocol.name()
            )));
        };
        return post_only(req).map(|()| Target::Checked(base, protocol));
    }
    post_only(req).map(|()| Target::Checked(base, route.protocol))
}

/// Checked requests are POSTs.
fn post_only(req: &Request<Incoming>) -> Result<(), GatewayError> {
    if req.method() != Method::POST {
        return Err(GatewayError::MethodNotAllowed(format!(
            "{} is not allowed here; use POST",
            req.method()
        )));
    }
    Ok(())
}

/// Step 2: who is calling, before the body is read: a request without a valid key costs
/// nothing.
pub fn authenticate<'a>(
    rt: &'a Runtime,
    route: &'a Route,
    parts: &Parts,
) -> Result<Caller<'a>, GatewayError> {
    let address = parts
        .extensions
        .get::<ClientPeer>()
        .map(|p| super::client_address::counted_as(p.0));
    if rt.keys.is_empty() {
        return Ok(Caller {
            policy: &route.policy,
            key_id: None,
            upstream_key: None,
            key_limit: None,
            limits: None,
            address,
        });
    }
    let presented = auth::presented_key(&parts.headers, parts.uri.query()).map_err(|_| {
        GatewayError::Unauthorized(
            "two different keys were presented (Authorization, x-api-key, api-key, x-goog-api-key or key=); present one"
                .into(),
        )
    })?;
    let key = presented
        .and_then(|presented| auth::find_key(&rt.keys, presented))
        .ok_or_else(|| {
            GatewayError::Unauthorized(
                "a valid guardwire key is required (Authorization: Bearer <key>, x-api-key or x-goog-api-key)"
                    .into(),
            )
        })?;
    Ok(Caller {
        policy: key.policy.as_ref().unwrap_or(&route.policy),
        key_id: Some(key.id),
        upstream_key: key.upstream_key.as_deref(),
        key_limit: key.max_in_flight.map(|max| (&key.in_flight, max)),
        limits: key.limits.as_ref(),
        address,
    })
}

/// What the steps of one request share.
pub struct RequestCtx<'a> {
    pub gw: &'a Gateway,
    pub rt: &'a Runtime,
    pub route: &'a Route,
    pub caller: Caller<'a>,
    /// When the request arrived: `latency_budget` and `timeouts.total_ms` count from here.
    pub started: Instant,
    pub request_id: &'a HeaderValue,
    /// The request id as text, for logs.
    pub id: &'a str,
    /// The operation's protocol (the route's, or one of its family).
    pub protocol: &'static dyn Protocol,
    /// The request's span and access-log facts.
    pub trace: &'a RequestTrace,
}

impl RequestCtx<'_> {
    /// How the checks treat strings of an answer that the decoder does not model.
    pub(super) fn fallback(&self) -> Fallback {
        Fallback {
            structural: self.protocol.structural(),
            unknown: self.route.unknown_content,
            fully_read: false,
        }
    }
}

/// How a wait for the upstream ended without an answer.
pub(super) enum Waited {
    /// The step's own limit passed.
    Limit,
    /// An enforced `latency_budget` ran out first.
    Budget,
}

impl<'a> RequestCtx<'a> {
    pub fn report(&self) -> Reporter<'_> {
        Reporter {
            metrics: &self.gw.metrics,
            audit: &self.rt.audit,
            policy: self.caller.policy,
            route: self.route.name,
            key_id: self.caller.key_id,
            request_id: self.id,
            trace: self.trace,
        }
    }

    pub(super) fn count_upstream_error(&self, kind: UpstreamErrorKind) {
        super::report::count_upstream_error(&self.gw.metrics, self.route.name, kind);
    }

    /// Whose checks this request's are, for the blocking pool's turns (`offload.rs`).
    pub fn tenant(&self) -> super::offload::Tenant {
        super::offload::Tenant::of(self.caller.key_id, self.caller.address)
    }

    /// The labels this exchange's tokens and spend are counted under, for the model asked for.
    pub fn traffic(&self, model: Option<&str>) -> TrafficLabels {
        TrafficLabels {
            route: self.route.name,
            model: self.rt.model_label(model),
            key_id: self.caller.key_id.unwrap_or("none"),
        }
    }

    /// The guard of this exchange, with this caller's policy (`model`: the one asked for, for
    /// its price).
    pub(super) fn guard(&self, history: ToolHistory, model: Option<&str>) -> ExchangeGuard {
        exchange_guard(self.rt, self.caller.policy, history, model)
    }

    /// Waits for `fut` at most `limit`, and never past an enforced `latency_budget`.
    pub(super) async fn wait<T>(
        &self,
        limit: Duration,
        fut: impl std::future::Future<Output = T>,
    ) -> Result<T, Waited> {
        let budget_left = self
            .caller
            .policy
            .latency_budget()
            .map(|(_, ms)| Duration::from_millis(ms).saturating_sub(self.started.elapsed()));
        match tokio::time::timeout(budget_left.map_or(limit, |left| left.min(limit)), fut).await {
            Ok(v) => Ok(v),
            Err(_) if budget_left.is_some_and(|left| left <= limit) => Err(Waited::Budget),
            Err(_) => Err(Waited::Limit),
        }
    }

    /// The latency budget ran out while waiting: the budget's verdict (a block when enforced),
    /// else the timeout `otherwise`.
    pub(super) fn budget_spent(&self, guard: &mut ExchangeGuard, otherwise: &str) -> GatewayError {
        let verdict = guard.check_latency(self.started.elapsed().as_millis() as u64);
        guard.take_findings(|monitored, _| self.report().monitor(monitored));
        match verdict {
            Err(finding) => self.report().block(finding),
            Ok(()) => GatewayError::UpstreamTimeout(otherwise.into()),
        }
    }

    /// Step 3: the request body, at most `limits.max_request_bytes`, within
    /// `timeouts.client_body_ms`. Its bytes are counted as they arrive — never from the
    /// announced `content-length`, which costs a client nothing — against
    /// `limits.max_buffered_request_bytes` and the caller's shares of it (its key's, its client
    /// address's), and given back when the exchange ends (the body is kept until then). A
    /// length announced over `limits.max_request_bytes` is refused (413) before a byte is read.
    pub async fn read_body(&self, body: Incoming) -> Result<(Bytes, BodyHeld), GatewayError> {
        let config = &self.rt.config.limits;
        let limit = config.max_request_bytes;
        let budget = BodyLimits {
            total: config.max_buffered_request_bytes,
            per_key: config.buffered_request_bytes_per_key(),
            per_address: config.max_buffered_request_bytes_per_client_address,
        };
        let ms = self.rt.config.timeouts.client_body_ms;
        if body
            .size_hint()
            .exact()
            .is_some_and(|n| usize::try_from(n).map_or(true, |n| n > limit))
        {
            return Err(GatewayError::PayloadTooLarge { limit });
        }
        let mut held = self.gw.body_bytes(self.caller.key_id, self.caller.address);
        let read = async move {
            let mut body = body;
            let mut parts: Vec<Bytes> = Vec::new();
            let mut total = 0usize;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| {
                    GatewayError::InvalidRequest(format!("could not read the request body: {e}"))
                })?;
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                total = total.saturating_add(data.len());
                if total > limit {
                    return Err(GatewayError::PayloadTooLarge { limit });
                }
                let more = total.saturating_sub(held.size());
                self.gw.more_body_bytes(&mut held, more, budget)?;
                parts.push(data);
            }
            let body = match parts.len() {
                0 => Bytes::new(),
                // A lone chunk is a slice of hyper's read buffer (8 KiB and up, shared with
                // the request head): kept for the stream's life, it would pin that buffer and
                // make hyper allocate another for its reads while the answer streams. The
                // body's own bytes are copied instead (one copy, beside parsing it).
                1 => Bytes::copy_from_slice(&parts[0]),
                _ => {
                    let mut all = BytesMut::with_capacity(total);
                    for p in parts {
                        all.extend_from_slice(&p);
                    }
                    all.freeze()
                }
            };
            Ok((body, held))
        };
        tokio::time::timeout(Duration::from_millis(ms), read)
            .await
            .map_err(|_| GatewayError::BodyTimeout { ms })?
    }

    /// Step 4: a permit against the key's `max_concurrent_requests` (429 over it) and
    /// `limits.max_concurrent_requests` (503), taken only once the body is in, so a slow
    /// client cannot hold one while others are turned away. It keeps the body's bytes and the
    /// client address's share (taken before the body was read).
    pub fn admit(
        &self,
        address: Option<AddressShare>,
        body: BodyHeld,
    ) -> Result<InFlight, GatewayError> {
        self.gw.admit(
            self.rt.config.limits.max_concurrent_requests,
            self.caller.key_limit,
            address,
            body,
        )
    }

    /// Step 4b: against the key's limits over time (when it has any), the request reserves
    /// what it may use (`ask`): refused with 429 over a limit, 503 when the store cannot count
    /// under `state.on_error: fail_closed`. The key's quota goes into `quota`, for the answer's
    /// rate-limit headers.
    pub async fn reserve(
        &self,
        ask: impl FnOnce(&crate::state::KeyLimits) -> Result<crate::state::Ask, GatewayError>,
        price: Option<crate::config::Price>,
        quota: &mut Option<crate::state::Quota>,
    ) -> Result<Option<crate::state::Reservation>, GatewayError> {
        let (Some(limits), Some(key)) = (self.caller.limits, self.caller.key_id) else {
            return Ok(None);
        };
        let ask = ask(limits)?;
        let admission = self.gw.state.reserve(key, limits, ask, price).await;
        self.admission(admission, quota)
    }

    /// [`RequestCtx::reserve`] begun now, its round trip to a remote store made while the
    /// request is checked; [`RequestCtx::reserved`] awaits it. Spawned, so a reservation the
    /// store made is settled (its `Drop`) even when this request is dropped before awaiting it.
    pub fn reserve_ahead(
        &self,
        ask: impl FnOnce(&crate::state::KeyLimits) -> Result<crate::state::Ask, GatewayError>,
        price: Option<crate::config::Price>,
    ) -> Result<Option<ReserveAhead>, GatewayError> {
        let (Some(limits), Some(key)) = (self.caller.limits, self.caller.key_id) else {
            return Ok(None);
        };
        let ask = ask(limits)?;
        let (state, limits) = (Arc::clone(&self.gw.state), Arc::clone(limits));
        // (In the request's span: what the store logs names the request.)
        Ok(Some(tokio::spawn(
            async move { state.reserve(key, &limits, ask, price).await }
                .instrument(tracing::Span::current()),
        )))
    }

    /// The reservation begun by [`RequestCtx::reserve_ahead`], as [`RequestCtx::reserve`]
    /// answers it.
    pub async fn reserved(
        &self,
        ahead: Option<ReserveAhead>,
        quota: &mut Option<crate::state::Quota>,
    ) -> Result<Option<crate::state::Reservation>, GatewayError> {
        let Some(ahead) = ahead else {
            return Ok(None);
        };
        // (A reservation that failed to run is a store that could not answer: 503.)
        let admission = ahead.await.unwrap_or_else(|e| {
            Err(crate::state::StoreError::Protocol(format!(
                "the reservation failed: {e}"
            )))
        });
        self.admission(admission, quota)
    }

    /// A store's answer to a reservation: the reservation, or 429 / 503.
    fn admission(
        &self,
        admission: Result<crate::state::Admission, crate::state::StoreError>,
        quota: &mut Option<crate::state::Quota>,
    ) -> Result<Option<crate::state::Reservation>, GatewayError> {
        match admission {
            Ok(crate::state::Admission::Admitted {
                quota: q,
                reservation,
            }) => {
                *quota = Some(q);
                Ok(Some(reservation))
            }
            Ok(crate::state::Admission::Refused {
                limit,
                retry_after_ms,
                quota: q,
            }) => {
                *quota = Some(q);
                Err(GatewayError::RateLimited {
                    limit,
                    retry_after_ms,
                })
            }
            Ok(crate::state::Admission::Unchecked) => Ok(None),
            Err(_) => Err(GatewayError::StateUnavailable),
        }
    }

    /// Before step 5: the request's references to provider-stored content (which no input
    /// check can read) are counted, and refused unless the route's `stored_context` is
    /// `pass`: 400 naming the first one's field, nothing forwarded.
    pub fn stored_context(
        &self,
        documents: &protocol::documents::Documents,
    ) -> Result<(), GatewayError> {
        for (kind, _) in &documents.stored {
            self.gw
                .metrics
                .stored_context
                .get_or_create(&StoredContextLabels {
                    route: self.route.name,
                    protocol: self.protocol.name(),
                    kind: kind.as_str(),
                })
                .inc();
        }
        stored_refusal(self.route, documents)
    }

    /// Step 5, BeforeCall: the input checks over the request's conversation. Returns the
    /// exchange's guard, which checks the answer next (continuing from the tool history).
    pub fn before_call(&self, parsed: &ParsedRequest) -> Result<ExchangeGuard, GatewayError> {
        let _span = self.trace.before_call_span().entered();
        let (guard, verdict) = before_call(self.rt, self.caller.policy, parsed);
        self.before_call_verdict(guard, verdict)
    }

    /// [`RequestCtx::before_call`] for a request of estimated `work`
    /// ([`super::offload::work`]), whose session had spent
    /// `session_before` (when `cost_budget` validators read it): a large one is checked on the
    /// bounded blocking pool ([`super::offload`]), so the async worker goes on serving other
    /// tenants and `/healthz` meanwhile.
    pub async fn before_call_sized(
        &self,
        parsed: &mut ParsedRequest,
        work: usize,
        session_before: Option<crate::evals::Spend>,
    ) -> Result<ExchangeGuard, GatewayError> {
        let (guard, verdict) = self
            .before_call_checked(parsed, work, session_before)
            .await?;
        self.before_call_verdict(guard, verdict)
    }

    /// [`RequestCtx::before_call_sized`]'s checks, their verdict not yet reported (blocks
    /// counted, audited): a request refused by its key's limits meanwhile reports none.
    pub async fn before_call_checked(
        &self,
        parsed: &mut ParsedRequest,
        work: usize,
        session_before: Option<crate::evals::Spend>,
    ) -> Result<(ExchangeGuard, Result<(), crate::policy::Finding>), GatewayError> {
        let mut guard = request_guard(self.rt, self.caller.policy, parsed);
        if let Some(before) = session_before {
            guard.set_session_before(before);
        }
        let span = self.trace.before_call_span();
        if !super::offload::is_large(work) {
            let _span = span.entered();
            let verdict = guard.before_call(&parsed.conversation);
            return Ok((guard, verdict));
        }
        let conversation = std::mem::take(&mut parsed.conversation);
        let checked = super::offload::check(work, self.tenant(), move || {
            let verdict = guard.before_call(&conversation);
            (guard, verdict, conversation)
        })
        .instrument(span.clone())
        .await;
        let Some((guard, verdict, conversation)) = checked else {
            return Err(GatewayError::Internal(
                "checking the request failed; it was not sent".into(),
            ));
        };
        parsed.conversation = conversation;
        Ok((guard, verdict))
    }

    /// Reports the BeforeCall checks' findings: monitored ones logged, a block counted and
    /// audited (the request's 400).
    pub fn before_call_verdict(
        &self,
        mut guard: ExchangeGuard,
        verdict: Result<(), crate::policy::Finding>,
    ) -> Result<ExchangeGuard, GatewayError> {
        guard.take_findings(|monitored, _| self.report().monitor(monitored));
        verdict.map_err(|finding| self.report().block(finding))?;
        Ok(guard)
    }

    /// Step 6: the request as it goes upstream: the route's path (prefix stripped), only the
    /// protocol's and the route's allowed headers, the client's key out and the provider key in
    /// (with keys), credentials never indexed by HPACK, identity encoding asked for.
    pub fn upstream_request(
        &self,
        parts: &Parts,
        base: &UpstreamBase,
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, GatewayError> {
        let mut path_and_query = self
            .route
            .forwarded(parts.uri.path_and_query().map_or("/", |p| p.as_str()))
            .into_owned();
        // Without keys the client's own credential (and the account it names) goes upstream.
        let client_credential = self.rt.keys.is_empty();
        let mut up_headers = headers::for_upstream(
            &parts.headers,
            self.protocol.forward_headers(),
            &self.route.forward_headers,
            client_credential,
        );
        if !client_credential {
            // The client's guardwire key never goes upstream; the provider key takes its place.
            path_and_query = auth::without_key_param(&path_and_query);
            auth::strip_client_auth(&mut up_headers);
            if let Some(k) = self.caller.upstream_key {
                auth::set_upstream_key(&mut up_headers, self.route.auth_header, k);
            }
        }
        let uri = base
            .uri_for(&path_and_query)
            .map_err(|e| GatewayError::InvalidRequest(format!("bad request path: {e}")))?;
        up_headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        up_headers.insert(&headers::REQUEST_ID, self.request_id.clone());
        headers::mark_credentials_sensitive(&mut up_headers, self.route.auth_header.as_str());
        let mut up_req = Request::builder()
            .method(parts.method.clone())
            .uri(uri)
            .body(Full::new(body))
            .map_err(|e| GatewayError::Internal(e.to_string()))?;
        *up_req.headers_mut() = up_headers;
        Ok(up_req)
    }

    /// Sends `up_req` and waits for the response head, within `timeouts.response_headers_ms`
    /// and the latency budget (judged by the exchange's `guard`).
    pub(super) async fn send_upstream(
        &self,
        base: &UpstreamBase,
        mut up_req: Request<Full<Bytes>>,
        guard: &mut ExchangeGuard,
    ) -> Result<Response<UpstreamBody>, GatewayError> {
        let timeout = Duration::from_millis(self.rt.config.timeouts.response_headers_ms);
        let method = up_req.method().clone();
        let span =
            self.trace
                .upstream_span(&method, base.authority().as_str(), up_req.headers_mut());
        let call = self
            .gw
            .client
            .request(base, up_req)
            .instrument(span.clone());
        let answer = self.wait(timeout, call).await;
        if let Ok(Ok(resp)) = &answer {
            span.record("http.response.status_code", resp.status().as_u16());
        }
        match answer {
            Err(Waited::Budget) => {
                Err(self.budget_spent(guard, "the upstream did not answer in time"))
            }
            Err(Waited::Limit) => {
                self.count_upstream_error(UpstreamErrorKind::Timeout);
                Err(GatewayError::UpstreamTimeout(
                    "the upstream did not answer in time".into(),
                ))
            }
            Ok(Err(e)) => {
                self.count_upstream_error(UpstreamErrorKind::Connect);
                tracing::warn!(request_id = self.id, route = self.route.name, error = %e, "upstream request failed");
                // The cause goes to the client too (resolve, connect, TLS: by the configured
                // upstream's name), so whoever tries a config sees why without the log.
                let why = match e {
                    UpstreamError::Connect(why) => why,
                    e => format!("{}: {e}", base.authority()),
                };
                Err(GatewayError::Upstream(format!(
                    "the upstream could not be reached: {why}"
                )))
            }
            Ok(Ok(resp)) => Ok(resp),
        }
    }

    /// Counts what the proxy added to a whole answer (any other outcome is counted by
    /// [`Gateway::handle`], from the request's upstream waits).
    pub fn observe_overhead(&self, overhead: Duration) {
        self.trace.overhead_observed();
        self.gw
            .metrics
            .overhead
            .get_or_create(&LatencyLabels {
                route: self.route.name,
                model: self.trace.model_label(),
            })
            .observe(overhead.as_secs_f64());
    }
}

/// The guard of one exchange under `policy` (`model`: the one asked for, for its price), as
/// the proxy and `guardwire eval` start it.
pub fn exchange_guard(
    rt: &Runtime,
    policy: &Arc<Policy>,
    history: ToolHistory,
    model: Option<&str>,
) -> ExchangeGuard {
    let price = model.and_then(|m| rt.config.price(m));
    let mut guard = policy.exchange_guard(history, price);
    if rt.config.audit.include_match {
        guard.keep_matches();
    }
    guard
}

/// BeforeCall over a parsed request: the exchange's guard (continuing from the request's tool
/// history, told how the answer comes) and the input checks' verdict. Monitor-mode findings
/// wait in the guard ([`ExchangeGuard::take_findings`]).
pub fn before_call(
    rt: &Runtime,
    policy: &Arc<Policy>,
    parsed: &ParsedRequest,
) -> (ExchangeGuard, Result<(), crate::policy::Finding>) {
    let mut guard = request_guard(rt, policy, parsed);
    let verdict = guard.before_call(&parsed.conversation);
    (guard, verdict)
}

/// The exchange's guard for a parsed request, before BeforeCall: continuing from the request's
/// tool history, told how the answer comes.
fn request_guard(rt: &Runtime, policy: &Arc<Policy>, parsed: &ParsedRequest) -> ExchangeGuard {
    let history = policy.tool_history(&parsed.conversation);
    let mut guard = exchange_guard(rt, policy, history, parsed.model.as_deref());
    guard.answer(parsed.stream);
    if let Some(n) = parsed.choices {
        guard.expect_choices(n);
    }
    guard
}

/// A request's references to provider-stored content, refused unless the route's
/// `stored_context` is `pass` (the error names the first one's field).
pub fn stored_refusal(
    route: &Route,
    documents: &protocol::documents::Documents,
) -> Result<(), GatewayError> {
    match documents.stored.first() {
        Some((kind @ protocol::documents::StoredKind::HostedTool, path))
            if route.stored_context == StoredContext::Refuse =>
        {
            Err(GatewayError::InvalidRequest(format!(
                "{path} is a tool the provider runs that gives the model content guardwire cannot check ({}: stored files, a remote MCP server, the web); leave it out (or set the route's stored_context: pass)",
                kind.as_str()
            )))
        }
        Some((kind, path)) if route.stored_context == StoredContext::Refuse => {
            Err(GatewayError::InvalidRequest(format!(
                "{path} refers to content stored at the provider ({}), which guardwire cannot check; send it inline (or set the route's stored_context: pass)",
                kind.as_str()
            )))
        }
        _ => Ok(()),
    }
}

/// The parsed request as the input checks read it: unless the route's `unknown_content` is
/// `pass`, input it cannot read is refused and the strings its decoder did not model join the
/// conversation; JSON held in texts (tool results, arguments) is read decoded too.
pub fn complete_input(
    unknown: crate::config::UnknownContent,
    protocol: &dyn Protocol,
    body: &[u8],
    parsed: &mut ParsedRequest,
) -> Result<(), GatewayError> {
    if unknown != crate::config::UnknownContent::Pass {
        if parsed.unreadable_input {
            return Err(GatewayError::InvalidRequest(
                "token-id prompts and inputs cannot be checked; send text (or set the route's unknown_content: pass)"
                    .into(),
            ));
        }
        if let Some(document) = parsed.documents.unreadable.first() {
            return Err(GatewayError::InvalidRequest(format!(
                "{document}: a document guardwire cannot read as text cannot be checked; send it as text (or set the route's unknown_content: pass)"
            )));
        }
        // What the decoder does not model is read by the input checks too.
        let structural = protocol.request_structural(body);
        protocol::residual::add_request_residuals(body, structural, &mut parsed.conversation)
            .map_err(|_| GatewayError::InvalidRequest("the request body cannot be read".into()))?;
    }
    protocol::residual::add_json_views(&mut parsed.conversation);
    Ok(())
}
