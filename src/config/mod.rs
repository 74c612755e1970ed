//! Configuration: a YAML file, overridden by `GUARDWIRE_…` environment variables
//! (`GUARDWIRE_LISTEN`, `GUARDWIRE_UPSTREAMS__OPENAI`, `GUARDWIRE_LIMITS__MAX_REQUEST_BYTES`, …:
//! `__` separates nesting levels). Unknown keys are errors that name the key and the file.
//!
//! Of guardwire it imports only the protocols' registry (which names a protocol, a provider and
//! a key header have). The file's values are checked and converted here, once — base URLs into
//! [`BaseUrl`], protocol and header names into [`ProtocolId`] and [`AuthHeader`] — so nothing
//! later parses a name again or can meet an invalid one.

use figment::providers::{Env, Format};
use figment::Figment;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

mod capture;
mod checked;
pub mod error;
mod errors;
mod judges;
mod limits;
mod routes;
mod sections;
pub mod state;
mod telemetry;

use errors::format_figment_error;

pub use crate::protocol::{AuthHeader, ProtocolId, Provider};
pub use capture::CaptureConfig;
pub use checked::{BaseUrl, ForwardHeader, NEVER_FORWARDED};
pub use error::ConfigError;
pub use judges::{
    BreakerConfig, CacheConfig, CheckedJudge, EvalsConfig, ExecConfig, JudgeConfig, RetryConfig,
};
pub use limits::Limits;
pub use routes::{CheckedRoute, PoisonedTools, RouteConfig};
pub use sections::{
    Admin, Log, LogFormat, MetricsConfig, Reload, RuntimeShape, Server, Timeouts, Upstreams,
    MAX_WORKERS,
};
pub use telemetry::Telemetry;

/// YAML through serde_norway, the maintained serde_yaml fork (figment's own YAML provider uses
/// the archived serde_yaml).
pub struct Yaml;

impl Format for Yaml {
    type Error = serde_norway::Error;
    const NAME: &'static str = "YAML";

    fn from_str<T: serde::de::DeserializeOwned>(string: &str) -> Result<T, Self::Error> {
        serde_norway::from_str(string)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address the proxy listens on.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    #[serde(default)]
    pub upstreams: Upstreams,
    /// Pack files enforced on every route, in order. Relative paths are relative to the working
    /// directory guardwire is started from.
    #[serde(default)]
    pub packs: Vec<PathBuf>,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub timeouts: Timeouts,
    #[serde(default)]
    pub log: Log,
    /// OpenTelemetry traces (off unless `telemetry.otlp_endpoint` is set).
    #[serde(default)]
    pub telemetry: Telemetry,
    #[serde(default)]
    pub reload: Reload,
    /// How `serve` runs connections: one work-stealing runtime, or one event loop per core.
    #[serde(default)]
    pub server: Server,
    #[serde(default)]
    pub admin: Admin,
    #[serde(default)]
    pub audit: AuditConfig,
    /// Opt-in body capture for `guardwire eval --replay` (off unless `capture.path` is set).
    #[serde(default)]
    pub capture: CaptureConfig,
    /// TLS for clients (optional); without it guardwire listens in plain HTTP (h1 and h2c).
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// Trust for upstream TLS beyond the public web roots.
    #[serde(default)]
    pub upstream_tls: UpstreamTls,
    /// Extra routes: a path prefix served by a protocol, an upstream and packs of its own (Azure
    /// OpenAI deployment paths, vLLM and other OpenAI-compatible servers). Tried before the
    /// standard provider paths, longest prefix first.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// Client keys. When any is configured every proxied request needs one (401 otherwise);
    /// guardwire swaps in the provider key, so clients never hold it.
    #[serde(default)]
    pub keys: Vec<KeyConfig>,
    /// Prices per model for `cost_budget`'s `max_cost_usd`, in USD per million tokens.
    #[serde(default)]
    pub prices: std::collections::BTreeMap<String, Price>,
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// Where state shared across requests and replicas lives (the keys' `rpm_limit`,
    /// `tpm_limit` and `max_budget`): in process, or a Redis server for a fleet.
    #[serde(default)]
    pub state: state::StateConfig,
    /// What happens to answer text the protocol decoders do not model (unknown events and
    /// fields); a route may set its own.
    #[serde(default)]
    pub unknown_content: UnknownContent,
    /// What happens to requests that refer to content stored at the provider
    /// (`previous_response_id`, `conversation`, `cachedContent`, file ids and URIs), which the
    /// input checks never see; a route may set its own.
    #[serde(default)]
    pub stored_context: StoredContext,
    /// Request headers forwarded upstream besides the protocol's allowlist (names,
    /// case-insensitive); a route may set its own list instead.
    #[serde(default)]
    pub forward_headers: Vec<ForwardHeader>,
    /// The LLMs judged checks (`llm_judge`, ...) ask, by name.
    #[serde(default)]
    pub judges: Vec<JudgeConfig>,
    /// Subprocess check handlers, used in packs as `type: <name>`.
    #[serde(default)]
    pub exec: std::collections::BTreeMap<String, ExecConfig>,
    /// The environment variables packs may read with `${VAR}` (`rest_eval` headers, `a2a_eval`
    /// `auth_token`); a pack naming another is refused at load.
    #[serde(default)]
    pub pack_env: Vec<String>,
    /// The queue the packs' `evals:` run from, off the request path.
    #[serde(default)]
    pub evals: EvalsConfig,
    /// The file this config was read from (errors about what it names, such as packs, say so).
    #[serde(skip)]
    pub file: Option<PathBuf>,
}

/// What happens to strings of an answer that no decoder turns into text (`unknown_content`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnknownContent {
    /// Checked by the output validators, each string as a text of its own (default).
    #[default]
    Scan,
    /// Any such string ends the answer with the error frame.
    Block,
    /// Relayed unchecked: the explicit escape hatch.
    Pass,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoredContext {
    /// Refused with 400 in the provider's shape, naming the field (default: fail closed).
    #[default]
    Refuse,
    /// Forwarded; the stored content is not checked (counted all the same).
    Pass,
}

/// The listener's certificate chain and private key, PEM files, re-read on every reload (so a
/// renewed certificate is picked up without a restart).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
}

