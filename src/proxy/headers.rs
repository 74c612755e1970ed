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
            let id = fresh_request_id().simple().to_string();
            HeaderValue::from_str(&id).unwrap_or_else(|_| HeaderValue::from_static("unknown"))
        })
}

/// A random (version 4) UUID from a per-thread generator seeded once from the OS, instead of
/// a `getrandom` system call per request. Request ids need to be unique, not secret.
fn fresh_request_id() -> uuid::Uuid {
    thread_local! {
        static STATE: std::cell::Cell<u64> = std::cell::Cell::new(uuid::Uuid::new_v4().as_u64_pair().0);
    }
    // SplitMix64: a full-period 64-bit sequence per thread from a random start.
    let next = || {
        STATE.with(|s| {
            let x = s.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
            s.set(x);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
    };
    let bits = (u128::from(next()) << 64) | u128::from(next());
    uuid::Builder::from_random_bytes(bits.to_le_bytes()).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_request_ids_are_distinct_version_4_uuids() {
        let ids: std::collections::HashSet<_> = (0..10_000).map(|_| fresh_request_id()).collect();
        assert_eq!(ids.len(), 10_000);
        for id in ids.iter().take(100) {
            assert_eq!(id.get_version(), Some(uuid::Version::Random));
            assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        }
        // Other threads start elsewhere in the sequence.
        let other = std::thread::spawn(fresh_request_id)
            .join()
            .unwrap_or_default();
        assert!(!ids.contains(&other));
        let id = request_id(&HeaderMap::new());
        assert_eq!(id.len(), 32, "{id:?}");
    }
}
