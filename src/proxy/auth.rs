//! Client keys (virtual keys): who is calling, which packs apply, and the provider key that
//! replaces theirs upstream. Keys are compared in constant time and never logged.

use crate::budget::Budget;
use crate::config::AuthHeader;
use crate::policy::Policy;
use http::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use std::sync::{Arc, Mutex};

/// A configured client key.
pub struct ClientKey {
    /// The id logs and the audit log use.
    pub id: &'static str,
    secret: Vec<u8>,
    /// Packs of this key, when it has its own.
    pub policy: Option<Arc<Policy>>,
    /// The provider key sent upstream in its place.
    pub upstream_key: Option<String>,
    /// Its requests in flight: carried over from the runtime a reload replaces, so requests
    /// still running on the old one keep counting.
    pub in_flight: Arc<Budget>,
    /// Its `max_concurrent_requests`, when it has one.
    pub max_in_flight: Option<usize>,
    /// Its limits over time (`rpm_limit`, `tpm_limit`, `max_budget`), when it has any.
    pub limits: Option<Arc<crate::state::KeyLimits>>,
}

impl ClientKey {
    pub fn new(
        id: &str,
        secret: String,
        policy: Option<Arc<Policy>>,
        upstream_key: Option<String>,
    ) -> Self {
        ClientKey {
            id: intern(id),
            secret: secret.into_bytes(),
            policy,
            upstream_key,
            in_flight: Budget::new(),
            max_in_flight: None,
            limits: None,
        }
    }
}

/// Headers a client may carry its key in, by provider convention.
const KEY_HEADERS: [&str; 3] = ["x-api-key", "api-key", "x-goog-api-key"];

/// The key the client presented: `Authorization: Bearer`, `x-api-key`, `api-key`,
/// `x-goog-api-key`, or Gemini's `key=` query parameter — every one of them, each as often as
/// it is given, must be the same key: which of two different keys should count is not
/// guardwire's to guess ([`AmbiguousKey`]). A non-Bearer `Authorization` presents no key.
pub fn presented_key<'a>(
    headers: &'a HeaderMap,
    query: Option<&'a str>,
) -> Result<Option<&'a [u8]>, AmbiguousKey> {
    let mut found: Option<&[u8]> = None;
    let mut add = |v: &'a [u8]| match found {
        Some(f) if f != v => Err(AmbiguousKey),
        _ => {
            found = Some(v);
            Ok(())
        }
    };
    for v in headers.get_all(AUTHORIZATION) {
        match v.as_bytes().strip_prefix(b"Bearer ") {
            Some(k) => add(k)?,
            None => return Ok(None),
        }
    }
    for name in KEY_HEADERS {
        for v in headers.get_all(name) {
            add(v.as_bytes())?;
        }
    }
    for kv in query.unwrap_or("").split('&') {
        if let Some(k) = kv.strip_prefix("key=") {
            add(k.as_bytes())?;
        }
    }
    Ok(found)
}

/// Two different keys in one request.
#[derive(Debug, PartialEq, Eq)]
pub struct AmbiguousKey;

/// The configured key matching `presented`. Every key is compared, in constant time per key,
/// so timing tells nothing about which key came close.
pub fn find_key<'a>(keys: &'a [ClientKey], presented: &[u8]) -> Option<&'a ClientKey> {
    let mut found = None;
    for k in keys {
        if super::constant_time_eq(presented, &k.secret) && found.is_none() {
            found = Some(k);
        }
    }
    found
}

/// Removes every header a client key can travel in, before the request goes upstream.
pub fn strip_client_auth(headers: &mut HeaderMap) {
    headers.remove(AUTHORIZATION);
    for name in KEY_HEADERS {
        headers.remove(name);
    }
}

/// Puts the provider key in `header` (`authorization` gets `Bearer <key>`).
pub fn set_upstream_key(headers: &mut HeaderMap, header: AuthHeader, key: &str) {
    let (name, value) = match header {
        AuthHeader::Bearer => (AUTHORIZATION, format!("Bearer {key}")),
        other => (HeaderName::from_static(other.as_str()), key.to_owned()),
    };
    if let Ok(mut v) = HeaderValue::from_str(&value) {
        v.set_sensitive(true);
        headers.insert(name, v);
    }
}

/// `path?query` without a `key=` parameter.
pub fn without_key_param(path_and_query: &str) -> String {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return path_and_query.to_owned();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| !kv.starts_with("key=") && !kv.is_empty())
        .collect();
    if kept.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

/// Route and key names become metrics labels, which must live for the program; each distinct
/// name is stored once, however often the config is reloaded.
pub fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = match NAMES.lock() {
        Ok(n) => n,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(n) = names.iter().find(|n| **n == name) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.push(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn keys_are_read_from_every_convention_and_stripped() {
        let mut h = HeaderMap::new();
        h.insert("x-goog-api-key", HeaderValue::from_static("g"));
        assert_eq!(presented_key(&h, None), Ok(Some(&b"g"[..])));
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer g"));
        assert_eq!(presented_key(&h, Some("key=g")), Ok(Some(&b"g"[..])));
        // Two different keys, wherever the second travels: neither is guessed.
        assert_eq!(presented_key(&h, Some("alt=sse&key=q")), Err(AmbiguousKey));
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer b"));
        assert_eq!(presented_key(&h, None), Err(AmbiguousKey));
        let mut twice = HeaderMap::new();
        twice.append("x-api-key", HeaderValue::from_static("a"));
        twice.append("x-api-key", HeaderValue::from_static("b"));
        assert_eq!(presented_key(&twice, None), Err(AmbiguousKey));
        assert_eq!(
            presented_key(&HeaderMap::new(), Some("alt=sse&key=q")),
            Ok(Some(&b"q"[..]))
        );
        let mut basic = HeaderMap::new();
        basic.insert(AUTHORIZATION, HeaderValue::from_static("Basic eA=="));
        basic.insert("x-api-key", HeaderValue::from_static("a"));
        assert_eq!(presented_key(&basic, None), Ok(None));
        strip_client_auth(&mut h);
        assert!(h.is_empty());
        set_upstream_key(&mut h, AuthHeader::Bearer, "sk-1");
        assert_eq!(h[AUTHORIZATION], "Bearer sk-1");
        assert!(h[AUTHORIZATION].is_sensitive());
        for header in [
            AuthHeader::ApiKey,
            AuthHeader::XApiKey,
            AuthHeader::XGoogApiKey,
        ] {
            set_upstream_key(&mut h, header, "sk-2");
            assert_eq!(h[header.as_str()], "sk-2");
            assert!(h[header.as_str()].is_sensitive());
        }
        assert_eq!(without_key_param("/v1/x?alt=sse&key=q"), "/v1/x?alt=sse");
        assert_eq!(without_key_param("/v1/x?key=q"), "/v1/x");
    }

    #[test]
    fn find_key_compares_every_key() {
        let keys = [
            ClientKey::new("a", "secret-a".into(), None, None),
            ClientKey::new("b", "secret-b".into(), None, None),
        ];
        assert_eq!(find_key(&keys, b"secret-b").map(|k| k.id), Some("b"));
        assert!(find_key(&keys, b"secret-").is_none());
        assert!(find_key(&keys, b"").is_none());
        assert!(std::ptr::eq(intern("route-x"), intern("route-x")));
    }
}