/// Extra CA certificates (PEM) trusted for upstream TLS, besides the webpki roots: for
/// upstreams behind a private CA. Read at start; verification itself is never turned off.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTls {
    pub ca_path: Option<PathBuf>,
}

/// A client key: what the client presents, and what guardwire does for requests with it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// Names the key in logs, the audit log and errors (the key itself is never logged).
    pub id: String,
    /// The environment variable holding the key (preferred), or…
    #[serde(default)]
    pub key_env: Option<String>,
    /// …the key itself.
    #[serde(default)]
    pub key: Option<String>,
    /// Packs for requests with this key (default: the route's).
    #[serde(default)]
    pub packs: Option<Vec<PathBuf>>,
    /// The environment variable holding the provider key to send upstream instead of the
    /// client's. Without it no key is sent (local servers that need none).
    #[serde(default)]
    pub upstream_key_env: Option<String>,
    /// Requests of this key proxied at once (streams until they end), so one key cannot take
    /// every permit of `limits.max_concurrent_requests`; over it: 429 + `retry-after`.
    /// Default: no limit of its own.
    #[serde(default)]
    pub max_concurrent_requests: Option<usize>,
    /// Requests per minute (a sliding window, across replicas with `state.url`); over it: 429.
    #[serde(default)]
    pub rpm_limit: Option<u64>,
    /// Tokens per minute, input and output (reserved before the call, settled with the
    /// provider's usage); over it: 429.
    #[serde(default)]
    pub tpm_limit: Option<u64>,
    /// USD this key may spend per `budget_duration` (priced with `prices`); over it: 429
    /// `insufficient_quota`.
    #[serde(default)]
    pub max_budget: Option<f64>,
    /// How long a budget lasts from its first use before it starts again (`30s`, `30m`, `1h`,
    /// `1d`, `30d`); absent: it never resets.
    #[serde(default)]
    pub budget_duration: Option<String>,
}

impl KeyConfig {
    /// The client key, from the environment or the config.
    pub fn secret(&self) -> Result<String, String> {
        match (&self.key_env, &self.key) {
            (Some(var), None) => match std::env::var(var) {
                Ok(v) if !v.is_empty() => Ok(v),
                _ => Err(format!("key_env: environment variable {var} is not set")),
            },
            (None, Some(k)) if !k.is_empty() => Ok(k.clone()),
            (None, Some(_)) => Err("key: must not be empty".into()),
            _ => Err("exactly one of key_env and key is required".into()),
        }
    }

