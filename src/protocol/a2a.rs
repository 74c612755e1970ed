//! A2A (Agent2Agent) over JSON-RPC, for `protocol: a2a` routes in front of an agent: the 1.0
//! methods (`SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`, `ListTasks`,
//! `SubscribeToTask`) and the 0.3 names the SDKs still speak (`message/send`,
//! `message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe`).
//!
//! A call's message parts are its input (BeforeCall): a block answers the JSON-RPC error for
//! the call's id and nothing is forwarded. The agent's reply is output: messages (the reply,
//! status-update messages, a task's history) on choice 0, each artifact on a choice of its own
//! (`1 +` its order of appearance), so the appended chunks of one streamed artifact
//! (`append: true`) are one text under the zero-leak hold-back, whatever else streams between
//! them. Data parts, metadata and unknown fields go to the fallback (`unknown_content`), whose
//! exemptions (ids, kinds, states) hold only where A2A's schema puts them (`schema.rs`).
//! Push notifications (which deliver answers past guardwire) and the extended agent card
//! (whose URLs guardwire cannot rewrite in band) are refused. The agent card itself is a
//! discovery document (`card.rs`). Requests are read in `request.rs`, answers in `wire.rs`.

mod card;
mod request;
mod schema;
mod wire;

use super::residual::{schema_strings, Place, Structural};
use super::{
    DecodeError, FrameKind, HeaderAllowlist, ParsedRequest, Protocol, ProtocolId, Provider,
    ReplyTo, StreamDecoder,
};
use crate::delta::Delta;
use crate::error::GatewayError;
use bytes::Bytes;

pub struct A2a;

/// An A2A agent: no standard base URL (`protocol: a2a` routes name theirs).
const PROVIDER: Provider = Provider::new(None, "a2a");

/// The A2A SDKs' headers: the protocol version the client speaks and the extensions it asks
/// for (with 0.3's `X-` spelling); the client's credential while it goes upstream.
pub static HEADERS: HeaderAllowlist = HeaderAllowlist {
    names: &["a2a-version", "a2a-extensions", "x-a2a-extensions"],
    prefixes: &[],
    client_account: &["authorization"],
};

/// The agent card's well-known paths: 1.0 (and late 0.3) and the older 0.2/0.3 name.
pub const CARD_PATHS: &[&str] = &["/.well-known/agent-card.json", "/.well-known/agent.json"];

/// The JSON-RPC error codes guardwire answers with (besides JSON-RPC's own, -32600 for a
/// request it cannot read or refuses, -32603 for its internal errors). In the range JSON-RPC
/// leaves to implementations, clear of A2A's -32001…-32009.
pub mod codes {
    /// A guardrail blocked the call or the agent's answer.
    pub const BLOCKED: i64 = -32090;
    /// The answer was held back past `limits.max_holdback_bytes` while a check was undecided.
    pub const HOLDBACK_EXCEEDED: i64 = -32091;
    /// No valid guardwire key.
    pub const UNAUTHORIZED: i64 = -32092;
    /// The agent could not be reached, timed out, or answered something unusable.
    pub const UPSTREAM: i64 = -32093;
    /// guardwire is overloaded or shutting down: retry shortly.
    pub const RETRY: i64 = -32094;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INTERNAL: i64 = -32603;
}

/// The JSON-RPC error code of `err`.
pub fn code_of(err: &GatewayError) -> i64 {
    match err {
        GatewayError::Blocked { .. } => codes::BLOCKED,
        GatewayError::HoldbackExceeded { .. } => codes::HOLDBACK_EXCEEDED,
        GatewayError::Unauthorized(_) => codes::UNAUTHORIZED,
        GatewayError::InvalidRequest(_)
        | GatewayError::PayloadTooLarge { .. }
        | GatewayError::UnsupportedMediaType(_)
        | GatewayError::BodyTimeout { .. } => codes::INVALID_REQUEST,
        GatewayError::NotFound(_) | GatewayError::MethodNotAllowed(_) => codes::METHOD_NOT_FOUND,
        GatewayError::Upstream(_)
        | GatewayError::UpstreamTimeout(_)
        | GatewayError::UpstreamIncomplete => codes::UPSTREAM,
        GatewayError::Overloaded
        | GatewayError::BufferFull
        | GatewayError::KeyLimit
        | GatewayError::AddressLimit
        | GatewayError::RateLimited { .. }
        | GatewayError::StateUnavailable
        | GatewayError::ShuttingDown => codes::RETRY,
        GatewayError::Internal(_) => codes::INTERNAL,
    }
}

