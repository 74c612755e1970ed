//! The config's header names and URLs as checked values: forwarded headers and upstream base
//! URLs. Converted once, when the config is loaded. (What a protocol, a provider and a key
//! header are called is the protocols' business: `protocol/registry.rs`.)

use serde::Deserialize;

/// Request headers no config may forward: hop-by-hop ones (RFC 9110 §7.6.1), which describe one
/// connection, `Host` (the upstream's is set from its base URL) and `Content-Length` (a
/// re-framed body gets its own).
pub const NEVER_FORWARDED: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

/// A header name of `forward_headers`: valid, lowercased (names are case-insensitive), and not
/// one of [`NEVER_FORWARDED`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct ForwardHeader(pub http::HeaderName);

impl TryFrom<String> for ForwardHeader {
    type Error = String;
    fn try_from(name: String) -> Result<ForwardHeader, String> {
        let header = http::HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| format!("`{name}` is not a header name"))?;
        if NEVER_FORWARDED.contains(&header.as_str()) {
            return Err(format!(
                "`{name}` cannot be forwarded: hop-by-hop headers, Host and Content-Length belong to one connection or are set by guardwire"
            ));
        }
        Ok(ForwardHeader(header))
    }
}

/// A checked upstream base URL: `http` or `https`, a host (no user info), no query; the port
/// dropped when it is the scheme's default, the path kept without a trailing slash.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct BaseUrl {
    pub tls: bool,
    pub authority: http::uri::Authority,
    /// Path prefix without trailing slash (`""` for a bare host).
    pub prefix: String,
}

impl BaseUrl {
    pub fn parse(url: &str) -> Result<BaseUrl, String> {
        use http::uri::{Authority, Scheme, Uri};
        let uri: Uri = url
            .parse()
            .map_err(|e| format!("`{url}` is not a URL: {e}"))?;
        let tls = match uri.scheme() {
            Some(s) if *s == Scheme::HTTPS => true,
            Some(s) if *s == Scheme::HTTP => false,
            _ => return Err(format!("`{url}` must start with http:// or https://")),
        };
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| format!("`{url}` has no host"))?;
        if authority.as_str().contains('@') {
            return Err(format!(
                "`{url}` must not carry user info (use upstream_key_env for keys)"
            ));
        }
        if uri.query().is_some() {
            return Err(format!("`{url}` must not have a query"));
        }
        let authority = if authority.port_u16() == Some(if tls { 443 } else { 80 }) {
            Authority::try_from(authority.host()).map_err(|e| format!("`{url}`: {e}"))?
        } else {
            authority
        };
        Ok(BaseUrl {
            tls,
            authority,
            prefix: uri.path().trim_end_matches('/').to_owned(),
        })
    }
}

impl TryFrom<String> for BaseUrl {
    type Error = String;
    fn try_from(url: String) -> Result<BaseUrl, String> {
        BaseUrl::parse(&url)
    }
}

impl std::fmt::Display for BaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority, self.prefix)
    }
}