    /// Its limits over time (`rpm_limit`, `tpm_limit`, `max_budget`, `budget_duration`),
    /// `None` when it has none.
    pub fn limits(&self) -> Result<Option<crate::state::limits::KeyLimits>, String> {
        if self.rpm_limit == Some(0) {
            return Err("rpm_limit: must be at least 1".into());
        }
        if self.tpm_limit == Some(0) {
            return Err("tpm_limit: must be at least 1".into());
        }
        let budget = match (self.max_budget, &self.budget_duration) {
            (None, None) => None,
            (None, Some(_)) => return Err("budget_duration: needs a max_budget".into()),
            (Some(usd), duration) => {
                if !(usd.is_finite() && usd > 0.0 && usd < 1e9) {
                    return Err("max_budget: must be a number of USD above 0".into());
                }
                let duration_ms = match duration {
                    Some(d) => Some(
                        state::parse_duration_ms(d).map_err(|e| format!("budget_duration: {e}"))?,
                    ),
                    None => None,
                };
                Some(crate::state::limits::BudgetLimit {
                    max_micro_usd: crate::state::limits::micro_usd(usd),
                    duration_ms,
                })
            }
        };
        if self.rpm_limit.is_none() && self.tpm_limit.is_none() && budget.is_none() {
            return Ok(None);
        }
        Ok(Some(crate::state::limits::KeyLimits {
            rpm: self.rpm_limit,
            tpm: self.tpm_limit,
            budget,
        }))
    }

    /// The provider key to swap in, if any.
    pub fn upstream_key(&self) -> Result<Option<String>, String> {
        match &self.upstream_key_env {
            None => Ok(None),
            Some(var) => match std::env::var(var) {
                Ok(v) if !v.is_empty() => Ok(Some(v)),
                _ => Err(format!(
                    "upstream_key_env: environment variable {var} is not set"
                )),
            },
        }
    }
}

/// The audit log: one JSON line per block, redaction and monitor-mode hit.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// A file to append to, or `-` for stdout; absent: no audit log.
    pub path: Option<String>,
    /// Also write the matched text (off by default: audit logs then hold what was blocked).
    #[serde(default)]
    pub include_match: bool,
}

/// What a model's tokens cost, in USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Input tokens written to a prompt cache; absent: twice the input price (Anthropic bills
    /// 1.25× for a 5-minute cache, 2× for an hour's: never priced below what is billed).
    #[serde(default)]
    pub cache_write_per_mtok: Option<f64>,
    /// Input tokens read from a prompt cache; absent: the input price.
    #[serde(default)]
    pub cache_read_per_mtok: Option<f64>,
}

impl Price {
    /// What `input` and `output` tokens cost, in USD.
    pub fn usd(&self, input: u64, output: u64) -> f64 {
        self.usd_cached(input, output, crate::delta::CacheTokens::default())
    }

    /// The same, `cache` of the input tokens priced as the cache bills them.
    pub fn usd_cached(&self, input: u64, output: u64, cache: crate::delta::CacheTokens) -> f64 {
        let plain = input.saturating_sub(cache.write.saturating_add(cache.read));
        let write = self
            .cache_write_per_mtok
            .unwrap_or(2.0 * self.input_per_mtok);
        let read = self.cache_read_per_mtok.unwrap_or(self.input_per_mtok);
        (plain as f64 * self.input_per_mtok
            + cache.write as f64 * write
            + cache.read as f64 * read
            + output as f64 * self.output_per_mtok)
            / 1e6
    }
}

impl Config {
    /// The config as `guardwire_config_hash` hashes it: every secret written in it (inline
    /// client keys, the admin token, `exec` env values) replaced by its SHA-256. The hash still
    /// changes when only a secret does — replicas with a rotated token differ — but what is
    /// hashed holds no secret. (A key for the hash would hide that too, but a per-process key
    /// makes replicas incomparable and a configured one is one more secret.)
    pub fn with_secrets_digested(&self) -> Config {
        let mut c = self.clone();
        if let Some(token) = &mut c.admin.token {
            *token = secret_digest(token);
        }
        for k in &mut c.keys {
            if let Some(key) = &mut k.key {
                *key = secret_digest(key);
            }
        }
        for handler in c.exec.values_mut() {
            for var in &mut handler.env {
                if let Some((name, value)) = var.split_once('=') {
                    *var = format!("{name}={}", secret_digest(value));
                }
            }
        }
        c
    }

    /// The price of `model`: an exact entry, else the longest configured prefix of it (so
    /// `gpt-4o` also prices `gpt-4o-2024-08-06`).
    pub fn price(&self, model: &str) -> Option<Price> {
        self.prices.get(model).copied().or_else(|| {
            self.prices
                .iter()
                .filter(|(k, _)| model.starts_with(k.as_str()))
                .max_by_key(|(k, _)| k.len())
                .map(|(_, p)| *p)
        })
    }
}

