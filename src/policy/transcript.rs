//! PromptKit's assertion rules for the checks whose eval reads other text than the validator
//! does. As a validator (the guardrail surface) these checks read the current request or
//! answer; as an eval or a scenario assertion PromptKit's handlers read the *transcript*:
//! every assistant message of the conversation with the answer (its `ContentScopeTranscript`,
//! runtime/evals/handlers/helpers.go `contentUnderTest`), and every tool call made in it
//! (`evals.ExtractToolCalls`). The rules here are those handlers', line for line, so a pack's
//! `evals:` and `eval --scenario` decide as PromptKit does:
//!
//! - `content_excludes` (`banned_words`, `content_not_includes`): 0 when any assistant message
//!   or the answer holds a pattern (case-insensitive substring, or `\b`-bounded with
//!   `match_mode: word_boundary`, ASCII word characters as Go's RE2 reads `\b`);
//! - `contains_any` (`content_includes_any`): 1 when any of them holds any pattern;
//! - `contains` (`content_includes`): the share of the patterns the answer holds (PromptKit's
//!   `ratioScore`; the assertion's default threshold, 1, asks for all);
//! - `tool_args` and `tool_args_session`: 1 when at least one call of the tool has every
//!   expected argument, values compared by their string form as Go's `%v` prints them
//!   (`"3"` equals `3`); 0 when no call matches or the tool was never called.
//!
//! Texts are read as written: no normalised view (the guardrail surface keeps its view; see
//! docs/packs.md, "Types and surfaces").

use crate::delta::{Conversation, Role};
use crate::judge::Answer;
use serde_json::{Map, Value};

/// One of the transcript rules, its params read.
#[derive(Debug, Clone)]
pub enum TranscriptRule {
    Excludes {
        patterns: Vec<String>,
        /// `match_mode: word_boundary`: one regex per pattern.
        bounded: Option<Vec<regex::Regex>>,
    },
    ContainsAny {
        patterns: Vec<String>,
    },
    ContainsAll {
        patterns: Vec<String>,
    },
    ToolArgs {
        tool: String,
        expected: Map<String, Value>,
    },
}

impl TranscriptRule {
    /// `content_excludes`' rule: substring, or with `word_boundary` `(?i)\bPATTERN\b`.
    pub fn excludes(patterns: Vec<String>, word_boundary: bool) -> Result<TranscriptRule, String> {
        let bounded = match word_boundary {
            false => None,
            true => Some(
                patterns
                    .iter()
                    .map(|p| {
                        // Go's RE2 `\b` is an ASCII word boundary; `(?i)` folds Unicode case.
                        regex::Regex::new(&format!(r"(?i)(?-u:\b){}(?-u:\b)", regex::escape(p)))
                            .map_err(|e| format!("param 'patterns': {p:?}: {e}"))
                    })
                    .collect::<Result<_, _>>()?,
            ),
        };
        Ok(TranscriptRule::Excludes { patterns, bounded })
    }

    /// The score PromptKit's handler gives the turn whose request is `conversation` and whose
    /// answer is `answer`: 1 passes, 0 fails (`contains`: the share found).
    pub fn score(&self, conversation: &Conversation, answer: &Answer) -> f64 {
        let bool_score = |b: bool| if b { 1.0 } else { 0.0 };
        match self {
            TranscriptRule::Excludes { patterns, bounded } => {
                let found = assistant_texts(conversation, answer).any(|text| match bounded {
                    Some(res) => res.iter().any(|re| re.is_match(&text)),
                    None => {
                        let lower = go_lower(&text);
                        patterns.iter().any(|p| lower.contains(&go_lower(p)))
                    }
                });
                bool_score(!found)
            }
            TranscriptRule::ContainsAny { patterns } => {
                let found = assistant_texts(conversation, answer).any(|text| {
                    let lower = go_lower(&text);
                    patterns.iter().any(|p| lower.contains(&go_lower(p)))
                });
                bool_score(found)
            }
            TranscriptRule::ContainsAll { patterns } => {
                if patterns.is_empty() {
                    return 0.0;
                }
                let lower = go_lower(&answer.text);
                let found = patterns
                    .iter()
                    .filter(|p| lower.contains(&go_lower(p)))
                    .count();
                found as f64 / patterns.len() as f64
            }
            TranscriptRule::ToolArgs { tool, expected } => {
                let earlier = conversation
                    .read_messages()
                    .flat_map(|m| m.tool_calls.iter())
                    .map(|c| (c.name.as_str(), c.arguments.as_str()));
                let now = answer
                    .tool_calls
                    .iter()
                    .map(|(n, a)| (n.as_str(), a.as_str()));
                let matched = earlier
                    .chain(now)
                    .filter(|(name, _)| name == tool)
                    .any(|(_, args)| args_match(args, expected));
                bool_score(matched)
            }
        }
    }
}

