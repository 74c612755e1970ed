//! JSON-RPC 2.0 framing as MCP uses it: a POST body is one message (or, in 2025-03-26, a
//! batch array), an SSE event's data is one message. Each message is read whole and
//! classified; anything that is not a valid JSON-RPC 2.0 message is refused with the JSON-RPC
//! error for it, never forwarded.

use serde_json::{Map, Value};

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

/// Reads a POST body or an event's data: one message or a non-empty batch array.
pub fn parse(data: &[u8]) -> Result<(Vec<Message>, bool), Invalid> {
    let value: Value = serde_json::from_slice(data).map_err(|e| Invalid {
        code: super::codes::PARSE_ERROR,
        // Kind and position only: the body is not quoted back.
        message: format!(
            "not JSON: {} at line {}, column {}",
            match e.classify() {
                serde_json::error::Category::Eof => "cut short",
                _ => "invalid",
            },
            e.line(),
            e.column()
        ),
        id: Value::Null,
    })?;
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

    #[test]
    fn errors_never_quote_the_input() {
        let e = parse(br#"{"jsonrpc":"2.0","id":1,"method":"sk-live-secret"#).unwrap_err();
        assert!(!e.message.contains("secret"));
        assert_eq!(e.code, crate::protocol::mcp::codes::PARSE_ERROR);
    }
}
