//! The registry: every protocol guardwire speaks, one line each — its [`ProtocolId`], its name
//! in config (`routes[].protocol`, `judges[].protocol`), logs and the `route` metrics label,
//! its module's [`Protocol`], the `gen_ai.operation.name` of its operation (OpenTelemetry GenAI
//! conventions), and the request and reply shapes a judge speaking it uses (`None`: it cannot
//! serve as a judge). Adding a protocol is its module and one line here; config, telemetry and
//! the judges read everything else through [`ProtocolId`] and [`Protocol`].

use super::judge_wire::{self, JudgeWire};
use super::{
    a2a, anthropic, gemini, mcp, openai_chat, openai_completions, openai_embeddings,
    openai_responses, Protocol,
};

macro_rules! registry {
    ($($id:ident: $name:literal, $protocol:expr, $operation:literal, $judge:expr;)*) => {
        /// A wire protocol guardwire speaks, as `routes[].protocol` names it. Each has a module
        /// under `src/protocol/` (`protocol::by_id`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ProtocolId {
            $($id,)*
        }

        impl ProtocolId {
            pub const ALL: [ProtocolId; [$($name),*].len()] = [$(ProtocolId::$id),*];

            /// The name in config, logs and the `route` metrics label.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ProtocolId::$id => $name,)*
                }
            }

            /// The `gen_ai.operation.name` of the protocol's operation.
            pub fn operation(self) -> &'static str {
                match self {
                    $(ProtocolId::$id => $operation,)*
                }
            }

            /// The judge request and reply shapes of the protocol, where judges may speak it.
            pub fn judge_wire(self) -> Option<&'static dyn JudgeWire> {
                match self {
                    $(ProtocolId::$id => $judge,)*
                }
            }
        }

        /// The protocols' modules, in [`ProtocolId::ALL`]'s order.
        pub(super) static REGISTRY: [&dyn Protocol; ProtocolId::ALL.len()] = [$(&$protocol),*];
    };
}

registry! {
    OpenAiChat: "openai_chat", openai_chat::OpenAiChat, "chat", Some(&judge_wire::OpenAiChat);
    OpenAiResponses: "openai_responses", openai_responses::OpenAiResponses, "chat", Some(&judge_wire::OpenAiResponses);
    AnthropicMessages: "anthropic_messages", anthropic::AnthropicMessages, "chat", Some(&judge_wire::AnthropicMessages);
    Gemini: "gemini", gemini::Gemini, "generate_content", Some(&judge_wire::Gemini);
    OpenAiCompletions: "openai_completions", openai_completions::OpenAiCompletions, "text_completion", None;
    OpenAiEmbeddings: "openai_embeddings", openai_embeddings::OpenAiEmbeddings, "embeddings", None;
    A2a: "a2a", a2a::A2a, "invoke_agent", None;
    Mcp: "mcp", mcp::Mcp, "execute_tool", None;
}

impl ProtocolId {
    pub fn from_name(name: &str) -> Option<ProtocolId> {
        ProtocolId::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The protocols a judge may speak, in [`ProtocolId::ALL`]'s order.
    pub fn judges() -> impl Iterator<Item = ProtocolId> {
        ProtocolId::ALL
            .into_iter()
            .filter(|p| p.judge_wire().is_some())
    }
}

/// A provider: whose `upstreams.<key>` a protocol's standard paths go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    Anthropic,
    Gemini,
    /// An A2A agent: no standard base URL (`protocol: a2a` routes name theirs).
    A2a,
    /// No provider: an MCP server is always a configured route's upstream.
    Mcp,
}

impl Provider {
    /// The `gen_ai.provider.name` of the provider whose wire format a protocol is.
    pub fn otel_name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gcp.gemini",
            Provider::A2a => "a2a",
            Provider::Mcp => "mcp",
        }
    }
}

/// The header a swapped-in provider key goes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthHeader {
    /// `Authorization: Bearer <key>` (OpenAI formats).
    Bearer,
    /// `api-key: <key>` (Azure OpenAI).
    ApiKey,
    /// `x-api-key: <key>` (Anthropic).
    XApiKey,
    /// `x-goog-api-key: <key>` (Gemini).
    XGoogApiKey,
}

impl AuthHeader {
    pub const ALL: [AuthHeader; 4] = [
        AuthHeader::Bearer,
        AuthHeader::ApiKey,
        AuthHeader::XApiKey,
        AuthHeader::XGoogApiKey,
    ];

    /// The header's name, as `routes[].upstream_auth` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthHeader::Bearer => "authorization",
            AuthHeader::ApiKey => "api-key",
            AuthHeader::XApiKey => "x-api-key",
            AuthHeader::XGoogApiKey => "x-goog-api-key",
        }
    }

    pub fn from_name(name: &str) -> Option<AuthHeader> {
        AuthHeader::ALL.into_iter().find(|h| h.as_str() == name)
    }
}
