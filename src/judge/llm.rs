//! LLM judges: the prompt (PromptKit's, with G-Eval's steps and scale), the request in the
//! judge's protocol (asking for JSON where the protocol can), and the verdict read from the
//! reply's text.

use super::gate::{AttemptError, Capacity, Gate};
use super::{http_call, verdict, ErrorKind, JudgeEnv, JudgeError, Subject, Verdict};
use crate::config::{AuthHeader, JudgeConfig, ProtocolId};
use crate::policy::judged::{Judged, LlmJudge, Reference, Scale, Similarity};
use crate::protocol::judge_wire::{self, JudgeAsk, TokenLogprobs};
use crate::protocol::{by_id, JudgeWire};
use crate::upstream::UpstreamBase;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// PromptKit's judge instruction, the reply shape spelled out.
const SYSTEM_PROMPT: &str = "You are an impartial evaluation judge. Judge the content against the criteria. \
Reply with a JSON object only, no other text: \
{\"score\": <number>, \"pass\": <true or false>, \"reason\": \"<one sentence>\", \"label\": \"<one word>\"}.";

pub struct JudgeClient {
    pub config: JudgeConfig,
    protocol: ProtocolId,
    base: UpstreamBase,
    api_key: Option<String>,
    gate: Gate,
    /// Embeddings of `cosine_similarity` reference texts, by (model, text): asked once.
    references: Mutex<HashMap<(String, String), Embedding>>,
}

/// An embedding, shared by the checks that use it.
type Embedding = Arc<Vec<f64>>;

/// Reference embeddings kept per judge, at most.
const MAX_REFERENCES: usize = 1024;

impl JudgeClient {
    /// A judge's client; its gate's label is `label_prefix` and the judge's name.
    pub fn new(config: &JudgeConfig, label_prefix: &str) -> Result<JudgeClient, String> {
        let checked = config
            .checked
            .as_ref()
            .ok_or_else(|| format!("judges ({}): the config was not validated", config.name))?;
        Ok(JudgeClient {
            protocol: checked.protocol,
            base: UpstreamBase::new(&checked.base_url)
                .map_err(|e| format!("judges ({}): base_url {e}", config.name))?,
            api_key: checked.api_key.clone(),
            gate: Gate::new(
                format!("{label_prefix}{}", config.name),
                config.retry.clone(),
                config.breaker.clone(),
                Capacity {
                    max_concurrency: config.max_concurrency,
                    max_queue: config.max_queue,
                    concurrency_per_key: config.max_concurrency_per_key,
                    queue_per_key: config.max_queue_per_key,
                },
                &config.cache,
            ),
            config: config.clone(),
            references: Mutex::new(HashMap::new()),
        })
    }

