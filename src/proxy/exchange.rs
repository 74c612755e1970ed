//! One exchange, as the steps a request goes through, in order:
//!
//! 1. [`target`]: the method is POST and the route has an upstream;
//! 2. [`authenticate`]: the caller's key (when keys are configured) picks the policy;
//! 3. [`RequestCtx::read_body`]: the body, size-limited, within `timeouts.client_body_ms`, its
//!    bytes counted against `limits.max_buffered_request_bytes` before they are read;
//! 4. [`RequestCtx::admit`]: an in-flight permit (the key's, then the total), taken only once
//!    the body is in;
//! 5. [`RequestCtx::before_call`]: the input checks (BeforeCall), before the provider is paid;
//! 6. [`RequestCtx::upstream_request`]: the request as it goes upstream (path, headers, keys);
//! 7. [`RequestCtx::response_head`]: its response head, within the head timeout and budget;
//! 8. [`RequestCtx::relay_stream`] for an SSE answer (OnChunk per frame, AfterCall at its end,
//!    in [`super::body::GuardedStream`]), or [`RequestCtx::check_whole`] for a whole one (the
//!    same checks in one pass).
//!
//! Every step shares one [`RequestCtx`]: the route, the caller, the request's identity and
//! clock, and where its verdicts are reported.

use super::body::{GuardedStream, ProxyBody, StreamContext};
use super::check::{check_payload, Fallback, Needs, Stop};
use super::redact;
use super::report::Reporter;
use super::runtime::{Route, Runtime};
use super::upstream::{UpstreamBase, UpstreamBody, UpstreamError};
use super::{auth, headers, Gateway, InFlight};
use crate::budget::{Budget, Held};
use crate::config::StoredContext;
use crate::delta::Conversation;
use crate::error::GatewayError;
use crate::evals::EvalSeed;
use crate::metrics::{LatencyLabels, StoredContextLabels, TrafficLabels, UpstreamErrorKind};
use crate::policy::tools::ToolHistory;
use crate::policy::{ExchangeGuard, Policy};
use crate::protocol::{self, ParsedRequest, Protocol};
use crate::telemetry::RequestTrace;
use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{header, HeaderValue, Method, Request, Response};
use http_body::Body as _;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

/// What of the request the answer's judged checks and the evals need: kept only when the
/// policy has some.
pub struct Kept {
    pub conversation: Option<Arc<Conversation>>,
    pub evals: Option<EvalSeed>,
    /// The request as the client sent it: its input tokens are estimated from it when the
    /// provider reports none.
    pub request: super::estimate::RequestCopy,
}

/// Who a request is from, once its key is checked, and what that decides.
pub struct Caller<'a> {
    pub policy: &'a Arc<Policy>,
    pub key_id: Option<&'static str>,
    pub upstream_key: Option<&'a str>,
    /// Its key's requests in flight and `max_concurrent_requests`, when it has one.
    pub key_limit: Option<(&'a Arc<Budget>, usize)>,
}

/// What a request is, by its route and path.
pub enum Target<'a> {
    /// An operation of the route's protocol (or its family, see [`protocol::family`]): checked
    /// in that protocol.
    Checked(&'a UpstreamBase, &'static dyn Protocol),
    /// One of the route's `passthrough_paths`: forwarded unchecked.
    Passthrough(&'a UpstreamBase),
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
                "{} is not a {} endpoint of this route (list it in the route's passthrough_paths to forward it unchecked)",
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
    if rt.keys.is_empty() {
        return Ok(Caller {
            policy: &route.policy,
            key_id: None,
            upstream_key: None,
            key_limit: None,
        });
    }
    let key = auth::presented_key(&parts.headers, parts.uri.query())
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
    fn fallback(&self) -> Fallback {
        Fallback {
            structural: self.protocol.structural(),
            unknown: self.route.unknown_content,
            fully_read: false,
        }
    }
}

/// How a wait for the upstream ended without an answer.
enum Waited {
    /// The step's own limit passed.
    Limit,
    /// An enforced `latency_budget` ran out first.
    Budget,
}

/// The upstream's answer once its head is in: relayed as is (an error status), or to check.
pub enum Head {
    Relay(Response<ProxyBody>),
    Check {
        parts: http::response::Parts,
        body: UpstreamBody,
        sse: bool,
        /// When the request was sent upstream.
        sent: Instant,
        /// When the head arrived.
        at: Instant,
    },
}

