//! Provider wire protocols. Each one is a parser/renderer pair behind [`Protocol`]: it decodes
//! requests into a [`Conversation`], streamed and whole responses into [`Delta`]s, and renders
//! guardwire's errors in the provider's native shape. Nothing else in guardwire knows a wire
//! format, so adding a protocol means adding a module here and its line in `registry.rs`
//! (its name in config, its telemetry operation, its judge shapes).

pub mod a2a;
pub mod anthropic;
pub mod documents;
mod frame_template;
#[cfg(test)]
pub(crate) mod frame_template_tests;
pub mod gemini;
pub mod identifier;
pub mod judge_wire;
pub mod mcp;
pub mod openai_chat;
pub mod openai_completions;
pub mod openai_embeddings;
pub mod openai_responses;
mod registry;
pub mod residual;
mod runs;
pub mod skim;
pub mod stream_usage;

pub use judge_wire::JudgeWire;
pub use registry::{AuthHeader, ProtocolId, Provider};

use crate::delta::{Channel, Conversation, Delta};
use crate::error::GatewayError;
use bytes::Bytes;
use registry::REGISTRY;
use std::borrow::Cow;

/// For `Option<Cow<str>>` fields: borrows the string from the input when it has no escapes.
/// serde's `#[serde(borrow)]` does not reach through `Option`, so without this every streamed
/// text would be copied into a new `String`.
fn borrow_opt_str<'de: 'a, 'a, D>(d: D) -> Result<Option<Cow<'a, str>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(serde::Deserialize)]
    struct Str<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(<Option<Str<'a>> as serde::Deserialize>::deserialize(d)?.map(|s| s.0))
}

/// An optional string that is `None` when the value is anything but a string (a field whose
/// name other events use for other things).
fn lenient_opt_str<'de: 'a, 'a, D>(d: D) -> Result<Option<Cow<'a, str>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Lenient;
    impl<'de> serde::de::Visitor<'de> for Lenient {
        type Value = Option<Cow<'de, str>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_owned())))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v)))
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut a: A,
        ) -> Result<Self::Value, A::Error> {
            while a.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut a: A,
        ) -> Result<Self::Value, A::Error> {
            while a
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            Ok(None)
        }
    }
    d.deserialize_any(Lenient)
}

/// A request as guardwire needs to see it.
#[derive(Debug, Clone, Default)]
pub struct ParsedRequest {
    /// The client asked for a streamed answer.
    pub stream: bool,
    /// The model asked for, where the protocol names it (prices for `cost_budget`).
    pub model: Option<String>,
    pub conversation: Conversation,
    /// The request carries input guardwire cannot read as text (token ids): refused unless
    /// the route's `unknown_content` is `pass`.
    pub unreadable_input: bool,
    /// Inline documents the proxy cannot read (refused unless `unknown_content: pass`) and
    /// references to provider-stored content (the route's `stored_context`).
    pub documents: documents::Documents,
    /// The session the request names itself (A2A's `contextId`), for the evals.
    pub session: Option<String>,
    /// How many choices (candidates) the answer may hold: the request's `n` (Gemini's
    /// `candidateCount`); `None` where the protocol has no choices (its decoder numbers what it
    /// reads itself). A choice index past them is refused: a reader that takes `choices[0]` by
    /// position would join texts guardwire reads apart
    /// ([`crate::policy::ExchangeGuard::expect_choices`]).
    pub choices: Option<u32>,
}

/// A count parameter of a request (`n`, `candidateCount`) as the answer's choices: a positive
/// integer as given, anything else (absent, null, not a count) 1 — the provider's default, or
/// an error the provider answers itself.
pub(crate) fn choices_param(value: Option<&serde_json::Value>) -> u32 {
    value
        .and_then(|v| {
            v.as_u64().or_else(|| {
                v.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 1.0)
                    .map(|f| f.min(u32::MAX as f64) as u64)
            })
        })
        .filter(|n| *n >= 1)
        .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// What an error answer to a request repeats of it, read from its body before it is parsed
/// ([`Protocol::reply_to`]): the JSON-RPC id (A2A), so that the client's SDK pairs the error
/// with its call — a whole error answer and the error frame that ends a stream alike. Empty for
/// the provider protocols, and for requests answered before their body is read.
#[derive(Debug, Clone, Default)]
pub struct ReplyTo {
    /// The request's JSON-RPC `id` as its JSON text (a string, a number or `null`); `None`:
    /// not a JSON-RPC call.
    pub rpc_id: Option<Box<serde_json::value::RawValue>>,
}

