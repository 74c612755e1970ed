//! `rest_eval` / `rest_eval_session`: PromptKit's body POSTed (or `method`) to the endpoint,
//! `{"score", "reasoning"}` read from its reply (`passed` is ignored: the threshold decides).
//! `a2a_eval` / `a2a_eval_session`: the same body as the context of an A2A JSON-RPC
//! `message/send` to the agent, the verdict read from the text of its reply (a Task's status
//! message, else its first artifact; or a Message).

use super::gate::{AttemptError, Gate};
use super::{http_call, verdict, ErrorKind, JudgeEnv, JudgeError, Subject, Verdict};
use crate::policy::judged::{RestEval, Scale};
use crate::upstream::UpstreamBase;
use http::{HeaderMap, HeaderValue};
use serde_json::{json, Map, Value};

/// PromptKit's default deadline for `rest_eval` (`timeout: 30s`).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// PromptKit's default deadline for `a2a_eval` (60 s).
pub const A2A_DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// PromptKit's instruction to an A2A judge agent.
const A2A_PROMPT: &str = "You are an evaluation judge. Evaluate the content in the context below against the criteria. \
Reply with JSON only: {\"passed\": true or false, \"score\": a number from 0 to 1, \"reasoning\": \"one sentence\"}.";

pub async fn evaluate(
    env: &JudgeEnv,
    base: &UpstreamBase,
    gate: &Gate,
    check: &RestEval,
    subject: &Subject,
    deadline: tokio::time::Instant,
) -> Result<Verdict, JudgeError> {
    let context = body(check, subject);
    let headers = headers(check)?;
    // Keyed by what decides the verdict (an A2A message's random id does not).
    let key = env.judges.cache_key(&[
        check.method.as_str().as_bytes(),
        base.authority().as_str().as_bytes(),
        check.path_and_query.as_bytes(),
        format!("{headers:?}").as_bytes(),
        &[u8::from(check.a2a)],
        check.criteria.as_deref().unwrap_or("").as_bytes(),
        context.to_string().as_bytes(),
    ]);
    let body = if check.a2a {
        a2a_request(check, &context)
    } else {
        context
    }
    .to_string()
    .into_bytes();
    gate.call(&env.metrics, env.tenant, Some(key), deadline, || {
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
            let text = if check.a2a {
                a2a_reply_text(&reply)?
            } else {
                String::from_utf8_lossy(&reply).into_owned()
            };
            verdict::parse(&text, Scale::Unit, false)
                .map_err(|e| AttemptError::input(ErrorKind::Malformed, e))
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

/// The JSON-RPC `message/send` carrying the instruction, the criteria and `context` (the
/// `rest_eval` body) as one text part.
fn a2a_request(check: &RestEval, context: &Value) -> Value {
    let mut text = A2A_PROMPT.to_owned();
    if let Some(c) = &check.criteria {
        text.push_str("\n\nCriteria: ");
        text.push_str(c);
    }
    text.push_str("\n\nContext:\n");
    text.push_str(&serde_json::to_string_pretty(context).unwrap_or_default());
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": uuid::Uuid::new_v4().to_string(),
                "parts": [{"kind": "text", "text": text}],
            },
        },
    })
}

/// The text of an agent's JSON-RPC reply: a Task's status message, else its first artifact;
/// or a Message's parts. A JSON-RPC error is a `status` error.
fn a2a_reply_text(reply: &[u8]) -> Result<String, AttemptError> {
    let malformed = |m: &str| AttemptError::input(ErrorKind::Malformed, m);
    let v: Value =
        serde_json::from_slice(reply).map_err(|_| malformed("the agent's reply is not JSON"))?;
    if let Some(code) = v.get("error").map(|e| e["code"].clone()) {
        // The agent's answer to this request (which its content may have provoked).
        return Err(AttemptError::input(
            ErrorKind::Status,
            format!("the agent answered JSON-RPC error {code}"),
        ));
    }
    let result = &v["result"];
    // A2A 1.0 wraps the Task (`{"task": {...}}`); 0.3 sends it as the result.
    let result = if result["task"].is_object() {
        &result["task"]
    } else {
        result
    };
    let texts = |parts: &Value| -> String {
        parts
            .as_array()
            .map(|ps| ps.iter().filter_map(|p| p["text"].as_str()).collect())
            .unwrap_or_default()
    };
    let text = [
        texts(&result["status"]["message"]["parts"]),
        texts(&result["artifacts"][0]["parts"]),
        texts(&result["parts"]),
    ]
    .into_iter()
    .find(|t| !t.is_empty())
    .ok_or_else(|| malformed("the agent's reply has no text"))?;
    Ok(text)
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
    fn a2a_replies() {
        use super::a2a_reply_text;
        let task = br#"{"jsonrpc":"2.0","id":1,"result":{"kind":"task","status":{"state":"completed","message":{"parts":[{"kind":"text","text":"{\"score\":1}"}]}},"artifacts":[{"parts":[{"text":"other"}]}]}}"#;
        assert_eq!(a2a_reply_text(task).unwrap(), "{\"score\":1}");
        let artifact = br#"{"result":{"task":{"status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"parts":[{"text":"{\"score\":0}"}]}]}}}"#;
        assert_eq!(a2a_reply_text(artifact).unwrap(), "{\"score\":0}");
        let message = br#"{"result":{"kind":"message","parts":[{"kind":"text","text":"a"},{"kind":"text","text":"b"}]}}"#;
        assert_eq!(a2a_reply_text(message).unwrap(), "ab");
        assert!(a2a_reply_text(br#"{"error":{"code":-32602}}"#).is_err());
        assert!(a2a_reply_text(br#"{"result":{}}"#).is_err());
    }

    #[test]
    fn env_expansion() {
        std::env::set_var("GW_REST_TEST_TOKEN", "t0k");
        assert_eq!(expand_env("Bearer ${GW_REST_TEST_TOKEN}"), "Bearer t0k");
        assert_eq!(expand_env("${GW_REST_TEST_UNSET_VAR}x"), "x");
        assert_eq!(expand_env("a ${open"), "a ${open");
        assert_eq!(expand_env("plain"), "plain");
    }
}
