//! One exchange, as the steps a request goes through, in order: 1–6 (the request up to the
//! call) in `request.rs`, then:
//!
//! 7. [`RequestCtx::response_head`]: its response head, within the head timeout and budget
//!    ([`RequestCtx::response_head_judged`] while `parallel: true` input checks are judged),
//!    and the charset its body is read in ([`super::charset`]);
//! 8. [`RequestCtx::relay_stream`] for an SSE answer (OnChunk per frame, AfterCall at its end,
//!    in [`super::body::GuardedStream`]), or [`RequestCtx::check_whole`] for a whole one (the
//!    same checks in one pass).

use super::body::{GuardedStream, ProxyBody, StreamContext};
use super::charset::{self, Transcoder};
use super::check::{check_payload, Needs, Stop};
use super::request::{Kept, RequestCtx, Waited};
use super::{headers, InFlight};
use super::{offload, redact};
use crate::delta::Conversation;
use crate::error::GatewayError;
use crate::metrics::{LatencyLabels, TrafficLabels, UpstreamErrorKind};
use crate::policy::tools::ToolHistory;
use crate::policy::ExchangeGuard;
use crate::upstream::{UpstreamBase, UpstreamBody};
use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use http_body_util::{Full, Limited};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The upstream's answer once its head is in: relayed as is (an error status), or to check.
pub enum Head {
    Relay(Response<ProxyBody>),
    Check {
        /// The head as it goes on: its `Content-Type` says UTF-8.
        parts: http::response::Parts,
        body: UpstreamBody,
        /// The body's bytes into the UTF-8 text that is checked and sent.
        text: Transcoder,
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
    /// Step 7: sends the request and waits for the response head. An error status is relayed
    /// as the provider sent it; an encoded body, or one in a charset guardwire cannot decode
    /// (neither can be checked), is refused.
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
        let (mut parts, mut body) = resp.into_parts();
        let sse = parts
            .headers
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if let Some(c) = self.trace.capture() {
            c.response_head(parts.status.as_u16(), sse);
            body.set_tap(Arc::clone(c) as Arc<dyn crate::upstream::Tap>);
        }
        if !parts.status.is_success() {
            if !self.protocol.relays_upstream_errors() {
                return Err(unrelayed_error(parts.status));
            }
            self.check_relayed_headers(&parts.headers, guard)?;
            // The provider's own errors reach the client, as read and checked
            // (`error_body.rs`).
            return self.checked_error(parts, body, guard).await;
        }
        if headers::encoded(&parts.headers) {
            self.count_upstream_error(UpstreamErrorKind::Encoded);
            return Err(GatewayError::Upstream(
                "the upstream sent an encoded body that cannot be checked".into(),
            ));
        }
        self.check_relayed_headers(&parts.headers, guard)?;
        let declared = charset::declared(&parts.headers).map_err(|charset::Unreadable(why)| {
            self.count_upstream_error(UpstreamErrorKind::Encoded);
            GatewayError::Upstream(format!("the upstream's answer cannot be checked: {why}"))
        })?;
        declared.label(&mut parts.headers);
        if let Some(c) = self.trace.capture() {
            // Recorded as the checks read it: decoded from its charset (the tap set above
            // recorded nothing yet; it stays for answers relayed as they came).
            let inner = Arc::clone(c) as Arc<dyn crate::upstream::Tap>;
            body.set_tap(Arc::new(charset::DecodedTap::new(
                declared.transcoder(),
                inner,
            )));
        }
        Ok(Head::Check {
            parts,
            body,
            text: declared.transcoder(),
            sse,
            sent,
            at,
        })
    }

    /// The answer's headers the client will get, through the checks (`headers::check_relayed`):
    /// a violation is the block, before any of the answer is sent.
    pub(super) fn check_relayed_headers(
        &self,
        h: &http::HeaderMap,
        guard: &mut ExchangeGuard,
    ) -> Result<(), GatewayError> {
        let verdict = headers::check_relayed(guard, h);
        guard.take_findings(|monitored, _| self.report().monitor(monitored));
        verdict.map_err(|finding| self.report().block(finding))
    }

