//! The reports of a cases run: the terminal table per assertion (the packs, then each
//! metric: mean, pass rate, threshold), the JSON file, and JUnit XML with one test case per
//! case and assertion.

use super::junit::escape;
use super::terminal::{clean, clean_to};
use super::Threshold;
use crate::suite::cases::{CaseResult, MetricResult};
use crate::suite::metrics::Metric;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

/// One assertion over the run: the packs or a metric.
pub struct Row {
    pub name: String,
    pub scored: u64,
    pub passed: u64,
    /// Mean score over the cases scored (`None` for the packs).
    pub mean: Option<f64>,
    /// G-Eval: the evaluation steps shown to the judge.
    pub steps: Option<Steps>,
}

/// A G-Eval metric's evaluation steps for the run.
pub struct Steps {
    /// The steps, or why the judge's could not be had.
    pub steps: Result<Vec<String>, String>,
    /// Written by the judge from the criteria (none were given).
    pub generated: bool,
}

fn steps_of(m: &Metric) -> Option<Steps> {
    let Metric::Judged(spec) = m else {
        return None;
    };
    if spec.kind != crate::suite::judged::Kind::GEval {
        return None;
    }
    Some(Steps {
        steps: spec.steps().map(<[String]>::to_vec),
        generated: spec.steps_wanted(),
    })
}

pub fn rows(results: &[CaseResult], metrics: &[Metric]) -> Vec<Row> {
    let mut rows = vec![Row {
        name: "pack".into(),
        scored: results.len() as u64,
        passed: results.iter().filter(|r| r.pack.is_none()).count() as u64,
        mean: None,
        steps: None,
    }];
    for (i, m) in metrics.iter().enumerate() {
        // The cases this metric ran on (a HoloDeck test case may run only some).
        let ran: Vec<&MetricResult> = results
            .iter()
            .filter_map(|r| r.scores.iter().find(|s| s.asked == i))
            .collect();
        let scores: Vec<f64> = ran.iter().filter_map(|s| s.score).collect();
        // The same metric asked again with other parameters (HoloDeck's rungs): `name #2`.
        let seen = metrics[..i].iter().filter(|o| o.name() == m.name()).count();
        rows.push(Row {
            name: if seen == 0 {
                m.name().into()
            } else {
                format!("{} #{}", m.name(), seen + 1)
            },
            scored: ran.len() as u64,
            passed: ran.iter().filter(|s| s.passed).count() as u64,
            mean: (!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64),
            steps: steps_of(m),
        });
    }
    // A scenario's assertions: a row per type, in the order first met.
    for a in results.iter().flat_map(assertions) {
        let name = format!("assert:{}", a.check);
        match rows.iter_mut().find(|r| r.name == name) {
            Some(row) => {
                row.scored += 1;
                row.passed += u64::from(a.passed);
            }
            None => rows.push(Row {
                name,
                scored: 1,
                passed: u64::from(a.passed),
                mean: None,
                steps: None,
            }),
        }
    }
    rows
}

fn assertions(r: &CaseResult) -> &[crate::suite::observed::AssertionResult] {
    r.observed.as_ref().map_or(&[], |o| &o.assertions[..])
}

/// `--fail-under` on every assertion's pass rate.
pub fn thresholds(rows: &[Row], fail_under: Option<f64>) -> Vec<Threshold> {
    let Some(min) = fail_under else {
        return Vec::new();
    };
    rows.iter()
        .map(|r| {
            let value = if r.scored == 0 {
                1.0
            } else {
                r.passed as f64 / r.scored as f64
            };
            Threshold {
                name: format!("{}.pass_rate", r.name),
                min,
                value,
                passed: value >= min,
            }
        })
        .collect()
}

pub fn terminal(file: &Path, results: &[CaseResult], rows: &[Row], th: &[Threshold]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{} cases from {}", results.len(), file.display());
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(12);
    let _ = writeln!(
        o,
        "\n{:<w$} {:>7} {:>7} {:>9} {:>8}  threshold",
        "assertion",
        "passed",
        "failed",
        "pass rate",
        "mean",
        w = width
    );
    for r in rows {
        let t = th
            .iter()
            .find(|t| t.name == format!("{}.pass_rate", r.name));
        let _ = writeln!(
            o,
            "{:<w$} {:>7} {:>7} {:>9} {:>8}  {}",
            r.name,
            r.passed,
            r.scored - r.passed,
            super::percent(r.passed, r.scored),
            r.mean.map_or("-".into(), |m| format!("{m:.4}")),
            t.map_or("-".into(), |t| format!(
                "{} (at least {})",
                if t.passed { "passed" } else { "FAILED" },
                t.min
            )),
            w = width
        );
    }
    let failed: Vec<&CaseResult> = results
        .iter()
        .filter(|r| {
            r.pack.is_some()
                || r.scores.iter().any(|s| !s.passed)
                || assertions(r).iter().any(|a| !a.passed)
        })
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(o, "\nfailed cases ({}):", failed.len());
        for r in failed.iter().take(20) {
            if let Some(why) = &r.pack {
                let _ = writeln!(o, "  {}: pack: {}", clean(&r.id), clean_to(why, 300));
            }
            for a in assertions(r).iter().filter(|a| !a.passed) {
                let _ = writeln!(
                    o,
                    "  {}: assert:{}: {}",
                    clean(&r.id),
                    clean(&a.check),
                    clean_to(a.message.as_deref().unwrap_or("failed"), 300)
                );
            }
            for s in &r.scores {
                if !s.passed {
                    let _ = writeln!(
                        o,
                        "  {}: {}: {}",
                        clean(&r.id),
                        s.metric.name(),
                        clean_to(s.reason.as_deref().unwrap_or(""), 300)
                    );
                }
            }
        }
    }
    o
}

