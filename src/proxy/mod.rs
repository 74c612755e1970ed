//! The HTTP edge: routing, the request path through the three hook phases, and the upstream call.
//!
//! Per request: route by path → read the body (size-limited) → protocol parses it →
//! **BeforeCall** → forward to the configured upstream → either relay a guarded stream
//! (**OnChunk** per delta, **AfterCall** at its end) or check a whole response (same hooks, one
//! pass) → answer. Every failure is a [`GatewayError`] rendered in the route's provider shape.

pub mod auth;
pub mod body;
pub mod headers;
pub mod redact;
pub mod upstream;

use crate::audit::{Audit, AuditEvent};
use crate::config::Config;
use crate::delta::Delta;
use crate::error::GatewayError;
use crate::metrics::{
    Metrics, ReloadLabels, ReloadResult, RequestLabels, RouteLabels, UpstreamErrorKind,
    UpstreamErrorLabels, VerdictLabels,
};
use crate::policy::{Finding, Mode, Policy, PolicyCache, PolicyError, PolicyLoader};
use crate::protocol::openai_chat::OpenAiChat;
use crate::protocol::Protocol;
use arc_swap::ArcSwap;
use body::{GuardedStream, ProxyBody, StreamContext};
use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use redact::TextSpan;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use upstream::{UpstreamBase, UpstreamClient};

/// One path family served by one protocol and one upstream.
pub struct Route {
    /// The `route` metrics label.
    pub name: &'static str,
    pub protocol: &'static dyn Protocol,
    /// `None` when the provider is not configured: its paths answer 404.
    pub upstream: Option<UpstreamBase>,
    pub policy: Arc<Policy>,
    /// A configured route's path prefix; `None` for the protocol's standard paths.
    pub prefix: Option<String>,
    /// Removed from the path before forwarding.
    pub strip_prefix: Option<String>,
    /// The header a swapped-in provider key goes in.
    pub auth_header: String,
}

/// Everything a request needs that can be swapped as a whole on reload.
pub struct Runtime {
    pub config: Config,
    /// Configured routes (longest prefix first), then one per protocol.
    pub routes: Vec<Route>,
    pub audit: Arc<Audit>,
    /// Client keys; when not empty, every proxied request needs one.
    pub keys: Vec<auth::ClientKey>,
    /// TLS for client connections, when configured.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The distinct compiled policies of routes and keys, reused by the next reload for every
    /// pack list whose files did not change.
    pub policies: PolicyCache,
}

impl Runtime {
    /// Builds one route per protocol and compiles the packs named in `config` (each distinct
    /// list of pack files once, however many routes and keys name it).
    pub fn build(config: Config) -> Result<Runtime, PolicyError> {
        Self::build_after(config, None)
    }

    /// Like [`Runtime::build`], reusing `previous`'s compiled policy for every pack list whose
    /// files have the same contents (a reload compiles only what changed).
    pub fn build_after(config: Config, previous: Option<&Runtime>) -> Result<Runtime, PolicyError> {
        let runtime = Self::compile(config, PolicyLoader::new(previous.map(|r| &r.policies)));
        crate::heap::release_unused();
        runtime
    }

