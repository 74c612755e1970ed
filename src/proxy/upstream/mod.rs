//! The upstream side: base URLs from config (never from the client), and the client that
//! reaches them: rustls (webpki roots plus an optional extra CA file, certificate verification
//! always on), HTTP/2 when the upstream offers it over TLS, else HTTP/1.1 with keep-alive.
//!
//! `connect.rs` opens connections, `pool.rs` keeps them between requests, `body.rs` is the
//! response body that drives its HTTP/1 connection.

mod body;
mod connect;
mod pool;

pub use body::UpstreamBody;

use crate::config::Config;
use bytes::Bytes;
use connect::{Connected, Connector};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri};
use http_body_util::Full;
use pool::{Pool, PoolKey, Unsent};
use std::sync::Arc;
use std::time::Duration;

/// Why an upstream request got no response head.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("{0}")]
    Connect(String),
    #[error("{0}")]
    Http(#[from] hyper::Error),
}

/// The client for every upstream, shared by all requests.
pub struct UpstreamClient {
    connector: Connector,
    pool: Arc<Pool>,
}

impl UpstreamClient {
    /// The client `config` asks for: `timeouts.connect_ms`, and `upstream_tls.ca_path` (CA
    /// certificates trusted besides the webpki roots).
    pub fn for_config(config: &Config) -> Result<Self, String> {
        Ok(UpstreamClient {
            connector: Connector::new(
                Duration::from_millis(config.timeouts.connect_ms),
                config.upstream_tls.ca_path.as_deref(),
            )?,
            pool: Pool::new(),
        })
    }

    /// Sends `req` to `base`'s host and waits for the response head. A request that a reused
    /// connection could not take (the upstream had closed it) is sent again on another.
    pub async fn request(
        &self,
        base: &UpstreamBase,
        mut req: Request<Full<Bytes>>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let key = &base.key;
        req = match self.try_h2(key, req).await? {
            Ok(resp) => return Ok(resp),
            Err(unsent) => unsent,
        };
        while let Some(conn) = self.pool.take_idle(key) {
            match conn.send(req, &self.pool).await {
                Ok(resp) => return Ok(resp),
                Err(Unsent {
                    request: Some(unsent),
                    error,
                }) => {
                    tracing::debug!(error = %error, "idle upstream connection could not take a request");
                    req = unsent;
                }
                Err(Unsent { error, .. }) => return Err(error.into()),
            }
        }
        let gate = self.pool.connect_gate(key);
        let held = match &gate {
            Some(gate) => match gate.try_lock() {
                Ok(held) => Some(held),
                Err(_) => {
                    // Another request is connecting: wait for it once. If it brought a shared
                    // HTTP/2 connection, use that; otherwise connect without waiting again
                    // (so a failing upstream is not tried one request after another).
                    drop(gate.lock().await);
                    req = match self.try_h2(key, req).await? {
                        Ok(resp) => return Ok(resp),
                        Err(unsent) => unsent,
                    };
                    None
                }
            },
            None => None,
        };
        match self.connector.connect(key).await? {
            Connected::H1(conn) => {
                self.pool.mark_h1(key);
                drop(held);
                conn.send(req, &self.pool)
                    .await
                    .map_err(|unsent| unsent.error.into())
            }
            Connected::H2(mut sender) => {
                self.pool.put_h2(key, &sender);
                drop(held);
                Ok(sender.send_request(req).await?.map(UpstreamBody::h2))
            }
        }
    }

    /// Sends `req` on the shared HTTP/2 connection to `key`, if there is a live one; hands the
    /// request back when there is none or it could not take it.
    async fn try_h2(
        &self,
        key: &Arc<PoolKey>,
        req: Request<Full<Bytes>>,
    ) -> Result<Result<Response<UpstreamBody>, Request<Full<Bytes>>>, UpstreamError> {
        let Some(mut sender) = self.pool.h2_sender(key) else {
            return Ok(Err(req));
        };
        let req = match sender.ready().await {
            Ok(()) => match sender.try_send_request(req).await {
                Ok(resp) => return Ok(Ok(resp.map(UpstreamBody::h2))),
                Err(mut e) => match e.take_message() {
                    Some(unsent) => unsent,
                    None => return Err(e.into_error().into()),
                },
            },
            Err(e) => {
                tracing::debug!(error = %e, "shared upstream HTTP/2 connection ended");
                req
            }
        };
        self.pool.forget_h2(key);
        Ok(Err(req))
    }
}

/// A provider's base URL, split for fast request-URI building.
#[derive(Debug, Clone)]
pub struct UpstreamBase {
    /// Scheme (TLS or not) and authority; also which pooled connections serve it.
    key: Arc<PoolKey>,
    /// Path prefix without trailing slash ("" for a bare host).
    pub prefix: String,
}

impl UpstreamBase {
    pub fn scheme(&self) -> Scheme {
        if self.key.tls {
            Scheme::HTTPS
        } else {
            Scheme::HTTP
        }
    }

    pub fn authority(&self) -> &Authority {
        &self.key.authority
    }

    /// The upstream URI for a client request path (and query).
    pub fn uri_for(&self, path_and_query: &str) -> Result<Uri, http::Error> {
        let pq = format!("{}{}", self.prefix, path_and_query);
        Uri::builder()
            .scheme(self.scheme())
            .authority(self.authority().clone())
            .path_and_query(PathAndQuery::try_from(pq)?)
            .build()
    }
}

/// Parses and checks a configured base URL: http or https, a host, no query.
pub fn parse_base_url(url: &str) -> Result<UpstreamBase, String> {
    let uri: Uri = url
        .parse()
        .map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let scheme = uri
        .scheme()
        .filter(|s| *s == &Scheme::HTTP || *s == &Scheme::HTTPS)
        .cloned()
        .ok_or_else(|| format!("`{url}` must start with http:// or https://"))?;
    let authority = uri
        .authority()
        .cloned()
        .ok_or_else(|| format!("`{url}` has no host"))?;
    if uri.query().is_some() {
        return Err(format!("`{url}` must not have a query"));
    }
    Ok(UpstreamBase {
        key: Arc::new(PoolKey {
            tls: scheme == Scheme::HTTPS,
            authority,
        }),
        prefix: uri.path().trim_end_matches('/').to_owned(),
    })
}