/// Top-level config keys, the only ones environment variables may set.
const TOP_LEVEL_KEYS: [&str; 25] = [
    "state",
    "listen",
    "forward_headers",
    "pack_env",
    "judges",
    "exec",
    "evals",
    "upstreams",
    "packs",
    "limits",
    "timeouts",
    "log",
    "telemetry",
    "upstream_tls",
    "unknown_content",
    "stored_context",
    "reload",
    "admin",
    "prices",
    "audit",
    "capture",
    "routes",
    "keys",
    "tls",
    "metrics",
];

/// `GUARDWIRE_<KEY>` and `GUARDWIRE_<KEY>__<SUBKEY>` for the top-level keys above. Other
/// `GUARDWIRE_…` variables (a deployment's own) are left alone; a typo below a known key
/// (`GUARDWIRE_LIMITS__MAX_BODY`) is still an unknown-key error.
fn env_overrides() -> Env {
    Env::prefixed("GUARDWIRE_")
        .filter(|key| {
            let key = key.as_str();
            TOP_LEVEL_KEYS.iter().any(|top| {
                key.eq_ignore_ascii_case(top)
                    || (key.len() > top.len() + 2
                        && key[..top.len()].eq_ignore_ascii_case(top)
                        && &key[top.len()..top.len() + 2] == "__")
            })
        })
        .split("__")
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}

impl Config {
    /// Reads `path` and the `GUARDWIRE_…` environment over it.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        if !path.exists() {
            return Err(ConfigError::Missing(path.display().to_string()));
        }
        let figment = Figment::new()
            .merge(Yaml::file_exact(path))
            .merge(env_overrides());
        let mut config: Config = figment.extract().map_err(|e| {
            let text = std::fs::read_to_string(path).ok();
            ConfigError::Invalid(format_figment_error(e, text.as_deref()))
        })?;
        config.file = Some(path.to_owned());
        // The checks past parsing name the key; the file is named here, as figment's errors do.
        config.validate().map_err(|e| match e {
            ConfigError::Invalid(m) => ConfigError::Invalid(format!("{m} (in {})", path.display())),
            other => other,
        })?;
        Ok(config)
    }

    /// Parses a config from YAML text (no environment), for tests and tools.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        let mut config: Config = Figment::new()
            .merge(Yaml::string(text))
            .extract()
            .map_err(|e| ConfigError::Invalid(format_figment_error(e, Some(text))))?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&mut self) -> Result<(), ConfigError> {
        let mut names: Vec<String> = ProtocolId::ALL
            .iter()
            .map(|p| p.as_str().to_owned())
            .collect();
        names.push("unmatched".into());
        for (i, r) in self.routes.iter_mut().enumerate() {
            let name = r.name.clone();
            let at = |m: String| ConfigError::Invalid(format!("routes[{i}] ({name}): {m}"));
            if r.name.is_empty() || names.contains(&r.name) {
                return Err(at(
                    "name: must be unique and not a built-in route name".into()
                ));
            }
            names.push(r.name.clone());
            let protocol = ProtocolId::from_name(&r.protocol).ok_or_else(|| {
                let known: Vec<&str> = ProtocolId::ALL.iter().map(|p| p.as_str()).collect();
                at(format!(
                    "protocol: `{}` is not one of {}",
                    r.protocol,
                    known.join(", ")
                ))
            })?;
            if !r.path_prefix.starts_with('/') {
                return Err(at("path_prefix: must start with /".into()));
            }
            if let Some(s) = &r.strip_prefix {
                if !r.path_prefix.starts_with(s.as_str()) {
                    return Err(at("strip_prefix: must be a prefix of path_prefix".into()));
                }
            }
            if let Some(p) = r
                .passthrough_paths
                .iter()
                .find(|p| !p.starts_with('/') || p.contains('?'))
            {
                return Err(at(format!(
                    "passthrough_paths: `{p}` must be a path starting with / and without a query"
                )));
            }
            r.settle_upstream_path(protocol).map_err(at)?;
            if protocol != ProtocolId::Mcp && r.poisoned_tools.is_some() {
                return Err(at("poisoned_tools: only mcp routes have it".into()));
            }
            let upstream = BaseUrl::parse(&r.upstream).map_err(|e| at(format!("upstream: {e}")))?;
            if let Some(url) = &r.public_url {
                if crate::protocol::by_id(protocol)
                    .discovery_paths()
                    .is_empty()
                {
                    return Err(at(format!(
                        "public_url: only routes whose protocol serves discovery documents (a2a) use it, not {}",
                        r.protocol
                    )));
                }
                BaseUrl::parse(url).map_err(|e| at(format!("public_url: {e}")))?;
            }
            let upstream_auth = match &r.upstream_auth {
                None => None,
                Some(h) => Some(AuthHeader::from_name(h).ok_or_else(|| {
                    let known: Vec<&str> = AuthHeader::ALL.iter().map(|h| h.as_str()).collect();
                    at(format!(
                        "upstream_auth: `{h}` is not one of {}",
                        known.join(", ")
                    ))
                })?),
            };
            r.checked = Some(CheckedRoute {
                protocol,
                upstream,
                upstream_auth,
            });
        }
        let mut ids: Vec<&str> = Vec::new();
        for (i, k) in self.keys.iter().enumerate() {
            let at = |m: String| ConfigError::Invalid(format!("keys[{i}] ({}): {m}", k.id));
            if k.id.is_empty() || ids.contains(&k.id.as_str()) {
                return Err(at("id: must be unique and not empty".into()));
            }
            ids.push(&k.id);
            k.secret().map_err(at)?;
            k.upstream_key().map_err(at)?;
            if k.max_concurrent_requests == Some(0) {
                return Err(at("max_concurrent_requests: must be at least 1".into()));
            }
            k.limits().map_err(at)?;
            if k.max_budget.is_some() && self.prices.is_empty() {
                return Err(at(
                    "max_budget: spend is priced with `prices`, and none are configured".into(),
                ));
            }
        }
        self.validate_durations()?;
        self.state.validate()?;
        self.telemetry.validate()?;
        self.capture.validate(&self.routes)?;
        judges::validate_judges(&mut self.judges)?;
        judges::validate_exec(&self.exec)?;
        judges::validate_evals(&self.evals)?;
        if self.admin.token.as_deref() == Some("") {
            return Err(ConfigError::Invalid(
                "admin.token: must not be empty (an empty token would let anyone reload); \
                 leave admin.token out to turn /admin/reload off"
                    .into(),
            ));
        }
        self.limits.validate()?;
        if self.server.workers > MAX_WORKERS {
            return Err(ConfigError::Invalid(format!(
                "server.workers: must be 0 (one per core) or at most {MAX_WORKERS}"
            )));
        }
        Ok(())
    }
}

