//! DeepEval's faithfulness and answer relevancy, the two metrics HoloDeck's RAG evaluations
//! name besides the contextual ones: the answer broken into claims (statements), each given a
//! verdict by the judge — yes, no or idk — and DeepEval's formula, the share of verdicts that
//! are not "no" (1 when there is nothing to judge).
//!
//! - faithfulness: three calls — the truths of the retrieval context (`generate_truths`), the
//!   claims of the answer (`generate_claims`), a verdict per claim against the truths
//!   (`generate_verdicts`: does the claim contradict them?);
//! - answer relevancy: two calls — the statements of the answer (`generate_statements`), a
//!   verdict per statement against the input (`generate_verdicts`: is it relevant?).
//!
//! The prompts are DeepEval's text-only templates (deepeval/metrics/*/templates), with the
//! lists numbered and counted (DeepEval prints Python's list) so that the number of verdicts
//! is known and a reply with another number fails the metric, as every other list reply here.

use super::deepeval::{json_object, SYSTEM};
use super::{query_of, shown_fits, Judgement, Kind, Runner, Spec, MAX_CALLS_PER_CASE};
use crate::suite::needs::CaseView;
use serde_json::Value;

/// The most claims, statements or truths one reply may hold.
const MAX_ITEMS: usize = MAX_CALLS_PER_CASE * 4;

/// A claim's or statement's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said {
    Yes,
    No,
    Idk,
}

/// DeepEval's score: verdicts that are not "no" ÷ verdicts; 1 without verdicts.
pub fn share_not_no(verdicts: &[Said]) -> f64 {
    if verdicts.is_empty() {
        return 1.0;
    }
    let kept = verdicts.iter().filter(|v| **v != Said::No).count();
    kept as f64 / verdicts.len() as f64
}

/// `{"<key>": ["…", …]}`: the list of strings of a reply (empty strings dropped); anything
/// else is an error.
pub fn read_list(text: &str, key: &str) -> Result<Vec<String>, String> {
    let obj = json_object(text)?;
    let Some(Value::Array(items)) = obj.get(key) else {
        return Err(format!("the reply has no `{key}` list"));
    };
    if items.len() > MAX_ITEMS {
        return Err(format!(
            "the reply has {} {key}, over {MAX_ITEMS}",
            items.len()
        ));
    }
    items
        .iter()
        .enumerate()
        .filter_map(|(i, v)| match v {
            Value::String(s) if s.trim().is_empty() => None,
            Value::String(s) => Some(Ok(s.trim().to_owned())),
            _ => Some(Err(format!("{key} {} is not a string", i + 1))),
        })
        .collect()
}

/// `{"verdicts": [{"verdict": "yes"|"no"|"idk", "reason": …}]}` with exactly `n` verdicts.
pub fn read_verdicts(text: &str, n: usize) -> Result<Vec<(Said, Option<String>)>, String> {
    let obj = json_object(text)?;
    let Some(Value::Array(items)) = obj.get("verdicts") else {
        return Err("the reply has no `verdicts` list".into());
    };
    if items.len() != n {
        return Err(format!("the reply has {} verdicts, not {n}", items.len()));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let k = i + 1;
            let Value::Object(v) = item else {
                return Err(format!("verdict {k} is not an object"));
            };
            let said = match v
                .get("verdict")
                .and_then(Value::as_str)
                .map(|s| s.trim().to_ascii_lowercase())
                .as_deref()
            {
                Some("yes") => Said::Yes,
                Some("no") => Said::No,
                Some("idk") => Said::Idk,
                _ => {
                    return Err(format!(
                        "verdict {k}: `verdict` is not \"yes\", \"no\" or \"idk\""
                    ))
                }
            };
            let reason = match v.get("reason") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
                Some(_) => return Err(format!("verdict {k}: `reason` is not a string")),
            };
            Ok((said, reason))
        })
        .collect()
}

