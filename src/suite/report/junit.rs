//! The JUnit XML report (`--junit FILE`) for CI systems: one test suite per run; a replay has
//! one test case per validator (failed when it blocked an exchange, with the counts and
//! example ids), one per refusal reason, one for invalid lines when there are any, and one per
//! threshold. Every text is XML-escaped; characters XML 1.0 cannot carry are replaced.

use super::Summary;
use std::fmt::Write as _;

/// `s` as XML character data or attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || matches!(c, '\u{fffe}' | '\u{ffff}') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

struct Case {
    class: String,
    name: String,
    failure: Option<(String, String)>,
}

pub fn render(s: &Summary<'_>) -> String {
    let t = s.tally;
    let mut cases = Vec::new();
    for (k, v) in &t.by_validator {
        let ids: Vec<&str> = v.examples.ids().collect();
        let detail = format!(
            "blocked {} of {} exchanges, monitored {}, redacted {}; examples: {}",
            v.blocked,
            t.exchanges,
            v.monitored,
            v.redacted,
            ids.join(", ")
        );
        cases.push(Case {
            class: format!("replay.validators.{}", k.file),
            name: format!("{} (validators[{}], {})", k.label, k.index, k.mode),
            failure: (v.blocked > 0).then(|| (format!("blocked {} exchanges", v.blocked), detail)),
        });
    }
    for (reason, (count, ex)) in &t.refusals {
        let ids: Vec<&str> = ex.ids().collect();
        cases.push(Case {
            class: "replay.refused".into(),
            name: reason.clone(),
            failure: Some((
                format!("{count} exchanges refused"),
                format!("examples: {}", ids.join(", ")),
            )),
        });
    }
    if t.invalid > 0 {
        let lines: Vec<String> = t
            .invalid_lines
            .iter()
            .map(|(l, e)| format!("line {l}: {e}"))
            .collect();
        cases.push(Case {
            class: "replay.input".into(),
            name: "invalid lines".into(),
            failure: Some((format!("{} invalid lines", t.invalid), lines.join("\n"))),
        });
    }
    for th in s.thresholds {
        cases.push(Case {
            class: "replay.thresholds".into(),
            name: th.name.clone(),
            failure: (!th.passed).then(|| {
                (
                    format!("{} is {:.4}, below {}", th.name, th.value, th.min),
                    String::new(),
                )
            }),
        });
    }
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuites name=\"guardwire eval\" tests=\"{}\" failures=\"{failures}\" errors=\"0\">",
        cases.len()
    );
    let _ = writeln!(
        o,
        "  <testsuite name=\"replay of {}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
        escape(&s.file.display().to_string()),
        cases.len()
    );
    for c in &cases {
        let _ = write!(
            o,
            "    <testcase classname=\"{}\" name=\"{}\"",
            escape(&c.class),
            escape(&c.name)
        );
        match &c.failure {
            None => o.push_str("/>\n"),
            Some((message, detail)) => {
                let _ = writeln!(
                    o,
                    ">\n      <failure message=\"{}\" type=\"guardwire\">{}</failure>\n    </testcase>",
                    escape(message),
                    escape(detail)
                );
            }
        }
    }
    o.push_str("  </testsuite>\n</testsuites>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(
            escape("<a href=\"x\">&'\u{1}\u{ffff}\n"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&apos;\u{fffd}\u{fffd}\n"
        );
    }
}