    /// `cosine_similarity`: the text's embedding (and the reference's, the first time) from
    /// the judge's embeddings endpoint; the score is their cosine similarity, at least 0.
    pub async fn similarity(
        &self,
        env: &JudgeEnv,
        check: &Similarity,
        subject: &Subject,
        deadline: tokio::time::Instant,
    ) -> Result<Verdict, JudgeError> {
        let text = subject.render(&Judged::Text).unwrap_or_default();
        let known = match &check.reference {
            Reference::Vector(v) => Some(Arc::new(v.clone())),
            Reference::Text(t) => self
                .references
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&(check.model.clone(), t.clone()))
                .cloned(),
        };
        let reference_text = match (&check.reference, &known) {
            (Reference::Text(t), None) => Some(t.as_str()),
            _ => None,
        };
        let mut inputs: Vec<&str> = reference_text.into_iter().collect();
        inputs.push(&text);
        let (path, body) = self.embeddings_request(&check.model, &inputs);
        let expected = inputs.len();
        let key = env.judges.cache_key(&[
            self.config.name.as_bytes(),
            b"embeddings",
            check.model.as_bytes(),
            format!("{:?}", check.reference).as_bytes(),
            text.as_bytes(),
        ]);
        let headers = self.headers();
        let verdict = self
            .gate
            .call(&env.metrics, env.tenant, Some(key), deadline, || {
                let (path, body, headers, known) =
                    (&path, body.clone(), headers.clone(), known.clone());
                async move {
                    let reply =
                        http_call(env, &self.base, http::Method::POST, path, headers, body).await?;
                    let mut vectors = embeddings(self.protocol, &reply)
                        .map_err(|e| AttemptError::input(ErrorKind::Malformed, e))?;
                    if vectors.len() != expected {
                        return Err(AttemptError::input(
                            ErrorKind::Malformed,
                            "the embeddings reply has the wrong number of vectors",
                        ));
                    }
                    let text_vector = vectors.pop().unwrap_or_default();
                    let reference = match known {
                        Some(r) => r,
                        None => {
                            let r = Arc::new(vectors.pop().unwrap_or_default());
                            if let Reference::Text(t) = &check.reference {
                                let mut refs =
                                    self.references.lock().unwrap_or_else(|e| e.into_inner());
                                if refs.len() < MAX_REFERENCES {
                                    refs.insert((check.model.clone(), t.clone()), Arc::clone(&r));
                                }
                            }
                            r
                        }
                    };
                    let sim = cosine(&reference, &text_vector).ok_or_else(|| {
                        AttemptError::input(
                            ErrorKind::Malformed,
                            "the embeddings differ in length or are zero",
                        )
                    })?;
                    Ok(Verdict {
                        score: sim.max(0.0),
                        reason: None,
                        label: None,
                    })
                }
            })
            .await?;
        Ok(verdict)
    }

    fn embeddings_request(&self, model: &str, inputs: &[&str]) -> (String, Vec<u8>) {
        let (path, body) = wire(self.protocol).embeddings_request(model, inputs);
        (path, body.to_string().into_bytes())
    }

    pub async fn judge(
        &self,
        env: &JudgeEnv,
        check: &LlmJudge,
        subject: &Subject,
        deadline: tokio::time::Instant,
    ) -> Result<Verdict, JudgeError> {
        let Some(content) = subject.render(&check.judged) else {
            return Ok(Verdict {
                score: 1.0,
                reason: Some("nothing to judge (no tool calls, or no retrieved context)".into()),
                label: None,
            });
        };
        let system = system_prompt(check);
        let user = user_prompt(check, &content);
        let model = check.model.as_deref().unwrap_or(&self.config.model);
        // G-Eval: the score weighted by the probabilities of the scores, where the protocol
        // reports them.
        let logprobs = check.scale == Scale::OneToFive && self.config.logprobs;
        let (path, body) = self.request(model, &system, &user, logprobs);
        let key = env.judges.cache_key(&[
            self.config.name.as_bytes(),
            model.as_bytes(),
            system.as_bytes(),
            user.as_bytes(),
        ]);
        let headers = self.headers();
        self.gate
            .call(&env.metrics, env.tenant, Some(key), deadline, || {
                let (path, body, headers) = (&path, body.clone(), headers.clone());
                async move {
                    let reply =
                        http_call(env, &self.base, http::Method::POST, path, headers, body).await?;
                    let text = reply_text(self.protocol, &reply)
                        .map_err(|e| AttemptError::input(ErrorKind::Malformed, e))?;
                    let mut verdict = verdict::parse(&text, check.scale, true)
                        .map_err(|e| AttemptError::input(ErrorKind::Malformed, e))?;
                    if logprobs {
                        // Only where the weighted token is the score the verdict gave.
                        let said = (verdict.score * 4.0 + 1.0).round();
                        if let Some((chosen, w)) =
                            weighted_score(&reply_logprobs(self.protocol, &reply))
                        {
                            if chosen == said {
                                verdict.score = (w - 1.0) / 4.0;
                            }
                        }
                    }
                    Ok(verdict)
                }
            })
            .await
    }

    /// The judge's reply to a prompt of the caller's own, once `read` accepts its text (a
    /// reply it refuses is [`ErrorKind::Malformed`], never retried): the same request, gate and
    /// deadline as a verdict's, without log probabilities and never cached.
    pub async fn reply<T>(
        &self,
        env: &JudgeEnv,
        system: &str,
        user: &str,
        deadline: tokio::time::Instant,
        read: &(dyn Fn(&str) -> Result<T, String> + Sync),
    ) -> Result<T, JudgeError> {
        let (path, body) = self.request(&self.config.model, system, user, false);
        let headers = self.headers();
        self.gate
            .call_fresh(&env.metrics, env.tenant, deadline, || {
                let (path, body, headers) = (&path, body.clone(), headers.clone());
                async move {
                    let reply =
                        http_call(env, &self.base, http::Method::POST, path, headers, body).await?;
                    let text = reply_text(self.protocol, &reply)
                        .map_err(|e| AttemptError::input(ErrorKind::Malformed, e))?;
                    read(&text).map_err(|e| AttemptError::input(ErrorKind::Malformed, e))
                }
            })
            .await
    }

    fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        let Some(key) = &self.api_key else {
            return h;
        };
        let auth = by_id(self.protocol).auth_header();
        let value = match auth {
            AuthHeader::Bearer => format!("Bearer {key}"),
            _ => key.clone(),
        };
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(HeaderName::from_static(auth.as_str()), v);
        }
        for (name, value) in wire(self.protocol).headers() {
            h.insert(*name, HeaderValue::from_static(value));
        }
        h
    }

    /// The request path and body: temperature 0, and JSON output asked for where the protocol
    /// has a switch for it (Anthropic has none: the prompt asks, and the reply is read
    /// tolerantly).
    fn request(&self, model: &str, system: &str, user: &str, logprobs: bool) -> (String, Vec<u8>) {
        let (path, body) = wire(self.protocol).request(&JudgeAsk {
            model,
            system,
            user,
            max_tokens: self.config.max_tokens,
            top_logprobs: logprobs.then_some(TOP_LOGPROBS),
        });
        (path, body.to_string().into_bytes())
    }
}

