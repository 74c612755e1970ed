//! MCP routes (`routes[].protocol: mcp`): Streamable HTTP in front of an MCP server. The
//! route's `path_prefix` is the MCP endpoint; requests go to the `upstream` URL as it is.
//!
//! - POST: the body's JSON-RPC messages are read whole and checked ([`check`]); one that
//!   fails is answered with its JSON-RPC error and nothing is forwarded. The answer (JSON, or
//!   an SSE stream of messages, [`stream`]) is checked message by message.
//! - GET: the server's own SSE stream, checked the same way (server requests such as
//!   `sampling/createMessage`, notifications).
//! - DELETE: ends a session; forwarded.
//!
//! The steps shared with the model protocols are `request.rs`'s: authenticate, read the body
//! (limits, timeouts), admit, the upstream request (headers allowlist, key swap) and its send.

pub mod check;
pub mod evals;
pub mod reply;
pub mod stream;

use super::body::ProxyBody;
use super::charset::{self, Transcoder};
use super::client_address::AddressShare;
use super::offload;
use super::request::{self, RequestCtx};
use super::runtime::{Route, Runtime};
use super::{headers, Gateway};
use crate::audit::Audit;
use crate::error::GatewayError;
use crate::metrics::UpstreamErrorKind;
use crate::policy::tools::ToolHistory;
use crate::protocol::mcp::jsonrpc::{self, IdKey, Kind};
use crate::protocol::mcp::{codes, routing, VERSIONS};
use crate::state::sessions as session;
use crate::telemetry::RequestTrace;
use crate::upstream::UpstreamBody;
use bytes::Bytes;
use check::{Checker, Refusal, Verdict};
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use reply::ServerReplies;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A JSON-RPC error answer of guardwire's own.
fn rpc_response(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut r = Response::new(ProxyBody::full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn refused(status: StatusCode, id: &Value, why: &Refusal) -> Response<ProxyBody> {
    rpc_response(status, why.json(id))
}

/// Which session a request belongs to: its client key, the route, its `Mcp-Session-Id`.
fn session_key(
    headers: &http::HeaderMap,
    key_id: Option<&'static str>,
    route: &'static str,
) -> Result<session::Key, GatewayError> {
    let id = match headers.get("mcp-session-id") {
        None => None,
        Some(v) if v.len() > session::MAX_SESSION_ID_BYTES => {
            return Err(GatewayError::InvalidRequest(format!(
                "Mcp-Session-Id is longer than {} bytes",
                session::MAX_SESSION_ID_BYTES
            )))
        }
        Some(v) => Some(
            v.to_str()
                .map_err(|_| {
                    GatewayError::InvalidRequest("Mcp-Session-Id is not visible ASCII".into())
                })?
                .into(),
        ),
    };
    Ok(session::Key {
        key_id,
        route,
        session: id,
    })
}

impl Gateway {
    /// One request on an MCP route.
    #[allow(clippy::too_many_arguments)] // the request's parts, as `exchange` holds them
    pub(super) async fn mcp_exchange(
        &self,
        rt: &Runtime,
        route: &Route,
        req: Request<Incoming>,
        address: Option<AddressShare>,
        started: Instant,
        request_id: &HeaderValue,
        trace: &RequestTrace,
        reply_to: &mut crate::protocol::ReplyTo,
        quota: &mut Option<crate::state::Quota>,
    ) -> Result<Response<ProxyBody>, GatewayError> {
        let base = route.upstream.as_ref().ok_or_else(|| {
            GatewayError::NotFound("no upstream is configured for this MCP route".into())
        })?;
        let prefix = route.prefix.as_deref().unwrap_or("/");
        let path = req.uri().path();
        if path.trim_end_matches('/') != prefix.trim_end_matches('/') {
            return Err(GatewayError::NotFound(format!(
                "{path} is not this route's MCP endpoint ({prefix})"
            )));
        }
        let (mut parts, body) = req.into_parts();
        let caller = request::authenticate(rt, route, &parts)?;
        trace.note_caller(caller.key_id);
        if let Some(v) = parts.headers.get("mcp-protocol-version") {
            let v = v.to_str().unwrap_or("?");
            if !VERSIONS.contains(&v) {
                let why = check::unsupported_version(v);
                return Ok(refused(StatusCode::BAD_REQUEST, &Value::Null, &why));
            }
        }
        let session = session_key(&parts.headers, caller.key_id, route.name)?;
        let ctx = RequestCtx {
            protocol: route.protocol,
            gw: self,
            rt,
            route,
            caller,
            started,
            request_id,
            id: request_id.to_str().unwrap_or(""),
            trace,
        };
        let max_batch = rt.config.limits.max_batch_messages;
        let mut checker = Checker {
            policy: Arc::clone(ctx.caller.policy),
            metrics: Arc::clone(&self.metrics),
            audit: Arc::new(Audit::per_request(&rt.audit)),
            route: route.name,
            key_id: ctx.caller.key_id,
            trace: trace.for_stream(),
            unknown: route.unknown_content,
            poisoned_tools: route.poisoned_tools,
            keep_matches: rt.config.audit.include_match,
            pending: HashMap::new(),
            server_replies: Vec::new(),
            // Opened once the request is admitted: nothing before it reaches the store.
            session: session::SessionView::default(),
            evals: ctx.eval_template().map(|t| {
                let header = ctx.eval_session_header(&parts.headers);
                let id = session.session.as_deref();
                evals::ToolEvals::new(t, header.or(id).map(crate::evals::bounded_session))
            }),
        };
        let (body, held) = match parts.method {
            Method::POST => {
                let text = headers::check_request_body_type(&mut parts.headers)?;
                let (body, held) = ctx.read_body(body).await?;
                (text.whole(body), held)
            }
            Method::GET | Method::DELETE => ctx.read_body(body).await?,
            _ => {
                return Err(GatewayError::MethodNotAllowed(format!(
                    "{} is not an MCP method; use POST, GET or DELETE",
                    parts.method
                )))
            }
        };
        let permit = ctx.admit(address, held)?;
        // A refusal from here on answers the message's id (a batch's: null).
        *reply_to = crate::protocol::mcp::jsonrpc::reply_to(&body);
        // Each MCP request counts for `rpm_limit`; MCP traffic has no model tokens to ask.
        let _reserved = ctx.reserve(|_| Ok(Default::default()), None, quota).await?;
        checker.session = self
            .state
            .open_session(session.clone())
            .await
            .map_err(|_| GatewayError::StateUnavailable)?;
        if parts.method == Method::POST {
            // A large body is checked off the async worker (`offload.rs`): the checker and
            // headers go with it and come back.
            let headers = std::mem::take(&mut parts.headers);
            let input = body.clone();
            let checked = offload::check(offload::jsonrpc_work(&body), ctx.tenant(), move || {
                let answer = check_post(&input, &headers, &mut checker, max_batch);
                (answer, checker, headers)
            })
            .await;
            let Some((answer, back, headers)) = checked else {
                return Err(GatewayError::Internal(
                    "the check of the MCP request failed".into(),
                ));
            };
            (checker, parts.headers) = (back, headers);
            if let Some(answer) = answer {
                return Ok(answer);
            }
            // Forwarded: the session's later calls (on any replica) are checked with these.
            checker
                .session
                .commit()
                .await
                .map_err(|_| GatewayError::StateUnavailable)?;
        } else if !body.is_empty() {
            return Err(GatewayError::InvalidRequest(format!(
                "an MCP {} has no body",
                parts.method
            )));
        } else if let Err(bad) = routing::texts(&parts.headers, &[]) {
            let why = Refusal::new(bad.code, bad.message);
            return Ok(refused(StatusCode::BAD_REQUEST, &bad.id, &why));
        }
        let mut up_req = ctx.upstream_request(&parts, base, body)?;
        // The MCP endpoint is the upstream URL itself; only the client's query is added, as the
        // upstream request has it (without a guardwire `key=` when keys are swapped).
        let query = up_req
            .uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let uri = base
            .uri_for(&query)
            .ok()
            .filter(|u| u.path().starts_with('/'))
            .map_or_else(|| base.uri_for(&format!("/{query}")), Ok)
            .map_err(|e| GatewayError::InvalidRequest(format!("bad request path: {e}")))?;
        *up_req.uri_mut() = uri;
        let replies = ServerReplies::new(
            Arc::clone(&self.client),
            base.clone(),
            up_req.uri().clone(),
            up_req.headers().clone(),
            Duration::from_millis(rt.config.timeouts.response_headers_ms),
            Arc::clone(&self.metrics),
            route.name,
        );
        let mut guard = ctx.guard(ToolHistory::default(), None);
        guard.answer(false);
        let (head, body) = ctx
            .send_upstream(base, up_req, &mut guard)
            .await?
            .into_parts();
        if parts.method == Method::DELETE && head.status.is_success() {
            checker.session.end().await;
            if let Some(evals) = &checker.evals {
                evals.end_session();
            }
        }
        if headers::encoded(&head.headers) {
            ctx.count_upstream_error(UpstreamErrorKind::Encoded);
            return Err(GatewayError::Upstream(
                "the MCP server sent an encoded body that cannot be checked".into(),
            ));
        }
        // Its headers reach the client (the SDK keeps `Mcp-Session-Id`, reads
        // `WWW-Authenticate`): checked as an answer's are.
        ctx.check_relayed_headers(&head.headers, &mut guard)?;
        let content_type = head
            .headers
            .get(header::CONTENT_TYPE)
            .map(|v| v.as_bytes().to_ascii_lowercase())
            .unwrap_or_default();
        let mut out_headers = headers::forwardable(&head.headers);
        // The body is read in the charset it declares and goes on as UTF-8; one guardwire
        // cannot decode is answered as any other unreadable answer.
        let declared = charset::declared(&head.headers).map_err(|charset::Unreadable(why)| {
            ctx.count_upstream_error(UpstreamErrorKind::Encoded);
            Refusal::new(
                codes::UPSTREAM,
                format!("the MCP server's answer cannot be checked: {why}"),
            )
        });
        if let Ok(declared) = &declared {
            declared.label(&mut out_headers);
        }
        let declared = match declared {
            Ok(declared) if content_type.starts_with(b"text/event-stream") => {
                let idle = Duration::from_millis(rt.config.timeouts.idle_ms);
                let max_frame = rt.config.limits.max_frame_bytes;
                let text = declared.transcoder();
                let stream = stream::McpStream::new(
                    body,
                    text,
                    checker,
                    (max_frame, idle),
                    permit,
                    replies,
                    ctx.tenant(),
                );
                let mut r = Response::new(ProxyBody::Mcp(Box::new(stream)));
                *r.status_mut() = head.status;
                *r.headers_mut() = out_headers;
                return Ok(r);
            }
            other => other,
        };
        // The server's own words are not relayed unchecked (its status stays): an error for
        // the one request waiting, else without an id.
        let sole_id = match checker.pending.len() {
            1 => checker.pending.keys().next().map(IdKey::to_value),
            _ => None,
        }
        .unwrap_or(Value::Null);
        let json = content_type.starts_with(b"application/json");
        let whole = match declared {
            Ok(declared) => {
                let text = declared.transcoder();
                mcp_whole(&ctx, body, text, checker, json, max_batch).await
            }
            Err(why) => Err(why),
        };
        drop(permit);
        let body = match whole {
            Ok((body, to_server)) => {
                replies.send(to_server);
                body
            }
            Err(why) => why.json(&sole_id).into(),
        };
        out_headers.remove(header::CONTENT_LENGTH);
        if !body.is_empty() {
            out_headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        let mut r = Response::new(ProxyBody::full(body));
        *r.status_mut() = head.status;
        *r.headers_mut() = out_headers;
        Ok(r)
    }
}

/// Checks the messages of a POST (at most `max_batch` in a batch). `Some`: the answer
/// (nothing is forwarded).
fn check_post(
    body: &[u8],
    headers: &http::HeaderMap,
    checker: &mut Checker,
    max_batch: usize,
) -> Option<Response<ProxyBody>> {
    // Over the cap, reading stops there: nothing is checked.
    let (messages, batch) = match jsonrpc::parse_capped(body, max_batch) {
        Ok(m) => m,
        Err(invalid) => {
            let why = Refusal::new(invalid.code, invalid.message);
            return Some(refused(StatusCode::BAD_REQUEST, &invalid.id, &why));
        }
    };
    // The 2026-07-28 routing headers copy values of the body; what they carry is checked
    // with it (a server that read them instead would see nothing unchecked).
    let params = match routing::texts(headers, &messages) {
        Ok(p) => p,
        Err(bad) => {
            let why = Refusal::new(bad.code, bad.message);
            return Some(refused(StatusCode::BAD_REQUEST, &bad.id, &why));
        }
    };
    // The answers are matched to the requests by id: two requests with one id could not be
    // told apart (and JSON-RPC wants ids unique among the requests in flight).
    let mut pending = HashMap::new();
    for msg in &messages {
        if let (Kind::Request(method), Some(id)) = (&msg.kind, IdKey::of(&msg.id)) {
            if pending.insert(id, method.clone()).is_some() {
                let why = Refusal::new(
                    codes::INVALID_REQUEST,
                    "two requests of the batch have the same id; a request's id must be unique among the requests in flight",
                );
                return Some(refused(StatusCode::BAD_REQUEST, &Value::Null, &why));
            }
        }
    }
    let refusals: Vec<Option<Refusal>> = messages
        .iter()
        .map(|msg| checker.client_message(msg, &params).err())
        .collect();
    if refusals.iter().all(Option::is_none) {
        checker.pending = pending;
        return None;
    }
    // Nothing of the POST is forwarded: each request gets its error.
    let mut errors = Vec::new();
    for (msg, refusal) in messages.iter().zip(refusals) {
        let why = match (refusal, &msg.kind) {
            // A refused notification or response too: its error, without an id.
            (Some(why), _) => why,
            (None, Kind::Request(_)) => Refusal::new(
                codes::REFUSED,
                "not forwarded: another message of this batch was blocked",
            ),
            (None, _) => continue,
        };
        errors.push(why.json(&msg.id));
    }
    let status = match messages.iter().any(|m| matches!(m.kind, Kind::Request(_))) {
        true => StatusCode::OK,
        // A notification or response has no answer of its own: the POST is refused.
        false => StatusCode::BAD_REQUEST,
    };
    let body = match batch {
        true => format!("[{}]", errors.join(",")),
        false => errors.pop().unwrap_or_default(),
    };
    Some(rpc_response(status, body))
}

/// A whole answer (JSON, or anything else the server sent): read within the limits, decoded
/// into UTF-8 by `text`, each message checked (off the async worker when large); `Ok`: the answer to relay and the
/// errors that answer the server's own blocked requests; `Err`: what replaces it.
async fn mcp_whole(
    ctx: &RequestCtx<'_>,
    body: UpstreamBody,
    text: Transcoder,
    mut checker: Checker,
    json: bool,
    max_batch: usize,
) -> Result<(Bytes, Vec<String>), Refusal> {
    let idle = Duration::from_millis(ctx.rt.config.timeouts.idle_ms);
    let limit = ctx.rt.config.limits.max_response_bytes;
    let read = tokio::time::timeout(idle, Limited::new(body, limit).collect()).await;
    let body = match read {
        Ok(Ok(collected)) => text.whole(collected.to_bytes()),
        Err(_) => {
            ctx.count_upstream_error(UpstreamErrorKind::Idle);
            return Err(Refusal::new(
                codes::UPSTREAM,
                "the MCP server's answer stalled",
            ));
        }
        Ok(Err(_)) => {
            ctx.count_upstream_error(UpstreamErrorKind::Reset);
            return Err(Refusal::new(
                codes::UPSTREAM,
                "the MCP server's answer failed or was larger than limits.max_response_bytes",
            ));
        }
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((Bytes::new(), Vec::new()));
    }
    let checked = offload::check(offload::jsonrpc_work(&body), ctx.tenant(), move || {
        let answer = check_answer(body, &mut checker, json, max_batch);
        (answer, std::mem::take(&mut checker.server_replies))
    })
    .await;
    match checked {
        Some((Ok(body), to_server)) => Ok((body, to_server)),
        Some((Err(why), _)) => {
            ctx.count_upstream_error(UpstreamErrorKind::Malformed);
            Err(why)
        }
        None => Err(Refusal::new(
            codes::UNCHECKABLE,
            "guardwire could not check the MCP server's answer",
        )),
    }
}

/// Checks each message of a whole answer; `Err`: it is not JSON-RPC (or a batch over the cap).
fn check_answer(
    body: Bytes,
    checker: &mut Checker,
    json: bool,
    max_batch: usize,
) -> Result<Bytes, Refusal> {
    let parsed = match json {
        true => jsonrpc::parse_capped(&body, max_batch),
        false => Err(jsonrpc::Invalid {
            code: codes::UPSTREAM,
            message: String::new(),
            id: Value::Null,
        }),
    };
    let (messages, batch) = match parsed {
        Ok(m) => m,
        Err(e) if e.is_over_cap() => {
            return Err(Refusal::new(
                codes::UPSTREAM,
                format!("the MCP server answered a batch of more than {max_batch} messages (limits.max_batch_messages)"),
            ))
        }
        Err(_) => {
            return Err(Refusal::new(
                codes::UPSTREAM,
                "the MCP server answered something that is not JSON-RPC",
            ))
        }
    };
    let mut changed = false;
    let mut out = Vec::with_capacity(messages.len());
    for msg in &messages {
        match checker.server_message(msg) {
            Verdict::Pass => out.push(msg.to_json()),
            Verdict::Replace(json) => {
                changed = true;
                out.push(json);
            }
            Verdict::Drop => changed = true,
        }
    }
    if !changed {
        return Ok(body);
    }
    Ok(match batch {
        true => format!("[{}]", out.join(",")).into(),
        false => out.pop().unwrap_or_default().into(),
    })
}