pub fn json(file: &Path, results: &[CaseResult], rows: &[Row], th: &[Threshold]) -> String {
    let cases: Vec<Value> = results
        .iter()
        .map(|r| {
            let scores: Vec<Value> = r
                .scores
                .iter()
                .map(|s| {
                    let mut v = json!({"metric": s.metric.name(), "score": s.score, "min": s.min, "passed": s.passed, "reason": s.reason});
                    if let Some(r) = &s.reasoning {
                        v["reasoning"] = json!(r);
                    }
                    if !s.detail.is_empty() {
                        let detail: serde_json::Map<String, Value> =
                            s.detail.iter().map(|(k, f)| ((*k).to_owned(), json!(f))).collect();
                        v["detail"] = Value::Object(detail);
                    }
                    v
                })
                .collect();
            let mut case = json!({"id": r.id, "tags": r.tags, "pack": {"passed": r.pack.is_none(), "reason": r.pack}, "metrics": scores});
            if let Some(o) = &r.observed {
                case["output"] = json!(r.output);
                case["live"] = o.to_json();
            }
            case
        })
        .collect();
    let assertions: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut v = json!({"name": r.name, "passed": r.passed, "failed": r.scored - r.passed, "mean": r.mean});
            if let Some(s) = &r.steps {
                v["evaluation_steps_generated"] = json!(s.generated);
                match &s.steps {
                    Ok(steps) => v["evaluation_steps"] = json!(steps),
                    Err(e) => v["evaluation_steps_error"] = json!(e),
                }
            }
            v
        })
        .collect();
    let thresholds: Vec<Value> = th
        .iter()
        .map(|t| json!({"name": t.name, "min": t.min, "value": t.value, "passed": t.passed}))
        .collect();
    let v = json!({
        "mode": "cases",
        "input": file.display().to_string(),
        "cases": cases,
        "assertions": assertions,
        "thresholds": thresholds,
        "passed_thresholds": th.iter().all(|t| t.passed),
    });
    let mut text = serde_json::to_string_pretty(&v).unwrap_or_default();
    text.push('\n');
    text
}

pub fn junit(file: &Path, results: &[CaseResult], th: &[Threshold]) -> String {
    let mut cases: Vec<(String, String, Option<String>)> = Vec::new();
    for r in results {
        cases.push((r.id.clone(), "pack".into(), r.pack.clone()));
        for (i, a) in assertions(r).iter().enumerate() {
            cases.push((
                r.id.clone(),
                format!("assertions[{i}] {}", a.check),
                (!a.passed).then(|| a.message.clone().unwrap_or_else(|| "failed".into())),
            ));
        }
        for s in &r.scores {
            cases.push((
                r.id.clone(),
                s.metric.name().into(),
                (!s.passed).then(|| s.reason.clone().unwrap_or_default()),
            ));
        }
    }
    for t in th {
        cases.push((
            "thresholds".into(),
            t.name.clone(),
            (!t.passed).then(|| format!("{} is {:.4}, below {}", t.name, t.value, t.min)),
        ));
    }
    let failures = cases.iter().filter(|c| c.2.is_some()).count();
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuites name=\"guardwire eval\" tests=\"{}\" failures=\"{failures}\" errors=\"0\">",
        cases.len()
    );
    let _ = writeln!(
        o,
        "  <testsuite name=\"cases of {}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
        escape(&file.display().to_string()),
        cases.len()
    );
    for (class, name, failure) in &cases {
        let _ = write!(
            o,
            "    <testcase classname=\"{}\" name=\"{}\"",
            escape(class),
            escape(name)
        );
        match failure {
            None => o.push_str("/>\n"),
            Some(msg) => {
                let _ = writeln!(
                    o,
                    ">\n      <failure message=\"{}\" type=\"guardwire\"/>\n    </testcase>",
                    escape(msg)
                );
            }
        }
    }
    o.push_str("  </testsuite>\n</testsuites>\n");
    o
}
