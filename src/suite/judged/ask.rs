//! What a judged metric asks the judge, call by call: the content shown (the question, the
//! context, the answer, as the metric reads them) and the criteria, in guardwire's own words of
//! each metric's definition (docs/metrics.md).

use super::{Kind, Param, Spec};
use crate::policy::judged::Scale;
use crate::suite::needs::CaseView;

/// The judge call of a metric scored by one verdict.
pub struct Ask {
    pub criteria: String,
    pub content: String,
    pub scale: Scale,
}

/// The question of a case: its text input, or the last user message's text.
pub fn query_of(case: &CaseView<'_>) -> String {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(case.input) else {
        return case.input.to_owned();
    };
    let messages = match &v {
        serde_json::Value::Array(m) => m,
        serde_json::Value::Object(o) => match o.get("messages").and_then(|m| m.as_array()) {
            Some(m) => m,
            None => return case.input.to_owned(),
        },
        _ => return case.input.to_owned(),
    };
    let text_of = |c: &serde_json::Value| -> Option<String> {
        match c {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Array(parts) => Some(
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            _ => None,
        }
    };
    messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(|r| r.as_str()) == Some("user"))
        .and_then(|m| m.get("content").and_then(text_of))
        .unwrap_or_else(|| case.input.to_owned())
}

/// The sentences of `text` (after `.`, `!` or `?` and white space, or a line break), for
/// contextual recall.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            out.push(std::mem::take(&mut current));
            continue;
        }
        current.push(c);
        if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|n| n.is_whitespace()) {
            out.push(std::mem::take(&mut current));
        }
    }
    out.push(current);
    out.into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

fn numbered(chunks: &[String]) -> String {
    chunks
        .iter()
        .enumerate()
        .map(|(i, c)| format!("[{}] {c}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

const ONE_TO_FIVE: &str = "Score 5 when it fully meets the criteria, 1 when it does not at all.";

/// The call `spec` makes on `case` (its criteria are guardwire's own wording of each metric's
/// definition; see docs/metrics.md). The contextual metrics ask for lists of verdicts instead
/// (deepeval.rs): `None`.
pub fn ask(spec: &Spec, case: &CaseView<'_>) -> Option<Ask> {
    let query = query_of(case);
    let output = case.output.unwrap_or_default().to_owned();
    let expected = case.expected.unwrap_or_default().to_owned();
    let context = case.context.unwrap_or_default();
    let one = |criteria: &str, content: String| Ask {
        criteria: format!("{criteria} {ONE_TO_FIVE}"),
        content,
        scale: Scale::OneToFive,
    };
    Some(match spec.kind {
        Kind::ContextualRelevancy
        | Kind::ContextualPrecision
        | Kind::ContextualRecall
        | Kind::Faithfulness
        | Kind::AnswerRelevancy => return None,
        Kind::Groundedness => one(
            "Groundedness: every claim of the Response is supported by the Context; a claim the Context does not support, or contradicts, lowers the score.",
            format!("Query:\n{query}\n\nContext:\n{}\n\nResponse:\n{output}", numbered(context)),
        ),
        Kind::Relevance => one(
            "Relevance: the Response answers the Query, accurately and completely, without unrelated material.",
            format!("Query:\n{query}\n\nResponse:\n{output}"),
        ),
        Kind::Coherence => one(
            "Coherence: the Response reads as a logical, well-ordered whole whose ideas connect and answer the Query.",
            format!("Query:\n{query}\n\nResponse:\n{output}"),
        ),
        Kind::Fluency => one(
            "Fluency: the Response is grammatical, with varied, precise vocabulary and sentences that read naturally.",
            format!("Response:\n{output}"),
        ),
        Kind::Similarity => one(
            "Similarity: the Response conveys the same information as the Ground truth, for the Query.",
            format!("Query:\n{query}\n\nGround truth:\n{expected}\n\nResponse:\n{output}"),
        ),
        Kind::GEval => {
            let mut content = String::new();
            for p in &spec.evaluation_params {
                let text = match p {
                    Param::Input => query.clone(),
                    Param::ActualOutput => output.clone(),
                    Param::ExpectedOutput => expected.clone(),
                    Param::Context | Param::RetrievalContext => numbered(context),
                };
                content.push_str(&format!("{}:\n{text}\n\n", p.title()));
            }
            let names: Vec<&str> = spec.evaluation_params.iter().map(|p| p.title()).collect();
            let scale_text = if spec.strict_mode {
                "Score 1 only if the content fully meets the criteria, else 0."
            } else {
                ONE_TO_FIVE
            };
            Ask {
                criteria: format!(
                    "{} (judged on: {}) {scale_text}",
                    spec.criteria,
                    names.join(", ")
                ),
                content: content.trim_end().to_owned(),
                scale: if spec.strict_mode {
                    Scale::Unit
                } else {
                    Scale::OneToFive
                },
            }
        }
    })
}
