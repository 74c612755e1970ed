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
/// request's own maximum, else `default_output`, for each answer it asks for
/// ([`output_bound`]); priced at the model's price.
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
    // Read once, as JSON with each key once: a key twice (an upstream may read the copy the
    // reservation did not) is refused; so is a body that looks like JSON but cannot be read
    // (a number out of range: an upstream's reader may take it); a body that is no JSON at
    // all (a file upload) reserves the default.
    let refuse = |why: &str| {
        Err(GatewayError::InvalidRequest(format!(
            "this key has a tpm_limit or max_budget, and {why}, so its usage cannot be bounded"
        )))
    };
    let request = match crate::protocol::mcp::jsonrpc::read_unique(body) {
        Ok(v) => Some(v),
        Err(e) if e.code == crate::protocol::mcp::codes::INVALID_REQUEST => {
            return refuse("the request holds a key twice: an upstream may read either copy");
        }
        Err(_) if looks_like_json(body) => {
            return refuse("the request's JSON cannot be read");
        }
        Err(_) => None,
    };
    let request = request.as_ref().and_then(serde_json::Value::as_object);
    if request.is_some_and(runs_in_background) {
        return Err(GatewayError::InvalidRequest(
            "this key has a tpm_limit or max_budget, and a background response (`background: true`) is generated after its answer, where its usage cannot be counted".into(),
        ));
    }
    // Media given by reference (an image's URL, a file's id) is billed by what it holds, not
    // by the bytes naming it.
    let media = request.map_or(0, referenced_media);
    let input = (body.len() as u64).div_ceil(4).saturating_add(media);
    let output =
        match request {
            None => default_output,
            Some(b) => match output_bound(b, default_output) {
                Some(output) => output,
                None => return refuse(
                    "a bound on its output (`max_tokens`, `n`, …) is a string that is no number",
                ),
            },
        };
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

/// Tokens a piece of media given by reference reserves (an image's URL or file id, a file's):
/// above what providers bill for the largest image they take (OpenAI's high-detail tiles and
/// patches, Anthropic's and Gemini's images stay under it); settlement corrects it.
const MEDIA_TOKENS: u64 = 4096;

/// Tokens a video or a sound given by reference reserves: billed by its length (a minute of
/// video is 10–20k tokens on vision-language models, Gemini's audio 32 per second), which its
/// reference does not say; longer media bill more (docs/limits.md).
const TIMED_MEDIA_TOKENS: u64 = 32 * 1024;

/// Whether a body starts as a JSON object or array does.
fn looks_like_json(body: &[u8]) -> bool {
    body.iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| matches!(b, b'{' | b'['))
}

/// Tokens the media a request gives by reference reserve, by shape rather than by a list of
/// spellings: a part whose `type` names a key it holds and is not text (`{"type": "image_url",
/// "image_url": …}`, vLLM's and SGLang's `video_url`, `audio_url`, `{"type": "video", "video":
/// …}`, `input_audio`, `*_embeds`, …), and any object naming media by URL, URI or file id
/// (Anthropic's sources by URL or file id, Gemini's `fileData` / `fileUri`, `file_id`,
/// `image_url`). Video and sound reserve [`TIMED_MEDIA_TOKENS`], the rest [`MEDIA_TOKENS`].
fn referenced_media(request: &serde_json::Map<String, serde_json::Value>) -> u64 {
    use serde_json::{Map, Value};
    const TEXT: [&str; 6] = [
        "text",
        "input_text",
        "output_text",
        "refusal",
        "thinking",
        "reasoning",
    ];
    let by_reference = |o: &Map<String, Value>| -> Option<bool> {
        let named = o
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| !TEXT.contains(t) && o.contains_key(*t));
        let keyed = o.keys().find(|k| {
            let k = k.to_ascii_lowercase();
            k.ends_with("_url")
                || k.ends_with("url")
                || k.ends_with("uri")
                || k.ends_with("_embeds")
                || matches!(
                    k.as_str(),
                    "file_id" | "filedata" | "file_data" | "input_audio"
                )
        });
        let url = o.get("type").and_then(Value::as_str) == Some("url") && o.contains_key("url");
        let what = named
            .or(keyed.map(String::as_str))
            .or(url.then_some("url"))?;
        let what = what.to_ascii_lowercase();
        Some(what.contains("video") || what.contains("audio"))
    };
    let tokens = |o: &Map<String, Value>| match by_reference(o) {
        Some(true) => TIMED_MEDIA_TOKENS,
        Some(false) => MEDIA_TOKENS,
        None => 0,
    };
    // (What a piece of media holds — its `{"url": …}` — is that piece, not another.)
    let mut total = tokens(request);
    // (Schemas name no media: a tool's `url` parameter is none.)
    let mut stack: Vec<&Value> = if total > 0 {
        Vec::new()
    } else {
        request
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "tools" | "functions" | "response_format"))
            .map(|(_, v)| v)
            .collect()
    };
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(a) => stack.extend(a),
            Value::Object(o) => match tokens(o) {
                0 => stack.extend(o.values()),
                t => total = total.saturating_add(t),
            },
            _ => {}
        }
    }
    total
}

