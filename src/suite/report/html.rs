//! `--html FILE` for a cases run: one self-contained page (inline CSS, no script, nothing
//! fetched) with the summary table and a `<details>` drill-down per case: input, output,
//! expected output (the text a blocking validator matched marked in the input and output), the
//! packs' verdict and each metric with its value, threshold, result and
//! the judge's reasoning (judged metrics) or the grader's account (trajectory graders).
//! Every text comes from the cases file (attacker-controlled) and is HTML-escaped; each is
//! shown up to [`MAX_SHOWN_CHARS`] characters.

use super::cases::Row;
use super::junit::escape;
use super::Threshold;
use crate::suite::cases::CaseResult;
use std::fmt::Write as _;
use std::path::Path;

/// The most characters of one text the page shows (the rest is counted, not shown).
pub const MAX_SHOWN_CHARS: usize = 16 * 1024;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}\
.pass{color:#176f2c}.fail{color:#b00020;font-weight:bold}\
details{border:1px solid #ddd;margin:.4em 0;padding:.3em .6em}\
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.4em}\
mark.blocked{background:#ffd6d6;color:#7a0010;outline:1px solid #b00020}";

/// `text` escaped, cut at [`MAX_SHOWN_CHARS`] with the rest counted.
fn shown(text: &str) -> String {
    let total = text.chars().count();
    if total <= MAX_SHOWN_CHARS {
        return escape(text);
    }
    let head: String = text.chars().take(MAX_SHOWN_CHARS).collect();
    format!(
        "{}… ({} more characters)",
        escape(&head),
        total - MAX_SHOWN_CHARS
    )
}

/// `text` as [`shown`], every occurrence of `span` (the text a blocking validator matched)
/// marked.
fn shown_marked(text: &str, span: Option<&str>) -> String {
    let Some(span) = span.filter(|s| !s.is_empty()) else {
        return shown(text);
    };
    let total = text.chars().count();
    let head: String = text.chars().take(MAX_SHOWN_CHARS).collect();
    let mut o = String::new();
    let mut parts = head.split(span).peekable();
    while let Some(part) = parts.next() {
        o.push_str(&escape(part));
        if parts.peek().is_some() {
            let _ = write!(
                o,
                "<mark class=\"blocked\" title=\"blocked\">{}</mark>",
                escape(span)
            );
        }
    }
    if total > MAX_SHOWN_CHARS {
        let _ = write!(o, "… ({} more characters)", total - MAX_SHOWN_CHARS);
    }
    o
}

fn verdict(passed: bool) -> &'static str {
    if passed {
        "<span class=\"pass\">passed</span>"
    } else {
        "<span class=\"fail\">FAILED</span>"
    }
}

pub fn render(file: &Path, results: &[CaseResult], rows: &[Row], th: &[Threshold]) -> String {
    let mut o = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(
        o,
        "<title>guardwire eval: {}</title><style>{STYLE}</style></head><body>\n<h1>guardwire eval</h1>\n<p>{} cases from <code>{}</code></p>\n",
        escape(&file.display().to_string()),
        results.len(),
        escape(&file.display().to_string())
    );
    o.push_str("<table><tr><th>assertion</th><th>passed</th><th>failed</th><th>mean</th><th>threshold</th></tr>\n");
    for r in rows {
        let t = th
            .iter()
            .find(|t| t.name == format!("{}.pass_rate", r.name));
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.name),
            r.passed,
            r.scored - r.passed,
            r.mean.map_or("-".into(), |m| format!("{m:.4}")),
            t.map_or("-".into(), |t| format!(
                "{} (pass rate {:.4}, at least {})",
                verdict(t.passed),
                t.value,
                t.min
            ))
        );
    }
    o.push_str("</table>\n");
    for r in rows {
        let Some(s) = &r.steps else { continue };
        let _ = write!(
            o,
            "<h2>{}: evaluation steps</h2>\n<p>{}</p>\n",
            escape(&r.name),
            if s.generated {
                "written by the judge from the criteria, once for the run"
            } else {
                "as given"
            }
        );
        match &s.steps {
            Ok(steps) => {
                o.push_str("<ol class=\"steps\">");
                for step in steps {
                    let _ = write!(o, "<li>{}</li>", shown(step));
                }
                o.push_str("</ol>\n");
            }
            Err(e) => {
                let _ = writeln!(o, "<p class=\"fail\">{}</p>", shown(e));
            }
        }
    }
    o.push_str("<h2>Cases</h2>\n");
    for r in results {
        let asserted = r.observed.as_ref().map_or(&[][..], |o| &o.assertions[..]);
        let passed = r.pack.is_none()
            && r.scores.iter().all(|s| s.passed)
            && asserted.iter().all(|a| a.passed);
        let _ = write!(
            o,
            "<details{}><summary>{} {}</summary>\n<h3>Input</h3><pre>{}</pre>\n<h3>Output</h3><pre>{}</pre>\n<h3>Expected output</h3><pre>{}</pre>\n",
            if passed { "" } else { " open" },
            verdict(passed),
            escape(&r.id),
            shown_marked(&r.input, r.blocked_span.as_deref()),
            r.output
                .as_deref()
                .map_or("-".into(), |t| shown_marked(t, r.blocked_span.as_deref())),
            r.expected.as_deref().map_or("-".into(), shown),
        );
        o.push_str("<table><tr><th>assertion</th><th>value</th><th>threshold</th><th>result</th><th>reason</th><th>reasoning</th></tr>\n");
        let _ = writeln!(
            o,
            "<tr><td>pack</td><td>-</td><td>released</td><td>{}</td><td>{}</td><td></td></tr>",
            verdict(r.pack.is_none()),
            r.pack.as_deref().map_or(String::new(), shown)
        );
        for s in &r.scores {
            let mut value = s.score.map_or("not scored".into(), |v| format!("{v:.4}"));
            for (name, f) in &s.detail {
                let _ = write!(value, " ({name} {f:.4})");
            }
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{value}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(s.metric.name()),
                s.min,
                verdict(s.passed),
                s.reason.as_deref().map_or(String::new(), shown),
                s.reasoning.as_deref().map_or(String::new(), |r| format!(
                    "<pre class=\"reasoning\">{}</pre>",
                    shown(r)
                ))
            );
        }
        for a in asserted {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>-</td><td>-</td><td>{}</td><td>{}</td></tr>",
                escape(&a.check),
                verdict(a.passed),
                a.message.as_deref().map_or(String::new(), shown)
            );
        }
        o.push_str("</table></details>\n");
    }
    o.push_str("</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_spans_are_marked_and_escaped() {
        assert_eq!(
            shown_marked("a <k> b <k>", Some("<k>")),
            "a <mark class=\"blocked\" title=\"blocked\">&lt;k&gt;</mark> b <mark class=\"blocked\" title=\"blocked\">&lt;k&gt;</mark>"
        );
        assert_eq!(shown_marked("abc", Some("x")), "abc");
        assert_eq!(shown_marked("a&b", None), "a&amp;b");
    }

    #[test]
    fn long_texts_are_cut_and_markup_escaped() {
        assert_eq!(shown("<b>&"), "&lt;b&gt;&amp;");
        let long = "x".repeat(MAX_SHOWN_CHARS + 5);
        assert!(shown(&long).ends_with("… (5 more characters)"));
    }
}