/// What a decoded stream frame was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Carries response data (possibly no text: role announcements, finish, usage).
    Data,
    /// No data at all (comment, keep-alive, unknown event): passed through as is.
    Passthrough,
    /// The provider's end-of-stream marker (`[DONE]`, `message_stop`, …).
    Terminal,
    /// The provider reported an error in-band; the stream ends after it.
    UpstreamError,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

impl DecodeError {
    /// `what` failed to parse, said by kind and position only: serde_json's own message can
    /// quote the input (`invalid type: string "…"`), which is model output, and what reaches
    /// the log never carries that.
    pub fn json(what: &str, e: &serde_json::Error) -> DecodeError {
        let kind = match e.classify() {
            serde_json::error::Category::Io => "read error",
            serde_json::error::Category::Syntax => "invalid JSON",
            serde_json::error::Category::Data => "unexpected shape",
            serde_json::error::Category::Eof => "JSON cut short",
        };
        DecodeError(format!(
            "{what}: {kind} at line {}, column {}",
            e.line(),
            e.column()
        ))
    }
}

/// Parses a request body; a malformed one is the client's error (400).
fn request_json<'a, T: serde::Deserialize<'a>>(body: &'a [u8]) -> Result<T, GatewayError> {
    serde_json::from_slice(body)
        .map_err(|e| GatewayError::InvalidRequest(format!("invalid request body: {e}")))
}

/// A text delta of choice 0, or nothing for absent or empty text (single-choice protocols).
fn text_delta(channel: Channel, text: Option<Cow<'_, str>>) -> Option<Delta<'_>> {
    text.filter(|t| !t.is_empty()).map(|text| Delta::Text {
        choice: 0,
        channel,
        text,
    })
}

/// Per-stream decoding state (some protocols need to remember what a block index stands for).
pub trait StreamDecoder: Send {
    /// Decodes one SSE event (its `event:` name and `data:` payload) into `out`.
    fn decode<'a>(
        &mut self,
        event: Option<&[u8]>,
        data: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<FrameKind, DecodeError>;

    /// At the end of an upstream body that brought no [`FrameKind::Terminal`] event: whether
    /// what was decoded is a complete answer all the same. Only protocols without a terminal
    /// event can say yes (Gemini: a `finishReason` was seen); for the others such a body was
    /// cut short, and the stream ends with an error frame rather than pass for complete.
    fn complete_without_terminal(&self) -> bool {
        false
    }

    /// True when every string of the last decoded frame was read by the decoder or is known
    /// structure, so the fallback ([`residual`]) need not walk the frame. A promise, so the
    /// default is no.
    fn fully_read(&self) -> bool {
        false
    }

    /// With [`StreamDecoder::fully_read`]: the identifier-shaped strings of the last frame
    /// (literals, quotes included) that the decoder skipped as structure and the checks have not
    /// seen — the secret and PII patterns read them, as the fallback would have (no position is
    /// exempt). Values a template repeats unchanged are not listed again.
    fn identifiers(&self) -> &[std::ops::Range<usize>] {
        &[]
    }

    /// Values the readers assemble from pieces of several frames (an id joined across a tool
    /// call's deltas), as the last frame completed them: read whole by the checks — an
    /// identifier by the secret and PII patterns, anything else as text.
    fn joined_values(&self) -> &[String] {
        &[]
    }

    /// True when the stream sends texts again ([`Delta::Repeat`]: Responses `.done` events and
    /// `response.completed`). The guard then keeps each channel's text to verify a repeat is
    /// what streamed before; without it, a repeat cannot be verified and fails closed.
    fn repeats_text(&self) -> bool {
        false
    }

    /// True when the last decoded frame was a usage-only chunk (`"choices": []` with `usage`),
    /// the one [`stream_usage`] asks OpenAI-style upstreams for.
    fn usage_only(&self) -> bool {
        false
    }
}

/// Request headers every protocol forwards: the body's type, what the client accepts, who it
/// is, retry de-duplication and W3C trace context. Lowercase, like every allowlist here.
pub const COMMON_HEADERS: [&str; 6] = [
    "content-type",
    "accept",
    "user-agent",
    "idempotency-key",
    "traceparent",
    "tracestate",
];

/// The request headers a protocol's clients send that go upstream. Anything else a client sends
/// is dropped unless the operator lists it in `forward_headers`: a header the provider reads
/// next to the operator's key (`X-Forwarded-For`, a beta switch of another provider, …) is the
/// operator's decision, not the client's. Names are lowercase.
#[derive(Debug)]
pub struct HeaderAllowlist {
    /// Headers that describe or shape the request (API version, beta features, SDK
    /// telemetry): always forwarded.
    pub names: &'static [&'static str],
    /// Prefixes of such headers (`x-stainless-`, the SDK telemetry of the Stainless-built SDKs).
    pub prefixes: &'static [&'static str],
    /// The client's credential and the account it bills (`openai-organization`): forwarded
    /// only while the client's own credential goes upstream, i.e. without `keys`. With keys
    /// the operator's provider key is sent, and a client must not pick which of the
    /// operator's organizations or projects pays.
    pub client_account: &'static [&'static str],
}