/// A count as an upstream may read it: a whole number, a float such as `2.0`, or a numeric
/// string as Python's and pydantic's readers take one (`"50"`, `" 50_000 "`). `Some(None)`: a
/// string that is no number (refused: a reader may still take it); `None`: no count there
/// (absent, or a value no reader takes as one).
fn read_count(v: Option<&serde_json::Value>) -> Option<Option<u64>> {
    use serde_json::Value;
    let whole = |n: f64| (n.is_finite() && n >= 0.0).then(|| n.ceil().min(u64::MAX as f64) as u64);
    match v? {
        Value::String(s) => {
            let s = s.trim();
            let digits = s.strip_prefix('+').unwrap_or(s);
            // Underscores between digits (`50_000`), as Python's `int()` reads them.
            let plain: String = digits.chars().filter(|&c| c != '_').collect();
            let grouped = !digits.is_empty()
                && !digits.starts_with('_')
                && !digits.ends_with('_')
                && !digits.contains("__")
                && digits.chars().all(|c| c.is_ascii_digit() || c == '_');
            let n = if grouped {
                plain.parse::<u64>().ok().or(Some(u64::MAX))
            } else {
                s.parse::<u64>().ok().or_else(|| whole(s.parse().ok()?))
            };
            Some(n)
        }
        v => v.as_u64().or_else(|| whole(v.as_f64()?)).map(Some),
    }
}

