//! Header hygiene between client and upstream: what of a request's head goes upstream (the
//! protocol's allowlist, [`crate::protocol::HeaderAllowlist`], and the route's
//! `forward_headers`), which values HPACK must never index, which request bodies guardwire can
//! read (and in which charset), and what of a response's head goes back.

use super::charset::{self, Transcoder};
use crate::config::NEVER_FORWARDED;
use crate::error::GatewayError;
use crate::protocol::HeaderAllowlist;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};

pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// True for headers no one may forward, whatever the config: hop-by-hop ones, `Host` and
/// `Content-Length` ([`NEVER_FORWARDED`]; `forward_headers` naming one is refused at load).
fn never_forwarded(name: &HeaderName) -> bool {
    NEVER_FORWARDED.contains(&name.as_str())
}

/// The headers `Connection` names as hop-by-hop for this one message.
fn connection_named(from: &HeaderMap) -> Vec<HeaderName> {
    from.get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::try_from(n.trim()).ok())
        .collect()
}

/// A response head as it goes back to the client: `from` without hop-by-hop headers (and those
/// named in `Connection`), `Host` and `Content-Length`.
pub fn forwardable(from: &HeaderMap) -> HeaderMap {
    let named = connection_named(from);
    let mut out = HeaderMap::with_capacity(from.len());
    for (name, value) in from {
        if never_forwarded(name) || named.contains(name) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// Checks the headers of an answer that are relayed to the client ([`forwardable`]), but
/// those guardwire reads and rewrites itself (the body's type and length).
pub fn check_relayed(
    guard: &mut crate::policy::ExchangeGuard,
    from: &HeaderMap,
) -> Result<(), crate::policy::Finding> {
    let named = connection_named(from);
    for (name, value) in from {
        if never_forwarded(name)
            || named.contains(name)
            || name == http::header::CONTENT_TYPE
            || name == http::header::CONTENT_LENGTH
        {
            continue;
        }
        guard.check_header(name.as_str(), value.as_bytes())?;
    }
    Ok(())
}

/// A client's request head as it goes upstream: only the headers of the protocol's
/// `allowlist` (its account and credential headers only while `client_credential`, the
/// client's own credential, goes upstream) and the route's `extra` (`forward_headers`), never
/// hop-by-hop ones (nor those named in `Connection`), `Host` or `Content-Length`.
pub fn for_upstream(
    from: &HeaderMap,
    allowlist: &HeaderAllowlist,
    extra: &[HeaderName],
    client_credential: bool,
) -> HeaderMap {
    let named = connection_named(from);
    let mut out = HeaderMap::with_capacity(from.len());
    for (name, value) in from {
        if never_forwarded(name) || named.contains(name) {
            continue;
        }
        if allowlist.allows(name.as_str(), client_credential) || extra.contains(name) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// Headers that carry a credential by name.
const CREDENTIALS: [&str; 6] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
];

/// Marks every credential of `headers` sensitive, so HTTP/2's HPACK never indexes it on a
/// connection shared by many clients' requests (an indexed value can be probed by its
/// compressed size, and stays in the shared table). Credentials are the headers in
/// [`CREDENTIALS`], `also` (the route's key header), and any name that says it holds a key,
/// token, secret or cookie (an operator's `forward_headers` entry such as `x-tenant-token`).
pub fn mark_credentials_sensitive(headers: &mut HeaderMap, also: &str) {
    for (name, value) in headers.iter_mut() {
        let n = name.as_str();
        let secret = CREDENTIALS.contains(&n) || n == also || names_a_secret(n.as_bytes());
        if secret {
            value.set_sensitive(true);
        }
    }
}

/// True when a header name (lower case, as `HeaderName` keeps it) contains a word that says it
/// holds a key, token, secret or cookie. One pass over the name's bytes: `str::contains` per
/// word built a searcher six times for every header of every request.
fn names_a_secret(name: &[u8]) -> bool {
    const WORDS: [&[u8]; 6] = [b"key", b"token", b"secret", b"cookie", b"auth", b"password"];
    (0..name.len()).any(|i| {
        let rest = &name[i..];
        WORDS.iter().any(|w| rest.starts_with(w))
    })
}

/// Refuses (415) a request body guardwire could not read as its checks do: a `Content-Encoding`
/// other than `identity`, a `Content-Type` other than `application/json`, or a charset
/// guardwire cannot decode ([`charset`]). Without a `Content-Type` the body is read as JSON and
/// forwarded as `application/json`. The answer decodes the body, once read, into the UTF-8
/// that is checked and forwarded, under a `Content-Type` that says so: the upstream reads what
/// was checked.
pub fn check_request_body_type(headers: &mut HeaderMap) -> Result<Transcoder, GatewayError> {
    let refuse = |m: String| Err(GatewayError::UnsupportedMediaType(m));
    if let Some(coding) = headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .find(|c| !c.is_empty() && !c.eq_ignore_ascii_case(b"identity"))
    {
        return refuse(format!(
            "request bodies with Content-Encoding `{}` cannot be checked; send the body uncompressed",
            String::from_utf8_lossy(coding)
        ));
    }
    let mut types = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(value), None) = (types.next(), types.next()) else {
        if headers.contains_key(header::CONTENT_TYPE) {
            return refuse("a request must have one Content-Type".into());
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return Ok(Transcoder::new(encoding_rs::UTF_8));
    };
    let media = value.as_bytes().split(|&b| b == b';').next();
    if !media.is_some_and(|m| m.trim_ascii().eq_ignore_ascii_case(b"application/json")) {
        return refuse(format!(
            "Content-Type `{}` is not supported; send the body as application/json",
            String::from_utf8_lossy(value.as_bytes())
        ));
    }
    match charset::declared(headers) {
        Ok(declared) => {
            declared.label(headers);
            Ok(declared.transcoder())
        }
        Err(charset::Unreadable(why)) => {
            refuse(format!("{why}; send the body as UTF-8 application/json"))
        }
    }
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

/// Whether an answer's body is encoded: every coding of every Content-Encoding line counts,
/// and one that is not identity means bytes guardwire cannot read (and so cannot check).
pub fn encoded(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .any(|coding| !coding.is_empty() && !coding.eq_ignore_ascii_case(b"identity"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::ProtocolId;
    use crate::protocol::by_id;
    use bytes::Bytes;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn names(h: &HeaderMap) -> Vec<&str> {
        let mut n: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        n.sort_unstable();
        n
    }

    #[test]
    fn requests_carry_only_the_protocols_headers_and_the_configured_ones() {
        let client = map(&[
            ("Authorization", "Bearer sk-client"),
            ("OpenAI-Organization", "org-1"),
            ("OpenAI-Project", "proj-1"),
            ("OpenAI-Beta", "assistants=v2"),
            ("X-Stainless-Lang", "python"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json"),
            ("User-Agent", "OpenAI/Python 1.0"),
            (
                "traceparent",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ),
            ("X-Forwarded-For", "10.0.0.1"),
            ("anthropic-beta", "x"),
            ("X-Team", "search"),
            ("Host", "guardwire"),
            ("Content-Length", "2"),
            ("Connection", "x-team, keep-alive"),
            ("Keep-Alive", "5"),
        ]);
        let chat = by_id(ProtocolId::OpenAiChat).forward_headers();
        // The client's own credential: it, and the account it names, go along.
        assert_eq!(
            names(&for_upstream(&client, chat, &[], true)),
            [
                "accept",
                "authorization",
                "content-type",
                "openai-beta",
                "openai-organization",
                "openai-project",
                "traceparent",
                "user-agent",
                "x-stainless-lang",
            ]
        );
        // The operator's key goes instead: no client credential, no choice of its account.
        let without = for_upstream(&client, chat, &[], false);
        for n in ["authorization", "openai-organization", "openai-project"] {
            assert!(!without.contains_key(n), "{n}");
        }
        // An operator's header goes along, unless the client made it hop-by-hop.
        let extra = [HeaderName::from_static("x-forwarded-for")];
        assert!(for_upstream(&client, chat, &extra, false).contains_key("x-forwarded-for"));
        let extra = [HeaderName::from_static("x-team")];
        assert!(!for_upstream(&client, chat, &extra, false).contains_key("x-team"));

        let client = map(&[
            ("x-api-key", "sk-ant"),
            ("anthropic-version", "2023-06-01"),
            ("anthropic-beta", "prompt-caching-2024-07-31"),
            ("openai-organization", "org-1"),
            ("x-stainless-retry-count", "0"),
        ]);
        let anthropic = by_id(ProtocolId::AnthropicMessages).forward_headers();
        assert_eq!(
            names(&for_upstream(&client, anthropic, &[], false)),
            [
                "anthropic-beta",
                "anthropic-version",
                "x-stainless-retry-count"
            ]
        );
        assert!(for_upstream(&client, anthropic, &[], true).contains_key("x-api-key"));

        let client = map(&[
            ("x-goog-api-key", "g"),
            ("x-goog-api-client", "google-genai-sdk/1.0"),
            ("x-goog-user-project", "p"),
            ("x-stainless-lang", "python"),
        ]);
        let gemini = by_id(ProtocolId::Gemini).forward_headers();
        assert_eq!(
            names(&for_upstream(&client, gemini, &[], false)),
            ["x-goog-api-client"]
        );
        assert_eq!(
            names(&for_upstream(&client, gemini, &[], true)),
            ["x-goog-api-client", "x-goog-api-key", "x-goog-user-project"]
        );
    }

    #[test]
    fn credentials_are_never_indexed() {
        let mut h = map(&[
            ("authorization", "Bearer sk"),
            ("x-api-key", "k"),
            ("x-goog-api-key", "g"),
            ("api-key", "a"),
            ("cookie", "c=1"),
            ("proxy-authorization", "Basic x"),
            ("x-tenant-token", "t"),
            ("x-upstream-auth", "u"),
            ("x-client-secret", "s"),
            ("db-password", "p"),
            ("content-type", "application/json"),
            ("x-stainless-lang", "python"),
        ]);
        mark_credentials_sensitive(&mut h, "x-upstream-auth");
        for (name, value) in &h {
            let secret = !matches!(name.as_str(), "content-type" | "x-stainless-lang");
            assert_eq!(value.is_sensitive(), secret, "{name}");
        }
    }

    #[test]
    fn request_bodies_must_be_plain_json() {
        for ok in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            "application/json;charset=\"UTF-8\"",
        ] {
            let mut h = map(&[("content-type", ok)]);
            let text = check_request_body_type(&mut h).unwrap();
            let body = Bytes::from_static(b"{}");
            assert_eq!(text.whole(body.clone()).as_ptr(), body.as_ptr(), "{ok}");
            assert_eq!(h["content-type"], ok);
        }
        // A charset guardwire decodes: the body goes on as UTF-8, and says so.
        for (declared, sent) in [
            (
                "application/json; charset=utf-16",
                "application/json; charset=utf-8",
            ),
            (
                "application/json; charset=latin1",
                "application/json; charset=utf-8",
            ),
            ("application/json; profile=\"x\"", "application/json"),
        ] {
            let mut h = map(&[("content-type", declared)]);
            let text = check_request_body_type(&mut h).unwrap();
            assert_eq!(h["content-type"], sent);
            if declared.contains("utf-16") {
                let body = Bytes::from_static(b"{\x00}\x00");
                assert_eq!(&text.whole(body)[..], b"{}");
            }
        }
        // No type: read as JSON, and said to be JSON upstream.
        let mut h = HeaderMap::new();
        assert!(check_request_body_type(&mut h).is_ok());
        assert_eq!(h["content-type"], "application/json");
        let mut h = map(&[("content-encoding", "identity")]);
        assert!(check_request_body_type(&mut h).is_ok());
        for (name, value, says) in [
            (
                "content-type",
                "application/x-www-form-urlencoded",
                "application/json",
            ),
            ("content-type", "text/plain", "application/json"),
            (
                "content-type",
                "multipart/form-data; boundary=x",
                "application/json",
            ),
            ("content-type", "application/json-seq", "application/json"),
            ("content-type", "application/json; charset=utf-7", "utf-7"),
            ("content-type", "application/json; charset=utf-32", "UTF-8"),
            (
                "content-type",
                "application/json; charset=utf-8; charset=utf-16le",
                "several charsets",
            ),
            ("content-encoding", "gzip", "uncompressed"),
            ("content-encoding", "identity, br", "uncompressed"),
        ] {
            let mut h = map(&[("content-type", "application/json"), (name, value)]);
            if name == "content-type" {
                h.insert(header::CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
            }
            let e = check_request_body_type(&mut h).unwrap_err();
            assert_eq!(e.status(), http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
            assert!(e.to_string().contains(says), "{value}: {e}");
        }
        let mut h = map(&[
            ("content-type", "application/json"),
            ("content-type", "text/plain"),
        ]);
        assert!(check_request_body_type(&mut h).is_err());
    }

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