/// `items` numbered from 1, one per line.
fn numbered(items: &[String]) -> String {
    items
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}. {s}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

/// DeepEval's `generate_truths` (faithfulness; no extraction limit).
pub fn truths_prompt(context: &[String]) -> String {
    format!(
        r#"Based on the given text, please generate a comprehensive list of FACTUAL, undisputed truths, that can inferred from the provided text.
These truths, MUST BE COHERENT. They must NOT be taken out of context.

Example:
Example Text: 
"Albert Einstein, the genius often associated with wild hair and mind-bending theories, famously won the Nobel Prize in Physics—though not for his groundbreaking work on relativity, as many assume. Instead, in 1968, he was honored for his discovery of the photoelectric effect, a phenomenon that laid the foundation for quantum mechanics."

Example JSON: 
{{
  "truths": [
    "Einstein won the noble prize for his discovery of the photoelectric effect in 1968.",
    "The photoelectric effect is a phenomenon that laid the foundation for quantum mechanics."
  ]  
}}
===== END OF EXAMPLE ======
**
IMPORTANT: Please make sure to only return in JSON format, with the "truths" key as a list of strings. No words or explanation is needed.
Only include truths that are factual, BUT IT DOESN'T MATTER IF THEY ARE FACTUALLY CORRECT.
**

Text:
{}

JSON:"#,
        context.join("\n\n")
    )
}

/// DeepEval's `generate_claims` (faithfulness).
pub fn claims_prompt(output: &str) -> String {
    format!(
        r#"Based on the given text, please extract a comprehensive list of FACTUAL, undisputed truths, that can inferred from the provided actual AI output. 
These truths, MUST BE COHERENT, and CANNOT be taken out of context.

Example:
Example Text: 
"Albert Einstein, the genius often associated with wild hair and mind-bending theories, famously won the Nobel Prize in Physics—though not for his groundbreaking work on relativity, as many assume. Instead, in 1968, he was honored for his discovery of the photoelectric effect, a phenomenon that laid the foundation for quantum mechanics."

Example JSON: 
{{
  "claims": [
    "Einstein won the noble prize for his discovery of the photoelectric effect in 1968.",
    "The photoelectric effect is a phenomenon that laid the foundation for quantum mechanics."
  ]  
}}
===== END OF EXAMPLE ======

**
IMPORTANT: Please make sure to only return in JSON format, with the "claims" key as a list of strings. No words or explanation is needed.
Only include claims that are factual, BUT IT DOESN'T MATTER IF THEY ARE FACTUALLY CORRECT. The claims you extract should include the full context it was presented in, NOT cherry picked facts.
You should NOT include any prior knowledge, and take the text at face value when extracting claims.
You should be aware that it is an AI that is outputting these claims.
**

AI Output:
{output}

JSON:"#
    )
}

/// DeepEval's faithfulness `generate_verdicts`: a verdict per claim against the truths.
pub fn faithfulness_verdicts_prompt(claims: &[String], truths: &[String]) -> String {
    let n = claims.len();
    format!(
        r#"Based on the given claims, which is a list of strings, generate a list of JSON objects to indicate whether EACH claim contradicts any facts in the retrieval context. The JSON will have 2 fields: 'verdict' and 'reason'.
The 'verdict' key should STRICTLY be either 'yes', 'no', or 'idk', which states whether the given claim agrees with the context. 
Provide a 'reason' ONLY if the answer is 'no' or 'idk'. 
The provided claim is drawn from the actual output. Try to provide a correction in the reason using the facts in the retrieval context.

Expected JSON format:
{{
  "verdicts": [
    {{
      "verdict": "yes"
    }},
    {{
      "reason": <explanation_for_contradiction>,
      "verdict": "no"
    }},
    {{
      "reason": <explanation_for_uncertainty>,
      "verdict": "idk"
    }}
  ]
}}
**
IMPORTANT: Please make sure to only return in JSON format, with the 'verdicts' key as a list of JSON objects.
Generate ONE verdict per claim - the number of 'verdicts' MUST equal the number of claims ({n}), in their order.
'no' ONLY if the retrieval context DIRECTLY CONTRADICTS the claim; 'idk' if the context does not say.
**

Retrieval Contexts:
{}

Claims ({n}, numbered below):
{}

JSON:"#,
        truths.join("\n\n"),
        numbered(claims)
    )
}