/// What is known once the upstream's response head arrived, for the metrics of the answer.
pub struct Answered {
    /// The labels the exchange's tokens and spend are counted under.
    pub traffic: TrafficLabels,
    /// The proxy's time before the upstream call.
    pub pre_upstream: Duration,
    /// When the request was sent upstream.
    pub sent: Instant,
    /// When the response head arrived.
    pub head_at: Instant,
    /// guardwire asked for the stream's usage, not the client: the usage chunk is not relayed.
    pub hide_usage: bool,
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

    fn count_upstream_error(&self, kind: UpstreamErrorKind) {
        super::report::count_upstream_error(&self.gw.metrics, self.route.name, kind);
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
    fn guard(&self, history: ToolHistory, model: Option<&str>) -> ExchangeGuard {
        let price = model.and_then(|m| self.rt.config.price(m));
        let mut guard = self.caller.policy.exchange_guard(history, price);
        if self.rt.config.audit.include_match {
            guard.keep_matches();
        }
        guard
    }

    /// Waits for `fut` at most `limit`, and never past an enforced `latency_budget`.
    async fn wait<T>(
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
    fn budget_spent(&self, guard: &mut ExchangeGuard, otherwise: &str) -> GatewayError {
        let verdict = guard.check_latency(self.started.elapsed().as_millis() as u64);
        guard.take_findings(|monitored, _| self.report().monitor(monitored));
        match verdict {
            Err(finding) => self.report().block(finding),
            Ok(()) => GatewayError::UpstreamTimeout(otherwise.into()),
        }
    }

    /// Step 3: the request body, at most `limits.max_request_bytes`, within
    /// `timeouts.client_body_ms`, and its share of `limits.max_buffered_request_bytes`: taken
    /// before a byte is read (its `content-length` when sent), grown as bytes arrive, given
    /// back when the exchange ends (the body is kept until then).
    pub async fn read_body(&self, body: Incoming) -> Result<(Bytes, Held), GatewayError> {
        let limit = self.rt.config.limits.max_request_bytes;
        let budget = self.rt.config.limits.max_buffered_request_bytes;
        let ms = self.rt.config.timeouts.client_body_ms;
        // A larger announced length fails at `limit` as it is read (413), as without one.
        let announced = body
            .size_hint()
            .exact()
            .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX).min(limit));
        let mut held = self.gw.body_bytes(announced, budget)?;
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
                1 => parts.swap_remove(0),
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
    /// client cannot hold one while others are turned away. It keeps the body's bytes.
    pub fn admit(&self, body: Held) -> Result<InFlight, GatewayError> {
        self.gw.admit(
            self.rt.config.limits.max_concurrent_requests,
            self.caller.key_limit,
            body,
        )
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
        match documents.stored.first() {
            Some((kind, path)) if self.route.stored_context == StoredContext::Refuse => {
                Err(GatewayError::InvalidRequest(format!(
                    "{path} refers to content stored at the provider ({}), which guardwire cannot check; send it inline (or set the route's stored_context: pass)",
                    kind.as_str()
                )))
            }
            _ => Ok(()),
        }
    }

    /// Step 5, BeforeCall: the input checks over the request's conversation. Returns the
    /// exchange's guard, which checks the answer next (continuing from the tool history).
    pub fn before_call(&self, parsed: &ParsedRequest) -> Result<ExchangeGuard, GatewayError> {
        let _span = self.trace.before_call_span().entered();
        let history = self.caller.policy.tool_history(&parsed.conversation);
        let mut guard = self.guard(history, parsed.model.as_deref());
        guard.answer(parsed.stream);
        let verdict = guard.before_call(&parsed.conversation);
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

    /// Step 7: sends the request and waits for the response head. An error status is relayed
    /// as the provider sent it; an encoded body (which cannot be checked) is refused.
    pub async fn response_head(
        &self,
        base: &UpstreamBase,
        up_req: Request<Full<Bytes>>,
        guard: &mut ExchangeGuard,
    ) -> Result<Head, GatewayError> {
        let sent = Instant::now();
        let resp = self.send_upstream(base, up_req, guard).await?;
        let at = Instant::now();
        self.gw
            .metrics
            .upstream_response
            .get_or_create(&LatencyLabels {
                route: self.route.name,
                model: self.trace.model_label(),
            })
            .observe((at - sent).as_secs_f64());
        let (parts, body) = resp.into_parts();
        if !parts.status.is_success() {
            // The provider's own errors reach the client unchanged, body and all.
            return Ok(Head::Relay(relay(parts, body)));
        }
        // Every coding of every Content-Encoding line: one that is not identity means bytes
        // guardwire cannot read (and so cannot check).
        let encoded = parts
            .headers
            .get_all(header::CONTENT_ENCODING)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .any(|coding| !coding.is_empty() && !coding.eq_ignore_ascii_case(b"identity"));
        if encoded {
            self.count_upstream_error(UpstreamErrorKind::Encoded);
            return Err(GatewayError::Upstream(
                "the upstream sent an encoded body that cannot be checked".into(),
            ));
        }
        let sse = parts
            .headers
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        Ok(Head::Check {
            parts,
            body,
            sse,
            sent,
            at,
        })
    }

    /// Step 8, streamed: the answer relayed frame by frame through a [`GuardedStream`], which
    /// holds the permit until the stream ends.
    pub fn relay_stream(
        &self,
        parts: http::response::Parts,
        body: UpstreamBody,
        mut guard: ExchangeGuard,
        answered: Answered,
        permit: InFlight,
        kept: Kept,
    ) -> Response<ProxyBody> {
        let Kept {
            conversation,
            evals,
            request,
        } = kept;
        let config = &self.rt.config;
        let overhead_so_far = answered.pre_upstream + answered.head_at.elapsed();
        let ctx = StreamContext {
            metrics: Arc::clone(&self.gw.metrics),
            audit: Arc::clone(&self.rt.audit),
            key_id: self.caller.key_id,
            route: self.route.name,
            protocol: self.protocol,
            overhead_so_far,
            idle_timeout: Duration::from_millis(config.timeouts.idle_ms),
            started: tokio::time::Instant::from_std(self.started),
            total_deadline: tokio::time::Instant::from_std(self.started)
                + Duration::from_millis(config.timeouts.total_ms),
            max_frame_bytes: config.limits.max_frame_bytes,
            max_holdback_bytes: config.limits.max_holdback_bytes,
            stop: self.gw.stop_streams.subscribe(),
            permit,
            fallback: self.fallback(),
            traffic: answered.traffic,
            sent: answered.sent,
            trace: self.trace.for_stream(),
            judge: conversation
                .filter(|_| !self.caller.policy.judged_output().is_empty())
                .map(|c| (self.judge_env(), c)),
            keep_reasons: config.audit.include_match,
            evals,
            hide_usage: answered.hide_usage,
            request,
        };
        guard.answer(true);
        let stream = GuardedStream::new(body, guard, ctx);
        let mut r = Response::new(ProxyBody::Guarded(Box::new(stream)));
        *r.headers_mut() = headers::forwardable(&parts.headers);
        r
    }

    /// Step 8, whole: the body read (within the idle limit and the budget), decoded, run
    /// through the same frame checker as a stream's frames, then AfterCall; released whole,
    /// with redactions applied, or blocked. The proxy's time (all but the waits on the
    /// upstream) is observed for a release and a block alike; the reported tokens are counted.
    pub async fn check_whole(
        &self,
        parts: http::response::Parts,
        body: UpstreamBody,
        mut guard: ExchangeGuard,
        answered: &Answered,
        kept: Kept,
    ) -> Result<Response<ProxyBody>, GatewayError> {
        let Kept {
            conversation,
            evals,
            request,
        } = kept;
        let head_at = answered.head_at;
        let waited = Instant::now();
        guard.answer(false);
        let idle = Duration::from_millis(self.rt.config.timeouts.idle_ms);
        let limit = self.rt.config.limits.max_response_bytes;
        let read = self.wait(idle, Limited::new(body, limit).collect()).await;
        self.trace.add_upstream_wait(waited.elapsed());
        let body = match read {
            Err(Waited::Budget) => {
                return Err(self.budget_spent(&mut guard, "the upstream body stalled"));
            }
            Err(Waited::Limit) => {
                self.count_upstream_error(UpstreamErrorKind::Idle);
                return Err(GatewayError::UpstreamTimeout(
                    "the upstream body stalled".into(),
                ));
            }
            Ok(Err(_)) => {
                self.count_upstream_error(UpstreamErrorKind::Reset);
                return Err(GatewayError::Upstream(
                    "the upstream response body failed or was too large".into(),
                ));
            }
            Ok(Ok(collected)) => collected.to_bytes(),
        };
        let check_started = Instant::now();
        let mut deltas = Vec::new();
        if let Err(e) = self.protocol.decode_response(&body, &mut deltas) {
            self.count_upstream_error(UpstreamErrorKind::Malformed);
            tracing::warn!(request_id = self.id, error = %e, "malformed upstream response");
            return Err(GatewayError::Upstream(
                "the upstream sent a malformed response".into(),
            ));
        }
        let mut spans = Vec::new();
        let on_chunk = self.trace.on_chunk_span().entered();
        let verdict = match check_payload(
            &mut guard,
            &deltas,
            &body,
            self.fallback(),
            &mut Needs::new(),
            &mut spans,
        ) {
            Ok(()) => Ok(()),
            Err(Stop::Violation(finding)) => Err(finding),
            // A whole answer has nothing before it to repeat.
            Err(Stop::Unchecked(why)) => {
                self.count_upstream_error(UpstreamErrorKind::Malformed);
                return Err(GatewayError::Upstream(why.into()));
            }
        };
        drop(on_chunk);
        // What the provider did not report is estimated before AfterCall (`cost_budget`).
        let estimated = super::estimate::fill(
            &mut guard,
            || request.tokens(),
            || {
                let (texts, total) = super::estimate::answer_texts(&deltas);
                super::estimate::count(texts.into_iter(), total)
            },
        );
        let verdict = verdict
            .and_then(|()| {
                let _span = self.trace.after_call_span().entered();
                guard.after_call()
            })
            .and_then(|()| guard.check_latency(self.started.elapsed().as_millis() as u64));
        guard.take_findings(|monitored, redacted| {
            self.report().monitor(monitored);
            self.report().redactions(redacted);
        });
        super::report::count_usage(
            &self.gw.metrics,
            &answered.traffic,
            &guard,
            self.trace,
            estimated,
        );
        // The answer's judged checks, once every other check passed; their wait is not the
        // proxy's time.
        let mut judged_for = Duration::ZERO;
        let verdict = match (verdict, conversation) {
            (Ok(()), Some(conversation)) if !self.caller.policy.judged_output().is_empty() => {
                let judging = Instant::now();
                let (text, tool_calls) = guard.judged_answer();
                let answer = crate::judge::Answer { text, tool_calls };
                let verdict = self.judge_whole_answer(answer, conversation).await;
                judged_for = judging.elapsed();
                self.trace.add_upstream_wait(judged_for);
                verdict
            }
            (verdict, _) => verdict,
        };
        let proxy_time = |check_started: Instant| {
            ((waited - head_at) + check_started.elapsed()).saturating_sub(judged_for)
        };
        if let Err(finding) = verdict {
            self.observe_overhead(answered.pre_upstream + proxy_time(check_started));
            let blocked = self.report().block(finding);
            if let Some(seed) = evals {
                super::evals::submit_answered(seed, &guard, self.trace);
            }
            return Err(blocked);
        }
        drop(deltas);
        let body = if guard.redactions().is_empty() {
            body
        } else {
            match redact::rewrite(&body, &spans, guard.redactions()) {
                Ok(Some(new)) => Bytes::from(new),
                Ok(None) => body,
                Err(redact::Unmaskable) => {
                    return Err(GatewayError::Internal(
                        "a redaction could not be applied".into(),
                    ))
                }
            }
        };
        let mut out_headers = headers::forwardable(&parts.headers);
        out_headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        let mut r = Response::new(ProxyBody::full(body));
        *r.status_mut() = parts.status;
        *r.headers_mut() = out_headers;
        self.observe_overhead(answered.pre_upstream + proxy_time(check_started));
        if let Some(seed) = evals {
            super::evals::submit_answered(seed, &guard, self.trace);
        }
        Ok(r)
    }

    /// A `passthrough_paths` request: forwarded as the client sent it (any method, any body;
    /// headers allowed and keys swapped as for any request) and its answer relayed untouched — unchecked, by the
    /// operator's explicit choice.
    pub async fn passthrough(
        &self,
        parts: &Parts,
        base: &UpstreamBase,
        body: Bytes,
    ) -> Result<Response<ProxyBody>, GatewayError> {
        let up_req = self.upstream_request(parts, base, body)?;
        // No checks, but the latency budget still counts.
        let mut guard = self.guard(ToolHistory::default(), None);
        guard.answer(false);
        let (parts, body) = self
            .send_upstream(base, up_req, &mut guard)
            .await?
            .into_parts();
        Ok(relay(parts, body))
    }

    /// Sends `up_req` and waits for the response head, within `timeouts.response_headers_ms`
    /// and the latency budget (judged by the exchange's `guard`).
    async fn send_upstream(
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

/// The upstream's answer as it came (status, body), hop-by-hop headers dropped.
fn relay(parts: http::response::Parts, body: UpstreamBody) -> Response<ProxyBody> {
    let mut r = Response::new(ProxyBody::Upstream(body));
    *r.status_mut() = parts.status;
    *r.headers_mut() = headers::forwardable(&parts.headers);
    r
}
