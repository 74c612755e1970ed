//! Header hygiene between client and upstream.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Headers that describe one connection, not the message: never forwarded (RFC 9110 §7.6.1).
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Copies `from` without hop-by-hop headers (and those named in `Connection`), without `Host`
/// (the upstream's is set from config) and without `Content-Length` (re-framed bodies get their
/// own).
pub fn forwardable(from: &HeaderMap) -> HeaderMap {
    let named: Vec<HeaderName> = from
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::try_from(n.trim()).ok())
        .collect();
    let mut out = HeaderMap::with_capacity(from.len());
    for (name, value) in from {
        if HOP_BY_HOP.contains(name)
            || named.contains(name)
            || name == header::HOST
            || name == header::CONTENT_LENGTH
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// The client's `x-request-id` if it sent a usable one, else a fresh one.
pub fn request_id(headers: &HeaderMap) -> HeaderValue {
    headers
        .get(&REQUEST_ID)
        .filter(|v| !v.is_empty() && v.len() <= 200)
        .cloned()
        .unwrap_or_else(|| {
            let id = uuid::Uuid::new_v4().simple().to_string();
            HeaderValue::from_str(&id).unwrap_or_else(|_| HeaderValue::from_static("unknown"))
        })
}
