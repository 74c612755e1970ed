//! MCP's JSON-RPC framing (`guardwire::protocol::mcp`): a POST body or an SSE event's data.
//!
//! Input: the bytes of the body.
//!
//! Asserts:
//! - `jsonrpc::parse` never panics; its refusal renders as a JSON-RPC error that is JSON;
//! - a message it accepts, written back (`to_json`), reads again as the same kind of message
//!   with the same id;
//! - fail closed: every non-empty string of an accepted message that is not one of the schema's
//!   values at its position (`structure_at`), and every object key that is no MCP field name in
//!   any spelling (`is_field`), is among the texts the checks read (`Texts::of_message`): as a
//!   text of its own, inside the JSON text of a free-form value, or as an identifier (read by
//!   the secret and PII patterns); or the message is marked unreadable (binary content);
//! - a body with an object that has a key twice is refused (`-32600`), never accepted.
#![no_main]

use guardwire::protocol::mcp::content::{canonical, is_field, structure_at, Structure, Texts};
use guardwire::protocol::mcp::jsonrpc;
use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let (messages, _) = match jsonrpc::parse(data) {
        Ok(m) => m,
        Err(e) => {
            if e.code == guardwire::protocol::mcp::codes::INVALID_REQUEST
                && e.message.contains("same key twice")
            {
                // Only when serde_json reads it (keeping the last copy) and a reader that
                // refuses duplicates does not.
                assert!(serde_json::from_slice::<IgnoredAny>(data).is_ok());
            }
            let answer = jsonrpc::error_json(&e.id, e.code, &e.message, None);
            assert!(serde_json::from_str::<IgnoredAny>(&answer).is_ok());
            return;
        }
    };
    for msg in messages {
        let again = jsonrpc::one(serde_json::from_str(&msg.to_json()).unwrap()).unwrap();
        assert_eq!(again.kind, msg.kind);
        assert_eq!(again.id, msg.id);
        let texts = Texts::of_message(&msg.body);
        if texts.unreadable.is_some() {
            continue;
        }
        let mut path = Vec::new();
        for (k, v) in &msg.body {
            path.push(canonical(k).unwrap_or(k));
            every_string_read(&mut path, v, &texts);
            path.pop();
        }
    }
});

fn read(s: &str, texts: &Texts) -> bool {
    let escaped = serde_json::to_string(s).unwrap();
    let inner = &escaped[1..escaped.len() - 1];
    texts.modelled.iter().any(|t| t == s)
        || texts.residual.iter().any(|t| t == s)
        || texts.modelled.iter().any(|t| t.contains(inner))
}

/// `path`: the keys from the message's top to `value` (array positions left out).
fn every_string_read<'a>(path: &mut Vec<&'a str>, value: &'a Value, texts: &Texts) {
    match value {
        Value::String(s) if s.is_empty() => {}
        Value::String(s) => match structure_at(path, s) {
            Some(Structure::Constant) => {}
            Some(Structure::Identifier) => assert!(
                texts.identifiers.contains(s),
                "{path:?}: identifier {s:?} is read by no check"
            ),
            None => assert!(read(s, texts), "{path:?}: {s:?} is read by no check"),
        },
        Value::Array(items) => {
            for item in items {
                every_string_read(path, item, texts);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                assert!(
                    is_field(k) || read(k, texts),
                    "{path:?}: key {k:?} is read by no check"
                );
                path.push(canonical(k).unwrap_or(k));
                every_string_read(path, v, texts);
                path.pop();
            }
        }
        _ => {}
    }
}
