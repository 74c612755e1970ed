//! DeepEval's contextual metrics, per statement and per node: the prompts (DeepEval's
//! `generate_verdicts` templates, text only), the judge's list of yes/no verdicts read strictly
//! (a reply that is not one fails the metric), and DeepEval's formulas.
//!
//! - contextual relevancy: one call per retrieval-context node; the judge extracts the node's
//!   statements and gives each a verdict; the score is relevant statements ÷ all statements.
//! - contextual precision: one call per case; a verdict per node, in order (exactly as many as
//!   nodes); the score is DeepEval's weighted cumulative precision.
//! - contextual recall: one call per case; a verdict per sentence of the expected output (cut by
//!   [`super::sentences`], numbered in the prompt, exactly as many verdicts); the score is
//!   attributable sentences ÷ sentences.

use serde_json::Value;

/// The system message of these calls (DeepEval's prompts are user messages; the reply shape
/// is in each).
pub const SYSTEM: &str =
    "You are an impartial evaluation judge. Reply with a JSON object only, no other text.";

/// The most verdicts one reply may hold (a node's statements).
pub const MAX_VERDICTS_PER_REPLY: usize = 256;

/// One of the judge's verdicts.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub yes: bool,
    /// Contextual relevancy: the statement the judge extracted.
    pub statement: Option<String>,
    pub reason: Option<String>,
}

/// How many verdicts a reply must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// One per node or sentence shown.
    Exactly(usize),
    /// A node's statements, as many as the judge found (at least one: DeepEval's prompt asks
    /// for a "no" verdict on a node without statements).
    Statements,
}

/// The verdicts of a reply: `{"verdicts": [{"verdict": "yes"|"no", "reason": …,
/// "statement": …}]}` (the JSON object from the first `{` to the last `}`); anything else —
/// no object, no list, a verdict other than yes or no, a missing statement, the wrong number
/// of verdicts — is an error.
pub fn read(text: &str, count: Count) -> Result<Vec<Verdict>, String> {
    let obj = json_object(text)?;
    let Some(Value::Array(items)) = obj.get("verdicts") else {
        return Err("the reply has no `verdicts` list".into());
    };
    let (statements, ok) = match count {
        Count::Exactly(n) => (false, items.len() == n),
        Count::Statements => (true, (1..=MAX_VERDICTS_PER_REPLY).contains(&items.len())),
    };
    if !ok {
        return Err(match count {
            Count::Exactly(n) => format!("the reply has {} verdicts, not {n}", items.len()),
            Count::Statements => format!(
                "the reply has {} verdicts, not 1 to {MAX_VERDICTS_PER_REPLY}",
                items.len()
            ),
        });
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let n = i + 1;
            let Value::Object(v) = item else {
                return Err(format!("verdict {n} is not an object"));
            };
            let yes = match v
                .get("verdict")
                .and_then(Value::as_str)
                .map(|s| s.trim().to_ascii_lowercase())
            {
                Some(s) if s == "yes" => true,
                Some(s) if s == "no" => false,
                _ => return Err(format!("verdict {n}: `verdict` is not \"yes\" or \"no\"")),
            };
            let text = |key: &str| -> Result<Option<String>, String> {
                match v.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => {
                        Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty()))
                    }
                    Some(_) => Err(format!("verdict {n}: `{key}` is not a string")),
                }
            };
            let statement = text("statement")?;
            if statements && statement.is_none() {
                return Err(format!("verdict {n} has no `statement`"));
            }
            Ok(Verdict {
                yes,
                statement,
                reason: text("reason")?,
            })
        })
        .collect()
}

/// The JSON object of a reply (a judge may wrap it in prose or a code fence).
pub fn json_object(text: &str) -> Result<serde_json::Map<String, Value>, String> {
    match (text.find('{'), text.rfind('}')) {
        (Some(start), Some(end)) if start < end => {
            match serde_json::from_str::<Value>(&text[start..=end]) {
                Ok(Value::Object(o)) => Ok(o),
                _ => Err("the reply's JSON object cannot be read".into()),
            }
        }
        _ => Err("the reply holds no JSON object".into()),
    }
}

/// Relevancy and recall: the share of "yes" (0 without verdicts, as DeepEval).
pub fn share_yes(verdicts: &[bool]) -> f64 {
    if verdicts.is_empty() {
        return 0.0;
    }
    verdicts.iter().filter(|v| **v).count() as f64 / verdicts.len() as f64
}

/// DeepEval's contextual precision: for each relevant node at rank k (1-based), the precision
/// at k (relevant nodes among the first k ÷ k); their sum ÷ the relevant nodes (0 when none).
pub fn weighted_precision(verdicts: &[bool]) -> f64 {
    let (mut relevant, mut sum) = (0u32, 0.0);
    for (i, hit) in verdicts.iter().enumerate() {
        if *hit {
            relevant += 1;
            sum += f64::from(relevant) / (i as f64 + 1.0);
        }
    }
    if relevant == 0 {
        0.0
    } else {
        sum / f64::from(relevant)
    }
}

