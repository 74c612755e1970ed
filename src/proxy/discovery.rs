//! Discovery documents (A2A agent cards): a GET of one of the route's protocol's discovery
//! paths is fetched from the upstream and served with the upstream's URLs rewritten to
//! guardwire's own for the route, so a client that reads the document keeps talking through
//! the proxy instead of going around it.
//!
//! guardwire's URL for the route is `routes[].public_url` when set, else `http://` (`https://`
//! with `tls`) + the request's `Host` + the route's `path_prefix`. An upstream URL maps back
//! through the route: its path, under the upstream base URL's path, is what guardwire forwards
//! for the client path `strip_prefix` + that rest; a URL whose path is not under the base path,
//! or whose client path would not come back to this route, cannot be reached through it (the
//! protocol drops it, or refuses the document).
//!
//! Before that, the document's own texts (an agent card's name, description and skills) are
//! checked as input with the route's packs: a violating document is not served.

use super::body::ProxyBody;
use super::request::{RequestCtx, Waited};
use crate::config::UnknownContent;
use crate::delta::{Conversation, Message, Role};
use crate::error::GatewayError;
use crate::metrics::UpstreamErrorKind;
use crate::policy::tools::ToolHistory;
use crate::protocol::residual::Place;
use crate::protocol::ParsedRequest;
use crate::upstream::UpstreamBase;
use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Response};
use http_body_util::{BodyExt, Limited};
use std::time::Duration;

impl RequestCtx<'_> {
    /// A GET of a discovery document: fetched, rewritten, served (the upstream's error
    /// statuses relayed as they came).
    pub async fn discovery(
        &self,
        parts: &Parts,
        base: &UpstreamBase,
    ) -> Result<Response<ProxyBody>, GatewayError> {
        let public_root = self.public_root(parts)?;
        let up_req = self.upstream_request(parts, base, Bytes::new())?;
        let mut guard = self.guard(ToolHistory::default(), None);
        guard.answer(false);
        let (head, body) = self
            .send_upstream(base, up_req, &mut guard)
            .await?
            .into_parts();
        if !head.status.is_success() {
            if !self.protocol.relays_upstream_errors() {
                return Err(super::exchange::unrelayed_error(head.status));
            }
            return Ok(super::exchange::relay(head, body));
        }
        // Read in the charset it declares, as its readers read it.
        let text = super::charset::declared(&head.headers)
            .map_err(|super::charset::Unreadable(why)| {
                self.count_upstream_error(UpstreamErrorKind::Encoded);
                GatewayError::Upstream(format!(
                    "the upstream's discovery document cannot be checked: {why}"
                ))
            })?
            .transcoder();
        let idle = Duration::from_millis(self.rt.config.timeouts.idle_ms);
        let limit = self.rt.config.limits.max_response_bytes;
        let body = match self.wait(idle, Limited::new(body, limit).collect()).await {
            Ok(Ok(collected)) => text.whole(collected.to_bytes()),
            Ok(Err(_)) => {
                self.count_upstream_error(UpstreamErrorKind::Reset);
                return Err(GatewayError::Upstream(
                    "the upstream's discovery document failed or was too large".into(),
                ));
            }
            Err(Waited::Budget) => {
                return Err(self.budget_spent(&mut guard, "the upstream body stalled"))
            }
            Err(Waited::Limit) => {
                self.count_upstream_error(UpstreamErrorKind::Idle);
                return Err(GatewayError::UpstreamTimeout(
                    "the upstream body stalled".into(),
                ));
            }
        };
        self.check_discovery(&body)?;
        let route = self.route;
        let prefix = route.prefix.as_deref().unwrap_or("/");
        let map = |url: &str| {
            map_url(
                url,
                &base.prefix,
                route.strip_prefix.as_deref(),
                prefix,
                &public_root,
            )
        };
        let rewritten = self
            .protocol
            .rewrite_discovery(&body, &map)
            .map_err(|why| {
                self.count_upstream_error(UpstreamErrorKind::Malformed);
                GatewayError::Upstream(why)
            })?;
        let mut r = Response::new(ProxyBody::full(rewritten));
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        Ok(r)
    }

    /// The document's texts as input (BeforeCall, the route's packs): a violation refuses the
    /// document (a client's model would read them: an agent card's skill descriptions are what
    /// tool descriptions are to MCP). Texts of fields the protocol does not model follow
    /// `unknown_content`: checked (`scan`), the document refused (`block`), or skipped (`pass`).
    fn check_discovery(&self, body: &[u8]) -> Result<(), GatewayError> {
        let texts = self.protocol.discovery_texts(body).map_err(|why| {
            self.count_upstream_error(UpstreamErrorKind::Malformed);
            GatewayError::Upstream(why)
        })?;
        let mut messages = Vec::with_capacity(texts.len());
        let mut identifiers = Vec::new();
        for (text, place) in texts {
            if text.is_empty() {
                continue;
            }
            if place == Place::Identifier {
                identifiers.push(text);
                continue;
            }
            if place == Place::Unknown {
                match self.route.unknown_content {
                    UnknownContent::Pass => continue,
                    UnknownContent::Block => {
                        return Err(GatewayError::Upstream(
                            "the upstream's discovery document has fields guardwire does not model (unknown_content: block)"
                                .into(),
                        ))
                    }
                    UnknownContent::Scan => {}
                }
            }
            messages.push(Message::text(Role::Other("agent_card".into()), vec![text]));
        }
        messages.extend(crate::protocol::identifier::message(identifiers));
        if messages.is_empty() {
            return Ok(());
        }
        let parsed = ParsedRequest {
            conversation: Conversation {
                messages,
                tools: Vec::new(),
            },
            ..ParsedRequest::default()
        };
        self.before_call(&parsed).map(drop)
    }

    /// guardwire's URL for the route's `path_prefix`: `public_url`, or the scheme it listens
    /// with, the request's host and the prefix.
    fn public_root(&self, parts: &Parts) -> Result<String, GatewayError> {
        let prefix = self.route.prefix.as_deref().unwrap_or("/");
        if let Some(url) = &self.route.public_url {
            let url = url.trim_end_matches('/');
            return Ok(if prefix.ends_with('/') {
                format!("{url}/")
            } else {
                url.to_owned()
            });
        }
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| parts.uri.authority().map(|a| a.as_str()))
            .filter(|h| {
                !h.is_empty()
                    && h.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b))
            })
            .ok_or_else(|| {
                GatewayError::InvalidRequest(
                    "a discovery document needs the request's Host (or the route's public_url)"
                        .into(),
                )
            })?;
        let scheme = if self.rt.tls.is_some() {
            "https"
        } else {
            "http"
        };
        Ok(format!("{scheme}://{host}{prefix}"))
    }
}

