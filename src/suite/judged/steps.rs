//! G-Eval's first phase: when a metric has no `evaluation_steps`, the judge writes 3–4 from
//! its `criteria` (DeepEval's `generate_evaluation_steps` prompt), once per metric and run
//! (before any case is scored); the steps are then shown in every case's prompt and in the
//! reports. A reply without a usable list of steps fails the metric on every case.

use super::deepeval::json_object;
use super::Param;
use serde_json::Value;

/// The most steps a reply may hold, and the longest step (characters).
pub const MAX_STEPS: usize = 12;
pub const MAX_STEP_CHARS: usize = 2000;

/// DeepEval's list of parameters: "A", "A and B", "A, B, and C".
pub fn parameters(params: &[Param]) -> String {
    let names: Vec<&str> = params.iter().map(|p| p.title()).collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [a, b] => format!("{a} and {b}"),
        [init @ .., last] => format!("{}, and {last}", init.join(", ")),
    }
}

/// DeepEval's prompt for the steps.
pub fn prompt(criteria: &str, params: &[Param]) -> String {
    let parameters = parameters(params);
    format!(
        r#"Given an evaluation criteria which outlines how you should judge the {parameters}, generate 3-4 concise evaluation steps based on the criteria below. You MUST make it clear how to evaluate {parameters} in relation to one another.

Evaluation Criteria:
{criteria}

**
IMPORTANT: Please make sure to only return in JSON format, with the "steps" key as a list of strings. No words or explanation is needed.
Example JSON:
{{
  "steps": <list_of_strings>
}}
**

JSON:"#
    )
}

/// The steps of a reply (`{"steps": ["…", …]}`): 1 to [`MAX_STEPS`] non-empty strings, each
/// at most [`MAX_STEP_CHARS`] characters; anything else is an error.
pub fn read(text: &str) -> Result<Vec<String>, String> {
    let obj = json_object(text)?;
    let Some(Value::Array(items)) = obj.get("steps") else {
        return Err("the reply has no `steps` list".into());
    };
    if items.is_empty() || items.len() > MAX_STEPS {
        return Err(format!(
            "the reply has {} steps, not 1 to {MAX_STEPS}",
            items.len()
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Value::String(s) if !s.trim().is_empty() => {
                if s.chars().count() > MAX_STEP_CHARS {
                    Err(format!(
                        "step {} is over {MAX_STEP_CHARS} characters",
                        i + 1
                    ))
                } else {
                    Ok(s.trim().to_owned())
                }
            }
            _ => Err(format!("step {} is not a non-empty string", i + 1)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_prompt_names_the_parameters_as_deepeval() {
        assert_eq!(parameters(&[Param::ActualOutput]), "Actual output");
        assert_eq!(
            parameters(&[Param::Input, Param::ActualOutput]),
            "Input and Actual output"
        );
        assert_eq!(
            parameters(&[Param::Input, Param::ActualOutput, Param::ExpectedOutput]),
            "Input, Actual output, and Expected output"
        );
        let p = prompt("Be right.", &[Param::ActualOutput]);
        assert!(p.starts_with("Given an evaluation criteria which outlines how you should judge the Actual output, generate 3-4"));
        assert!(p.contains("Evaluation Criteria:\nBe right.\n"));
    }

    #[test]
    fn steps_are_read_strictly() {
        assert_eq!(
            read("```json\n{\"steps\": [\" Check A \", \"Check B\"]}\n```").unwrap(),
            ["Check A", "Check B"]
        );
        let long = format!("{{\"steps\": [\"{}\"]}}", "x".repeat(MAX_STEP_CHARS + 1));
        let many = format!("{{\"steps\": {:?}}}", vec!["s"; MAX_STEPS + 1]);
        for (bad, why) in [
            ("I cannot help with that.", "no JSON object"),
            ("{\"step\": [\"a\"]}", "no `steps` list"),
            ("{\"steps\": \"a\"}", "no `steps` list"),
            ("{\"steps\": []}", "0 steps"),
            (
                "{\"steps\": [\"a\", \" \"]}",
                "step 2 is not a non-empty string",
            ),
            ("{\"steps\": [1]}", "step 1 is not"),
            (long.as_str(), "over 2000 characters"),
            (many.as_str(), "13 steps"),
        ] {
            let e = read(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
