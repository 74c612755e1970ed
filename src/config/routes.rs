//! `routes[]`: extra routes, each a path prefix served by a protocol, an upstream and packs of
//! its own; checked by `Config::validate` (mod.rs), which fills [`RouteConfig::checked`].

use super::{BaseUrl, ForwardHeader, StoredContext, UnknownContent};
use crate::protocol::{AuthHeader, ProtocolId};
use serde::Deserialize;
use std::path::PathBuf;

/// What a `tools/list` answer on an MCP route does with a tool whose name, description or
/// schemas fail the input checks (`routes[].poisoned_tools`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PoisonedTools {
    /// The tool is removed from the list; the others reach the client (default).
    #[default]
    Remove,
    /// The whole list is answered with the block's JSON-RPC error.
    Refuse,
}

/// What happens to a request that refers to provider-stored content (`stored_context`).
/// A configured route.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Unique; the `route` label of metrics and logs.
    pub name: String,
    /// The wire format: `openai_chat` (also serving legacy Completions and Embeddings),
    /// `openai_responses`, `anthropic_messages`, `gemini`, `openai_completions`,
    /// `openai_embeddings` or `a2a` (an agent's JSON-RPC interface, `upstream` its base URL).
    /// Checked by [`Config::validate`], which fills [`RouteConfig::checked`].
    pub protocol: String,
    /// Requests whose path starts with this go to this route.
    pub path_prefix: String,
    /// Base URL of the upstream; the request path is appended (after `strip_prefix`).
    pub upstream: String,
    /// Removed from the front of the path before forwarding (`/vllm` serves `/vllm/v1/...` from
    /// the upstream's `/v1/...`).
    #[serde(default)]
    pub strip_prefix: Option<String>,
    /// Packs of this route (default: the top-level `packs`).
    #[serde(default)]
    pub packs: Option<Vec<PathBuf>>,
    /// Paths (after `strip_prefix`, without query) forwarded *unchecked*, with any method: the
    /// route's other endpoints a client needs (`/v1/models`). Every other path that is not the
    /// protocol's operation answers 404.
    #[serde(default)]
    pub passthrough_paths: Vec<String>,
    /// The header that carries a swapped-in provider key: `authorization` (Bearer, default for
    /// OpenAI formats), `api-key` (Azure OpenAI), `x-api-key` (Anthropic), `x-goog-api-key`
    /// (Gemini). Default: the protocol's.
    #[serde(default)]
    pub upstream_auth: Option<String>,
    /// `unknown_content` for this route (default: the top-level setting).
    #[serde(default)]
    pub unknown_content: Option<UnknownContent>,
    /// `stored_context` for this route (default: the top-level setting).
    #[serde(default)]
    pub stored_context: Option<StoredContext>,
    /// Request headers forwarded besides the protocol's allowlist, instead of the top-level
    /// `forward_headers` (default: those).
    #[serde(default)]
    pub forward_headers: Option<Vec<ForwardHeader>>,
    /// Streamed OpenAI Chat and Completions requests ask the upstream for usage
    /// (`stream_options.include_usage: true`), so tokens, spend and `cost_budget` work when the
    /// client did not ask; the usage chunk then is not relayed to it. `false` forwards requests
    /// unchanged (for an upstream that refuses the field). Default true.
    #[serde(default = "default_true")]
    pub request_usage: bool,
    /// `a2a` routes: the URL at which clients reach this route's `path_prefix`
    /// (`https://agents.example.com/billing`), put in the agent card's interface URLs. Default:
    /// `http://` (`https://` with `tls`) + the request's `Host` + `path_prefix`.
    #[serde(default)]
    pub public_url: Option<String>,
    /// `mcp` routes: a tool of a `tools/list` answer that fails the input checks is removed
    /// from the list (`remove`, default) or the list is refused (`refuse`).
    #[serde(default)]
    pub poisoned_tools: Option<PoisonedTools>,
    /// The names above, checked and converted (set by a successful [`Config::validate`]; a
    /// `Config` from [`Config::load`] or [`Config::from_yaml`] always has it).
    #[serde(skip)]
    pub checked: Option<CheckedRoute>,
}

