//! The upstream side: base URLs from config (never from the client), and one pooled hyper
//! client with rustls (webpki roots, certificate verification always on, HTTP/1.1 and HTTP/2).

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::Uri;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

pub type UpstreamClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A provider's base URL, split for fast request-URI building.
#[derive(Debug, Clone)]
pub struct UpstreamBase {
    pub scheme: Scheme,
    pub authority: Authority,
    /// Path prefix without trailing slash ("" for a bare host).
    pub prefix: String,
}

impl UpstreamBase {
    /// The upstream URI for a client request path (and query).
    pub fn uri_for(&self, path_and_query: &str) -> Result<Uri, http::Error> {
        let pq = format!("{}{}", self.prefix, path_and_query);
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
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
        scheme,
        authority,
        prefix: uri.path().trim_end_matches('/').to_owned(),
    })
}

/// Builds the shared upstream client.
pub fn build_client(connect_timeout: Duration) -> Result<UpstreamClient, rustls::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(https))
}
