//! Usage on every OpenAI-style stream. Chat Completions and legacy Completions report a
//! stream's token usage only when the request has `stream_options: {"include_usage": true}`
//! (then a last chunk with `"choices": []` and `usage` comes before `[DONE]`). guardwire asks
//! for it on the client's behalf (`routes[].request_usage`), and when the client did not ask,
//! that chunk is read by guardwire and not relayed: the client gets the stream it asked for.

use memchr::memmem::Finder;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::ops::Range;
use std::sync::LazyLock;

/// What asking for usage did to a streamed request's body.
#[derive(Debug, PartialEq, Eq)]
pub enum UsageAsk {
    /// The client asked for usage itself: the body goes upstream as it came and the usage
    /// chunk reaches the client.
    ClientAsked,
    /// guardwire asked: this body goes upstream instead, and the usage-only chunk is kept
    /// from the client.
    Added(Vec<u8>),
}

/// The members of a JSON object in order, values as their raw text.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, &'de RawValue>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

const ASK: &str = r#"{"include_usage":true}"#;

/// `stream_options.include_usage: true` merged into a streamed request's `body` (a JSON
/// object). Nothing but that member changes: when the request has no `stream_options`, it is
/// appended to the body's bytes as they are; otherwise `stream_options` gets (or has replaced)
/// its `include_usage` and the body is rewritten member by member, every other value as its
/// raw text. `None` when the body is not an object or `stream_options` is neither an object
/// nor null: it goes upstream unchanged (and the upstream judges it).
pub fn ask_for_usage(body: &[u8]) -> Option<UsageAsk> {
    let members: Members<'_> = serde_json::from_slice(body).ok()?;
    let Some(pos) = members.0.iter().position(|(k, _)| k == "stream_options") else {
        // Appended before the closing brace: every byte the client sent stays.
        let end = body.iter().rposition(|&b| b == b'}')?;
        let mut out = Vec::with_capacity(body.len() + 48);
        out.extend_from_slice(&body[..end]);
        if !members.0.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(br#""stream_options":"#);
        out.extend_from_slice(ASK.as_bytes());
        out.extend_from_slice(&body[end..]);
        return Some(UsageAsk::Added(out));
    };
    let options = members.0[pos].1.get().trim();
    let new_options = if options == "null" {
        ASK.to_owned()
    } else {
        let inner: Members<'_> = serde_json::from_str(options).ok()?;
        let asked = inner
            .0
            .iter()
            .find(|(k, _)| k == "include_usage")
            .is_some_and(|(_, v)| v.get().trim() == "true");
        if asked {
            return Some(UsageAsk::ClientAsked);
        }
        let mut entries: Vec<(String, &str)> = inner
            .0
            .iter()
            .filter(|(k, _)| k != "include_usage")
            .map(|(k, v)| (k.clone(), v.get()))
            .collect();
        entries.push(("include_usage".into(), "true"));
        object(&entries)
    };
    let entries: Vec<(String, &str)> = members
        .0
        .iter()
        .enumerate()
        .map(|(i, (k, v))| {
            let v = if i == pos {
                new_options.as_str()
            } else {
                v.get()
            };
            (k.clone(), v)
        })
        .collect();
    Some(UsageAsk::Added(object(&entries).into_bytes()))
}

/// A JSON object of keys and raw values.
fn object(entries: &[(String, &str)]) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(k).unwrap_or_default());
        out.push(':');
        out.push_str(v);
    }
    out.push('}');
    out
}

/// The byte range of a chunk's `"usage":null` member (with its leading comma), which OpenAI
/// adds to every chunk of a stream that asked for usage, in a raw SSE frame (compact or
/// Python-spaced separators): the frame without it is the bytes before and after. Quotes
/// inside JSON strings are escaped, so these bytes can only be a member; `None` for a frame
/// without it. A range, not a copy: the caller relays the two slices of the frame it has.
pub fn null_usage_member(raw: &[u8]) -> Option<Range<usize>> {
    // One searcher, built once, for the key both spellings share: the frame is scanned once
    // (a searcher per spelling scanned every relayed frame twice).
    static KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(br#""usage":"#));
    KEY.find_iter(raw).find_map(|at| {
        let (before, after) = (&raw[..at], &raw[at + KEY.needle().len()..]);
        if before.ends_with(b",") && after.starts_with(b"null") {
            Some((at - 1)..(at + KEY.needle().len() + 4))
        } else if before.ends_with(b", ") && after.starts_with(b" null") {
            Some((at - 2)..(at + KEY.needle().len() + 5))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    /// The frame without its `"usage":null` member, or `None` when it has none.
    fn without_null_usage(raw: &[u8]) -> Option<Vec<u8>> {
        null_usage_member(raw).map(|m| [&raw[..m.start], &raw[m.end..]].concat())
    }

    fn added(body: &str) -> String {
        match ask_for_usage(body.as_bytes()) {
            Some(UsageAsk::Added(b)) => String::from_utf8(b).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn usage_is_asked_for_keeping_every_other_byte() {
        assert_eq!(
            added(r#"{"model":"m","stream":true,"temperature":0.70} "#),
            r#"{"model":"m","stream":true,"temperature":0.70,"stream_options":{"include_usage":true}} "#
        );
        assert_eq!(
            added(r#"{"stream":true,"stream_options":null,"n":1e2}"#),
            r#"{"stream":true,"stream_options":{"include_usage":true},"n":1e2}"#
        );
        assert_eq!(
            added(
                r#"{"stream":true,"stream_options":{"include_obfuscation":false,"include_usage":false},"x":"\u00e9"}"#
            ),
            r#"{"stream":true,"stream_options":{"include_obfuscation":false,"include_usage":true},"x":"\u00e9"}"#
        );
    }

    #[test]
    fn a_client_that_asked_is_left_alone_and_odd_bodies_pass() {
        assert_eq!(
            ask_for_usage(br#"{"stream":true,"stream_options":{"include_usage": true}}"#),
            Some(UsageAsk::ClientAsked)
        );
        assert_eq!(ask_for_usage(br#"{"stream_options":"x"}"#), None);
        assert_eq!(ask_for_usage(b"[1]"), None);
        assert_eq!(ask_for_usage(b"{"), None);
    }

    #[test]
    fn null_usage_members_are_removed() {
        assert_eq!(
            without_null_usage(b"data: {\"choices\":[],\"usage\":null}\n\n").unwrap(),
            b"data: {\"choices\":[]}\n\n"
        );
        assert_eq!(
            without_null_usage(b"data: {\"choices\": [], \"usage\": null}\n\n").unwrap(),
            b"data: {\"choices\": []}\n\n"
        );
        assert!(without_null_usage(b"data: {\"choices\":[]}\n\n").is_none());
        // Before other members (OpenAI's `obfuscation` follows it), and after a usage-like text.
        assert_eq!(
            without_null_usage(
                b"data: {\"c\":\"\\\"usage\\\":null\",\"usage\":null,\"obfuscation\":\"x\"}\n\n"
            )
            .unwrap(),
            b"data: {\"c\":\"\\\"usage\\\":null\",\"obfuscation\":\"x\"}\n\n"
        );
        // A usage object, and separators of neither spelling, stay.
        for kept in [
            &b"data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n"[..],
            b"data: {\"choices\":[],\"usage\": null}\n\n",
            b"data: {\"usage\":null}\n\n",
        ] {
            assert!(without_null_usage(kept).is_none());
        }
    }
}