/// guardwire's URL for the upstream URL `url` (see the module's text), or `None` when it
/// cannot be reached through the route.
fn map_url(
    url: &str,
    base_path: &str,
    strip_prefix: Option<&str>,
    prefix: &str,
    public_root: &str,
) -> Option<String> {
    let path = match url.split_once("://") {
        Some((_, rest)) => &rest[rest.find('/').unwrap_or(rest.len())..],
        None if url.starts_with('/') => url,
        None => return None,
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    // A dot segment (`..`, `%2e%2e`) would lead a client that resolves it to another route.
    let dot = |seg: &str| {
        let seg = seg.to_ascii_lowercase().replace("%2e", ".");
        seg == "." || seg == ".."
    };
    if path.split('/').any(dot) {
        return None;
    }
    let rest = path.strip_prefix(base_path)?;
    let rest = match rest {
        "" => "/",
        r if r.starts_with('/') => r,
        _ => return None,
    };
    let client_path = match strip_prefix {
        Some(s) => format!("{}{rest}", s.trim_end_matches('/')),
        None => rest.to_owned(),
    };
    let tail = client_path.strip_prefix(prefix)?;
    Some(format!("{public_root}{tail}"))
}

#[cfg(test)]
mod tests {
    use super::map_url;

    #[test]
    fn upstream_urls_map_back_through_the_route_or_not_at_all() {
        let root = "http://gw:8080/agent";
        // strip_prefix /agent, upstream http://a:9/: /agent/a2a → /a2a.
        let m = |url| map_url(url, "", Some("/agent"), "/agent", root);
        assert_eq!(
            m("http://a:9/a2a").as_deref(),
            Some("http://gw:8080/agent/a2a")
        );
        assert_eq!(
            m("http://other/a2a?x=1").as_deref(),
            Some("http://gw:8080/agent/a2a")
        );
        assert_eq!(m("http://a:9").as_deref(), Some("http://gw:8080/agent/"));
        assert_eq!(m("mailto:x"), None);
        // Dot segments would lead a client elsewhere once it resolves them.
        assert_eq!(m("http://a:9/../../other/a2a"), None);
        assert_eq!(m("http://a:9/a2a/%2E%2e/x"), None);
        assert_eq!(m("http://a:9/./a2a"), None);
        // Upstream with a base path: URLs outside it cannot be reached.
        let m = |url| map_url(url, "/v03", Some("/agent"), "/agent", root);
        assert_eq!(
            m("http://a:9/v03/a2a").as_deref(),
            Some("http://gw:8080/agent/a2a")
        );
        assert_eq!(m("http://a:9/a2a"), None);
        assert_eq!(m("http://a:9/v030/a2a"), None);
        // Without strip_prefix the path is forwarded whole: only paths under the prefix.
        let m = |url| map_url(url, "", None, "/agent", root);
        assert_eq!(
            m("http://a:9/agent/a2a").as_deref(),
            Some("http://gw:8080/agent/a2a")
        );
        assert_eq!(m("http://a:9/a2a"), None);
    }
}
