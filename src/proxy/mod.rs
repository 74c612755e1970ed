//! The HTTP edge: routing, the request path through the three hook phases, and the upstream call.
//!
//! Per request: route by path → read the body (size-limited) → protocol parses it →
//! **BeforeCall** → forward to the configured upstream → either relay a guarded stream
//! (**OnChunk** per delta, **AfterCall** at its end) or check a whole response (same hooks, one
//! pass) → answer. Every failure is a [`GatewayError`] rendered in the route's provider shape.
//! The steps are in `request.rs` (up to the call) and `exchange.rs` (the answer); the operators'
//! endpoints and the reload in `operator.rs`.

pub mod auth;
pub mod body;
pub mod charset;
pub mod check;
pub mod client_address;
mod discovery;
mod error_body;
pub(crate) use error_body::{check_error_text, readable};
pub mod estimate;
mod evals;
mod exchange;
pub mod headers;
pub mod judged;
mod mcp;
mod offload;
mod operator;
pub mod quota;
pub mod redact;
pub mod report;
mod request;
mod runtime;
mod spending;

pub use report::Reporter;
pub use request::{before_call, complete_input, exchange_guard, stored_refusal};
pub use runtime::{check_refs, Route, Runtime};

use crate::budget::{BodyHeld, BodyLimits, BodyRefusal, Budget, Held, RequestBytes};
use crate::error::GatewayError;
use crate::metrics::{LatencyLabels, Metrics, RejectReason, RequestLabels, UpstreamErrorKind};
use crate::protocol::openai_chat::OpenAiChat;
use crate::protocol::{stream_usage, Protocol, ReplyTo};
use crate::telemetry::RequestTrace;
use crate::upstream::UpstreamClient;
use arc_swap::ArcSwap;
use body::ProxyBody;
use bytes::Bytes;
use client_address::{AddressShare, ClientAddresses};
use exchange::{Answered, Head};
use http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use request::{RequestCtx, Target};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

pub struct Gateway {
    runtime: ArcSwap<Runtime>,
    client: Arc<UpstreamClient>,
    pub metrics: Arc<Metrics>,
    /// The file the config came from, re-read on reload (`None`: built in memory, no reload).
    config_path: Option<PathBuf>,
    /// Serialises reloads so two triggers at once cannot swap out of order.
    reloading: tokio::sync::Mutex<()>,
    /// Requests admitted (`limits.max_concurrent_requests`).
    in_flight: Arc<Budget>,
    /// Request-body bytes held (`limits.max_buffered_request_bytes`, and its shares per key
    /// and per client address).
    request_bytes: RequestBytes,
    /// Requests in flight per client address
    /// (`limits.max_concurrent_requests_per_client_address`).
    client_addresses: Arc<ClientAddresses>,
    /// Client connections open (`limits.max_connections`), counted by the accept loop.
    pub(crate) connections: Arc<Budget>,
    /// Set when shutdown begins: `/readyz` answers 503 so load balancers stop sending.
    draining: AtomicBool,
    /// Set when the drain deadline passes: open streams end with the protocol's error frame.
    stop_streams: watch::Sender<bool>,
    /// Where ended exchanges wait for the packs' `evals:` (configured at start).
    evals: Arc<crate::evals::EvalQueue>,
    /// State shared across requests and replicas (`state:`): the keys' limits over time, MCP
    /// sessions' tool calls and removed tools; kept across reloads.
    /// Made at start; `state:` changes take effect on restart.
    pub(crate) state: Arc<crate::state::State>,
}

/// One request counted against `limits.max_concurrent_requests` (and its key's
/// `max_concurrent_requests`, and its client address's cap), with its body's bytes; all given
/// back on drop (for a stream: when the stream ends).
pub struct InFlight {
    _request: Held,
    _key: Option<Held>,
    _address: Option<AddressShare>,
    _body: BodyHeld,
}

