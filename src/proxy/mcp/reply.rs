//! guardwire's answers to the MCP server's own requests (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`, …) that failed their checks. Such a request is not
//! relayed to the client — its id is the server's, and ids are per direction, so an error
//! with it could settle one of the client's own requests — and the server, which waits for an
//! answer, gets the JSON-RPC error instead: POSTed to the MCP endpoint on the session as the
//! client would POST its response (Streamable HTTP: the server accepts it with 202).

use crate::metrics::{Metrics, UpstreamErrorKind};
use crate::proxy::report::count_upstream_error;
use crate::upstream::{UpstreamBase, UpstreamClient};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Uri};
use http_body_util::Full;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Answers in flight at once for one exchange; past them an answer is not sent (the server's
/// request then times out on its side, as if the client had not answered).
pub const MAX_IN_FLIGHT: usize = 4;

/// Where and how one exchange's answers to its server go: the exchange's own upstream request
/// (URL, session and protocol headers, the swapped credential), as a POST of JSON.
#[derive(Clone)]
pub struct ServerReplies {
    pub client: Arc<UpstreamClient>,
    pub base: UpstreamBase,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub timeout: Duration,
    pub metrics: Arc<Metrics>,
    pub route: &'static str,
    in_flight: Arc<Semaphore>,
}

impl ServerReplies {
    /// From the exchange's upstream request (`uri`, `headers`).
    pub fn new(
        client: Arc<UpstreamClient>,
        base: UpstreamBase,
        uri: Uri,
        mut headers: HeaderMap,
        timeout: Duration,
        metrics: Arc<Metrics>,
        route: &'static str,
    ) -> ServerReplies {
        // A GET stream's resumption header and a POST's length are not this request's.
        headers.remove("last-event-id");
        headers.remove(header::CONTENT_LENGTH);
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        ServerReplies {
            client,
            base,
            uri,
            headers,
            timeout,
            metrics,
            route,
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        }
    }

    /// Sends each JSON-RPC error (one message each) to the server, without waiting.
    pub fn send(&self, replies: Vec<String>) {
        for reply in replies {
            let Ok(permit) = Arc::clone(&self.in_flight).try_acquire_owned() else {
                crate::telemetry::throttle::SERVER_REPLIES.allow(self.route, |suppressed| {
                    tracing::warn!(route = self.route, suppressed, "too many answers to the MCP server's blocked requests at once: one was not sent");
                });
                continue;
            };
            let this = self.clone();
            tokio::spawn(async move {
                let _permit = permit;
                this.post(reply).await;
            });
        }
    }

    async fn post(&self, reply: String) {
        let mut req = Request::new(Full::new(Bytes::from(reply)));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        let kind =
            match tokio::time::timeout(self.timeout, self.client.request(&self.base, req)).await {
                // The answer's body (202: none) is not read: dropping it ends the exchange.
                Ok(Ok(resp)) if resp.status().is_success() => return,
                Ok(Ok(_)) => UpstreamErrorKind::Malformed,
                Ok(Err(_)) => UpstreamErrorKind::Connect,
                Err(_) => UpstreamErrorKind::Timeout,
            };
        count_upstream_error(&self.metrics, self.route, kind);
        crate::telemetry::throttle::SERVER_REPLIES.allow(self.route, |suppressed| {
            tracing::warn!(route = self.route, kind = ?kind, suppressed, "the MCP server did not take guardwire's answer to its blocked request");
        });
    }
}
