//! The routing headers of the 2026-07-28 envelope: `Mcp-Method` (the body's method),
//! `Mcp-Name` (a `tools/call`'s or `prompts/get`'s name, a `resources/read`'s URI) and
//! `Mcp-Param-*` (tool arguments the tool's schema mirrors into headers). A server may read
//! them instead of the body, so what they carry is read as the body's text: a value wrapped as
//! `=?base64?…?=` (the SDKs' encoding of what is not printable ASCII) is decoded, and a value
//! guardwire cannot read — raw bytes outside printable ASCII, a wrapping that is not canonical
//! base64 of UTF-8 — is refused, as is an `Mcp-Method` that is not the body's method or an
//! `Mcp-Name` that is not the name (or URI) the body carries. Nothing of a refused POST is
//! forwarded.

use super::codes;
use super::jsonrpc::{Invalid, Message};
use base64::Engine;
use http::HeaderMap;
use serde_json::Value;

/// True for a header whose value carries a value of the body.
fn carries_content(name: &str) -> bool {
    name == "mcp-name" || name.starts_with("mcp-param-")
}

/// True for a routing header (it describes a POST's body).
pub fn is_routing(name: &str) -> bool {
    name == "mcp-method" || carries_content(name)
}

fn mismatch(message: String, id: &Value) -> Invalid {
    Invalid {
        code: codes::HEADER_MISMATCH,
        message,
        id: id.clone(),
    }
}

