//! `rest_eval` / `rest_eval_session`: PromptKit's body POSTed (or `method`) to the endpoint,
//! `{"score", "reasoning"}` read from its reply (`passed` is ignored: the threshold decides).

use super::gate::{AttemptError, Gate};
use super::{http_call, verdict, ErrorKind, JudgeEnv, JudgeError, Subject, Verdict};
use crate::policy::judged::{RestEval, Scale};
use crate::proxy::upstream::UpstreamBase;
use http::{HeaderMap, HeaderValue};
use serde_json::{json, Map, Value};

/// PromptKit's default deadline for `rest_eval` (`timeout: 30s`).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

pub async fn evaluate(
    env: &JudgeEnv,
    base: &UpstreamBase,
    gate: &Gate,
    check: &RestEval,
    subject: &Subject,
    deadline: tokio::time::Instant,
) -> Result<Verdict, JudgeError> {
    let body = body(check, subject).to_string().into_bytes();
    let headers = headers(check)?;
    let key = env.judges.cache_key(&[
        check.method.as_str().as_bytes(),
        base.authority().as_str().as_bytes(),
        check.path_and_query.as_bytes(),
        format!("{headers:?}").as_bytes(),
        &body,
    ]);
    gate.call(&env.metrics, Some(key), deadline, || {
        let (body, headers) = (body.clone(), headers.clone());
        async move {
            let reply = http_call(
                env,
                base,
                check.method.clone(),
                &check.path_and_query,
                headers,
                body,
            )
            .await?;
            let text = String::from_utf8_lossy(&reply);
            verdict::parse(&text, Scale::Unit, false)
                .map_err(|e| AttemptError::new(ErrorKind::Malformed, e, false))
        }
    })
    .await
}

/// PromptKit's request body: `extra` nested under its own key, not merged.
fn body(check: &RestEval, subject: &Subject) -> Value {
    let mut body = Map::new();
    body.insert(
        "current_output".into(),
        Value::String(subject.current_output(check.session)),
    );
    if check.include_messages {
        body.insert("messages".into(), Value::Array(subject.messages_json()));
    }
    if check.include_tool_calls {
        body.insert("tool_calls".into(), Value::Array(subject.tool_calls_json()));
    }
    if let Some(c) = &check.criteria {
        body.insert("criteria".into(), Value::String(c.clone()));
    }
    body.insert("variables".into(), json!({}));
    if let Some(extra) = &check.extra {
        body.insert("extra".into(), extra.clone());
    }
    Value::Object(body)
}

/// The headers, `${VAR}` expanded from the environment (an unset variable is empty, as in
/// PromptKit).
fn headers(check: &RestEval) -> Result<HeaderMap, JudgeError> {
    let mut h = HeaderMap::new();
    for (name, template) in &check.headers {
        let value = HeaderValue::from_str(&expand_env(template)).map_err(|_| {
            JudgeError::new(
                ErrorKind::Transport,
                format!("header `{name}` is not a valid value once expanded"),
            )
        })?;
        h.append(name.clone(), value);
    }
    Ok(h)
}

/// `${VAR}` replaced by the variable's value.
pub fn expand_env(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                out.push_str(&std::env::var(&after[..end]).unwrap_or_default());
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::expand_env;

    #[test]
    fn env_expansion() {
        std::env::set_var("GW_REST_TEST_TOKEN", "t0k");
        assert_eq!(expand_env("Bearer ${GW_REST_TEST_TOKEN}"), "Bearer t0k");
        assert_eq!(expand_env("${GW_REST_TEST_UNSET_VAR}x"), "x");
        assert_eq!(expand_env("a ${open"), "a ${open");
        assert_eq!(expand_env("plain"), "plain");
    }
}