impl HeaderAllowlist {
    /// True when `name` (lowercase) goes upstream; `client_credential`: the client's own
    /// credential does.
    pub fn allows(&self, name: &str, client_credential: bool) -> bool {
        COMMON_HEADERS.contains(&name)
            || self.names.contains(&name)
            || self.prefixes.iter().any(|p| name.starts_with(p))
            || (client_credential && self.client_account.contains(&name))
    }
}

/// Every protocol guardwire speaks, in [`ProtocolId::ALL`]'s order. A request goes to the first
/// whose [`Protocol::matches`] accepts its path.
pub fn all() -> [&'static dyn Protocol; ProtocolId::ALL.len()] {
    REGISTRY
}

/// The protocol of `id` (its module, from the registry).
pub fn by_id(id: ProtocolId) -> &'static dyn Protocol {
    *slot(id)
}

fn slot(id: ProtocolId) -> &'static &'static dyn Protocol {
    &REGISTRY[ProtocolId::ALL.iter().position(|p| *p == id).unwrap_or(0)]
}

/// The operations a route of `protocol` serves: its own, and for `openai_chat` (what
/// OpenAI-compatible servers are configured as) also legacy Completions and Embeddings, which
/// every such server offers beside chat. The first whose [`Protocol::serves`] accepts a path
/// handles it.
pub fn family(protocol: &'static dyn Protocol) -> &'static [&'static dyn Protocol] {
    static CHAT: [&dyn Protocol; 3] = [
        &openai_chat::OpenAiChat,
        &openai_completions::OpenAiCompletions,
        &openai_embeddings::OpenAiEmbeddings,
    ];
    if protocol.id() == ProtocolId::OpenAiChat {
        &CHAT
    } else {
        std::slice::from_ref(slot(protocol.id()))
    }
}

/// The protocol named `name` (as in `routes[].protocol` and the route labels).
pub fn by_name(name: &str) -> Option<&'static dyn Protocol> {
    ProtocolId::from_name(name).map(by_id)
}

