//! JSON-RPC 2.0 framing as MCP uses it: a POST body is one message (or, in 2025-03-26, a
//! batch array), an SSE event's data is one message. Each message is read whole and
//! classified; anything that is not a valid JSON-RPC 2.0 message is refused with the JSON-RPC
//! error for it, never forwarded.
//!
//! The bytes that are checked are the bytes that are forwarded, so a message must read the same
//! to every JSON reader: an object with the same key twice (at any depth, however the key is
//! escaped) is refused — serde_json keeps the last copy, other readers keep the first — in the
//! same single pass that reads the message ([`Unique`]).

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// What a message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A request: it has an id and waits for its response.
    Request(String),
    /// A notification: a method without an id.
    Notification(String),
    /// A successful response (`result`).
    Response,
    /// An error response (`error`).
    Error,
}

/// One JSON-RPC message, read.
#[derive(Debug, Clone)]
pub struct Message {
    pub kind: Kind,
    /// The id of a request or response (`Null` for a notification or an error without one).
    pub id: Value,
    pub body: Map<String, Value>,
}

impl Message {
    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match &self.kind {
            Kind::Request(m) | Kind::Notification(m) => Some(m),
            _ => None,
        }
    }

    pub fn params(&self) -> Option<&Value> {
        self.body.get("params")
    }

    pub fn result(&self) -> Option<&Value> {
        self.body.get("result")
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.body).unwrap_or_default()
    }
}

/// A message's id as a hash key, so a batch's messages are matched with their answers in
/// linear time. JSON-RPC ids are strings or integers, and `1` and `"1"` are different ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IdKey {
    Int(i128),
    Str(String),
}

impl IdKey {
    /// `None`: not an id a request can have (`null`, a float, anything else).
    pub fn of(id: &Value) -> Option<IdKey> {
        match id {
            Value::String(s) => Some(IdKey::Str(s.clone())),
            Value::Number(n) => n
                .as_u64()
                .map(i128::from)
                .or_else(|| n.as_i64().map(i128::from))
                .map(IdKey::Int),
            _ => None,
        }
    }

    /// The id as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            IdKey::Str(s) => Value::String(s.clone()),
            IdKey::Int(n) => serde_json::from_str(&n.to_string()).unwrap_or(Value::Null),
        }
    }
}

/// Why bytes are not a JSON-RPC message: the error to answer (`id` where one was readable).
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub code: i64,
    pub message: String,
    pub id: Value,
}

fn invalid(message: &str, id: Value) -> Invalid {
    Invalid {
        code: super::codes::INVALID_REQUEST,
        message: message.into(),
        id,
    }
}

/// The error [`Unique`] raises (serde_json adds the position).
const DUPLICATE: &str = "duplicate key";