/// The judge shapes of `protocol` (config lets judges speak only protocols that have them;
/// any other is read as OpenAI Chat's).
fn wire(protocol: ProtocolId) -> &'static dyn JudgeWire {
    by_id(protocol)
        .judge_wire()
        .unwrap_or(&judge_wire::OpenAiChat)
}

fn system_prompt(check: &LlmJudge) -> String {
    let mut s = check
        .system_prompt
        .clone()
        .unwrap_or_else(|| SYSTEM_PROMPT.to_owned());
    if check.scale == Scale::OneToFive {
        s.push_str(" The score is a whole number from 1 (worst) to 5 (best).");
    } else if check.system_prompt.is_none() {
        s.push_str(" The score is from 0 (fails the criteria) to 1 (meets them).");
    }
    s
}

/// PromptKit's user message, with G-Eval's steps when given.
fn user_prompt(check: &LlmJudge, content: &str) -> String {
    let mut s = format!(
        "Content to evaluate:\n{content}\n\nCriteria: {}",
        check.criteria
    );
    if let Some(r) = &check.rubric {
        s.push_str("\n\nRubric: ");
        s.push_str(r);
    }
    if !check.evaluation_steps.is_empty() {
        s.push_str("\n\nEvaluation steps:");
        for (i, step) in check.evaluation_steps.iter().enumerate() {
            s.push_str(&format!("\n{}. {step}", i + 1));
        }
    }
    s
}

/// How many alternatives per token a G-Eval judge is asked for (the five scores fit).
const TOP_LOGPROBS: u32 = 5;