    fn compile(config: Config, mut loader: PolicyLoader<'_>) -> Result<Runtime, PolicyError> {
        let policy = loader.policy(&config.packs)?;
        let audit = Arc::new(Audit::open(&config.audit).map_err(PolicyError::Setup)?);
        let mut configured: Vec<_> = config.routes.iter().collect();
        configured.sort_by_key(|r| std::cmp::Reverse(r.path_prefix.len()));
        let mut routes = Vec::new();
        for rc in configured {
            // Names, protocols and URLs were validated when the config was loaded.
            let Some(protocol) = crate::protocol::by_name(&rc.protocol) else {
                continue;
            };
            routes.push(Route {
                name: auth::intern(&rc.name),
                protocol,
                upstream: upstream::parse_base_url(&rc.upstream).ok(),
                policy: match &rc.packs {
                    Some(packs) => loader.policy(packs)?,
                    None => Arc::clone(&policy),
                },
                prefix: Some(rc.path_prefix.clone()),
                strip_prefix: rc.strip_prefix.clone(),
                auth_header: rc
                    .upstream_auth
                    .clone()
                    .unwrap_or_else(|| protocol.auth_header().to_owned()),
            });
        }
        routes.extend(crate::protocol::all().iter().map(|&protocol| {
            Route {
                name: protocol.name(),
                protocol,
                upstream: protocol
                    .upstream(&config.upstreams)
                    .and_then(|u| upstream::parse_base_url(u).ok()),
                policy: Arc::clone(&policy),
                prefix: None,
                strip_prefix: None,
                auth_header: protocol.auth_header().to_owned(),
            }
        }));
        let mut keys = Vec::new();
        for (i, k) in config.keys.iter().enumerate() {
            let setup = |e: String| PolicyError::Setup(format!("keys[{i}] ({}): {e}", k.id));
            let key_policy = match &k.packs {
                Some(packs) => Some(loader.policy(packs)?),
                None => None,
            };
            keys.push(auth::ClientKey::new(
                &k.id,
                k.secret().map_err(setup)?,
                key_policy,
                k.upstream_key().map_err(setup)?,
            ));
        }
        let tls = match &config.tls {
            Some(t) => Some(crate::tls::server_config(t).map_err(PolicyError::Setup)?),
            None => None,
        };
        Ok(Runtime {
            config,
            routes,
            audit,
            keys,
            tls,
            policies: loader.finish(),
        })
    }

    fn route_for(&self, path: &str) -> Option<&Route> {
        self.routes.iter().find(|r| match &r.prefix {
            Some(prefix) => path.starts_with(prefix.as_str()),
            None => r.protocol.matches(path),
        })
    }
}

pub struct Gateway {
    runtime: ArcSwap<Runtime>,
    client: UpstreamClient,
    pub metrics: Arc<Metrics>,
    /// The file the config came from, re-read on reload (`None`: built in memory, no reload).
    config_path: Option<PathBuf>,
    /// Serialises reloads so two triggers at once cannot swap out of order.
    reloading: tokio::sync::Mutex<()>,
    in_flight: Arc<AtomicUsize>,
    /// Set when shutdown begins: `/readyz` answers 503 so load balancers stop sending.
    draining: AtomicBool,
    /// Set when the drain deadline passes: open streams end with the protocol's error frame.
    stop_streams: watch::Sender<bool>,
}

/// One request counted against `limits.max_concurrent_requests`, released on drop (for a
/// stream: when the stream ends).
pub struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Per-request facts threaded through the phases.
struct Exchange {
    started: Instant,
    request_id: HeaderValue,
}

impl Exchange {
    /// The request id as text, for logs.
    fn id(&self) -> &str {
        self.request_id.to_str().unwrap_or("")
    }
}

impl Gateway {
    pub fn new(runtime: Runtime, config_path: Option<PathBuf>) -> Result<Gateway, String> {
        let client = UpstreamClient::for_config(&runtime.config)?;
        Ok(Gateway {
            runtime: ArcSwap::from_pointee(runtime),
            client,
            metrics: Arc::new(Metrics::new()),
            config_path,
            reloading: tokio::sync::Mutex::new(()),
            in_flight: Arc::new(AtomicUsize::new(0)),
            draining: AtomicBool::new(false),
            stop_streams: watch::channel(false).0,
        })
    }

    /// Readiness goes false; requests are still served (call before stopping the listener).
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// The drain deadline passed: every open stream ends now with its protocol's error frame.
    pub fn stop_streams(&self) {
        self.stop_streams.send_replace(true);
    }

    fn admit(&self, max: usize) -> Option<InFlight> {
        let permit = InFlight(Arc::clone(&self.in_flight));
        (self.in_flight.fetch_add(1, Ordering::AcqRel) < max).then_some(permit)
    }