/// DeepEval's answer relevancy `generate_statements`.
pub fn statements_prompt(output: &str) -> String {
    format!(
        r#"Given the text, breakdown and generate a list of statements presented. Ambiguous statements and single words can be considered as statements, but only if outside of a coherent statement.

Example:
Example text: 
Our new laptop model features a high-resolution Retina display for crystal-clear visuals. It also includes a fast-charging battery, giving you up to 12 hours of usage on a single charge. For security, we’ve added fingerprint authentication and an encrypted SSD. Plus, every purchase comes with a one-year warranty and 24/7 customer support.

{{
  "statements": [
    "The new laptop model has a high-resolution Retina display.",
    "It includes a fast-charging battery with up to 12 hours of usage.",
    "Security features include fingerprint authentication and an encrypted SSD.",
    "Every purchase comes with a one-year warranty.",
    "24/7 customer support is included."
  ]
}}
===== END OF EXAMPLE ======

**
IMPORTANT: Please make sure to only return in valid and parseable JSON format, with the "statements" key mapping to a list of strings. No words or explanation are needed. Ensure all strings are closed appropriately. Repair any invalid JSON before you output it.
**

Text:
{output}

JSON:"#
    )
}

/// DeepEval's answer relevancy `generate_verdicts`: a verdict per statement against the input.
pub fn relevancy_verdicts_prompt(input: &str, statements: &[String]) -> String {
    let n = statements.len();
    format!(
        r#"For the provided list of statements, determine whether each statement is relevant to address the input.
Generate JSON objects with 'verdict' and 'reason' fields.
The 'verdict' should be 'yes' (relevant), 'no' (irrelevant), or 'idk' (ambiguous/supporting information).
Provide 'reason' ONLY for 'no' or 'idk' verdicts.
The statements are from an AI's actual output.

**
IMPORTANT: Please make sure to only return in valid and parseable JSON format, with the 'verdicts' key mapping to a list of JSON objects. Ensure all strings are closed appropriately. Repair any invalid JSON before you output it.

Expected JSON format:
{{
  "verdicts": [
    {{
      "verdict": "yes"
    }},
    {{
      "reason": <explanation_for_irrelevance>,
      "verdict": "no"
    }},
    {{
      "reason": <explanation_for_ambiguity>,
      "verdict": "idk"
    }}
  ]  
}}

Generate ONE verdict per statement - number of 'verdicts' MUST equal number of statements ({n}), in their order.
'verdict' must be STRICTLY 'yes', 'no', or 'idk':
- 'yes': statement is relevant to addressing the input
- 'no': statement is irrelevant to the input  
- 'idk': statement is ambiguous (not directly relevant but could be supporting information)
Provide 'reason' ONLY for 'no' or 'idk' verdicts.
**          

Input:
{input}

Statements ({n}, numbered below):
{}

JSON:"#,
        numbered(statements)
    )
}