/// A JSON value read in one pass, refusing an object that has a key twice: serde_json's own
/// `Value` keeps the last copy silently. The nesting limit is serde_json's (128).
pub struct Unique(pub Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Unique, D::Error> {
        d.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Unique::deserialize(d).map(|u| u.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(Unique(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Unique(v) = map.next_value()?;
            if out.insert(key, v).is_some() {
                return Err(de::Error::custom(DUPLICATE));
            }
        }
        Ok(Value::Object(out))
    }
}

/// Reads JSON whole, refusing duplicate keys: the error to answer, never quoting the input.
pub fn read_unique(data: &[u8]) -> Result<Value, Invalid> {
    serde_json::from_slice::<Unique>(data)
        .map(|u| u.0)
        .map_err(|e| why_not_read(e, data))
}

/// The error to answer for bytes the reader refused: kind and position, never the input.
fn why_not_read(e: serde_json::Error, data: &[u8]) -> Invalid {
    use serde_json::error::Category;
    // A duplicate found before a syntax error further on: the body is no JSON at all, and is
    // answered as such (the error path only reads it twice).
    let e = match e.classify() {
        Category::Data => serde_json::from_slice::<de::IgnoredAny>(data)
            .err()
            .unwrap_or(e),
        _ => e,
    };
    let (code, what) = match e.classify() {
        // The only data error a `Unique` raises: any JSON is a value.
        Category::Data => (
            super::codes::INVALID_REQUEST,
            "an object has the same key twice (readers disagree on which copy counts; the key is not quoted)",
        ),
        Category::Eof => (super::codes::PARSE_ERROR, "not JSON: cut short"),
        _ => (super::codes::PARSE_ERROR, "not JSON: invalid"),
    };
    Invalid {
        code,
        // Kind and position only: the body is not quoted back.
        message: format!("{what} at line {}, column {}", e.line(), e.column()),
        id: Value::Null,
    }
}

/// A POST body or an event's data read as [`Unique`] does, but a top-level array stops being
/// read at its `max + 1`-th element ([`OVER_CAP`]).
struct TopLevel {
    max: usize,
}

impl<'de> DeserializeSeed<'de> for TopLevel {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopLevel {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC message or batch")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        UniqueVisitor.visit_bool(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        UniqueVisitor.visit_i64(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        UniqueVisitor.visit_u64(v)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        UniqueVisitor.visit_f64(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        UniqueVisitor.visit_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        UniqueVisitor.visit_string(v)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        UniqueVisitor.visit_unit()
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        UniqueVisitor.visit_map(map)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(v)) = seq.next_element()? {
            if items.len() == self.max {
                return Err(de::Error::custom(OVER_CAP));
            }
            items.push(v);
        }
        Ok(Value::Array(items))
    }
}

/// Reads a POST body or an event's data: one message or a non-empty batch array.
pub fn parse(data: &[u8]) -> Result<(Vec<Message>, bool), Invalid> {
    parse_capped(data, usize::MAX)
}

/// The error a batch over its cap raises inside the reader (never a key, so never confused
/// with [`DUPLICATE`]'s).
const OVER_CAP: &str = "batch over its cap";

/// How the refusal of a batch over its cap begins ([`Invalid::is_over_cap`]).
const OVER_CAP_MESSAGE: &str = "a batch of more than";

impl Invalid {
    /// Whether this refuses a batch over its cap ([`parse_capped`]).
    pub fn is_over_cap(&self) -> bool {
        self.message.starts_with(OVER_CAP_MESSAGE)
    }
}

/// [`parse`] with at most `max` messages in a batch: reading stops at the first message past
/// it (so a huge batch costs no more than `max` messages to refuse) and the answer is
/// [`Invalid`] with [`Invalid::over_cap`] set.
pub fn parse_capped(data: &[u8], max: usize) -> Result<(Vec<Message>, bool), Invalid> {
    let mut de = serde_json::Deserializer::from_slice(data);
    let read = TopLevel { max }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    let value = match read {
        Ok(v) => v,
        Err(e)
            if e.classify() == serde_json::error::Category::Data
                && e.to_string().starts_with(OVER_CAP) =>
        {
            return Err(Invalid {
                code: super::codes::INVALID_REQUEST,
                message: format!(
                    "{OVER_CAP_MESSAGE} {max} messages is refused (limits.max_batch_messages); nothing of it was checked or forwarded"
                ),
                id: Value::Null,
            })
        }
        Err(e) => return Err(why_not_read(e, data)),
    };
    match value {
        Value::Array(items) if items.is_empty() => Err(invalid(
            "an empty batch is not a JSON-RPC message",
            Value::Null,
        )),
        Value::Array(items) => {
            let messages = items.into_iter().map(one).collect::<Result<_, _>>()?;
            Ok((messages, true))
        }
        other => Ok((vec![one(other)?], false)),
    }
}

/// Reads one message.
pub fn one(value: Value) -> Result<Message, Invalid> {
    let Value::Object(body) = value else {
        return Err(invalid("a JSON-RPC message is an object", Value::Null));
    };
    let id = body.get("id").cloned().unwrap_or(Value::Null);
    let id_ok = match &id {
        Value::String(_) => true,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        _ => false,
    };
    if body.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(
            "jsonrpc must be \"2.0\"",
            if id_ok { id } else { Value::Null },
        ));
    }
    let kind = match (body.get("method"), body.get("result"), body.get("error")) {
        (Some(Value::String(m)), None, None) => match body.get("id") {
            None => Kind::Notification(m.clone()),
            Some(_) if id_ok => Kind::Request(m.clone()),
            Some(_) => return Err(invalid("id must be a string or an integer", Value::Null)),
        },
        (Some(_), None, None) => return Err(invalid("method must be a string", id)),
        (None, Some(_), None) if id_ok => Kind::Response,
        (None, None, Some(Value::Object(e)))
            if e.get("code").is_some_and(|c| c.is_i64())
                && e.get("message").is_some_and(Value::is_string)
                && (id_ok || id.is_null()) =>
        {
            Kind::Error
        }
        _ => {
            return Err(invalid(
                "not a JSON-RPC request, notification or response",
                Value::Null,
            ))
        }
    };
    if let Some(p) = body.get("params") {
        if !(p.is_object() || p.is_array()) {
            return Err(invalid("params must be an object or an array", id));
        }
    }
    Ok(Message { kind, id, body })
}