    pub fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }

    /// Re-reads the config file and every pack it names; if all is valid, swaps the new runtime
    /// in (requests in flight finish on the old one), else keeps the running one. Either way
    /// the result is counted and logged (with file and key on failure). Settings of the
    /// listener itself (`listen`, `limits.max_header_bytes`, `timeouts.client_header_ms`,
    /// `timeouts.connect_ms`) take effect on restart only.
    pub async fn reload(&self) -> Result<(), String> {
        let _one_at_a_time = self.reloading.lock().await;
        let result = match &self.config_path {
            None => Err("guardwire was not started from a config file".to_owned()),
            Some(path) => {
                let path = path.clone();
                let running = self.runtime();
                // Compiling packs is CPU work (automata): keep it off the request threads.
                tokio::task::spawn_blocking(move || {
                    let config = Config::load(&path).map_err(|e| e.to_string())?;
                    Runtime::build_after(config, Some(&running)).map_err(|e| e.to_string())
                })
                .await
                .map_err(|e| format!("reload task failed: {e}"))
                .and_then(|r| r)
            }
        };
        let label = match result {
            Ok(runtime) => {
                let validators = runtime
                    .routes
                    .first()
                    .map_or(0, |r| r.policy.validators().len());
                self.swap_runtime(runtime);
                tracing::info!(validators, "config reloaded");
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "config reload failed; keeping the running policy");
                Err(e)
            }
        };
        self.metrics
            .config_reloads
            .get_or_create(&ReloadLabels {
                result: if label.is_ok() {
                    ReloadResult::Success
                } else {
                    ReloadResult::Failure
                },
            })
            .inc();
        label
    }

    /// `POST /admin/reload`: only when `admin.token` is set, only with that bearer token.
    async fn admin_reload(&self, req: &Request<Incoming>) -> Response<ProxyBody> {
        let Some(token) = self.runtime.load().config.admin.token.clone() else {
            return plain(StatusCode::NOT_FOUND, "not found\n");
        };
        let presented = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .unwrap_or_default();
        if !constant_time_eq(presented, token.as_bytes()) {
            return plain(
                StatusCode::UNAUTHORIZED,
                "a valid admin token is required\n",
            );
        }
        match self.reload().await {
            Ok(()) => plain(StatusCode::OK, "reloaded\n"),
            Err(e) => plain(StatusCode::BAD_REQUEST, format!("reload failed: {e}\n")),
        }
    }

    /// The runtime requests started from now on use; requests in flight keep theirs.
    pub fn swap_runtime(&self, runtime: Runtime) {
        self.runtime.store(Arc::new(runtime));
    }

    pub fn runtime(&self) -> Arc<Runtime> {
        self.runtime.load_full()
    }

    pub async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<ProxyBody> {
        let started = Instant::now();
        match (req.method(), req.uri().path()) {
            (&Method::GET, "/healthz") => return plain(StatusCode::OK, "ok\n"),
            (&Method::GET, "/readyz") => {
                return if self.draining.load(Ordering::Acquire) {
                    plain(StatusCode::SERVICE_UNAVAILABLE, "draining\n")
                } else {
                    plain(StatusCode::OK, "ready\n")
                };
            }
            (&Method::POST, "/admin/reload") => return self.admin_reload(&req).await,
            (&Method::GET, "/metrics") => {
                let mut r = plain(StatusCode::OK, self.metrics.render());
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    ),
                );
                return r;
            }
            _ => {}
        }
        let rt = self.runtime.load_full();
        let request_id = headers::request_id(req.headers());
        let route = rt.route_for(req.uri().path());
        let (route_name, protocol): (&'static str, &'static dyn Protocol) = match route {
            Some(r) => (r.name, r.protocol),
            None => ("unmatched", &OpenAiChat),
        };
        let ex = Exchange {
            started,
            request_id: request_id.clone(),
        };
        let result = match route {
            None => Err(GatewayError::NotFound(format!(
                "no route for {} {}",
                req.method(),
                req.uri().path()
            ))),
            Some(route) => {
                let total = Duration::from_millis(rt.config.timeouts.total_ms);
                match tokio::time::timeout(total, self.proxy(&rt, route, req, &ex)).await {
                    Ok(result) => result,
                    Err(_) => {
                        self.count_upstream_error(route, UpstreamErrorKind::Total);
                        Err(GatewayError::UpstreamTimeout(
                            "the request took longer than the total time allowed".into(),
                        ))
                    }
                }
            }
        };
        let mut resp = result.unwrap_or_else(|e| error_response(protocol, &e));
        resp.headers_mut().insert(&headers::REQUEST_ID, request_id);
        self.metrics
            .requests
            .get_or_create(&RequestLabels {
                route: route_name,
                status: resp.status().as_u16(),
            })
            .inc();
        resp
    }

    async fn proxy(
        &self,
        rt: &Runtime,
        route: &Route,
        req: Request<Incoming>,
        ex: &Exchange,
    ) -> Result<Response<ProxyBody>, GatewayError> {
        let limits = &rt.config.limits;
        if req.method() != Method::POST {
            return Err(GatewayError::MethodNotAllowed(format!(
                "{} is not allowed here; use POST",
                req.method()
            )));
        }
        let Some(base) = &route.upstream else {
            return Err(GatewayError::NotFound(format!(
                "no upstream is configured for {}",
                req.uri().path()
            )));
        };
        // Who is calling, before the body is read: a request without a valid key costs nothing.
        let (parts, body) = req.into_parts();
        let caller = if rt.keys.is_empty() {
            Caller {
                policy: &route.policy,
                key_id: None,
                upstream_key: None,
            }
        } else {
            let key = auth::presented_key(&parts.headers, parts.uri.query())
                .and_then(|presented| auth::find_key(&rt.keys, presented))
                .ok_or_else(|| {
                    GatewayError::Unauthorized(
                        "a valid guardwire key is required (Authorization: Bearer <key>, x-api-key or x-goog-api-key)"
                            .into(),
                    )
                })?;
            Caller {
                policy: key.policy.as_ref().unwrap_or(&route.policy),
                key_id: Some(key.id),
                upstream_key: key.upstream_key.as_deref(),
            }
        };
        // The body has its own deadline, and only a request whose body is in takes a permit:
        // a slow client cannot hold one while others are turned away.
        let body_ms = rt.config.timeouts.client_body_ms;
        let body = tokio::time::timeout(
            Duration::from_millis(body_ms),
            read_limited(body, limits.max_request_bytes),
        )
        .await
        .map_err(|_| GatewayError::BodyTimeout { ms: body_ms })??;
        let Some(permit) = self.admit(limits.max_concurrent_requests) else {
            return Err(GatewayError::Overloaded);
        };
        let parsed = route.protocol.parse_request(&body, parts.uri.path())?;

        // BeforeCall
        let mut findings = Vec::new();
        let history = caller.policy.tool_history(&parsed.conversation);
        let verdict = caller.policy.before_call_with(
            &parsed.conversation,
            &history,
            &mut findings,
            rt.config.audit.include_match,
        );
        self.reporter(rt, route, &caller, ex).monitor(&findings);
        if let Err(finding) = verdict {
            return Err(self.reporter(rt, route, &caller, ex).block(finding));
        }

        let mut path_and_query = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        if let Some(strip) = &route.strip_prefix {
            if let Some(rest) = path_and_query.strip_prefix(strip.as_str()) {
                path_and_query = if rest.starts_with('/') {
                    rest.to_owned()
                } else {
                    format!("/{rest}")
                };
            }
        }
        let mut up_headers = headers::forwardable(&parts.headers);
        if !rt.keys.is_empty() {
            // The client's guardwire key never goes upstream; the provider key takes its place.
            path_and_query = auth::without_key_param(&path_and_query);
            auth::strip_client_auth(&mut up_headers);
            if let Some(k) = caller.upstream_key {
                auth::set_upstream_key(&mut up_headers, &route.auth_header, k);
            }
        }
        let uri = base
            .uri_for(&path_and_query)
            .map_err(|e| GatewayError::InvalidRequest(format!("bad request path: {e}")))?;
        up_headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        up_headers.insert(&headers::REQUEST_ID, ex.request_id.clone());
        let mut up_req = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .body(Full::new(body))
            .map_err(|e| GatewayError::Internal(e.to_string()))?;
        *up_req.headers_mut() = up_headers;

        let pre_upstream = ex.started.elapsed();
        let price = parsed.model.as_deref().and_then(|m| rt.config.price(m));
        // An enforced `latency_budget` ends the exchange when it runs out, at any stage.
        let budget = caller.policy.latency_budget();
        let budget_left = |budget: Option<(u32, u64)>| {
            budget.map(|(v, ms)| {
                (
                    v,
                    Duration::from_millis(ms).saturating_sub(ex.started.elapsed()),
                )
            })
        };
        let timeout = Duration::from_millis(rt.config.timeouts.response_headers_ms);
        let head_timeout = match budget_left(budget) {
            Some((_, left)) => timeout.min(left),
            None => timeout,
        };
        let resp = match tokio::time::timeout(head_timeout, self.client.request(base, up_req)).await
        {
            Err(_) if budget_left(budget).is_some_and(|(_, left)| left.is_zero()) => {
                let mut guard = caller.policy.stream_guard(parsed.stream, history, price);
                if rt.config.audit.include_match {
                    guard.keep_matches();
                }
                let verdict = guard.check_latency(ex.started.elapsed().as_millis() as u64);
                self.reporter(rt, route, &caller, ex)
                    .monitor(&guard.findings);
                return Err(match verdict {
                    Err(finding) => self.reporter(rt, route, &caller, ex).block(finding),
                    Ok(()) => {
                        GatewayError::UpstreamTimeout("the upstream did not answer in time".into())
                    }
                });
            }
            Err(_) => {
                self.count_upstream_error(route, UpstreamErrorKind::Timeout);
                return Err(GatewayError::UpstreamTimeout(
                    "the upstream did not answer in time".into(),
                ));
            }
            Ok(Err(e)) => {
                self.count_upstream_error(route, UpstreamErrorKind::Connect);
                tracing::warn!(request_id = ?ex.request_id, route = route.name, error = %e, "upstream request failed");
                return Err(GatewayError::Upstream(
                    "the upstream could not be reached".into(),
                ));
            }
            Ok(Ok(resp)) => resp,
        };
        let head_started = Instant::now();
        let (up_parts, up_body) = resp.into_parts();
        let mut out_headers = headers::forwardable(&up_parts.headers);

        if !up_parts.status.is_success() {
            // The provider's own errors reach the client unchanged, body and all.
            let mut r = Response::new(ProxyBody::Upstream(up_body));
            *r.status_mut() = up_parts.status;
            *r.headers_mut() = out_headers;
            return Ok(r);
        }
        if let Some(enc) = up_parts.headers.get(header::CONTENT_ENCODING) {
            if enc.as_bytes() != b"identity" {
                self.count_upstream_error(route, UpstreamErrorKind::Encoded);
                return Err(GatewayError::Upstream(
                    "the upstream sent an encoded body that cannot be checked".into(),
                ));
            }
        }
        let is_sse = up_parts
            .headers
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));

        if is_sse {
            let mut guard = caller.policy.stream_guard(true, history, price);
            if rt.config.audit.include_match {
                guard.keep_matches();
            }
            let ctx = StreamContext {
                metrics: Arc::clone(&self.metrics),
                audit: Arc::clone(&rt.audit),
                key_id: caller.key_id,
                route: route.name,
                request_id: ex.id().to_owned(),
                protocol: route.protocol,
                overhead_so_far: pre_upstream + head_started.elapsed(),
                idle_timeout: Duration::from_millis(rt.config.timeouts.idle_ms),
                started: tokio::time::Instant::from_std(ex.started),
                total_deadline: tokio::time::Instant::from_std(ex.started)
                    + Duration::from_millis(rt.config.timeouts.total_ms),
                max_frame_bytes: limits.max_frame_bytes,
                max_holdback_bytes: limits.max_holdback_bytes,
                stop: self.stop_streams.subscribe(),
                permit,
            };
            let stream = GuardedStream::new(up_body, guard, ctx);
            let mut r = Response::new(ProxyBody::Guarded(Box::new(stream)));
            *r.headers_mut() = out_headers;
            return Ok(r);
        }

        // A whole response: OnChunk over each channel's full text, then AfterCall.
        let waited = Instant::now();
        let idle = Duration::from_millis(rt.config.timeouts.idle_ms);
        let body_timeout = match budget_left(budget) {
            Some((_, left)) => idle.min(left),
            None => idle,
        };
        let mut guard = caller.policy.stream_guard(false, history, price);
        if rt.config.audit.include_match {
            guard.keep_matches();
        }
        let body = match tokio::time::timeout(
            body_timeout,
            Limited::new(up_body, limits.max_response_bytes).collect(),
        )
        .await
        {
            Err(_) if budget_left(budget).is_some_and(|(_, left)| left.is_zero()) => {
                let verdict = guard.check_latency(ex.started.elapsed().as_millis() as u64);
                self.reporter(rt, route, &caller, ex)
                    .monitor(&guard.findings);
                return Err(match verdict {
                    Err(finding) => self.reporter(rt, route, &caller, ex).block(finding),
                    Ok(()) => GatewayError::UpstreamTimeout("the upstream body stalled".into()),
                });
            }
            Err(_) => {
                self.count_upstream_error(route, UpstreamErrorKind::Idle);
                return Err(GatewayError::UpstreamTimeout(
                    "the upstream body stalled".into(),
                ));
            }
            Ok(Err(_)) => {
                self.count_upstream_error(route, UpstreamErrorKind::Reset);
                return Err(GatewayError::Upstream(
                    "the upstream response body failed or was too large".into(),
                ));
            }
            Ok(Ok(collected)) => collected.to_bytes(),
        };
        let check_started = Instant::now();
        let mut deltas = Vec::new();
        if let Err(e) = route.protocol.decode_response(&body, &mut deltas) {
            self.count_upstream_error(route, UpstreamErrorKind::Malformed);
            tracing::warn!(request_id = ?ex.request_id, error = %e, "malformed upstream response");
            return Err(GatewayError::Upstream(
                "the upstream sent a malformed response".into(),
            ));
        }
        let redacts = caller.policy.redacts();
        let mut spans = Vec::new();
        let verdict = deltas
            .iter()
            .try_for_each(|d| {
                let at = guard.on_chunk(d)?;
                if let (true, Some((channel, pos)), Delta::Text { text, .. }) = (redacts, at, d) {
                    let taken: Vec<_> =
                        spans.iter().map(|s: &TextSpan| s.literal.clone()).collect();
                    let (literal, raw) =
                        redact::locate(&body, text, &taken).unwrap_or((0..0, false));
                    spans.push(TextSpan {
                        channel,
                        start: pos - text.len() as u64,
                        end: pos,
                        literal,
                        raw,
                        text: text.to_string(),
                    });
                }
                Ok(())
            })
            .and_then(|()| guard.after_call())
            .and_then(|()| guard.check_latency(ex.started.elapsed().as_millis() as u64));
        self.reporter(rt, route, &caller, ex)
            .monitor(&guard.findings);
        self.reporter(rt, route, &caller, ex)
            .redactions(&guard.redacted);
        if let Err(finding) = verdict {
            return Err(self.reporter(rt, route, &caller, ex).block(finding));
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
        out_headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        let mut r = Response::new(ProxyBody::full(body));
        *r.status_mut() = up_parts.status;
        *r.headers_mut() = out_headers;
        let overhead = pre_upstream + (waited - head_started) + check_started.elapsed();
        self.metrics
            .overhead
            .get_or_create(&RouteLabels { route: route.name })
            .observe(overhead.as_secs_f64());
        Ok(r)
    }

    fn reporter<'a>(
        &'a self,
        rt: &'a Runtime,
        route: &'a Route,
        caller: &'a Caller<'a>,
        ex: &'a Exchange,
    ) -> Reporter<'a> {
        Reporter {
            metrics: &self.metrics,
            audit: &rt.audit,
            policy: caller.policy,
            route: route.name,
            key_id: caller.key_id,
            request_id: ex.id(),
        }
    }

    fn count_upstream_error(&self, route: &Route, kind: UpstreamErrorKind) {
        count_upstream_error(&self.metrics, route.name, kind);
    }
}

