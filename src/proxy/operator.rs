//! The operators' side of the gateway: `/healthz`, `/readyz`, `/metrics` and
//! `POST /admin/reload` (on `admin.listen`, or on the clients' listener with the admin token),
//! and the reload they and SIGHUP trigger.

use super::body::ProxyBody;
use super::{constant_time_eq, note_runtime, plain, Gateway, Runtime};
use crate::config::Config;
use crate::metrics::{Exposition, ReloadLabels, ReloadResult};
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Gateway {
    /// Re-reads the config file and every pack it names; if all is valid, swaps the new runtime
    /// in (requests in flight finish on the old one), else keeps the running one. Either way
    /// the result is counted and logged (with file and key on failure). Settings of the
    /// listener itself (`listen`, `limits.max_header_bytes`, `timeouts.client_header_ms`,
    /// `timeouts.connect_ms`) and `state:` take effect on restart only.
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
                note_runtime(&self.metrics, &runtime);
                self.metrics.config_last_reload_successful.set(1);
                self.swap_runtime(runtime);
                tracing::info!(validators, "config reloaded");
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "config reload failed; keeping the running policy");
                self.metrics.config_last_reload_successful.set(0);
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

    /// `None` when `req` carries `Authorization: Bearer <admin.token>`; else the refusal: 404
    /// without a token configured (`not_found` says where to look), 401 with one.
    pub(super) fn refuse_without_token(
        &self,
        req: &Request<Incoming>,
        not_found: &'static str,
    ) -> Option<Response<ProxyBody>> {
        let Some(token) = self.runtime.load().config.admin.token.clone() else {
            return Some(plain(StatusCode::NOT_FOUND, not_found));
        };
        let presented = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .unwrap_or_default();
        if constant_time_eq(presented, token.as_bytes()) {
            return None;
        }
        let mut r = plain(
            StatusCode::UNAUTHORIZED,
            "a valid admin token is required\n",
        );
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        Some(r)
    }

    /// `POST /admin/reload`: only when `admin.token` is set, only with that bearer token.
    async fn admin_reload(&self, req: &Request<Incoming>) -> Response<ProxyBody> {
        if let Some(refusal) = self.refuse_without_token(req, "not found\n") {
            return refusal;
        }
        match self.reload().await {
            Ok(()) => plain(StatusCode::OK, "reloaded\n"),
            Err(e) => plain(StatusCode::BAD_REQUEST, format!("reload failed: {e}\n")),
        }
    }

    /// The key `id` (percent-decoded) and its limits over time, or the answer saying why not.
    fn limited_key(
        &self,
        id: &str,
    ) -> Result<(&'static str, Arc<crate::state::KeyLimits>), Box<Response<ProxyBody>>> {
        let id = percent_decoded(id);
        let rt = self.runtime();
        let Some(key) = rt.keys.iter().find(|k| k.id == id) else {
            return Err(Box::new(plain(
                StatusCode::NOT_FOUND,
                format!("no key {id:?}\n"),
            )));
        };
        match &key.limits {
            Some(limits) => Ok((key.id, Arc::clone(limits))),
            None => Err(Box::new(plain(
                StatusCode::NOT_FOUND,
                format!("key {id:?} has no rpm_limit, tpm_limit or max_budget\n"),
            ))),
        }
    }

    /// `GET /admin/keys/<id>/usage`: the key's counts and what is left, as JSON.
    async fn key_usage(&self, id: &str) -> Response<ProxyBody> {
        let (id, limits) = match self.limited_key(id) {
            Ok(k) => k,
            Err(refusal) => return *refusal,
        };
        match self.state.usage(id, &limits).await {
            Ok(q) => {
                let window = |w: Option<crate::state::Window>| {
                    w.map(|w| {
                        serde_json::json!({"limit": w.limit, "remaining": w.remaining, "reset_ms": w.reset_ms})
                    })
                };
                let usd = |micro: u64| micro as f64 / 1e6;
                let budget = q.budget.map(|b| {
                    serde_json::json!({
                        "max_usd": usd(b.max_micro_usd),
                        "spent_usd": usd(b.spent_micro_usd),
                        "reserved_usd": usd(b.reserved_micro_usd),
                        "remaining_usd": usd(b.remaining_micro_usd()),
                        "reset_ms": b.reset_ms,
                    })
                });
                let body = serde_json::json!({
                    "key": id,
                    "requests": window(q.requests),
                    "tokens": window(q.tokens),
                    "budget": budget,
                });
                let mut r = plain(StatusCode::OK, format!("{body}\n"));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                r
            }
            Err(e) => plain(StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
        }
    }

    /// `POST /admin/keys/<id>/reset`: the key's counts forgotten (requests in flight settle as
    /// new usage).
    async fn key_reset(&self, id: &str) -> Response<ProxyBody> {
        let (id, _) = match self.limited_key(id) {
            Ok(k) => k,
            Err(refusal) => return *refusal,
        };
        match self.state.reset(id).await {
            Ok(()) => {
                tracing::info!(key = id, "the key's limits over time were reset");
                plain(StatusCode::OK, "reset\n")
            }
            Err(e) => plain(StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
        }
    }

    /// The operators' listener (`admin.listen`): its endpoints, and 404 for anything else.
    pub async fn handle_operator(self: Arc<Self>, req: Request<Incoming>) -> Response<ProxyBody> {
        match self.operator_endpoint(&req).await {
            Some(resp) => resp,
            None => plain(StatusCode::NOT_FOUND, "not found\n"),
        }
    }

    /// The operators' endpoints on the clients' listener: `/healthz` and `/readyz` for
    /// anyone (orchestrators probe them there); `/metrics` and `/admin/*` only with the admin
    /// token — without one configured they are not served here at all (404), only on
    /// `admin.listen`. `None`: not an operators' path, a client request.
    pub(super) async fn operator_endpoint_for_clients(
        &self,
        req: &Request<Incoming>,
    ) -> Option<Response<ProxyBody>> {
        let path = req.uri().path();
        if path == "/metrics" || path == "/admin" || path.starts_with("/admin/") {
            const ELSEWHERE: &str = "not found: /metrics and /admin/* are served on admin.listen \
                                     (or here with admin.token)\n";
            if let Some(refusal) = self.refuse_without_token(req, ELSEWHERE) {
                return Some(refusal);
            }
            return Some(match self.operator_endpoint(req).await {
                Some(resp) => resp,
                None => plain(StatusCode::NOT_FOUND, "not found\n"),
            });
        }
        match path {
            "/healthz" | "/readyz" => self.operator_endpoint(req).await,
            _ => None,
        }
    }

    /// `/healthz`, `/readyz`, `/metrics`, `POST /admin/reload` and `/admin/keys/*` (which
    /// need the token wherever they are asked).
    async fn operator_endpoint(&self, req: &Request<Incoming>) -> Option<Response<ProxyBody>> {
        Some(match (req.method(), req.uri().path()) {
            (&Method::GET, "/healthz") => plain(StatusCode::OK, "ok\n"),
            (&Method::GET, "/readyz") => {
                // The store's state is reported, not made a condition: with the store down
                // every replica would turn unready together, and keys without limits (and
                // `fail_open` ones) can still be served.
                let (state, _) = self.state.readiness().await;
                if self.draining.load(Ordering::Acquire) {
                    plain(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("draining\n{state}\n"),
                    )
                } else {
                    plain(StatusCode::OK, format!("ready\n{state}\n"))
                }
            }
            (&Method::POST, "/admin/reload") => self.admin_reload(req).await,
            (method, path) if path.starts_with("/admin/keys/") => {
                if let Some(refusal) = self.refuse_without_token(req, "not found\n") {
                    return Some(refusal);
                }
                let rest = &path["/admin/keys/".len()..];
                match (method, rest.rsplit_once('/')) {
                    (&Method::GET, Some((id, "usage"))) => self.key_usage(id).await,
                    (&Method::POST, Some((id, "reset"))) => self.key_reset(id).await,
                    _ => plain(
                        StatusCode::NOT_FOUND,
                        "not found: GET /admin/keys/<id>/usage or POST /admin/keys/<id>/reset\n",
                    ),
                }
            }
            (&Method::GET, "/metrics") => {
                let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
                let m = &self.metrics;
                m.requests_in_flight.set(gauge(self.in_flight.used()));
                m.buffered_request_bytes
                    .set(gauge(self.request_bytes.used()));
                m.connections_open.set(gauge(self.connections.used()));
                let accept = req.headers().get(header::ACCEPT);
                let format = Exposition::negotiate(accept.and_then(|a| a.to_str().ok()));
                let mut r = plain(StatusCode::OK, self.metrics.render(format));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(format.content_type()),
                );
                r
            }
            _ => return None,
        })
    }
}

/// A path segment with its `%XX` escapes decoded (key ids may hold any character); a bad
/// escape is kept as written.
fn percent_decoded(segment: &str) -> String {
    let b = segment.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