/// The assistant messages' texts, then the answer's: each message's text parts joined with
/// nothing between, as PromptKit's `Message.GetContent` joins a multimodal message's parts.
fn assistant_texts<'a>(
    conversation: &'a Conversation,
    answer: &'a Answer,
) -> impl Iterator<Item = std::borrow::Cow<'a, str>> {
    conversation
        .read_messages()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| match m.text.as_slice() {
            [one] => std::borrow::Cow::Borrowed(one.as_str()),
            parts => std::borrow::Cow::Owned(parts.concat()),
        })
        .chain(std::iter::once(std::borrow::Cow::Borrowed(
            answer.text.as_str(),
        )))
}

/// Go's `strings.ToLower`: each character's simple lowercase mapping (one character, where
/// Rust's full mapping of `İ` gives two).
fn go_lower(s: &str) -> String {
    s.chars()
        .map(|c| c.to_lowercase().next().unwrap_or(c))
        .collect()
}

/// PromptKit's `argsMatch`: every expected argument present with the same string form. Args
/// that are not a JSON object have no arguments (Go's unmarshal into a map fails).
fn args_match(args: &str, expected: &Map<String, Value>) -> bool {
    let parsed: Map<String, Value> = match serde_json::from_str(args) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    expected.iter().all(|(k, want)| {
        parsed
            .get(k)
            .is_some_and(|got| go_string(got) == go_string(want))
    })
}

/// A JSON value as Go's `fmt.Sprintf("%v", v)` prints what `encoding/json` decoded it into
/// (PromptKit's `asString`): strings as they are, numbers as float64 (`%g`, shortest: `3`,
/// `2.5`, `1e+06`), `<nil>`, `map[k:v …]` with sorted keys, `[a b]`.
pub fn go_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_float(n.as_f64().unwrap_or(f64::NAN)),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(go_string).collect();
            format!("[{}]", inner.join(" "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_string(&m[k.as_str()])))
                .collect();
            format!("map[{}]", inner.join(" "))
        }
    }
}