/// The tokens of a reply with their alternatives, where the protocol reports them.
pub fn reply_logprobs(protocol: ProtocolId, body: &[u8]) -> Vec<TokenLogprobs> {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    wire(protocol).reply_logprobs(&v)
}

/// G-Eval's probability-weighted score (1 to 5): at the token that holds the reply's score
/// (the first digit 1–5 after `"score":`), the scores 1–5 among its alternatives weighted by
/// their probabilities. Returns (the chosen digit, the weighted score); `None` when the reply
/// has no such token or its log probabilities are not ones (above 0, not finite).
pub fn weighted_score(tokens: &[TokenLogprobs]) -> Option<(f64, f64)> {
    let digit = |t: &str| match t.trim().trim_matches('"') {
        d @ ("1" | "2" | "3" | "4" | "5") => d.parse::<f64>().ok(),
        _ => None,
    };
    let mut before = String::new();
    for (token, alternatives) in tokens {
        let head = before.trim_end();
        let after_key = head
            .strip_suffix(':')
            .is_some_and(|k| k.trim_end().trim_end_matches('"').ends_with("score"));
        if let (true, Some(chosen)) = (after_key, digit(token)) {
            let (mut total, mut weighted) = (0.0, 0.0);
            for (alt, lp) in alternatives {
                if let Some(d) = digit(alt) {
                    if !(lp.is_finite() && *lp <= 0.0) {
                        return None;
                    }
                    let p = lp.exp();
                    total += p;
                    weighted += p * d;
                }
            }
            let score = weighted / total;
            return (total > 0.0 && score.is_finite()).then_some((chosen, score));
        }
        before.push_str(token);
    }
    None
}

/// The vectors of an embeddings reply, in input order.
pub fn embeddings(protocol: ProtocolId, body: &[u8]) -> Result<Vec<Vec<f64>>, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|_| "the embeddings reply is not JSON".to_owned())?;
    let vector =
        |x: &Value| -> Option<Vec<f64>> { x.as_array()?.iter().map(Value::as_f64).collect() };
    let items = wire(protocol).embeddings(&v);
    if items.is_empty() {
        return Err("the embeddings reply has no vectors".into());
    }
    items
        .iter()
        .map(|i| vector(i).ok_or_else(|| "an embedding is not a list of numbers".to_owned()))
        .collect()
}

/// Cosine similarity; `None` for vectors of different lengths or without magnitude.
pub fn cosine(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let (na, nb) = (
        a.iter().map(|x| x * x).sum::<f64>().sqrt(),
        b.iter().map(|x| x * x).sum::<f64>().sqrt(),
    );
    (na > 0.0 && nb > 0.0).then(|| (dot / (na * nb)).clamp(-1.0, 1.0))
}