pub trait Protocol: Send + Sync + 'static {
    fn id(&self) -> ProtocolId;

    /// Name used in config, logs, the `check` output and as the `route` metrics label (its
    /// registry line).
    fn name(&self) -> &'static str {
        self.id().as_str()
    }

    /// The `gen_ai.operation.name` of this protocol's operation (its registry line).
    fn operation(&self) -> &'static str {
        self.id().operation()
    }

    /// What a judge speaking this protocol sends and reads; `None` when judges cannot speak
    /// it (its registry line).
    fn judge_wire(&self) -> Option<&'static dyn JudgeWire> {
        self.id().judge_wire()
    }

    /// True when this protocol serves `path`.
    fn matches(&self, path: &str) -> bool;

    /// Paths (a configured route's, its prefix stripped) answered on GET with a discovery
    /// document naming the upstream's own URLs, which guardwire fetches and serves with those
    /// URLs rewritten to its own ([`Protocol::rewrite_discovery`]): A2A agent cards.
    fn discovery_paths(&self) -> &'static [&'static str] {
        &[]
    }

    /// Rewrites a discovery document (see [`Protocol::discovery_paths`]): every URL of the
    /// upstream it names goes through `map`, which returns guardwire's URL for it, or `None`
    /// when it cannot be reached through the route. `Err` says why the document cannot be served.
    fn rewrite_discovery(
        &self,
        _body: &[u8],
        _map: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<u8>, String> {
        Err(format!("{} has no discovery document", self.name()))
    }

    /// True when `path` — a configured route's path, its prefix stripped, without query — is
    /// this protocol's operation under whatever prefix the upstream puts before it (Azure's
    /// `/openai/deployments/{d}/chat/completions`, a gateway's `/openai/v1/...`). Other paths of
    /// a route are not served: they would pass unchecked.
    fn serves(&self, path: &str) -> bool;

    /// The header a provider key goes in, for routes that swap keys (`authorization` carries
    /// `Bearer <key>`).
    fn auth_header(&self) -> AuthHeader {
        AuthHeader::Bearer
    }

    /// The request headers of this protocol's clients that go upstream (besides
    /// [`COMMON_HEADERS`] and the route's `forward_headers`); by default the OpenAI SDKs'
    /// ([`openai_chat::HEADERS`]), which every OpenAI-style protocol shares.
    fn forward_headers(&self) -> &'static HeaderAllowlist {
        &openai_chat::HEADERS
    }

    /// Whose `upstreams.<key>` base URL this protocol's standard paths go to, and the provider's
    /// telemetry name: declared by the module (a new provider's key is accepted under
    /// `upstreams:` once its protocol is registered).
    fn provider(&self) -> Provider;

    /// The keys of this protocol's answers whose string values are structure, not text: the
    /// fallback ([`residual`]) checks every other string a decoder did not turn into a delta.
    fn structural(&self) -> &'static residual::Structural;

    /// The same for the events of a streamed answer (by default [`Protocol::structural`]).
    fn stream_structural(&self) -> &'static residual::Structural {
        self.structural()
    }

    /// The same for the request `body` (by default the keys every provider's requests share,
    /// [`residual::REQUEST_STRUCTURAL`]): what the input checks read besides the decoder's
    /// conversation.
    fn request_structural(&self, _body: &[u8]) -> &'static residual::Structural {
        &residual::REQUEST_STRUCTURAL
    }

    /// The texts of a discovery document (`body`, as the upstream sent it) that the client's
    /// model may read, checked as input before the document is served: each with its place
    /// (an unknown field's follow `unknown_content`; an identifier-shaped value at a place of
    /// structure is read by the secret and PII patterns only).
    fn discovery_texts(&self, _body: &[u8]) -> Result<Vec<(String, residual::Place)>, String> {
        Ok(Vec::new())
    }

    /// Reads a request body (JSON) into the conversation; `path` is the request path.
    fn parse_request(&self, body: &[u8], path: &str) -> Result<ParsedRequest, GatewayError>;

    fn stream_decoder(&self) -> Box<dyn StreamDecoder>;

    /// True when a stream reports usage only if asked (`stream_options.include_usage`, see
    /// [`stream_usage`]): guardwire asks on the client's behalf.
    fn usage_on_request(&self) -> bool {
        false
    }

    /// Decodes a complete (non-streamed) response body.
    fn decode_response<'a>(
        &self,
        body: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<(), DecodeError>;

    /// What an error answer to the request in `body` repeats of it ([`ReplyTo`]); read before
    /// the body is parsed, so that a request that fails to parse is answered in kind.
    fn reply_to(&self, _body: &[u8]) -> ReplyTo {
        ReplyTo::default()
    }

    /// Whether the upstream's own error answers (a non-2xx status) reach the client unchanged,
    /// body and all: a provider's errors do (its SDK reads them); a peer agent's do not (its
    /// text is content like any other, and an error body is not checked), so they become
    /// guardwire's error in this protocol's shape.
    fn relays_upstream_errors(&self) -> bool {
        true
    }

    /// The HTTP status of an error answer; by default the error's own (JSON-RPC answers its
    /// calls' errors with 200).
    fn error_status(&self, err: &GatewayError, _to: &ReplyTo) -> http::StatusCode {
        err.status()
    }

    /// The JSON body of an error answer in the provider's shape; by default OpenAI's
    /// ([`openai_error_json`]), which every OpenAI-style protocol shares.
    fn error_body(&self, err: &GatewayError, _to: &ReplyTo) -> Bytes {
        openai_error_json(err).into()
    }

    /// The in-band error frame that ends a stream so the provider's SDK raises; by default an
    /// SSE `data:` event with OpenAI's error body.
    fn stream_error_frame(&self, err: &GatewayError, _to: &ReplyTo) -> Bytes {
        format!("data: {}\n\n", openai_error_json(err)).into()
    }
}

