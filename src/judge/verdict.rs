//! Reading a verdict out of a reply: the JSON object from its first `{` to its last `}` (a
//! judge may wrap it in prose or a code fence), with `score` (or, without one, `pass`),
//! `reason` (or `reasoning`) and `label`.

use super::Verdict;
use crate::policy::judged::Scale;
use serde_json::Value;

/// The verdict in `text`, or why there is none. Without `score`, a boolean `pass` (or
/// `passed`) counts as 1 or 0 when `pass_counts` (judges); `rest_eval` replies need a score.
pub fn parse(text: &str, scale: Scale, pass_counts: bool) -> Result<Verdict, String> {
    let (Some(start), Some(end)) = (text.find('{'), text.rfind('}')) else {
        return Err("the reply holds no JSON object".into());
    };
    if end < start {
        return Err("the reply holds no JSON object".into());
    }
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(&text[start..=end]) else {
        return Err("the reply's JSON object cannot be read".into());
    };
    let score = match obj.get("score") {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        None | Some(Value::Null) => None,
        Some(_) => return Err("`score` is not a number".into()),
    };
    let score = match (score, obj.get("pass").or_else(|| obj.get("passed"))) {
        (Some(s), _) => normalise(s, scale)?,
        (None, Some(Value::Bool(pass))) if pass_counts => f64::from(u8::from(*pass)),
        (None, _) => return Err("the reply has no `score`".into()),
    };
    let text_field = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| obj.get(*n).and_then(Value::as_str))
            .map(str::to_owned)
    };
    Ok(Verdict {
        score,
        reason: text_field(&["reason", "reasoning", "detail"]),
        label: text_field(&["label"]),
    })
}

/// A score on `scale` as 0–1; out of the scale's range is malformed, not clamped.
pub fn normalise(score: f64, scale: Scale) -> Result<f64, String> {
    let (lo, hi) = match scale {
        Scale::Unit => (0.0, 1.0),
        Scale::OneToFive => (1.0, 5.0),
    };
    if !score.is_finite() || score < lo || score > hi {
        return Err(format!("`score` {score} is outside {lo}–{hi}"));
    }
    Ok((score - lo) / (hi - lo))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    #[test]
    fn verdicts_are_read_tolerantly() {
        let v = parse("Sure! ```json\n{\"score\": 0.8, \"pass\": true, \"reason\": \"fine\", \"label\": \"safe\"}\n```", Scale::Unit, true).unwrap();
        assert_eq!(
            (v.score, v.reason.as_deref(), v.label.as_deref()),
            (0.8, Some("fine"), Some("safe"))
        );
        assert_eq!(
            parse("{\"pass\": false}", Scale::Unit, true).unwrap().score,
            0.0
        );
        assert_eq!(
            parse("{\"score\": \"1\"}", Scale::Unit, true)
                .unwrap()
                .score,
            1.0
        );
        assert_eq!(
            parse(
                "{\"score\": 4, \"reasoning\": \"r\"}",
                Scale::OneToFive,
                true
            )
            .unwrap()
            .score,
            0.75
        );
        assert_eq!(
            parse("{\"score\": 4}", Scale::OneToFive, true)
                .unwrap()
                .reason,
            None
        );
        for bad in [
            "no json",
            "{\"score\": 1.5}",
            "{\"score\": 0}  trailing } junk {",
            "{}",
            "{\"score\": [1]}",
            "} {",
            "{\"score\": 0}",
        ] {
            let scale = if bad == "{\"score\": 0}" {
                Scale::OneToFive
            } else {
                Scale::Unit
            };
            let r = parse(bad, scale, true);
            assert!(r.is_err(), "{bad}: {r:?}");
        }
        // `rest_eval` ignores `passed`: a score is needed.
        assert!(parse("{\"passed\": true}", Scale::Unit, false).is_err());
    }
}