impl Gateway {
    pub fn new(runtime: Runtime, config_path: Option<PathBuf>) -> Result<Gateway, String> {
        let client = UpstreamClient::for_config(&runtime.config)?;
        let metrics = Metrics::new();
        note_runtime(&metrics, &runtime);
        let metrics = Arc::new(metrics);
        let server = &runtime.config.server;
        let per_core_workers = match server.runtime {
            crate::config::RuntimeShape::PerCore => server.worker_count(),
            crate::config::RuntimeShape::WorkStealing => 0,
        };
        let state = Arc::new(crate::state::State::new(
            &runtime.config.state,
            runtime.config.timeouts.total_ms,
            per_core_workers,
            Arc::clone(&metrics),
        )?);
        let evals = crate::evals::EvalQueue::new(
            runtime.config.evals.clone(),
            Arc::clone(&metrics),
            Some(Arc::clone(&state)),
        );
        Ok(Gateway {
            state,
            evals: Arc::new(evals),
            runtime: ArcSwap::from_pointee(runtime),
            client: Arc::new(client),
            metrics,
            config_path,
            reloading: tokio::sync::Mutex::new(()),
            in_flight: Budget::new(),
            request_bytes: RequestBytes::default(),
            client_addresses: ClientAddresses::new(),
            connections: Budget::new(),
            draining: AtomicBool::new(false),
            stop_streams: watch::channel(false).0,
        })
    }

    /// Starts the evals' workers on `runtime` (otherwise they start on the runtime of the first
    /// turn submitted).
    pub fn start_evals_on(&self, runtime: &tokio::runtime::Handle) {
        self.evals.start_on(runtime);
    }

    /// Readiness goes false; requests are still served (call before stopping the listener).
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// The drain deadline passed: every open stream ends now with its protocol's error frame.
    pub fn stop_streams(&self) {
        self.stop_streams.send_replace(true);
    }

    /// Turns true at the drain deadline (see [`Gateway::stop_streams`]).
    pub fn streams_stopped(&self) -> watch::Receiver<bool> {
        self.stop_streams.subscribe()
    }

    /// A share of `limits.max_concurrent_requests_per_client_address` for a request from
    /// `peer`, taken before its body is read (`None`: no cap); the refusal is counted.
    fn address_share(
        &self,
        rt: &Runtime,
        peer: IpAddr,
    ) -> Result<Option<AddressShare>, GatewayError> {
        let max = rt.config.limits.max_concurrent_requests_per_client_address;
        if max == 0 {
            return Ok(None);
        }
        match self.client_addresses.take(peer, max) {
            Some(share) => Ok(Some(share)),
            None => {
                self.metrics.reject(RejectReason::AddressConcurrency);
                Err(GatewayError::AddressLimit)
            }
        }
    }

    /// A permit for a request whose body (`body`) is in, holding its `address` share: first
    /// against its key's limit (`key`: its count and limit), then against `max` requests in
    /// flight. Each refusal is counted.
    fn admit(
        &self,
        max: usize,
        key: Option<(&Arc<Budget>, usize)>,
        address: Option<AddressShare>,
        body: BodyHeld,
    ) -> Result<InFlight, GatewayError> {
        let key = match key {
            None => None,
            Some((count, max)) => match count.take(1, max) {
                Some(held) => Some(held),
                None => {
                    self.metrics.reject(RejectReason::KeyConcurrency);
                    return Err(GatewayError::KeyLimit);
                }
            },
        };
        let Some(request) = self.in_flight.take(1, max) else {
            self.metrics.reject(RejectReason::ConcurrentRequests);
            return Err(GatewayError::Overloaded);
        };
        Ok(InFlight {
            _request: request,
            _key: key,
            _address: address,
            _body: body,
        })
    }

    /// An empty hold on the request-body bytes for a body about to be read from `key` at
    /// `address`, grown with [`Gateway::more_body_bytes`] as its bytes arrive.
    fn body_bytes(&self, key: Option<&'static str>, address: Option<IpAddr>) -> BodyHeld {
        self.request_bytes.hold(key, address)
    }