impl Runner {
    /// Faithfulness or answer relevancy of `case` (see the module's text).
    pub(super) fn claims(
        &self,
        spec: &Spec,
        judge: &str,
        case: &CaseView<'_>,
    ) -> Result<Judgement, String> {
        let output = case.output.unwrap_or_default();
        let list = |user: &str, key: &'static str| -> Result<Vec<String>, String> {
            shown_fits(spec, user)?;
            let read = |text: &str| read_list(text, key);
            self.tokio
                .block_on(crate::judge::reply(&self.env, judge, SYSTEM, user, &read))
                .map_err(|e| format!("metric {}: judge {judge}: {e}", spec.name))
        };
        let (items, verdicts_user, label) = match spec.kind {
            Kind::Faithfulness => {
                let context = case.context.unwrap_or_default();
                let truths = list(&truths_prompt(context), "truths")?;
                let claims = list(&claims_prompt(output), "claims")?;
                let user = faithfulness_verdicts_prompt(&claims, &truths);
                (claims, user, "claim")
            }
            _ => {
                let statements = list(&statements_prompt(output), "statements")?;
                let user = relevancy_verdicts_prompt(&query_of(case), &statements);
                (statements, user, "statement")
            }
        };
        if items.is_empty() {
            return Ok(Judgement {
                score: 1.0,
                reasoning: format!("no {label}s to judge"),
            });
        }
        let n = items.len();
        shown_fits(spec, &verdicts_user)?;
        let read = |text: &str| read_verdicts(text, n);
        let verdicts = self
            .tokio
            .block_on(crate::judge::reply(
                &self.env,
                judge,
                SYSTEM,
                &verdicts_user,
                &read,
            ))
            .map_err(|e| format!("metric {}: judge {judge}: {e}", spec.name))?;
        let lines: Vec<String> = items
            .iter()
            .zip(&verdicts)
            .enumerate()
            .map(|(i, (item, (said, reason)))| {
                let said = match said {
                    Said::Yes => "yes",
                    Said::No => "no",
                    Said::Idk => "idk",
                };
                match reason {
                    Some(r) => format!("{label} {}: {said}: {item} ({r})", i + 1),
                    None => format!("{label} {}: {said}: {item}", i + 1),
                }
            })
            .collect();
        let said: Vec<Said> = verdicts.iter().map(|(s, _)| *s).collect();
        Ok(Judgement {
            score: share_not_no(&said),
            reasoning: lines.join("\n"),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn scores_count_every_verdict_but_no() {
        use Said::*;
        assert_eq!(share_not_no(&[Yes, No, Idk, Yes]), 0.75);
        assert_eq!(share_not_no(&[No]), 0.0);
        assert_eq!(share_not_no(&[]), 1.0);
    }

    #[test]
    fn replies_are_read_strictly() {
        assert_eq!(
            read_list(
                "```json\n{\"claims\": [\"a\", \" \", \"b \"]}\n```",
                "claims"
            )
            .unwrap(),
            ["a", "b"]
        );
        assert!(read_list("{\"claims\": [1]}", "claims").is_err());
        assert!(read_list("{\"truths\": []}", "claims").is_err());
        let v = read_verdicts(
            r#"{"verdicts": [{"verdict": "IDK", "reason": "r"}, {"verdict": "yes"}]}"#,
            2,
        )
        .unwrap();
        assert_eq!(v, [(Said::Idk, Some("r".into())), (Said::Yes, None)]);
        assert!(read_verdicts(r#"{"verdicts": [{"verdict": "yes"}]}"#, 2).is_err());
        assert!(read_verdicts(r#"{"verdicts": [{"verdict": "maybe"}]}"#, 1).is_err());
    }

    #[test]
    fn prompts_show_the_lists_numbered_and_counted() {
        let p = faithfulness_verdicts_prompt(&["A.".into(), "B.".into()], &["T1.".into()]);
        assert!(p.ends_with(
            "Retrieval Contexts:\nT1.\n\nClaims (2, numbered below):\n1. A.\n2. B.\n\nJSON:"
        ));
        let r = relevancy_verdicts_prompt("q?", &["S.".into()]);
        assert!(r.ends_with("Input:\nq?\n\nStatements (1, numbered below):\n1. S.\n\nJSON:"));
        assert!(truths_prompt(&["x".into(), "y".into()]).ends_with("Text:\nx\n\ny\n\nJSON:"));
        assert!(claims_prompt("out").ends_with("AI Output:\nout\n\nJSON:"));
        assert!(statements_prompt("out").ends_with("Text:\nout\n\nJSON:"));
    }
}