impl RouteConfig {
    /// The agent routes read `upstream` one way: `path_prefix` is where guardwire serves the
    /// upstream URL. An `mcp` route's upstream is the endpoint itself; an `a2a` route's is the
    /// agent's base URL, under which its card and JSON-RPC endpoint lie, so the prefix is
    /// removed before the rest is appended (`strip_prefix` is the prefix itself, whether
    /// written or not). Without that, the card's path arrived as `<prefix>/.well-known/…` and
    /// was answered "use POST".
    pub(super) fn settle_upstream_path(&mut self, protocol: ProtocolId) -> Result<(), String> {
        match protocol {
            ProtocolId::Mcp
                if self.strip_prefix.is_some() || !self.passthrough_paths.is_empty() =>
            {
                return Err("strip_prefix, passthrough_paths: not used by mcp routes (the route's path_prefix is the MCP endpoint, forwarded to the upstream URL as it is)".into());
            }
            ProtocolId::A2a => match &self.strip_prefix {
                None => self.strip_prefix = Some(self.path_prefix.clone()),
                Some(s) if s.trim_end_matches('/') == self.path_prefix.trim_end_matches('/') => {}
                Some(s) => {
                    return Err(format!(
                        "strip_prefix: an a2a route serves its upstream (the agent's base URL) at path_prefix `{}`, so the whole prefix is removed; leave strip_prefix out and put the rest of the agent's path in upstream (strip_prefix `{s}` would send the card's path as `{}/.well-known/…`)",
                        self.path_prefix,
                        self.path_prefix.get(s.len()..).unwrap_or_default().trim_end_matches('/'),
                    ))
                }
            },
            _ => {}
        }
        Ok(())
    }
}

fn default_true() -> bool {
    true
}

/// A route's protocol, upstream and key header, as checked values.
#[derive(Debug, Clone)]
pub struct CheckedRoute {
    pub protocol: ProtocolId,
    pub upstream: BaseUrl,
    pub upstream_auth: Option<AuthHeader>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::config::Config;

    fn route(protocol: &str, strip: &str) -> Result<Config, String> {
        Config::from_yaml(&format!(
            "routes:\n  - name: r\n    protocol: {protocol}\n    path_prefix: /agents/billing\n    upstream: \"http://127.0.0.1:9/base\"\n{strip}"
        ))
        .map_err(|e| e.to_string())
    }

    #[test]
    fn agent_routes_serve_their_upstream_at_path_prefix() {
        // a2a: the prefix stands for the agent's base URL, written or not.
        for strip in ["", "    strip_prefix: /agents/billing\n"] {
            let config = route("a2a", strip).unwrap();
            assert_eq!(
                config.routes[0].strip_prefix.as_deref(),
                Some("/agents/billing")
            );
        }
        // Part of the prefix would forward the card's path under the rest: refused, naming
        // the fix.
        let e = route("a2a", "    strip_prefix: /agents\n").unwrap_err();
        assert!(e.contains("routes[0] (r): strip_prefix"), "{e}");
        assert!(e.contains("leave strip_prefix out"), "{e}");
        assert!(e.contains("/billing/.well-known"), "{e}");
        // mcp: the upstream is the endpoint itself; strip_prefix is refused.
        assert!(route("mcp", "").unwrap().routes[0].strip_prefix.is_none());
        let e = route("mcp", "    strip_prefix: /agents/billing\n").unwrap_err();
        assert!(e.contains("not used by mcp routes"), "{e}");
        // Other protocols keep forwarding the whole path unless told otherwise.
        assert!(route("openai_chat", "").unwrap().routes[0]
            .strip_prefix
            .is_none());
    }
}