impl Config {
    /// Every duration is more than 0 (where 0 does not mean "off") and at most
    /// [`MAX_DURATION_MS`], so no deadline computed from it can overflow.
    fn validate_durations(&self) -> Result<(), ConfigError> {
        let t = &self.timeouts;
        let durations = [
            ("timeouts.connect_ms", t.connect_ms, false),
            ("timeouts.response_headers_ms", t.response_headers_ms, false),
            ("timeouts.idle_ms", t.idle_ms, false),
            ("timeouts.client_header_ms", t.client_header_ms, false),
            ("timeouts.client_body_ms", t.client_body_ms, false),
            ("timeouts.client_idle_ms", t.client_idle_ms, false),
            ("timeouts.client_ping_ms", t.client_ping_ms, true),
            ("timeouts.client_send_ms", t.client_send_ms, false),
            ("timeouts.total_ms", t.total_ms, false),
            ("reload.poll_ms", self.reload.poll_ms, true),
            (
                "telemetry.export_timeout_ms",
                self.telemetry.export_timeout_ms,
                false,
            ),
        ];
        for (key, ms, zero_is_off) in durations {
            if ms == 0 && !zero_is_off {
                return Err(ConfigError::Invalid(format!(
                    "{key}: must be more than 0 (milliseconds)"
                )));
            }
            check_duration_ms(ms).map_err(|e| ConfigError::Invalid(format!("{key}: {e}")))?;
        }
        Ok(())
    }
}

/// The longest duration any setting may name: one year, in milliseconds. Far beyond any
/// useful timeout, and far below where `Instant + Duration` would overflow.
pub const MAX_DURATION_MS: u64 = 365 * 24 * 3600 * 1000;

/// A duration setting within [`MAX_DURATION_MS`].
pub fn check_duration_ms(ms: u64) -> Result<(), String> {
    if ms > MAX_DURATION_MS {
        return Err(format!(
            "{ms} ms is more than the most allowed, {MAX_DURATION_MS} ms (one year)"
        ));
    }
    Ok(())
}

/// `sha256:` and the hex SHA-256 of `secret`.
fn secret_digest(secret: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, secret.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests;
