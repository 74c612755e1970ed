//! The registry: every protocol guardwire speaks, one line each — its [`ProtocolId`], its name
//! in config (`routes[].protocol`, `judges[].protocol`), logs and the `route` metrics label,
//! its module's [`Protocol`], the `gen_ai.operation.name` of its operation (OpenTelemetry GenAI
//! conventions), and the request and reply shapes a judge speaking it uses (`None`: it cannot
//! serve as a judge). Adding a protocol is its module and one line here; config, telemetry and
//! the judges read everything else through [`ProtocolId`] and [`Protocol`] — the keys of
//! `upstreams:` too, from the [`Provider`] each module declares.

use super::judge_wire::{self, JudgeWire};
use super::{
    a2a, anthropic, gemini, mcp, openai_chat, openai_completions, openai_embeddings,
    openai_responses, Protocol,
};
use std::sync::LazyLock;

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

/// A provider: the key of its base URL under `upstreams:` and its `gen_ai.provider.name`. Each
/// protocol module declares its provider ([`Protocol::provider`]; the OpenAI formats share
/// `openai_chat::PROVIDER`), so a protocol of a new provider is still its module and one line
/// here: `upstreams:` accepts exactly the keys of the registered protocols' providers
/// ([`Provider::upstream_keys`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provider {
    upstream_key: Option<&'static str>,
    otel_name: &'static str,
}

impl Provider {
    /// A provider whose standard paths go to `upstreams.<upstream_key>` (`None`: it has no
    /// standard base URL — A2A agents, MCP servers — and only configured routes reach it).
    pub const fn new(upstream_key: Option<&'static str>, otel_name: &'static str) -> Provider {
        Provider {
            upstream_key,
            otel_name,
        }
    }

    /// The key of the provider's base URL under `upstreams:`, if it has one.
    pub fn upstream_key(self) -> Option<&'static str> {
        self.upstream_key
    }

    /// The `gen_ai.provider.name` of the provider whose wire format a protocol is.
    pub fn otel_name(self) -> &'static str {
        self.otel_name
    }

    /// Every key `upstreams:` accepts: the registered protocols' providers' keys, once each, in
    /// [`ProtocolId::ALL`]'s order (`openai`, `anthropic`, `gemini`).
    pub fn upstream_keys() -> &'static [&'static str] {
        static KEYS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
            let mut keys = Vec::new();
            for key in REGISTRY.iter().filter_map(|p| p.provider().upstream_key) {
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
            keys
        });
        &KEYS
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_keys_come_from_the_protocols_providers() {
        assert_eq!(Provider::upstream_keys(), ["openai", "anthropic", "gemini"]);
        for (id, key, otel) in [
            (ProtocolId::OpenAiChat, Some("openai"), "openai"),
            (ProtocolId::OpenAiResponses, Some("openai"), "openai"),
            (
                ProtocolId::AnthropicMessages,
                Some("anthropic"),
                "anthropic",
            ),
            (ProtocolId::Gemini, Some("gemini"), "gcp.gemini"),
            (ProtocolId::OpenAiCompletions, Some("openai"), "openai"),
            (ProtocolId::OpenAiEmbeddings, Some("openai"), "openai"),
            (ProtocolId::A2a, None, "a2a"),
            (ProtocolId::Mcp, None, "mcp"),
        ] {
            let p = super::super::by_id(id).provider();
            assert_eq!((p.upstream_key(), p.otel_name()), (key, otel), "{id:?}");
        }
        // One key is one provider: protocols naming the same key declare the same provider.
        for a in REGISTRY {
            for b in REGISTRY {
                let (pa, pb) = (a.provider(), b.provider());
                if pa.upstream_key().is_some() && pa.upstream_key() == pb.upstream_key() {
                    assert_eq!(pa, pb, "{} and {}", a.name(), b.name());
                }
            }
        }
    }
}