/// The JSON-RPC error response for `id`.
pub fn error_json(id: &Value, code: i64, message: &str, data: Option<Value>) -> String {
    let mut error = Map::new();
    error.insert("code".into(), code.into());
    error.insert("message".into(), message.into());
    if let Some(d) = data {
        error.insert("data".into(), d);
    }
    let mut body = Map::new();
    body.insert("jsonrpc".into(), "2.0".into());
    body.insert("id".into(), id.clone());
    body.insert("error".into(), Value::Object(error));
    serde_json::to_string(&body).unwrap_or_default()
}

/// The call's id, whatever else the body holds (`null` when it has none or is not JSON, as
/// JSON-RPC answers what it cannot read).
pub fn reply_to(body: &[u8]) -> crate::protocol::ReplyTo {
    #[derive(serde::Deserialize)]
    struct Id<'a> {
        #[serde(borrow, default)]
        id: Option<&'a serde_json::value::RawValue>,
    }
    let id = serde_json::from_slice::<Id<'_>>(body)
        .ok()
        .and_then(|i| i.id)
        // An id is a string, a number or null (JSON-RPC 2.0): anything else is answered null.
        .filter(|id| !matches!(id.get().as_bytes().first(), Some(b'{' | b'[')))
        .map_or_else(
            || serde_json::value::RawValue::from_string("null".into()),
            |id| Ok(id.to_owned()),
        );
    crate::protocol::ReplyTo { rpc_id: id.ok() }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn messages_are_classified_and_bad_ones_refused() {
        let kind = |s: &str| parse(s.as_bytes()).map(|(m, _)| m[0].kind.clone());
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#),
            Ok(Kind::Request("tools/call".into()))
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Kind::Notification("notifications/initialized".into()))
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
            Ok(Kind::Response)
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}"#),
            Ok(Kind::Error)
        );
        for bad in [
            "",
            "[]",
            "3",
            r#"{"id":1,"method":"x"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":"s"}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x""#,
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad}");
        }
        let (batch, is_batch) =
            parse(br#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]"#)
                .unwrap();
        assert!(is_batch);
        assert_eq!(batch.len(), 2);
    }

    fn batch(n: usize) -> String {
        let one = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        format!("[{}]", vec![one; n].join(","))
    }

    #[test]
    fn a_batch_over_its_cap_is_refused_with_the_key_named() {
        assert_eq!(parse_capped(batch(3).as_bytes(), 3).unwrap().0.len(), 3);
        let e = parse_capped(batch(4).as_bytes(), 3).unwrap_err();
        assert_eq!(e.code, crate::protocol::mcp::codes::INVALID_REQUEST);
        assert_eq!(e.id, Value::Null);
        assert!(
            e.message.contains("limits.max_batch_messages"),
            "{}",
            e.message
        );
        assert!(e.is_over_cap());
        // Reading stops at the cap: what follows is never read, valid or not.
        let cut = format!("{},{{\"x", &batch(5)[..batch(5).len() - 1]);
        let e = parse_capped(cut.as_bytes(), 3).unwrap_err();
        assert!(e.message.contains("max_batch_messages"), "{}", e.message);
        // One message is no batch; the cap does not apply to arrays inside it.
        let one = r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1,2,3,4,5]}"#;
        assert!(parse_capped(one.as_bytes(), 1).is_ok());
        // Other errors are worded as before.
        let e = parse_capped(b"[{\"a\":1,\"a\":2}]", 3).unwrap_err();
        assert!(e.message.contains("same key twice"), "{}", e.message);
        let e = parse_capped(b"[{\"a\":1}", 3).unwrap_err();
        assert_eq!(e.code, crate::protocol::mcp::codes::PARSE_ERROR);
        assert!(parse_capped(b"[] x", 3).is_err(), "trailing bytes");
    }

    #[test]
    fn ids_key_by_type_and_value() {
        assert_eq!(IdKey::of(&json_id("1")), Some(IdKey::Int(1)));
        assert_ne!(IdKey::of(&json_id("1")), IdKey::of(&json_id("\"1\"")));
        assert_eq!(IdKey::of(&json_id("-1")), Some(IdKey::Int(-1)));
        assert_eq!(
            IdKey::of(&json_id("18446744073709551615")),
            Some(IdKey::Int(i128::from(u64::MAX)))
        );
        assert_eq!(IdKey::of(&Value::Null), None);
        assert_eq!(IdKey::of(&json_id("1.5")), None);
    }

    fn json_id(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    proptest::proptest! {
        /// Whatever the batch's length and the cap, a batch is read as `parse` reads it
        /// when it fits and refused when it does not.
        #[test]
        fn the_cap_is_exact(n in 1usize..40, max in 1usize..40) {
            let body = batch(n);
            match parse_capped(body.as_bytes(), max) {
                Ok((m, true)) => {
                    proptest::prop_assert!(n <= max);
                    proptest::prop_assert_eq!(m.len(), parse(body.as_bytes()).unwrap().0.len());
                }
                Ok(_) => proptest::prop_assert!(false, "a batch read as one message"),
                Err(e) => {
                    proptest::prop_assert!(n > max);
                    proptest::prop_assert!(e.message.contains("max_batch_messages"));
                }
            }
        }
    }

    #[test]
    fn errors_never_quote_the_input() {
        let e = parse(br#"{"jsonrpc":"2.0","id":1,"method":"sk-live-secret"#).unwrap_err();
        assert!(!e.message.contains("secret"));
        assert_eq!(e.code, crate::protocol::mcp::codes::PARSE_ERROR);
    }

    #[test]
    fn a_key_twice_before_a_syntax_error_is_answered_as_no_json() {
        // Found by the fuzz target: the duplicate comes first, the body is not JSON.
        let e = parse(br#"[{"jsonrpc":"2.0","method":"a","params":{"x":[{"k":{"z":1,"z":2}}]2}]"#)
            .unwrap_err();
        assert_eq!(e.code, crate::protocol::mcp::codes::PARSE_ERROR);
        assert!(e.message.starts_with("not JSON"), "{}", e.message);
    }

    #[test]
    fn a_key_twice_is_refused_at_any_depth_however_spelled() {
        for bad in [
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":{"secret-key":1,"secret-key":2}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"t":"a","\u0074":"b"}}"#,
            r#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b","params":[{"k":1,"k":1}]}]"#,
        ] {
            let e = parse(bad.as_bytes()).unwrap_err();
            assert_eq!(
                e.code,
                crate::protocol::mcp::codes::INVALID_REQUEST,
                "{bad}"
            );
            assert!(!e.message.contains("secret"), "{}", e.message);
        }
        // The same key in sibling objects is fine.
        assert!(parse(
            br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":{"k":1},"b":{"k":1}}}"#
        )
        .is_ok());
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-z\u{e9}\"\\\\ ]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z\u{e9}]{0,3}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Writes `v` as JSON; the `target`-th non-empty object (in document order) gets its first
    /// member written once more after the others, its key spelled with `\u` escapes when
    /// `escaped`. `seen` counts the non-empty objects.
    fn write(v: &Value, target: usize, escaped: bool, seen: &mut usize, out: &mut String) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                let here = *seen == target;
                *seen += 1;
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(k).unwrap());
                    out.push(':');
                    write(v, target, escaped, seen, out);
                }
                if here {
                    let (k, v) = m.iter().next().unwrap();
                    out.push(',');
                    if escaped {
                        out.push('"');
                        for c in k.encode_utf16() {
                            out.push_str(&format!("\\u{c:04x}"));
                        }
                        out.push('"');
                    } else {
                        out.push_str(&serde_json::to_string(k).unwrap());
                    }
                    out.push(':');
                    out.push_str(&serde_json::to_string(v).unwrap());
                }
                out.push('}');
            }
            other => out.push_str(&serde_json::to_string(other).unwrap()),
        }
    }

    proptest::proptest! {
        /// What `read_unique` accepts, serde_json reads the same; a key written twice in any
        /// object, at any depth, however escaped, is refused as an invalid request.
        #[test]
        fn duplicate_keys_are_found_wherever_they_are(
            v in json_value(),
            pick in 0usize..64,
            escaped in proptest::bool::ANY,
        ) {
            let plain = serde_json::to_string(&v).unwrap();
            proptest::prop_assert_eq!(read_unique(plain.as_bytes()).unwrap(), v.clone());
            let mut objects = 0;
            write(&v, usize::MAX, false, &mut objects, &mut String::new());
            if objects > 0 {
                let mut twice = String::new();
                write(&v, pick % objects, escaped, &mut 0, &mut twice);
                let e = read_unique(twice.as_bytes()).unwrap_err();
                proptest::prop_assert_eq!(e.code, crate::protocol::mcp::codes::INVALID_REQUEST, "{}", twice);
                // serde_json alone takes it: the case the review found.
                proptest::prop_assert!(serde_json::from_str::<Value>(&twice).is_ok());
            }
        }
    }
}