    /// Sends the request upstream and waits for the head (step 7) while the `parallel: true`
    /// input checks are judged: a failing verdict drops the upstream call (cancelling it), and
    /// no head is used before every verdict passed.
    pub async fn response_head_judged(
        &self,
        base: &UpstreamBase,
        up_req: Request<Full<Bytes>>,
        guard: &mut ExchangeGuard,
        conversation: &Arc<Conversation>,
    ) -> Result<Head, GatewayError> {
        let judging = self.judge_input(conversation, true);
        let call = self.response_head(base, up_req, guard);
        tokio::pin!(judging, call);
        tokio::select! {
            verdict = &mut judging => {
                verdict?;
                call.await
            }
            head = &mut call => {
                let head = head?;
                judging.await?;
                Ok(head)
            }
        }
    }

    /// Step 8, streamed: the answer relayed frame by frame through a [`GuardedStream`], which
    /// holds the permit until the stream ends.
    #[allow(clippy::too_many_arguments)] // the answer's parts, as `Head::Check` holds them
    pub fn relay_stream(
        &self,
        parts: http::response::Parts,
        body: UpstreamBody,
        text: Transcoder,
        mut guard: ExchangeGuard,
        answered: Answered,
        permit: InFlight,
        kept: Kept,
    ) -> Response<ProxyBody> {
        let Kept {
            conversation,
            evals,
            request,
            reply_to,
            spending,
        } = kept;
        let config = &self.rt.config;
        let overhead_so_far = answered.pre_upstream + answered.head_at.elapsed();
        // An agent's answer may hold any number of parts and chunks: its verdicts are one
        // audit line for the request, as an MCP request's are (`Audit::per_request`).
        let audit = match self.protocol.name() {
            "a2a" => Arc::new(crate::audit::Audit::per_request(&self.rt.audit)),
            _ => Arc::clone(&self.rt.audit),
        };
        let ctx = StreamContext {
            metrics: Arc::clone(&self.gw.metrics),
            audit,
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
            fallback: super::check::Fallback {
                structural: self.protocol.stream_structural(),
                ..self.fallback()
            },
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
            reply_to,
            spending,
        };
        guard.answer(true);
        let stream = GuardedStream::new(body, text, guard, ctx);
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
        text: Transcoder,
        mut guard: ExchangeGuard,
        answered: &Answered,
        kept: Kept,
    ) -> Result<Response<ProxyBody>, GatewayError> {
        let Kept {
            conversation,
            evals,
            request,
            spending,
            ..
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
            Ok(Ok(collected)) => text.whole(collected.to_bytes()),
        };
        let check_started = Instant::now();
        // Decoding and checking a large answer (up to `limits.max_response_bytes`) takes
        // milliseconds: off the async worker, as MCP's large messages (`offload.rs`).
        let work = WholeWork {
            protocol: self.protocol,
            fallback: self.fallback(),
            request,
            started: self.started,
            on_chunk: self.trace.on_chunk_span(),
            after_call: self.trace.after_call_span(),
        };
        let checked = offload::check(offload::work(&body), self.tenant(), {
            let body = body.clone();
            move || work.run(&body, guard)
        })
        .await;
        let WholeChecked {
            mut guard,
            spans,
            verdict,
            estimated,
        } = match checked {
            Some(Ok(checked)) => checked,
            Some(Err(WholeFailure::Malformed(e))) => {
                self.count_upstream_error(UpstreamErrorKind::Malformed);
                tracing::warn!(request_id = self.id, error = %e, "malformed upstream response");
                return Err(GatewayError::Upstream(
                    "the upstream sent a malformed response".into(),
                ));
            }
            Some(Err(WholeFailure::Unchecked(why))) => {
                self.count_upstream_error(UpstreamErrorKind::Malformed);
                return Err(GatewayError::Upstream(why.into()));
            }
            None => {
                return Err(GatewayError::Internal(
                    "the check of the answer failed".into(),
                ))
            }
        };
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
        spending.record(&guard, false);
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
                spending.submit_evals(seed, &guard, self.trace);
            }
            return Err(blocked);
        }
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
            spending.submit_evals(seed, &guard, self.trace);
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
}