/// `{"jsonrpc":"2.0","id":…,"error":{"code","message","data"}}`: `data` is A2A 1.0's list of
/// details with one `google.rpc.ErrorInfo` (domain `guardwire`, reason guardwire's error code,
/// its type in `metadata`), which the SDK hands to the error it raises.
fn rpc_error_json(err: &GatewayError, to: &ReplyTo) -> String {
    let (kind, code) = err.type_and_code();
    let id = to.rpc_id.as_deref().map_or("null", |id| id.get());
    let error = serde_json::json!({
        "code": code_of(err),
        "message": err.to_string(),
        "data": [{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": code.to_ascii_uppercase(),
            "domain": "guardwire",
            "metadata": {"type": kind},
        }],
    });
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#)
}

impl Protocol for A2a {
    fn relays_upstream_errors(&self) -> bool {
        false
    }

    fn id(&self) -> ProtocolId {
        ProtocolId::A2a
    }

    /// Only configured routes speak A2A: an agent has no standard path.
    fn matches(&self, _path: &str) -> bool {
        false
    }

    /// Every POST of the route is a JSON-RPC call (the agent card names its endpoint).
    fn serves(&self, path: &str) -> bool {
        !path.starts_with("/.well-known/")
    }

    fn discovery_paths(&self) -> &'static [&'static str] {
        CARD_PATHS
    }

    fn rewrite_discovery(
        &self,
        body: &[u8],
        map: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<u8>, String> {
        card::rewrite(body, map)
    }

    fn forward_headers(&self) -> &'static HeaderAllowlist {
        &HEADERS
    }

    fn provider(&self) -> Provider {
        PROVIDER
    }

    fn structural(&self) -> &'static Structural {
        &schema::ANSWERS
    }

    /// A known method's call by its schema; an unknown method's params are all text.
    fn request_structural(&self, body: &[u8]) -> &'static Structural {
        match request::method_of(body).map(|m| request::method(&m)) {
            Some(request::Method::Send { .. } | request::Method::Task { .. }) => &schema::CALLS,
            _ => &schema::UNKNOWN_CALLS,
        }
    }

    /// The card's names, descriptions, skills, provider and every unknown field: what a
    /// client's model reads about the agent.
    fn discovery_texts(&self, body: &[u8]) -> Result<Vec<(String, Place)>, String> {
        let mut left = Vec::new();
        schema_strings(body, &schema::CARD_SCHEMA, &[], &mut left)
            .map_err(|_| "the agent card is not JSON guardwire can read".to_owned())?;
        left.into_iter()
            .map(|l| {
                serde_json::from_slice::<String>(&body[l.literal])
                    .map(|t| (t, l.place))
                    .map_err(|_| "the agent card is not JSON guardwire can read".to_owned())
            })
            .collect()
    }

    fn parse_request(&self, body: &[u8], _path: &str) -> Result<ParsedRequest, GatewayError> {
        request::parse(body)
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::<wire::A2aStream>::default()
    }

    fn decode_response<'a>(
        &self,
        body: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<(), DecodeError> {
        wire::A2aStream::default()
            .decode(None, body, out)
            .map(|_: FrameKind| ())
    }

    fn reply_to(&self, body: &[u8]) -> ReplyTo {
        request::reply_to(body)
    }

    /// JSON-RPC answers a call's errors with 200 (as the A2A SDK's server does), so the client
    /// reads the error object; what is not a call (the agent card, a request refused before
    /// its body was read) keeps the HTTP status.
    fn error_status(&self, err: &GatewayError, to: &ReplyTo) -> http::StatusCode {
        match to.rpc_id {
            Some(_) => http::StatusCode::OK,
            None => err.status(),
        }
    }

    fn error_body(&self, err: &GatewayError, to: &ReplyTo) -> Bytes {
        rpc_error_json(err, to).into()
    }

    /// `event: error` with the JSON-RPC error for the call's id: the SDK raises it.
    fn stream_error_frame(&self, err: &GatewayError, to: &ReplyTo) -> Bytes {
        format!("event: error\ndata: {}\n\n", rpc_error_json(err, to)).into()
    }
}

#[cfg(test)]
mod tests;