/// Go's `%v` of a float64, `strconv.FormatFloat(f, 'g', -1, 64)`: the shortest digits that
/// read back, in exponent form when the decimal exponent is below -4 or at least 6 (the
/// shortest form's `%g` precision), with at least two exponent digits.
fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the shortest digits that read back: `1.5e6`, `-2e-7`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    // Plain digits: Rust's `{}` of f64 is the shortest form without an exponent.
    format!("{f}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::delta::{Message, ToolCall};
    use serde_json::json;

    fn conv(assistant: &[&str]) -> Conversation {
        let mut messages = Vec::new();
        for a in assistant {
            messages.push(Message::text(Role::User, vec!["q".into()]));
            messages.push(Message::text(Role::Assistant, vec![(*a).into()]));
        }
        messages.push(Message::text(Role::User, vec!["q".into()]));
        Conversation {
            messages,
            tools: Vec::new(),
        }
    }

    fn answer(text: &str) -> Answer {
        Answer {
            text: text.into(),
            tool_calls: Vec::new(),
        }
    }

    #[test]
    fn excludes_and_contains_any_read_every_assistant_message() {
        let c = conv(&["We are open Monday to Friday."]);
        let ex = TranscriptRule::excludes(vec!["monday".into()], false).unwrap();
        assert_eq!(ex.score(&c, &answer("No weekend support.")), 0.0);
        assert_eq!(ex.score(&conv(&[]), &answer("No weekend support.")), 1.0);
        let any = TranscriptRule::ContainsAny {
            patterns: vec!["FRIDAY".into(), "nope".into()],
        };
        assert_eq!(any.score(&c, &answer("No weekend support.")), 1.0);
        assert_eq!(any.score(&conv(&["hi"]), &answer("bye")), 0.0);
        // The user's words are not the assistant's.
        let mut user_said = conv(&[]);
        user_said.messages[0].text = vec!["monday".into()];
        assert_eq!(ex.score(&user_said, &answer("ok")), 1.0);
    }

    #[test]
    fn word_boundaries_are_ascii_as_in_go() {
        let ex = TranscriptRule::excludes(vec!["cat".into()], true).unwrap();
        let c = conv(&[]);
        assert_eq!(ex.score(&c, &answer("a CAT sat")), 0.0);
        assert_eq!(ex.score(&c, &answer("concatenate")), 1.0);
        // `é` is no ASCII word character: Go's `\b` sees a boundary before `cat`.
        assert_eq!(ex.score(&c, &answer("écat")), 0.0);
    }

    #[test]
    fn contains_scores_the_share_of_patterns_in_the_answer_only() {
        let all = TranscriptRule::ContainsAll {
            patterns: vec!["a".into(), "zz".into()],
        };
        assert_eq!(all.score(&conv(&["zz"]), &answer("abc")), 0.5);
    }

    #[test]
    fn tool_args_passes_when_one_call_matches_by_string_form() {
        let mut c = conv(&[""]);
        c.messages[1].tool_calls.push(ToolCall {
            id: None,
            name: "get_weather".into(),
            arguments: r#"{"city":"Rome","days":3}"#.into(),
        });
        let rule = |expected: Value| TranscriptRule::ToolArgs {
            tool: "get_weather".into(),
            expected: expected.as_object().unwrap().clone(),
        };
        let a = Answer {
            text: String::new(),
            tool_calls: vec![("get_weather".into(), r#"{"city":"Paris"}"#.into())],
        };
        assert_eq!(rule(json!({"city": "Rome"})).score(&c, &a), 1.0);
        assert_eq!(rule(json!({"city": "Paris"})).score(&c, &a), 1.0);
        assert_eq!(rule(json!({"days": "3"})).score(&c, &a), 1.0);
        assert_eq!(rule(json!({"city": "Oslo"})).score(&c, &a), 0.0);
        let never = TranscriptRule::ToolArgs {
            tool: "other".into(),
            expected: json!({"x": 1}).as_object().unwrap().clone(),
        };
        assert_eq!(never.score(&c, &a), 0.0);
    }

    /// Each expectation is what Go 1.19's `fmt.Sprintf("%v", v)` printed for the value
    /// `encoding/json` decoded.
    #[test]
    fn values_print_as_go_prints_them() {
        let cases = [
            (json!(3), "3"),
            (json!(2.5), "2.5"),
            (json!(1000000), "1e+06"),
            (json!(123456), "123456"),
            (json!(1234567), "1.234567e+06"),
            (json!(0.0001), "0.0001"),
            (json!(0.00001), "1e-05"),
            (json!(-0.5), "-0.5"),
            (json!(1e21), "1e+21"),
            (json!(123456.5), "123456.5"),
            (json!(null), "<nil>"),
            (json!(true), "true"),
            (json!([1, "a"]), "[1 a]"),
            (json!({"b": 1, "a": [true]}), "map[a:[true] b:1]"),
        ];
        for (v, want) in cases {
            assert_eq!(go_string(&v), want, "{v}");
        }
    }
}
