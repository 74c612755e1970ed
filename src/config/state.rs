//! `state:` — where state shared across requests and replicas lives (the per-key limits and
//! budgets of `keys[]`), and the limits' own keys on `keys[]` entries (LiteLLM's names).

use super::error::ConfigError;
use serde::Deserialize;

/// `state:`: in process by default; a Redis (or Valkey) server for a fleet of replicas.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// `redis://[user:password@]host:port/db` or `rediss://…` (TLS, verified against the
    /// webpki roots); absent: state in this process only.
    #[serde(default)]
    pub url: Option<String>,
    /// What a request of a limited key gets while the store cannot answer: `fail_closed` (503,
    /// nothing sent upstream) or `fail_open` (served uncounted).
    #[serde(default)]
    pub on_error: OnStoreError,
    /// Each store round trip's limit, in milliseconds; past it the store counts as down for
    /// that request (`on_error`).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Prefix of every key guardwire writes, so several deployments can share one server.
    #[serde(default = "default_key_prefix")]
    pub key_prefix: String,
    /// Output tokens a request reserves when it sets no maximum of its own (`max_tokens`,
    /// `max_completion_tokens`, `max_output_tokens`, `maxOutputTokens`).
    #[serde(default = "default_reserve_output_tokens")]
    pub reserve_output_tokens: u64,
    /// An MCP session is forgotten this long after its last use (milliseconds).
    #[serde(default = "default_session_ttl_ms")]
    pub session_ttl_ms: u64,
    /// MCP sessions one client key holds at once; over it, its least recently used goes.
    #[serde(default = "default_max_sessions_per_key")]
    pub max_sessions_per_key: usize,
    /// MCP sessions held at once in process, over every key (in-process state only: a Redis
    /// server bounds its memory itself).
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            url: None,
            on_error: OnStoreError::default(),
            timeout_ms: default_timeout_ms(),
            key_prefix: default_key_prefix(),
            reserve_output_tokens: default_reserve_output_tokens(),
            session_ttl_ms: default_session_ttl_ms(),
            max_sessions_per_key: default_max_sessions_per_key(),
            max_sessions: default_max_sessions(),
        }
    }
}

fn default_timeout_ms() -> u64 {
    250
}

fn default_key_prefix() -> String {
    "guardwire:".into()
}

fn default_reserve_output_tokens() -> u64 {
    4096
}

fn default_session_ttl_ms() -> u64 {
    86_400_000
}

fn default_max_sessions_per_key() -> usize {
    1024
}

fn default_max_sessions() -> usize {
    4096
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnStoreError {
    #[default]
    FailClosed,
    FailOpen,
}

impl StateConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(format!("state.{m}")));
        if let Some(url) = &self.url {
            if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                return bad(format!(
                    "url: {} is not a redis:// or rediss:// URL",
                    without_password(url)
                ));
            }
        }
        if self.timeout_ms == 0 {
            return bad("timeout_ms: must be at least 1".into());
        }
        if self.reserve_output_tokens == 0 {
            return bad("reserve_output_tokens: must be at least 1".into());
        }
        if self.session_ttl_ms < 1_000 {
            return bad("session_ttl_ms: must be at least 1000".into());
        }
        if self.max_sessions_per_key == 0 || self.max_sessions < self.max_sessions_per_key {
            return bad(
                "max_sessions_per_key: must be at least 1, and max_sessions at least max_sessions_per_key".into(),
            );
        }
        Ok(())
    }
}

/// The URL as it may be shown (errors, `/readyz`): any password replaced by `***`.
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.into();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{}", &rest[at + 1..])
        }
        None => url.into(),
    }
}

/// A `budget_duration`: `30s`, `30m`, `1h`, `1d`, `30d` — a number and one unit. Calendar
/// months (LiteLLM's `1mo`) are refused: their length varies, so say `30d` or `31d`.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 30s, 30m, 1h, 1d or 30d"))?;
    let unit_ms: u64 = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "mo" => {
            return Err(format!(
            "{text:?}: calendar months are not supported (their length varies); write 30d or 31d"
        ))
        }
        _ => {
            return Err(format!(
                "{text:?} is not a duration such as 30s, 30m, 1h, 1d or 30d"
            ))
        }
    };
    match n.checked_mul(unit_ms) {
        Some(0) | None => Err(format!(
            "{text:?}: must be at least 1s and at most ~584 million years"
        )),
        Some(ms) => Ok(ms),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn durations_read_as_litellm_writes_them() {
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("30m"), Ok(1_800_000));
        assert_eq!(parse_duration_ms("1h"), Ok(3_600_000));
        assert_eq!(parse_duration_ms("30d"), Ok(30 * 86_400_000));
        for bad in [
            "",
            "s",
            "1",
            "1w",
            "0s",
            "-1s",
            "1.5h",
            "1 mo",
            "99999999999999999999d",
        ] {
            assert!(parse_duration_ms(bad).is_err(), "{bad}");
        }
        assert!(parse_duration_ms("1mo").unwrap_err().contains("30d"));
    }

    #[test]
    fn passwords_never_shown() {
        assert_eq!(
            without_password("redis://app:s3cret@10.0.0.1:6379/0"),
            "redis://app:***@10.0.0.1:6379/0"
        );
        assert_eq!(
            without_password("rediss://:s3cret@h:6380"),
            "rediss://:***@h:6380"
        );
        assert_eq!(without_password("redis://h:6379"), "redis://h:6379");
    }
}