    /// `n` more bytes of a body: refused (and counted) over the key's share (429), the client
    /// address's (429) or the total (503).
    fn more_body_bytes(
        &self,
        held: &mut BodyHeld,
        n: usize,
        limits: BodyLimits,
    ) -> Result<(), GatewayError> {
        let (reason, error) = match held.grow(n, limits) {
            Ok(()) => return Ok(()),
            Err(BodyRefusal::Key) => (RejectReason::KeyRequestBytes, GatewayError::KeyLimit),
            Err(BodyRefusal::Address) => (
                RejectReason::AddressRequestBytes,
                GatewayError::AddressLimit,
            ),
            Err(BodyRefusal::Total) => (RejectReason::RequestBytes, GatewayError::BufferFull),
        };
        self.metrics.reject(reason);
        Err(error)
    }

    pub fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }

    /// The runtime requests started from now on use; requests in flight keep theirs.
    pub fn swap_runtime(&self, runtime: Runtime) {
        self.runtime.store(Arc::new(runtime));
    }

    pub fn runtime(&self) -> Arc<Runtime> {
        self.runtime.load_full()
    }

    /// Answers a client's request from `peer` (the TCP peer's address); returns the answer
    /// and the name of the route it took (`operator` for `/healthz`, `/metrics` and the like).
    pub async fn handle(
        self: Arc<Self>,
        mut req: Request<Incoming>,
        peer: IpAddr,
    ) -> (Response<ProxyBody>, &'static str) {
        let started = Instant::now();
        // Who the request is from, for the steps that share budgets out per client address.
        req.extensions_mut().insert(request::ClientPeer(peer));
        if let Some(resp) = self.operator_endpoint_for_clients(&req).await {
            return (resp, "operator");
        }
        let rt = self.runtime.load_full();
        let request_id = headers::request_id(req.headers());
        let route = rt.route_for(req.uri().path());
        let (route_name, protocol): (&'static str, &'static dyn Protocol) = match route {
            Some(r) => (r.name, r.protocol),
            None => ("unmatched", &OpenAiChat),
        };
        let trace = RequestTrace::start(
            rt.config.log.access,
            started,
            req.method(),
            req.uri().path(),
            req.headers(),
            route_name,
            route.map(|r| r.protocol),
            request_id.to_str().unwrap_or(""),
        );
        // What an error answer repeats of the request (its JSON-RPC id), once its body is read.
        let mut reply_to = ReplyTo::default();
        // The caller's key's quota, once its limits over time were counted: the answer's
        // rate-limit headers.
        let mut quota = None;
        let result = match route {
            None => Err(GatewayError::NotFound(format!(
                "no route for {} {}",
                req.method(),
                req.uri().path()
            ))),
            Some(route) => 'routed: {
                let address = match self.address_share(&rt, peer) {
                    Ok(share) => share,
                    Err(e) => break 'routed Err(e),
                };
                let total = Duration::from_millis(rt.config.timeouts.total_ms);
                // Boxed: the exchange's future is kilobytes, and each layer that held it by
                // value (the timeout, this future, hyper's service future) copied it whole.
                let exchange = Box::pin(self.exchange(
                    &rt,
                    route,
                    req,
                    address,
                    started,
                    &request_id,
                    &trace,
                    &mut reply_to,
                    &mut quota,
                ));
                match tokio::time::timeout(total, exchange).await {
                    Ok(result) => result,
                    Err(_) => {
                        // The wait cut short here was not recorded: the overhead of this
                        // outcome is unknown, so it is not observed.
                        trace.overhead_observed();
                        report::count_upstream_error(
                            &self.metrics,
                            route.name,
                            UpstreamErrorKind::Total,
                        );
                        Err(GatewayError::UpstreamTimeout(
                            "the request took longer than the total time allowed".into(),
                        ))
                    }
                }
            }
        };
        let mut resp = result.unwrap_or_else(|e| {
            if !matches!(e, GatewayError::Blocked { .. }) {
                trace.note_failure();
            }
            error_response(protocol, &e, &reply_to)
        });
        if let Some(q) = &quota {
            quota::set_headers(protocol.id(), q, resp.headers_mut());
        }
        resp.headers_mut().insert(&headers::REQUEST_ID, request_id);
        // A stream observes its own duration, and finishes its trace, when it ends.
        if !matches!(resp.body(), ProxyBody::Guarded(_)) {
            self.metrics
                .request_duration
                .get_or_create(&LatencyLabels {
                    route: route_name,
                    model: trace.model_label(),
                })
                .observe(started.elapsed().as_secs_f64());
            trace.finish(resp.status().as_u16());
            // What the proxy added to an answer that was not checked whole (a block before
            // the call, a refusal, an upstream error or the provider's own error status):
            // all its time but the waits on the upstream.
            if route.is_some() && !trace.was_overhead_observed() {
                let overhead = started.elapsed().saturating_sub(trace.upstream_wait());
                self.metrics
                    .overhead
                    .get_or_create(&LatencyLabels {
                        route: route_name,
                        model: trace.model_label(),
                    })
                    .observe(overhead.as_secs_f64());
            }
        }
        self.metrics
            .requests
            .get_or_create(&RequestLabels {
                route: route_name,
                model: trace.model_label(),
                status: resp.status().as_u16(),
            })
            .inc();
        (resp, route_name)
    }

    /// One proxied request, step by step (each step is in `exchange.rs`), holding its
    /// client address's share. `reply_to` is set once the body is read, for the error answer
    /// [`Gateway::handle`] renders.
    #[allow(clippy::too_many_arguments)] // the request's parts, as `handle` holds them
    async fn exchange(
        &self,
        rt: &Runtime,
        route: &Route,
        req: Request<Incoming>,
        address: Option<AddressShare>,
        started: Instant,
        request_id: &HeaderValue,
        trace: &RequestTrace,
        reply_to: &mut ReplyTo,
        quota: &mut Option<crate::state::Quota>,
    ) -> Result<Response<ProxyBody>, GatewayError> {
        if route.protocol.id() == crate::protocol::ProtocolId::Mcp {
            return self
                .mcp_exchange(
                    rt, route, req, address, started, request_id, trace, reply_to, quota,
                )
                .await;
        }
        let target = request::target(route, &req)?;
        let (mut parts, body) = req.into_parts();
        let caller = request::authenticate(rt, route, &parts)?;
        trace.note_caller(caller.key_id);
        // A checked body is read as JSON; one the upstream would read otherwise is refused
        // before it is read.
        let text = match target {
            Target::Checked(..) => Some(headers::check_request_body_type(&mut parts.headers)?),
            _ => None,
        };
        let protocol = match target {
            Target::Checked(_, p) => p,
            Target::Passthrough(_) | Target::Discovery(_) => route.protocol,
        };
        let ctx = RequestCtx {
            protocol,
            gw: self,
            rt,
            route,
            caller,
            started,
            request_id,
            id: request_id.to_str().unwrap_or(""),
            trace,
        };
        let (body, body_bytes) = ctx.read_body(body).await?;
        // Checked and forwarded as UTF-8, whatever charset the client declared.
        let body = match text {
            Some(text) => text.whole(body),
            None => body,
        };
        if let (Some(capture), Target::Checked(..)) = (&rt.capture, &target) {
            let path = parts.uri.path();
            if let Some(c) = capture.start(
                route.name,
                protocol.name(),
                path,
                ctx.id,
                ctx.caller.key_id,
                &self.metrics,
            ) {
                c.request(&body);
                trace.capture_into(c);
            }
        }
        let permit = ctx.admit(address, body_bytes)?;
        let base = match target {
            Target::Checked(base, _) => base,
            // Requests all the same for `rpm_limit`, asking no tokens.
            Target::Passthrough(base) => {
                let _reserved = ctx.reserve(|_| Ok(Default::default()), None, quota).await?;
                return ctx.passthrough(&parts, base, body).await;
            }
            Target::Discovery(base) => {
                let _reserved = ctx.reserve(|_| Ok(Default::default()), None, quota).await?;
                return ctx.discovery(&parts, base).await;
            }
        };
        *reply_to = protocol.reply_to(&body);
        // Decoding a large body and walking it for what the decoder does not model takes
        // milliseconds: off the async worker, as its checks are (`offload.rs`).
        let unknown = route.unknown_content;
        let work = offload::work(&body);
        let mut parsed = offload::check(work, ctx.tenant(), {
            let (body, path) = (body.clone(), parts.uri.path().to_owned());
            move || -> Result<_, GatewayError> {
                let mut parsed = protocol.parse_request(&body, &path)?;
                request::complete_input(unknown, protocol, &body, &mut parsed)?;
                Ok(parsed)
            }
        })
        .await
        .ok_or_else(|| GatewayError::Internal("the check of the request failed".into()))??;
        ctx.stored_context(&parsed.documents)?;
        trace.note_model(parsed.model.as_deref());
        let traffic = ctx.traffic(parsed.model.as_deref());
        trace.note_model_label(traffic.model);
        let model = parsed.model.as_deref();
        let price = model.and_then(|m| rt.config.price(m));
        let ask = |limits: &crate::state::KeyLimits| {
            let default_output = rt.config.state.reserve_output_tokens;
            quota::ask(limits, &body, model, price, default_output)
        };
        // The key's reservation is a store round trip: to a remote store it is made while the
        // request is checked — unless the checks need the session's spend so far (another
        // round trip, made beside it). A block is reported only once the key was admitted.
        let (reservation, session_spend, before_call) =
            if self.state.is_remote() && !ctx.caller.policy.has_cost_budget() {
                let ahead = ctx.reserve_ahead(ask, price)?;
                let checked = ctx.before_call_checked(&mut parsed, work, None).await;
                let reservation = ctx.reserved(ahead, quota).await?;
                let before_call = checked.and_then(|(g, v)| ctx.before_call_verdict(g, v));
                (reservation, None, before_call)
            } else {
                let (reservation, (session_spend, session_before)) = tokio::join!(
                    ctx.reserve(ask, price, quota),
                    ctx.session_spend(&parts.headers, &parsed, price)
                );
                let reservation = reservation?;
                let before_call = ctx
                    .before_call_sized(&mut parsed, work, session_before)
                    .await;
                (reservation, session_spend, before_call)
            };
        let spending = spending::Spending {
            reservation,
            session: session_spend,
        };
        // Judged checks and evals see the conversation (the request's, and the answer's
        // `_session` variants); it is kept only when some exist.
        let policy = ctx.caller.policy;
        let conversation = policy
            .keeps_exchange()
            .then(|| Arc::new(std::mem::take(&mut parsed.conversation)));
        let mut evals = conversation
            .as_ref()
            .and_then(|c| ctx.eval_seed(&parts.headers, c, parsed.session.as_deref()));
        // A request blocked before the call is a turn for the evals too.
        let blocked_before = |evals: Option<crate::evals::EvalSeed>, e: GatewayError| {
            if let (Some(seed), GatewayError::Blocked { .. }) = (evals, &e) {
                seed.submit(
                    None,
                    true,
                    trace.fired(),
                    (None, None),
                    Default::default(),
                    None,
                );
            }
            e
        };
        let mut guard = match before_call {
            Ok(guard) => guard,
            Err(e) => return Err(blocked_before(evals, e)),
        };
        if let Some(conversation) = &conversation {
            if let Err(e) = ctx.judge_input(conversation, false).await {
                return Err(blocked_before(evals, e));
            }
        }
        // Streamed OpenAI-style answers report usage only when asked: ask on the client's
        // behalf, and keep the usage chunk from a client that did not ask.
        let mut hide_usage = false;
        let request = estimate::RequestCopy {
            protocol,
            body: body.clone(),
            path: parts.uri.path().to_owned(),
        };
        let body = match parsed.stream && route.request_usage && protocol.usage_on_request() {
            true => match stream_usage::ask_for_usage(&body) {
                Some(stream_usage::UsageAsk::Added(asked)) => {
                    hide_usage = true;
                    Bytes::from(asked)
                }
                _ => body,
            },
            false => body,
        };
        let up_req = ctx.upstream_request(&parts, base, body)?;
        spending.sent();
        // The proxy's own time so far: judges' waits are not part of it.
        let pre_upstream = started.elapsed().saturating_sub(trace.upstream_wait());
        let parallel = conversation
            .as_ref()
            .filter(|_| policy.judged_input().iter().any(|(_, c)| c.parallel));
        let head = match parallel {
            Some(conversation) => {
                match ctx
                    .response_head_judged(base, up_req, &mut guard, conversation)
                    .await
                {
                    Ok(head) => head,
                    Err(e) => return Err(blocked_before(evals.take(), e)),
                }
            }
            None => ctx.response_head(base, up_req, &mut guard).await?,
        };
        let (head, body, text, sse, sent, head_at) = match head {
            Head::Relay(resp) => {
                spending.nothing_billed();
                return Ok(resp);
            }
            Head::Check {
                parts,
                body,
                text,
                sse,
                sent,
                at,
            } => (parts, body, text, sse, sent, at),
        };
        let answered = Answered {
            traffic,
            pre_upstream,
            sent,
            head_at,
            hide_usage,
        };
        let kept = request::Kept {
            conversation,
            evals,
            request,
            reply_to: reply_to.clone(),
            spending,
        };
        if sse {
            return Ok(ctx.relay_stream(head, body, text, guard, answered, permit, kept));
        }
        let resp = ctx
            .check_whole(head, body, text, guard, &answered, kept)
            .await?;
        drop(permit);
        Ok(resp)
    }
}

