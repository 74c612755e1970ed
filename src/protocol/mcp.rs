//! MCP (Model Context Protocol) over Streamable HTTP: JSON-RPC 2.0 messages POSTed by the
//! client and answered with JSON or an SSE stream of messages, the server's own SSE stream on
//! GET, DELETE ending a session. MCP is not a model API: a route of it has no conversation to
//! parse and no answer of deltas, so [`Mcp`] implements [`Protocol`] for what every route
//! needs from its protocol (name, headers, error shape) and its exchange is run message by
//! message by `proxy/mcp.rs`, over the framing of [`jsonrpc`] and the texts [`content`] reads
//! from each message for the same compiled checks.

pub mod content;
pub mod jsonrpc;
pub mod routing;

use super::residual::Structural;
use super::{DecodeError, FrameKind, HeaderAllowlist, ParsedRequest, Protocol, StreamDecoder};
use super::{ProtocolId, Provider, ReplyTo};
use crate::delta::Delta;
use crate::error::GatewayError;
use bytes::Bytes;

/// The revisions of Streamable HTTP guardwire reads (the `MCP-Protocol-Version` header, an
/// `initialize` request's `protocolVersion`, the 2026-07-28 envelope's `_meta`). The legacy
/// HTTP+SSE transport of 2024-11-05 is refused.
pub const VERSIONS: [&str; 4] = ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"];

/// JSON-RPC error codes guardwire answers with (the implementation-defined band of MCP,
/// -32000..-32019; the SDKs use -32000 and -32001 internally, never on the wire).
pub mod codes {
    /// A guardrail blocked the message (a request never reached the server; a result, a
    /// list or a server request never reached the client).
    pub const BLOCKED: i64 = -32010;
    /// The message holds what guardwire cannot check (a binary `blob`, a string under
    /// `unknown_content: block`, too many bytes for one event).
    pub const UNCHECKABLE: i64 = -32011;
    /// The MCP server could not be reached or answered something unusable.
    pub const UPSTREAM: i64 = -32012;
    /// Refused by guardwire for another reason (a key, a limit, a method).
    pub const REFUSED: i64 = -32013;
    /// The key is over its `rpm_limit`, `tpm_limit` or `max_budget` (HTTP 429, `retry-after`).
    pub const RATE_LIMITED: i64 = -32014;
    /// The routing headers do not match the body, or carry what guardwire cannot read
    /// (spec-defined in 2026-07-28).
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The protocol revision is not one guardwire reads (spec-defined in 2026-07-28).
    pub const UNSUPPORTED_VERSION: i64 = -32022;
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
}

pub struct Mcp;

/// No provider: an MCP server is always a configured route's upstream.
const PROVIDER: Provider = Provider::new(None, "mcp");

/// What MCP clients send that goes upstream besides [`super::COMMON_HEADERS`]: the session,
/// the revision, SSE resumption, the 2026-07-28 routing headers (`Mcp-Method`, `Mcp-Name`,
/// `Mcp-Param-*`); the client's own `authorization` only while no guardwire keys are set.
pub static HEADERS: HeaderAllowlist = HeaderAllowlist {
    names: &[
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
        "mcp-method",
        "mcp-name",
    ],
    prefixes: &["mcp-param-"],
    client_account: &["authorization"],
};

/// Keys whose string values are protocol structure, never text a model reads.
pub static STRUCTURAL: Structural = Structural {
    keys: &[
        "jsonrpc",
        "method",
        "protocolVersion",
        "mimeType",
        "progressToken",
        "cursor",
        "nextCursor",
        "stopReason",
        "level",
        "version",
    ],
    nested: &[],
    text_keys: &[],
    free: &[],
    schema: None,
};

impl Protocol for Mcp {
    fn id(&self) -> ProtocolId {
        ProtocolId::Mcp
    }

    /// MCP is served only on configured routes (`routes[].protocol: mcp`).
    fn matches(&self, _path: &str) -> bool {
        false
    }

    /// The MCP endpoint is the route's path itself.
    fn serves(&self, path: &str) -> bool {
        path == "/"
    }

    fn forward_headers(&self) -> &'static HeaderAllowlist {
        &HEADERS
    }

    fn provider(&self) -> Provider {
        PROVIDER
    }

    fn structural(&self) -> &'static Structural {
        &STRUCTURAL
    }

    fn parse_request(&self, _body: &[u8], _path: &str) -> Result<ParsedRequest, GatewayError> {
        Err(GatewayError::Internal(
            "MCP messages are read by the MCP exchange".into(),
        ))
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(NoDecoder)
    }

    fn decode_response<'a>(&self, _: &'a [u8], _: &mut Vec<Delta<'a>>) -> Result<(), DecodeError> {
        Err(DecodeError(
            "MCP messages are read by the MCP exchange".into(),
        ))
    }

    fn error_body(&self, err: &GatewayError, to: &ReplyTo) -> Bytes {
        jsonrpc::error_json(&reply_id(to), error_code(err), &err.to_string(), None).into()
    }

    fn stream_error_frame(&self, err: &GatewayError, to: &ReplyTo) -> Bytes {
        let json = jsonrpc::error_json(&reply_id(to), error_code(err), &err.to_string(), None);
        format!("event: message\ndata: {json}\n\n").into()
    }
}

/// The id an error answers: the call's, when the body was read far enough to know it.
fn reply_id(to: &ReplyTo) -> serde_json::Value {
    to.rpc_id
        .as_deref()
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// The JSON-RPC code of a guardwire error.
pub fn error_code(err: &GatewayError) -> i64 {
    match err {
        GatewayError::Blocked { .. } => codes::BLOCKED,
        GatewayError::InvalidRequest(_) => codes::INVALID_REQUEST,
        GatewayError::Upstream(_)
        | GatewayError::UpstreamTimeout(_)
        | GatewayError::UpstreamIncomplete => codes::UPSTREAM,
        GatewayError::RateLimited { .. } => codes::RATE_LIMITED,
        _ => codes::REFUSED,
    }
}

/// Never used: MCP streams are read whole message by message by the MCP exchange.
struct NoDecoder;

impl StreamDecoder for NoDecoder {
    fn decode<'a>(
        &mut self,
        _: Option<&[u8]>,
        _: &'a [u8],
        _: &mut Vec<Delta<'a>>,
    ) -> Result<FrameKind, DecodeError> {
        Err(DecodeError(
            "MCP messages are read by the MCP exchange".into(),
        ))
    }
}
