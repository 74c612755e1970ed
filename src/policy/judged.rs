//! Judged checks: the validators whose verdict comes from someone else — an LLM judge
//! (`llm_judge*`), an HTTP endpoint (`rest_eval*`) or a subprocess (`exec:` handlers). Here is
//! what a pack says about them, validated at load; `crate::judge` makes the calls.
//!
//! Their verdict is a score from 0 to 1 that passes at `min_score` (default 0.5); an error
//! (deadline, transport, a reply that cannot be read) fails the check unless the validator
//! says `on_error: fail_open`.

use serde_json::{Map, Value};

/// The names a pack's judged checks may refer to, from the config: the `judges:` and the
/// `exec:` handlers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckRefs {
    pub judges: Vec<String>,
    pub exec: Vec<String>,
    /// The judges with an embeddings endpoint (not Anthropic's protocol), with their
    /// `embedding_model` if set.
    pub embedders: Vec<(String, Option<String>)>,
    /// The environment variables `${VAR}` in packs may read (`pack_env`).
    pub env: Vec<String>,
    /// Where `meteor` evals read WordNet 3.0 (`evals.wordnet_dir`); `None`: Debian's folder.
    pub wordnet_dir: Option<std::path::PathBuf>,
}

/// A judged validator's check.
#[derive(Debug, Clone)]
pub struct JudgedCheck {
    pub kind: JudgedKind,
    /// Deadline of one verdict, retries included (`timeout_ms`; `timeout` for `rest_eval`);
    /// `None`: the judge's (or handler's) own.
    pub timeout_ms: Option<u64>,
    /// Input checks: judged while the upstream call runs (`parallel: true`).
    pub parallel: bool,
    /// Streamed answers: judged window by window as they stream (`window:`), each released
    /// once it passes; `None`: the whole answer is held and judged at its end.
    pub window: Option<Window>,
}

/// Where a streamed answer is cut for judging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// After `.`, `!` or `?` and the white space that follows, or after a line break.
    Sentence,
    /// At a blank line.
    Paragraph,
    /// Every this many characters.
    Chars(usize),
}

impl Window {
    /// The end (byte offset) of the last complete window in `text`, if any; `text` starts at
    /// a window's start.
    pub fn last_cut(self, text: &str) -> Option<usize> {
        self.last_cut_after(text, 0, 0)
    }

    /// Like [`Window::last_cut`] when `text[..from]` (`chars_before` characters) was looked at
    /// already and holds no cut: only what follows is scanned, so a window that grows frame by
    /// frame costs its length once, not once per frame.
    pub fn last_cut_after(self, text: &str, from: usize, chars_before: usize) -> Option<usize> {
        let from = from.min(text.len());
        match self {
            Window::Paragraph => {
                // The blank line may start in what was looked at.
                let start = if from > 0 && text.as_bytes()[from - 1] == b'\n' {
                    from - 1
                } else {
                    from
                };
                text[start..].rfind("\n\n").map(|i| start + i + 2)
            }
            Window::Sentence => {
                // The white space after the sentence belongs to it (a frame that ends with
                // it is released with the sentence).
                let b = text.as_bytes();
                (from..b.len())
                    .rev()
                    .find(|&i| {
                        b[i] == b'\n'
                            || (i > 0
                                && matches!(b[i - 1], b'.' | b'!' | b'?')
                                && b[i].is_ascii_whitespace())
                    })
                    .map(|i| i + 1)
            }
            Window::Chars(n) => {
                let mut chars = chars_before;
                let mut cut = None;
                for (i, c) in text[from..].char_indices() {
                    chars += 1;
                    if chars.is_multiple_of(n) {
                        cut = Some(from + i + c.len_utf8());
                    }
                }
                cut
            }
        }
    }
}

#[derive(Debug, Clone)]
pub enum JudgedKind {
    Llm(LlmJudge),
    Rest(RestEval),
    Exec(ExecCheck),
    Similarity(Similarity),
}

/// `cosine_similarity`: the text's embedding against a reference, from a judge's embeddings
/// endpoint; the score is the cosine similarity (negative counts as 0).
#[derive(Debug, Clone)]
pub struct Similarity {
    pub judge: String,
    pub model: String,
    pub reference: Reference,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Reference {
    /// Embedded on first use, then kept.
    Text(String),
    /// PromptKit's form: the reference embedding itself.
    Vector(Vec<f64>),
}

/// What an LLM judge is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// The text under judgment: the answer (output) or the request's messages (input).
    Text,
    /// The whole conversation, the answer included (`llm_judge_session`).
    Session,
    /// The tool calls (of the answer; of the conversation on input), those named in `tools`
    /// when given (`llm_judge_tool_calls`).
    ToolCalls { tools: Vec<String> },
    /// RAG checks (`faithfulness`, `answer_relevancy`): the question (the last user message),
    /// the context the request carries (`context: Some`, faithfulness) and the answer.
    Rag { context: Option<ContextSource> },
}