/// Compares secrets in constant time (`subtle`): the time depends on the lengths only, which
/// are not secret, never on where a guess first differs.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(a, b).into()
}

fn plain(status: StatusCode, text: impl Into<Bytes>) -> Response<ProxyBody> {
    let mut r = Response::new(ProxyBody::full(text));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// An error answer in `protocol`'s shape; blocks say the request must not be retried as is.
pub fn error_response(
    protocol: &dyn Protocol,
    err: &GatewayError,
    to: &ReplyTo,
) -> Response<ProxyBody> {
    let mut r = Response::new(ProxyBody::full(protocol.error_body(err, to)));
    *r.status_mut() = protocol.error_status(err, to);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    match err {
        GatewayError::Blocked { .. } | GatewayError::HoldbackExceeded { .. } => {
            h.insert("x-should-retry", HeaderValue::from_static("false"));
        }
        GatewayError::Overloaded
        | GatewayError::BufferFull
        | GatewayError::KeyLimit
        | GatewayError::AddressLimit
        | GatewayError::StateUnavailable
        | GatewayError::ShuttingDown => {
            h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        // A budget that never starts again: no retry will pass.
        GatewayError::RateLimited {
            retry_after_ms: None,
            ..
        } => {
            h.insert("x-should-retry", HeaderValue::from_static("false"));
        }
        GatewayError::RateLimited {
            retry_after_ms: Some(ms),
            ..
        } => {
            h.insert(
                header::RETRY_AFTER,
                HeaderValue::from(quota::retry_after_secs(Some(*ms))),
            );
            h.insert("retry-after-ms", HeaderValue::from(*ms));
        }
        _ => {}
    }
    r
}

/// What the metrics say about a runtime being put in force (at start, or by a reload): its
/// config hash, when, its concurrency limit, and its series at zero.
fn note_runtime(metrics: &Metrics, rt: &Runtime) {
    metrics
        .config_hash
        .set(i64::try_from(rt.config_hash).unwrap_or_default());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    metrics.config_last_reload_success_timestamp.set(now);
    let max = rt.config.limits.max_concurrent_requests;
    metrics
        .max_concurrent_requests
        .set(i64::try_from(max).unwrap_or(i64::MAX));
    report::declare_series(metrics, rt);
}