/// A header value as the server reads it: printable ASCII as it is, the `=?base64?…?=`
/// wrapping decoded; `None` when it cannot be read.
pub fn decode(raw: &[u8]) -> Option<String> {
    if !raw.iter().all(|&b| (0x20..=0x7e).contains(&b)) {
        return None;
    }
    let text = std::str::from_utf8(raw).ok()?;
    let Some(payload) = text
        .strip_prefix("=?base64?")
        .and_then(|t| t.strip_suffix("?="))
    else {
        return Some(text.to_owned());
    };
    // The standard engine refuses non-canonical padding and trailing bits, as the SDKs do.
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(payload)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// What `Mcp-Name` mirrors of a message: `Some(value)` for the methods that name something
/// (`None` inside when the body lacks it), `None` for the others.
fn named_in_body(m: &Message) -> Option<Option<&str>> {
    let field = match m.method()? {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    Some(
        m.params()
            .and_then(|p| p.get(field))
            .and_then(Value::as_str),
    )
}

/// The texts the routing headers of a POST carry (each header's name suffix and decoded
/// value), after checking them against `messages`; `Err`: the error that answers the POST.
pub fn texts(headers: &HeaderMap, messages: &[Message]) -> Result<Vec<String>, Invalid> {
    let id = match messages {
        [one] => one.id.clone(),
        _ => Value::Null,
    };
    let mut methods = headers.get_all("mcp-method").iter();
    if let Some(method) = methods.next() {
        let same = methods.next().is_none()
            && !messages.is_empty()
            && messages.iter().all(|m| {
                m.method()
                    .is_some_and(|m| m.as_bytes() == method.as_bytes())
            });
        if !same {
            return Err(mismatch(
                "the Mcp-Method header does not match the body's method; nothing was forwarded"
                    .into(),
                &id,
            ));
        }
    }
    let mut names = headers.get_all("mcp-name").iter();
    if let Some(named) = names.next() {
        // The value the server routes by must be the one the body carries (and checked).
        let same = names.next().is_none()
            && decode(named.as_bytes()).is_some_and(|named| {
                messages.iter().all(|m| match named_in_body(m) {
                    Some(body) => body == Some(named.as_str()),
                    None => true,
                })
            });
        if !same {
            return Err(mismatch(
                "the Mcp-Name header does not match the body's name (params.name of tools/call and prompts/get, params.uri of resources/read); nothing was forwarded"
                    .into(),
                &id,
            ));
        }
    }
    let mut out = Vec::new();
    for (name, value) in headers {
        let name = name.as_str();
        if !carries_content(name) {
            continue;
        }
        if messages.is_empty() {
            return Err(mismatch(
                format!("the {name} header describes a POST's body; this request has none"),
                &id,
            ));
        }
        let Some(text) = decode(value.as_bytes()) else {
            return Err(mismatch(
                format!(
                    "the {name} header's value is neither printable ASCII nor =?base64?…?= of UTF-8 text, so guardwire cannot check it; nothing was forwarded"
                ),
                &id,
            ));
        };
        if let Some(suffix) = name.strip_prefix("mcp-param-") {
            out.push(suffix.to_owned());
        }
        if !text.is_empty() {
            out.push(text);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::protocol::mcp::jsonrpc::parse;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &[u8])]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(*n, HeaderValue::from_bytes(v).unwrap());
        }
        h
    }

    #[test]
    fn values_are_decoded_or_refused() {
        assert_eq!(decode(b"plain value").as_deref(), Some("plain value"));
        // "café forbidden" as the SDKs wrap it.
        let wrapped = format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode("café forbidden")
        );
        assert_eq!(
            decode(wrapped.as_bytes()).as_deref(),
            Some("café forbidden")
        );
        for bad in [
            &b"caf\xc3\xa9"[..],
            b"tab\there",
            b"=?base64?not base64!?=",
            b"=?base64?Zm9vYg=?=",
            b"=?base64?Zm9=?=",
            b"=?base64?/w==?=",
        ] {
            assert_eq!(decode(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_method_header_must_be_the_bodys() {
        let (msgs, _) =
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}"#)
                .unwrap();
        let ok = headers(&[("mcp-method", b"tools/call"), ("mcp-name", b"a")]);
        assert_eq!(texts(&ok, &msgs).unwrap(), ["a"]);
        for bad in [
            headers(&[("mcp-method", b"tools/list")]),
            headers(&[("mcp-method", b"tools/call"), ("mcp-method", b"tools/call")]),
            headers(&[("mcp-param-q", b"\x80")]),
        ] {
            let e = texts(&bad, &msgs).unwrap_err();
            assert_eq!(e.code, codes::HEADER_MISMATCH);
            assert_eq!(e.id, 1);
        }
        let (resp, _) = parse(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap();
        assert!(texts(&headers(&[("mcp-method", b"tools/call")]), &resp).is_err());
        assert!(texts(&headers(&[("mcp-name", b"a")]), &[]).is_err());
        let p = headers(&[("mcp-param-region", b"=?base64?ZXU=?=")]);
        assert_eq!(texts(&p, &msgs).unwrap(), ["region", "eu"]);
    }

    #[test]
    fn the_name_header_must_be_the_bodys_name_or_uri() {
        let one = |body: &[u8]| parse(body).unwrap().0;
        let call = one(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}"#);
        let prompt =
            one(br#"{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"p"}}"#);
        let read = one(
            br#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///x"}}"#,
        );
        let unnamed = one(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}"#);
        let wrapped_a = b"=?base64?YQ==?=";
        assert_eq!(
            texts(&headers(&[("mcp-name", wrapped_a)]), &call).unwrap(),
            ["a"]
        );
        assert!(texts(&headers(&[("mcp-name", b"p")]), &prompt).is_ok());
        assert!(texts(&headers(&[("mcp-name", b"file:///x")]), &read).is_ok());
        for (h, msgs) in [
            (headers(&[("mcp-name", b"b")]), &call),
            (headers(&[("mcp-name", b"a"), ("mcp-name", b"a")]), &call),
            (headers(&[("mcp-name", b"a ")]), &call),
            (headers(&[("mcp-name", b"q")]), &prompt),
            (headers(&[("mcp-name", b"file:///y")]), &read),
            (headers(&[("mcp-name", b"a")]), &unnamed),
        ] {
            let e = texts(&h, msgs).unwrap_err();
            assert_eq!(e.code, codes::HEADER_MISMATCH, "{h:?}");
            assert_eq!(e.id, msgs[0].id);
        }
    }
}