/// The text of a judge's reply, in its protocol's shape.
pub fn reply_text(protocol: ProtocolId, body: &[u8]) -> Result<String, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|_| "the judge's reply is not JSON".to_owned())?;
    let texts = wire(protocol).reply_texts(&v);
    if texts.is_empty() {
        return Err("the judge's reply has no text".into());
    }
    Ok(texts.concat())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    #[test]
    fn embeddings_and_cosine() {
        let openai = br#"{"data":[{"index":1,"embedding":[0,1]},{"index":0,"embedding":[1,0]}]}"#;
        assert_eq!(
            embeddings(ProtocolId::OpenAiChat, openai).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        let gemini = br#"{"embeddings":[{"values":[0.5,0.5]}]}"#;
        assert_eq!(
            embeddings(ProtocolId::Gemini, gemini).unwrap(),
            vec![vec![0.5, 0.5]]
        );
        assert!(embeddings(ProtocolId::OpenAiChat, b"{}").is_err());
        assert!(embeddings(ProtocolId::OpenAiChat, br#"{"data":[{"embedding":["x"]}]}"#).is_err());
        assert_eq!(cosine(&[1.0, 0.0], &[1.0, 0.0]), Some(1.0));
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 2.0]), Some(0.0));
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), None);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), None);
    }

    #[test]
    fn reply_texts_of_each_protocol() {
        for (protocol, body) in [
            (
                ProtocolId::OpenAiChat,
                r#"{"choices":[{"message":{"role":"assistant","content":"{\"score\":1}"}}]}"#,
            ),
            (
                ProtocolId::AnthropicMessages,
                r#"{"content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"{\"score\":1}"}]}"#,
            ),
            (
                ProtocolId::OpenAiResponses,
                r#"{"output":[{"type":"reasoning"},{"type":"message","content":[{"type":"output_text","text":"{\"score\":1}"}]}]}"#,
            ),
            (
                ProtocolId::Gemini,
                r#"{"candidates":[{"content":{"parts":[{"text":"{\"score\":"},{"text":"1}"}]}}]}"#,
            ),
        ] {
            assert_eq!(
                reply_text(protocol, body.as_bytes()).as_deref(),
                Ok("{\"score\":1}"),
                "{protocol:?}"
            );
            assert!(reply_text(protocol, b"{}").is_err());
            assert!(reply_text(protocol, b"not json").is_err());
        }
    }

    #[test]
    fn g_eval_scores_are_weighted_by_the_scores_probabilities() {
        let tokens = |alts: &str| {
            format!(
                r#"[{{"token":"{{\"","logprob":0,"top_logprobs":[]}},
                   {{"token":"score","logprob":0,"top_logprobs":[]}},
                   {{"token":"\":","logprob":0,"top_logprobs":[]}},
                   {{"token":" 4","logprob":-0.4,"top_logprobs":{alts}}},
                   {{"token":",","logprob":0,"top_logprobs":[]}}]"#
            )
        };
        let chat = |alts: &str| {
            format!(
                r#"{{"choices":[{{"message":{{"content":"{{\"score\": 4, \"reason\": \"x\"}}"}},"logprobs":{{"content":{}}}}}]}}"#,
                tokens(alts)
            )
        };
        // 4 at 60 %, 3 at 40 % (ln 0.6, ln 0.4), and a token that is no score.
        let body = chat(
            r#"[{"token":" 4","logprob":-0.5108256},{"token":" 3","logprob":-0.9162907},{"token":" x","logprob":-3}]"#,
        );
        let (chosen, w) =
            weighted_score(&reply_logprobs(ProtocolId::OpenAiChat, body.as_bytes())).unwrap();
        assert_eq!(chosen, 4.0);
        assert!((w - 3.6).abs() < 1e-6, "{w}");
        // A log probability above 0 is no probability: not used.
        let body = chat(r#"[{"token":" 4","logprob":0.5},{"token":" 3","logprob":-1}]"#);
        assert_eq!(
            weighted_score(&reply_logprobs(ProtocolId::OpenAiChat, body.as_bytes())),
            None
        );
        // No alternatives that are scores, or no logprobs at all: the reply's own score.
        let body = chat(r#"[{"token":" x","logprob":-1}]"#);
        assert_eq!(
            weighted_score(&reply_logprobs(ProtocolId::OpenAiChat, body.as_bytes())),
            None
        );
        assert_eq!(
            weighted_score(&reply_logprobs(
                ProtocolId::OpenAiChat,
                br#"{"choices":[]}"#
            )),
            None
        );
        // Gemini's shape.
        let gemini = r#"{"candidates":[{"logprobsResult":{
            "chosenCandidates":[{"token":"{\"score\": ","logProbability":0},{"token":"5","logProbability":-0.1}],
            "topCandidates":[{"candidates":[]},{"candidates":[{"token":"5","logProbability":0},{"token":"1","logProbability":0}]}]}}]}"#;
        let (_, w) =
            weighted_score(&reply_logprobs(ProtocolId::Gemini, gemini.as_bytes())).unwrap();
        assert!((w - 3.0).abs() < 1e-9, "{w}");
    }
}