/// The nodes of the retrieval context, numbered from 1.
fn nodes(context: &[String]) -> String {
    context
        .iter()
        .enumerate()
        .map(|(i, c)| format!("[{}] {c}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

/// DeepEval's contextual relevancy prompt for one node.
pub fn relevancy_prompt(input: &str, node: &str) -> String {
    format!(
        r#"Based on the input and context, please generate a JSON object to indicate whether each statement found in the context is relevant to the provided input. The JSON will be a list of 'verdicts', with 2 mandatory fields: 'verdict' and 'statement', and 1 optional field: 'reason'.
You should first extract statements found in the context, which are high level information found in the context, before deciding on a verdict and optionally a reason for each statement.
The 'verdict' key should STRICTLY be either 'yes' or 'no', and states whether the statement is relevant to the input.
Provide a 'reason' ONLY IF verdict is no. You MUST quote the irrelevant parts of the statement to back up your reason.
If provided context contains no actual content or statements then: give "no" as a "verdict",
put context into "statement", and "No statements found in provided context." into "reason".
**
IMPORTANT: Please make sure to only return in JSON format.
Example Context: "Einstein won the Nobel Prize for his discovery of the photoelectric effect. He won the Nobel Prize in 1968. There was a cat."
Example Input: "What were some of Einstein's achievements?"

Example:
{{
  "verdicts": [
    {{
      "statement": "Einstein won the Nobel Prize for his discovery of the photoelectric effect in 1968",
      "verdict": "yes"
    }},
    {{
      "statement": "There was a cat.",
      "reason": "The retrieval context contained the information 'There was a cat' when it has nothing to do with Einstein's achievements.",
      "verdict": "no"
    }}
  ]
}}
**

Input:
{input}

Context:
{node}

JSON:"#
    )
}

/// DeepEval's contextual precision prompt: a verdict per node, in order.
pub fn precision_prompt(input: &str, expected: &str, context: &[String]) -> String {
    let n = context.len();
    format!(
        r#"Given the input, expected output, and retrieval context, please generate a list of JSON objects to determine whether each node in the retrieval context was remotely useful in arriving at the expected output.

**
IMPORTANT: Please make sure to only return in JSON format, with the 'verdicts' key as a list of JSON. These JSON only contain the `verdict` key that outputs only 'yes' or 'no', and a `reason` key to justify the verdict. In your reason, you should aim to quote parts of the context.
Example Retrieval Context: ["Einstein won the Nobel Prize for his discovery of the photoelectric effect", "He won the Nobel Prize in 1968.", "There was a cat."]
Example Input: "Who won the Nobel Prize in 1968 and for what?"
Example Expected Output: "Einstein won the Nobel Prize in 1968 for his discovery of the photoelectric effect."

Example:
{{
  "verdicts": [
    {{
      "reason": "It clearly addresses the question by stating that 'Einstein won the Nobel Prize for his discovery of the photoelectric effect.'",
      "verdict": "yes"
    }},
    {{
      "reason": "The text verifies that the prize was indeed won in 1968.",
      "verdict": "yes"
    }},
    {{
      "reason": "'There was a cat' is not at all relevant to the topic of winning a Nobel Prize.",
      "verdict": "no"
    }}
  ]
}}
Since you are going to generate a verdict for each context, the number of 'verdicts' SHOULD BE STRICTLY EQUAL to that of the contexts ({n}), in their order.
**

Input:
{input}

Expected output:
{expected}

Retrieval Context ({n} document{s}):
{nodes}

JSON:"#,
        s = if n == 1 { "" } else { "s" },
        nodes = nodes(context),
    )
}

/// DeepEval's contextual recall prompt, the expected output's sentences numbered (guardwire
/// cuts them, so the number of verdicts is known).
pub fn recall_prompt(sentences: &[String], context: &[String]) -> String {
    let n = sentences.len();
    let numbered = sentences
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}. {s}", i + 1))
        .collect::<Vec<_>>()
        .join("\n");
    format!(
        r#"For EACH sentence in the given expected output below, determine whether the sentence can be attributed to the nodes of retrieval contexts. Please generate a list of JSON with two keys: `verdict` and `reason`.
The `verdict` key should STRICTLY be either a 'yes' or 'no'. Answer 'yes' if the sentence can be attributed to any parts of the retrieval context, else answer 'no'.
The `reason` key should provide a reason why to the verdict. In the reason, you should aim to include the node(s) count in the retrieval context (eg., 1st node, and 2nd node in the retrieval context) that is attributed to said sentence. You should also aim to quote the specific part of the retrieval context to justify your verdict, but keep it extremely concise and cut short the quote with an ellipsis if possible.

**
IMPORTANT: Please make sure to only return in JSON format, with the 'verdicts' key as a list of JSON objects, each with two keys: `verdict` and `reason`.

{{
  "verdicts": [
    {{
      "reason": "...",
      "verdict": "yes"
    }},
    ...
  ]
}}

Since you are going to generate a verdict for each sentence, the number of 'verdicts' SHOULD BE STRICTLY EQUAL to the number of sentences in `expected output` ({n}, numbered below), in their order.
**

Expected Output:
{numbered}

Retrieval Context:
{nodes}

JSON:"#,
        nodes = nodes(context),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn weighted_precision_is_deepevals() {
        let p = |v: &[u8]| weighted_precision(&v.iter().map(|x| *x == 1).collect::<Vec<_>>());
        // Hand-computed: relevant at ranks 1 and 3: (1/1 + 2/3) / 2.
        assert!((p(&[1, 0, 1]) - 5.0 / 6.0).abs() < 1e-12);
        // Ranks 2 and 3: (1/2 + 2/3) / 2 = 7/12.
        assert!((p(&[0, 1, 1]) - 7.0 / 12.0).abs() < 1e-12);
        // Rank 4 of 4: 1/4.
        assert!((p(&[0, 0, 0, 1]) - 0.25).abs() < 1e-12);
        // Ranks 1, 2, 4 of 5: (1 + 1 + 3/4) / 3 = 11/12.
        assert!((p(&[1, 1, 0, 1, 0]) - 11.0 / 12.0).abs() < 1e-12);
        assert_eq!(p(&[1, 1]), 1.0);
        assert_eq!(p(&[0, 0]), 0.0);
        assert_eq!(p(&[]), 0.0);
        // The same relevant nodes ranked later score lower: the weighting is by rank.
        assert!(p(&[1, 1, 0, 0]) > p(&[0, 0, 1, 1]));
    }

    #[test]
    fn shares_of_yes() {
        assert_eq!(share_yes(&[true, false, false, true]), 0.5);
        assert!((share_yes(&[true, true, false]) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(share_yes(&[]), 0.0);
    }

    #[test]
    fn verdict_lists_are_read_strictly() {
        let v = read(
            "Here: ```json\n{\"verdicts\": [{\"verdict\": \" Yes\", \"reason\": \"r\"}, {\"verdict\": \"no\", \"reason\": null}]}\n```",
            Count::Exactly(2),
        )
        .unwrap();
        assert_eq!(
            v,
            [
                Verdict {
                    yes: true,
                    statement: None,
                    reason: Some("r".into())
                },
                Verdict {
                    yes: false,
                    statement: None,
                    reason: None
                },
            ]
        );
        let s = read(
            r#"{"verdicts": [{"statement": "Paris is the capital.", "verdict": "yes"}]}"#,
            Count::Statements,
        )
        .unwrap();
        assert_eq!(s[0].statement.as_deref(), Some("Paris is the capital."));
        for (bad, count, why) in [
            ("no json", Count::Exactly(1), "no JSON object"),
            ("{\"score\": 1}", Count::Exactly(1), "no `verdicts` list"),
            (
                r#"{"verdicts": [{"verdict": "yes"}]}"#,
                Count::Exactly(2),
                "1 verdicts, not 2",
            ),
            (
                r#"{"verdicts": [{"verdict": "maybe"}]}"#,
                Count::Exactly(1),
                "not \"yes\" or \"no\"",
            ),
            (
                r#"{"verdicts": [{"verdict": 1}]}"#,
                Count::Exactly(1),
                "not \"yes\" or \"no\"",
            ),
            (
                r#"{"verdicts": ["yes"]}"#,
                Count::Exactly(1),
                "not an object",
            ),
            (
                r#"{"verdicts": [{"verdict": "no", "reason": 3}]}"#,
                Count::Exactly(1),
                "`reason` is not a string",
            ),
            (
                r#"{"verdicts": [{"verdict": "yes"}]}"#,
                Count::Statements,
                "has no `statement`",
            ),
            (r#"{"verdicts": []}"#, Count::Statements, "0 verdicts"),
        ] {
            let e = read(bad, count).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn prompts_show_what_deepeval_shows() {
        let ctx = vec!["A.".to_owned(), "B.".to_owned()];
        let p = precision_prompt("q?", "exp", &ctx);
        assert!(p.contains("Retrieval Context (2 documents):\n[1] A.\n[2] B.\n\nJSON:"));
        assert!(p.contains("Input:\nq?\n\nExpected output:\nexp"));
        let r = recall_prompt(&["One.".into(), "Two.".into()], &ctx);
        assert!(r.contains("Expected Output:\n1. One.\n2. Two.\n\nRetrieval Context:\n[1] A."));
        assert!(r.contains("(2, numbered below)"));
        let c = relevancy_prompt("q?", "B.");
        assert!(c.ends_with("Input:\nq?\n\nContext:\nB.\n\nJSON:"));
    }
}