/// `{"error":{"message","type","param","code"}}`, the shape every OpenAI SDK parses.
pub fn openai_error_json(err: &GatewayError) -> String {
    #[derive(serde::Serialize)]
    struct Body<'a> {
        error: Detail<'a>,
    }
    #[derive(serde::Serialize)]
    struct Detail<'a> {
        message: String,
        #[serde(rename = "type")]
        kind: &'a str,
        param: Option<()>,
        code: &'a str,
    }
    let (kind, code) = err.type_and_code();
    let body = Body {
        error: Detail {
            message: err.to_string(),
            kind,
            param: None,
            code,
        },
    };
    serde_json::to_string(&body).unwrap_or_default()
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    #[test]
    fn every_protocol_id_has_its_module_and_name() {
        for id in ProtocolId::ALL {
            assert_eq!(by_id(id).id(), id);
            assert_eq!(by_name(id.as_str()).map(|p| p.id()), Some(id));
        }
        assert_eq!(all().map(|p| p.id()), ProtocolId::ALL);
        assert!(by_name("soap").is_none());
    }

    #[test]
    fn parse_errors_say_kind_and_position_never_content() {
        const SECRET: &str = "sk-live-7f3a9c";
        let frames = [
            format!(r#"{{"choices":"{SECRET}"}}"#),
            format!(r#"{{"choices":[{{"index":"{SECRET}","delta":{{}}}}]}}"#),
            format!(r#"{{"type":"content_block_delta","index":"{SECRET}"}}"#),
            format!(r#"{{"type":"response.output_text.delta","delta":["{SECRET}"]}}"#),
            format!(r#"{{"candidates":"{SECRET}"}}"#),
            format!(r#"{{"data":"{SECRET}"}}"#),
            format!(r#""{SECRET}""#),
            format!(r#"{{"choices":["{SECRET}"#),
        ];
        let mut errors = 0;
        for p in all() {
            for frame in &frames {
                let mut out = Vec::new();
                let events: [Option<&[u8]>; 2] = [None, Some(b"content_block_delta")];
                for event in events {
                    if let Err(e) = p.stream_decoder().decode(event, frame.as_bytes(), &mut out) {
                        errors += 1;
                        assert!(!e.to_string().contains(SECRET), "{}: {e}", p.name());
                    }
                    out.clear();
                }
                if let Err(e) = p.decode_response(frame.as_bytes(), &mut out) {
                    errors += 1;
                    assert!(!e.to_string().contains(SECRET), "{}: {e}", p.name());
                }
            }
        }
        assert!(errors >= 20, "only {errors} frames were refused");
    }

    #[test]
    fn routes_serve_the_operation_under_any_prefix_and_nothing_else() {
        let serves = |id, path| by_id(id).serves(path);
        assert!(serves(ProtocolId::OpenAiChat, "/v1/chat/completions"));
        assert!(serves(
            ProtocolId::OpenAiChat,
            "/openai/deployments/d/chat/completions"
        ));
        assert!(!serves(ProtocolId::OpenAiChat, "/v1/completions"));
        assert!(!serves(ProtocolId::OpenAiChat, "/v1/chat/completions/x"));
        assert!(serves(ProtocolId::OpenAiResponses, "/openai/v1/responses"));
        assert!(!serves(ProtocolId::OpenAiResponses, "/v1/responses/resp_1"));
        assert!(serves(ProtocolId::AnthropicMessages, "/v1/messages"));
        assert!(!serves(
            ProtocolId::AnthropicMessages,
            "/v1/messages/count_tokens"
        ));
        assert!(serves(
            ProtocolId::Gemini,
            "/v1beta/models/g:streamGenerateContent"
        ));
        assert!(serves(
            ProtocolId::Gemini,
            "/v1/projects/p/locations/l/publishers/google/models/g:generateContent"
        ));
        assert!(!serves(ProtocolId::Gemini, "/v1beta/models/g:countTokens"));
        assert!(!serves(
            ProtocolId::Gemini,
            "/v1beta/models/:generateContent"
        ));
    }
}
