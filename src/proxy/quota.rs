//! A key's limits over time on the request path (`rpm_limit`, `tpm_limit`, `max_budget`):
//! what a request reserves, and the rate-limit headers its answer carries. The counting itself
//! is the state room's ([`crate::state`]).

use crate::config::Price;
use crate::error::GatewayError;
use crate::protocol::ProtocolId;
use crate::state::{micro_usd, Ask, KeyLimits, Quota, Window};
use http::{HeaderMap, HeaderName, HeaderValue};

/// What a request reserves: one request; its input tokens estimated as its body's bytes / 4
/// (cheap, and near o200k's ratio for prose; settlement corrects it); its output bounded by the
/// request's own maximum, else `default_output`; priced at the model's price.
/// A key with a budget calling a model without a price is refused: its spend could not be
/// counted (fail closed).
pub fn ask(
    limits: &KeyLimits,
    body: &[u8],
    model: Option<&str>,
    price: Option<Price>,
    default_output: u64,
) -> Result<Ask, GatewayError> {
    if limits.tpm.is_none() && limits.budget.is_none() {
        return Ok(Ask::default());
    }
    let input = (body.len() as u64).div_ceil(4);
    let output = output_bound(body).unwrap_or(default_output);
    let tokens = input.saturating_add(output);
    let micro = match (limits.budget, price) {
        (None, _) => 0,
        (Some(_), Some(p)) => micro_usd(p.usd(input, output)),
        (Some(_), None) => {
            return Err(GatewayError::InvalidRequest(format!(
                "this key has a max_budget, and the model {} has no price in `prices`, so its spend cannot be counted",
                model.map_or("(none named)".to_owned(), |m| format!("{m:?}"))
            )))
        }
    };
    Ok(Ask {
        tokens,
        micro_usd: micro,
    })
}

/// The request's own bound on its output tokens, in any provider's spelling.
fn output_bound(body: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Bounds {
        max_tokens: Option<u64>,
        max_completion_tokens: Option<u64>,
        max_output_tokens: Option<u64>,
        #[serde(rename = "generationConfig")]
        generation_config: Option<GenerationConfig>,
    }
    #[derive(serde::Deserialize)]
    struct GenerationConfig {
        #[serde(rename = "maxOutputTokens")]
        max_output_tokens: Option<u64>,
    }
    let b: Bounds = serde_json::from_slice(body).ok()?;
    [
        b.max_tokens,
        b.max_completion_tokens,
        b.max_output_tokens,
        b.generation_config.and_then(|g| g.max_output_tokens),
    ]
    .into_iter()
    .flatten()
    .min()
}

/// The rate-limit headers of an answer to a limited key: OpenAI's `x-ratelimit-*` on every
/// protocol (the SDKs read them), and on Anthropic routes also `anthropic-ratelimit-*`.
pub fn set_headers(protocol: ProtocolId, quota: &Quota, h: &mut HeaderMap) {
    let now = std::time::SystemTime::now();
    for (name, window) in [("requests", quota.requests), ("tokens", quota.tokens)] {
        let Some(w) = window else { continue };
        put(h, &format!("x-ratelimit-limit-{name}"), w.limit.to_string());
        put(
            h,
            &format!("x-ratelimit-remaining-{name}"),
            w.remaining.to_string(),
        );
        put(
            h,
            &format!("x-ratelimit-reset-{name}"),
            go_duration(w.reset_ms),
        );
        if protocol == ProtocolId::AnthropicMessages {
            anthropic(h, name, &w, now);
        }
    }
}

fn anthropic(h: &mut HeaderMap, name: &str, w: &Window, now: std::time::SystemTime) {
    let reset = now + std::time::Duration::from_millis(w.reset_ms);
    put(
        h,
        &format!("anthropic-ratelimit-{name}-limit"),
        w.limit.to_string(),
    );
    put(
        h,
        &format!("anthropic-ratelimit-{name}-remaining"),
        w.remaining.to_string(),
    );
    put(
        h,
        &format!("anthropic-ratelimit-{name}-reset"),
        rfc3339(reset),
    );
}

fn put(h: &mut HeaderMap, name: &str, value: String) {
    if let (Ok(n), Ok(v)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
        h.insert(n, v);
    }
}

/// A duration as OpenAI writes its resets: `0s`, `20ms`, `1s`, `6m0s`, `1h2m3s` (whole
/// seconds rounded up from one second on).
pub fn go_duration(ms: u64) -> String {
    if ms < 1_000 {
        return if ms == 0 {
            "0s".into()
        } else {
            format!("{ms}ms")
        };
    }
    let s = ms.div_ceil(1_000);
    match (s / 3600, (s / 60) % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, m, sec) => format!("{h}h{m}m{sec}s"),
    }
}

/// A UTC time as RFC 3339 (`2026-11-27T20:41:07Z`), as Anthropic's reset headers carry it.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days to a civil date (Howard Hinnant's algorithm, for dates after 1970).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// `retry-after` in whole seconds, at least 1.
pub fn retry_after_secs(ms: Option<u64>) -> u64 {
    ms.map_or(1, |ms| ms.div_ceil(1_000).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_read_as_openai_writes_them() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(20), "20ms");
        assert_eq!(go_duration(1_000), "1s");
        assert_eq!(go_duration(1_001), "2s");
        assert_eq!(go_duration(360_000), "6m0s");
        assert_eq!(go_duration(3_723_000), "1h2m3s");
    }

    #[test]
    fn times_read_as_rfc3339() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_898_467);
        assert_eq!(rfc3339(t), "2026-11-28T20:41:07Z");
        assert_eq!(rfc3339(std::time::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // A leap day.
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_709_164_800);
        assert_eq!(rfc3339(t), "2024-02-29T00:00:00Z");
    }

    #[test]
    fn asks_take_the_smallest_bound_and_refuse_unpriced_budgets() {
        let l = KeyLimits {
            rpm: None,
            tpm: Some(1000),
            budget: None,
        };
        let body = br#"{"model":"m","max_tokens":50,"generationConfig":{"maxOutputTokens":30}}"#;
        let a = ask(&l, body, Some("m"), None, 4096).unwrap_or_default();
        assert_eq!(a.tokens, (body.len() as u64).div_ceil(4) + 30);
        let a = ask(&l, b"{}", None, None, 4096).unwrap_or_default();
        assert_eq!(a.tokens, 1 + 4096);
        let budget = KeyLimits {
            budget: Some(crate::state::BudgetLimit {
                max_micro_usd: 1,
                duration_ms: None,
            }),
            ..l
        };
        assert!(ask(&budget, b"{}", Some("m"), None, 10).is_err());
        let price = Price {
            input_per_mtok: 1.0,
            output_per_mtok: 2.0,
        };
        let a =
            ask(&budget, br#"{"max_tokens":10}"#, Some("m"), Some(price), 10).unwrap_or_default();
        // 5 input tokens at $1/M and 10 output at $2/M: 25 micro-USD.
        assert_eq!(a.micro_usd, 25);
    }
}