/// Who a request is from, once its key is checked, and what that decides.
struct Caller<'a> {
    policy: &'a Arc<Policy>,
    key_id: Option<&'static str>,
    upstream_key: Option<&'a str>,
}

/// Where the verdicts of one exchange go: metrics, the log and the audit log — the validator,
/// phase and rule, never the matched text. Shared by the request path and the stream body.
pub struct Reporter<'a> {
    pub metrics: &'a Metrics,
    pub audit: &'a Audit,
    pub policy: &'a Policy,
    pub route: &'static str,
    pub key_id: Option<&'a str>,
    pub request_id: &'a str,
}

impl Reporter<'_> {
    /// Counts and logs a block, and returns the error the client is answered with.
    pub fn block(&self, finding: Finding) -> GatewayError {
        self.record(&finding, Mode::Enforce);
        GatewayError::Blocked {
            message: self.policy.message(&finding),
        }
    }

    /// Monitor-mode violations (which never block).
    pub fn monitor(&self, findings: &[Finding]) {
        for f in findings {
            self.record(f, Mode::Monitor);
        }
    }

    /// Matches masked by redact-mode validators.
    pub fn redactions(&self, findings: &[Finding]) {
        for f in findings {
            self.record(f, Mode::Redact);
        }
    }

    fn record(&self, f: &Finding, mode: Mode) {
        let v = self.policy.validator(f.validator);
        let (family, mode_name) = match mode {
            Mode::Enforce => (&self.metrics.blocked, "enforce"),
            Mode::Monitor => (&self.metrics.monitored, "monitor"),
            Mode::Redact => (&self.metrics.redacted, "redact"),
        };
        let (route, request_id, phase) = (self.route, self.request_id, f.phase.as_str());
        family
            .get_or_create(&VerdictLabels {
                validator: v.label.clone(),
                phase,
                route,
            })
            .inc();
        tracing::info!(request_id, route, key_id = self.key_id, validator = %v.label, phase, mode = mode_name, "guardrail verdict");
        if self.audit.enabled() {
            self.audit.record(&AuditEvent {
                ts: crate::audit::now_rfc3339(),
                request_id,
                route,
                key_id: self.key_id,
                validator: &v.label,
                check: v.canonical,
                phase,
                mode: mode_name,
                rule: f.rule,
                matched: f.matched.as_deref(),
            });
        }
    }
}

fn count_upstream_error(metrics: &Metrics, route: &'static str, kind: UpstreamErrorKind) {
    metrics
        .upstream_errors
        .get_or_create(&UpstreamErrorLabels { route, kind })
        .inc();
}

async fn read_limited(body: Incoming, limit: usize) -> Result<Bytes, GatewayError> {
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(GatewayError::PayloadTooLarge { limit })
        }
        Err(e) => Err(GatewayError::InvalidRequest(format!(
            "could not read the request body: {e}"
        ))),
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
pub fn error_response(protocol: &dyn Protocol, err: &GatewayError) -> Response<ProxyBody> {
    let mut r = Response::new(ProxyBody::full(protocol.error_body(err)));
    *r.status_mut() = err.status();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    match err {
        GatewayError::Blocked { .. } | GatewayError::HoldbackExceeded { .. } => {
            h.insert("x-should-retry", HeaderValue::from_static("false"));
        }
        GatewayError::Overloaded | GatewayError::ShuttingDown => {
            h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        _ => {}
    }
    r
}