/// What checking a whole answer needs, moved to where [`offload::check`] runs it.
struct WholeWork {
    protocol: &'static dyn crate::protocol::Protocol,
    fallback: super::check::Fallback,
    request: super::estimate::RequestCopy,
    started: Instant,
    on_chunk: tracing::Span,
    after_call: tracing::Span,
}

/// A whole answer checked: the guard back, the text spans (for redactions), the verdict of
/// OnChunk and AfterCall, and which token counts were estimated.
struct WholeChecked {
    guard: ExchangeGuard,
    spans: Vec<redact::TextSpan>,
    verdict: Result<(), crate::policy::Finding>,
    estimated: super::estimate::Estimated,
}

enum WholeFailure {
    /// The answer is not its protocol's (the decoder's error, for the log).
    Malformed(String),
    /// Something in it cannot be checked.
    Unchecked(&'static str),
}

impl WholeWork {
    /// Decodes `body`, runs the frame checker over it (OnChunk and the fallback), estimates
    /// what the provider did not report (before AfterCall: `cost_budget`), then AfterCall.
    fn run(self, body: &[u8], mut guard: ExchangeGuard) -> Result<WholeChecked, WholeFailure> {
        let mut deltas = Vec::new();
        if let Err(e) = self.protocol.decode_response(body, &mut deltas) {
            return Err(WholeFailure::Malformed(e.to_string()));
        }
        let mut spans = Vec::new();
        let on_chunk = self.on_chunk.entered();
        let verdict = match check_payload(
            &mut guard,
            &deltas,
            body,
            self.fallback,
            &mut Needs::new(),
            &mut spans,
        ) {
            Ok(()) => Ok(()),
            Err(Stop::Violation(finding)) => Err(finding),
            // A whole answer has nothing before it to repeat.
            Err(Stop::Unchecked(why)) => return Err(WholeFailure::Unchecked(why)),
        };
        drop(on_chunk);
        let request = self.request;
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
                let _span = self.after_call.entered();
                guard.after_call()
            })
            .and_then(|()| guard.check_latency(self.started.elapsed().as_millis() as u64));
        Ok(WholeChecked {
            guard,
            spans,
            verdict,
            estimated,
        })
    }
}

/// The upstream's answer as it came (status, body), hop-by-hop headers dropped.
pub(super) fn relay(parts: http::response::Parts, body: UpstreamBody) -> Response<ProxyBody> {
    let mut r = Response::new(ProxyBody::Upstream(body));
    *r.status_mut() = parts.status;
    *r.headers_mut() = headers::forwardable(&parts.headers);
    r
}

/// An answer read and checked whole, relayed as `body` (UTF-8, as checked).
pub(super) fn relay_checked(parts: http::response::Parts, body: Bytes) -> Response<ProxyBody> {
    let mut headers = headers::forwardable(&parts.headers);
    headers.remove(header::CONTENT_LENGTH);
    let mut r = Response::new(ProxyBody::full(body));
    *r.status_mut() = parts.status;
    *r.headers_mut() = headers;
    r
}

/// The error that stands for an upstream's error answer its protocol does not relay
/// ([`Protocol::relays_upstream_errors`](crate::protocol::Protocol::relays_upstream_errors)):
/// its status is said, its body (unchecked text) is not.
pub(super) fn unrelayed_error(status: http::StatusCode) -> GatewayError {
    GatewayError::Upstream(format!("the upstream answered HTTP {}", status.as_u16()))
}