/// Where a RAG check finds the retrieved context in the request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextSource {
    /// Results of these tools (`context_tools`); `Some(empty)`: of every tool.
    pub tools: Option<Vec<String>>,
    /// Messages of these roles (`context_roles`: system, user, assistant, tool).
    pub roles: Vec<String>,
    /// Messages whose `name` is one of these (`context_names`).
    pub names: Vec<String>,
}

/// How the judge's score is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// 0 to 1 (PromptKit).
    Unit,
    /// 1 to 5, normalised to 0–1 as (s − 1) / 4 (G-Eval).
    OneToFive,
}

#[derive(Debug, Clone)]
pub struct LlmJudge {
    /// The `judges:` entry asked.
    pub judge: String,
    pub criteria: String,
    pub rubric: Option<String>,
    pub system_prompt: Option<String>,
    /// Overrides the judge's model.
    pub model: Option<String>,
    /// G-Eval: the steps the judge follows, listed in the prompt.
    pub evaluation_steps: Vec<String>,
    pub scale: Scale,
    pub judged: Judged,
}

#[derive(Debug, Clone)]
pub struct RestEval {
    /// `scheme://authority` and the path and query, from `url`.
    pub base: crate::config::BaseUrl,
    pub path_and_query: String,
    pub method: http::Method,
    /// Values may hold `${VAR}`: expanded from the environment per call (unset: empty).
    pub headers: Vec<(http::HeaderName, String)>,
    pub include_messages: bool,
    pub include_tool_calls: bool,
    pub criteria: Option<String>,
    /// Sent under `extra`.
    pub extra: Option<Value>,
    /// The assistant messages of the conversation, answer included (`rest_eval_session`).
    pub session: bool,
    /// `a2a_eval*`: the body goes to an A2A agent as the context of a JSON-RPC `message/send`.
    pub a2a: bool,
}

#[derive(Debug, Clone)]
pub struct ExecCheck {
    /// The `exec:` handler.
    pub handler: String,
    /// The validator's own params, passed on stdin.
    pub params: Map<String, Value>,
}

/// Parses a Go-style duration (`30s`, `500ms`, `1m30s`, `1.5s`) into milliseconds.
pub fn go_duration_ms(text: &str) -> Option<u64> {
    let mut total = 0.0f64;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let ms = match &rest[..unit_len] {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            _ => return None,
        };
        total += value * ms;
        rest = &rest[unit_len..];
    }
    (total.is_finite() && total >= 1.0).then_some(total.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::{go_duration_ms, Window};

    #[test]
    fn window_cuts() {
        for (window, text, cut) in [
            (Window::Sentence, "One. Two", Some(5)),
            (Window::Sentence, "One. Two! Thr", Some(10)),
            (Window::Sentence, "One.", None),
            (Window::Sentence, "3.5 apples", None),
            (Window::Sentence, "line\nnext", Some(5)),
            (Window::Paragraph, "a\n\nb\n\nc", Some(6)),
            (Window::Paragraph, "a\nb", None),
            (Window::Chars(3), "abcdefg", Some(6)),
            (Window::Chars(3), "ab", None),
            (Window::Chars(2), "ééé", Some(4)),
        ] {
            assert_eq!(window.last_cut(text), cut, "{window:?} {text:?}");
        }
    }

    /// The windows an answer streamed in `pieces` is cut into, fed as the stream feeds them:
    /// incrementally (`last_cut_after`) or by rescanning the open window (`last_cut`).
    fn cuts(window: Window, pieces: &[String], incremental: bool) -> Vec<String> {
        let (mut open, mut scanned, mut chars, mut out) = (String::new(), 0, 0, Vec::new());
        for p in pieces {
            open.push_str(p);
            let cut = if incremental {
                window.last_cut_after(&open, scanned, chars)
            } else {
                window.last_cut(&open)
            };
            match cut {
                Some(cut) => {
                    out.push(open.drain(..cut).collect());
                    scanned = open.len();
                    chars = open.chars().count();
                }
                None => {
                    chars += open[scanned..].chars().count();
                    scanned = open.len();
                }
            }
        }
        out.push(open);
        out
    }

    proptest::proptest! {
        #[test]
        fn incremental_cuts_are_the_rescanning_cuts(
            pieces in proptest::collection::vec("[a. !?\n\u{e9}]{0,7}", 0..40),
            n in 1usize..6,
        ) {
            for window in [Window::Sentence, Window::Paragraph, Window::Chars(n)] {
                proptest::prop_assert_eq!(
                    cuts(window, &pieces, true),
                    cuts(window, &pieces, false),
                    "{:?}", window
                );
            }
        }
    }

    #[test]
    fn go_durations() {
        for (text, ms) in [
            ("30s", Some(30_000)),
            ("500ms", Some(500)),
            ("1m30s", Some(90_000)),
            ("1.5s", Some(1_500)),
            ("2h", Some(7_200_000)),
            ("", None),
            ("10", None),
            ("5x", None),
            ("0s", None),
            ("s", None),
        ] {
            assert_eq!(go_duration_ms(text), ms, "{text}");
        }
    }
}