/// The request's own bound on its output tokens, in any provider's spelling, times the
/// answers it asks for (`n`, legacy Completions' `best_of`, Gemini's `candidateCount`: each
/// is generated and billed). The largest spelling counts: an upstream may read any of them
/// (fail closed: never reserve less than it could bill); no bound given: the caller's default,
/// times the answers. `None`: a bound is a string that is no number (refused).
fn output_bound(
    b: &serde_json::Map<String, serde_json::Value>,
    default_output: u64,
) -> Option<u64> {
    use serde_json::Value;
    // Each field is read on its own: one of another shape drops no other.
    let mut unreadable = false;
    let mut count = |v: Option<&Value>| match read_count(v) {
        Some(Some(n)) => Some(n),
        Some(None) => {
            unreadable = true;
            None
        }
        None => None,
    };
    let configs: Vec<&serde_json::Map<String, Value>> = ["generationConfig", "generation_config"]
        .iter()
        .filter_map(|k| b.get(*k).and_then(Value::as_object))
        .collect();
    let mut in_configs = |names: [&str; 2]| {
        configs
            .iter()
            .flat_map(|g| names.map(|n| g.get(n)))
            .filter_map(&mut count)
            .max()
    };
    let (g_max, g_count) = (
        in_configs(["maxOutputTokens", "max_output_tokens"]),
        in_configs(["candidateCount", "candidate_count"]),
    );
    let bound = [
        count(b.get("max_tokens")),
        count(b.get("max_completion_tokens")),
        count(b.get("max_output_tokens")),
        g_max,
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(default_output);
    let answers = [count(b.get("n")), count(b.get("best_of")), g_count]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(1)
        .max(1);
    // Legacy Completions: a list of prompts (texts, or token lists) is answered once per prompt.
    let prompts = match b.get("prompt") {
        Some(Value::Array(a)) if a.iter().any(|p| p.is_string() || p.is_array()) => {
            a.len().max(1) as u64
        }
        _ => 1,
    };
    (!unreadable).then(|| bound.saturating_mul(answers).saturating_mul(prompts))
}

/// A Responses request run in the background: answered at once, generated (and billed) later.
fn runs_in_background(request: &serde_json::Map<String, serde_json::Value>) -> bool {
    request
        .get("background")
        .is_some_and(|v| *v != serde_json::Value::Bool(false) && !v.is_null())
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
    fn asks_take_the_largest_bound_for_every_answer_and_refuse_unpriced_budgets() {
        let l = KeyLimits {
            rpm: None,
            tpm: Some(1000),
            budget: None,
        };
        let body = br#"{"model":"m","max_tokens":50,"generationConfig":{"maxOutputTokens":30}}"#;
        let a = ask(&l, body, Some("m"), None, 4096).unwrap_or_default();
        assert_eq!(a.tokens, (body.len() as u64).div_ceil(4) + 50);
        let a = ask(&l, b"{}", None, None, 4096).unwrap_or_default();
        assert_eq!(a.tokens, 1 + 4096);
        // Review 14: a key twice (an upstream may read either copy) is refused.
        assert!(ask(
            &l,
            br#"{"max_tokens":1,"max_tokens":50000}"#,
            None,
            None,
            4096
        )
        .is_err());
        assert!(ask(
            &l,
            br#"{"background":false,"background":true}"#,
            None,
            None,
            4096
        )
        .is_err());
        // Every answer asked for is generated and billed.
        for (body, output) in [
            (&br#"{"n":50,"max_tokens":10}"#[..], 500),
            (br#"{"n":3}"#, 3 * 4096),
            (br#"{"best_of":4,"n":2,"max_tokens":10}"#, 40),
            (
                br#"{"generationConfig":{"candidateCount":8,"maxOutputTokens":10}}"#,
                80,
            ),
            (br#"{"n":2.0,"max_completion_tokens":7}"#, 14),
            (br#"{"n":0,"max_tokens":7}"#, 7),
            (br#"{"prompt":["a","b","c"],"n":2,"max_tokens":5}"#, 30),
            (br#"{"prompt":[1,2,3],"max_tokens":5}"#, 5),
            // Review 14: numeric strings (pydantic reads them), a field of another shape.
            (br#"{"max_tokens":"50","n":"4"}"#, 200),
            (br#"{"max_tokens":10,"n":3,"generationConfig":0}"#, 30),
            // Review 15: Python's grouped digits, a sign, spaces.
            (br#"{"max_tokens":"50_000","n":" +0_4 "}"#, 200_000),
            (br#"{"max_tokens":"1e3"}"#, 1000),
        ] {
            let a = ask(&l, body, None, None, 4096).unwrap_or_default();
            assert_eq!(
                a.tokens,
                (body.len() as u64).div_ceil(4) + output,
                "{body:?}"
            );
        }
        let budget = KeyLimits {
            budget: Some(crate::state::BudgetLimit {
                max_micro_usd: 1,
                duration_ms: None,
            }),
            ..l
        };
        assert!(ask(&budget, b"{}", Some("m"), None, 10).is_err());
        // Review 15: a bound that is a string but no number, or JSON that cannot be read (a
        // number out of range), is refused; a body that is no JSON reserves the default.
        for body in [
            &br#"{"max_tokens":"lots"}"#[..],
            br#"{"n":"\u0665"}"#,
            br#"{"max_tokens":""}"#,
            br#"{"max_tokens":"5__0"}"#,
            br#" {"max_tokens":10,"x_pad":1e400}"#,
        ] {
            assert!(ask(&l, body, None, None, 10).is_err(), "{body:?}");
        }
        assert_eq!(
            ask(
                &l,
                b"--boundary
",
                None,
                None,
                10
            )
            .unwrap_or_default()
            .tokens,
            3 + 10
        );
        // Review 15: media by reference reserves what a provider bills for one, not its bytes.
        let images = br#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}},{"type":"input_image","file_id":"f1"},{"type":"image","source":{"type":"url","url":"https://x/b.png"}}]}],"max_tokens":1}"#;
        let a = ask(&l, images, None, None, 10).unwrap_or_default();
        assert_eq!(
            a.tokens,
            (images.len() as u64).div_ceil(4) + 3 * MEDIA_TOKENS + 1
        );
        // Review 16: by shape — video and sound parts in vLLM's and SGLang's spellings, audio
        // by URL, embeddings, Gemini's file URIs; video and sound reserve more.
        let timed = br#"{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"https://v/1.mp4"}},{"type":"audio_url","audio_url":{"url":"https://a/1.wav"}},{"type":"video","video":"https://v/2.mp4"}]}],"max_tokens":1}"#;
        let a = ask(&l, timed, None, None, 10).unwrap_or_default();
        assert_eq!(
            a.tokens,
            (timed.len() as u64).div_ceil(4) + 3 * TIMED_MEDIA_TOKENS + 1
        );
        let others = br#"{"contents":[{"parts":[{"fileUri":"gs://b/x.pdf"}]}],"messages":[{"role":"user","content":[{"type":"image","image":"https://x/c.png"},{"type":"image_embeds","image_embeds":"AAAA"},{"type":"text","text":"hi"}]}],"max_tokens":1}"#;
        let a = ask(&l, others, None, None, 10).unwrap_or_default();
        assert_eq!(
            a.tokens,
            (others.len() as u64).div_ceil(4) + 3 * MEDIA_TOKENS + 1
        );
        // A background response cannot be counted.
        assert!(ask(&l, br#"{"background":true}"#, None, None, 10).is_err());
        assert!(ask(&l, br#"{"background":false}"#, None, None, 10).is_ok());
        let price = Price {
            input_per_mtok: 1.0,
            output_per_mtok: 2.0,
            ..Price::default()
        };
        let a =
            ask(&budget, br#"{"max_tokens":10}"#, Some("m"), Some(price), 10).unwrap_or_default();
        // 5 input tokens at $1/M and 10 output at $2/M: 25 micro-USD.
        assert_eq!(a.micro_usd, 25);
    }
}
