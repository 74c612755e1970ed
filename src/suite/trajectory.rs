//! Trajectory graders (Puck's and swink's) and PromptKit's cross-variant assertions, over what
//! a case recorded: its tool calls (`tool_calls`, else those of a whole recorded `response`),
//! its totals (`trajectory: {steps, tokens, duration_ms, cost_usd}`, tokens else from the
//! response's usage) and its golden tool path (`expected_tools`). Each grader scores 1 or 0,
//! with the reason; what a grader reads is checked on every case before any case runs.

use super::needs::{CaseView, Needs, ToolCall};

/// How the tools called are matched against `expected_tools`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathMatch {
    /// The same calls, in the same order, nothing else.
    Exact,
    /// The expected calls in their order; other calls may come between.
    InOrder,
    /// Every expected call (as many times as listed), in any order; others may come too.
    AnyOrder,
}

/// What `outcome_equivalent` compares with the case's base (`variant_of`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The same tool names in the same order.
    ToolCalls,
    /// The same output text (surrounding white space ignored).
    ContentHash,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Grader {
    MaxSteps(u64),
    MaxTokens(u64),
    MaxDurationMs(u64),
    MaxCostUsd(f64),
    /// These tools were called in this order (others may come between).
    ToolSequence(Vec<String>),
    /// These texts appear in the output in this order.
    OutputSequence(Vec<String>),
    /// The tool was called (exactly `times` times when given).
    ToolCalled {
        name: String,
        times: Option<u64>,
    },
    /// The tool was not called.
    ToolNotCalled(String),
    /// The tools called against `expected_tools`.
    GoldenPath(PathMatch),
    /// Across variants: the case against its `variant_of` base.
    OutcomeEquivalent(Outcome),
}

/// The graders `--metric` accepts by name (the others take parameters: `--metric-file`).
pub const NAMES: [&str; 3] = [
    "golden_path_exact",
    "golden_path_in_order",
    "golden_path_any_order",
];

/// One trajectory grader as asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub name: String,
    pub grader: Grader,
}

impl Spec {
    pub fn by_name(name: &str) -> Option<Spec> {
        let m = match name {
            "golden_path_exact" => PathMatch::Exact,
            "golden_path_in_order" => PathMatch::InOrder,
            "golden_path_any_order" => PathMatch::AnyOrder,
            _ => return None,
        };
        Some(Spec {
            name: name.to_owned(),
            grader: Grader::GoldenPath(m),
        })
    }

    /// What a case must carry for this grader.
    pub fn needs(&self) -> Vec<Needs> {
        match &self.grader {
            Grader::MaxSteps(_) => vec![Needs::Steps],
            Grader::MaxTokens(_) => vec![Needs::Tokens],
            Grader::MaxDurationMs(_) => vec![Needs::Duration],
            Grader::MaxCostUsd(_) => vec![Needs::Cost],
            Grader::OutputSequence(_) => vec![Needs::Output],
            Grader::ToolSequence(_) | Grader::ToolCalled { .. } | Grader::ToolNotCalled(_) => {
                vec![Needs::ToolCalls]
            }
            Grader::GoldenPath(_) => vec![Needs::ToolCalls, Needs::ExpectedTools],
            Grader::OutcomeEquivalent(Outcome::ToolCalls) => {
                vec![Needs::ToolCalls, Needs::Variant]
            }
            Grader::OutcomeEquivalent(Outcome::ContentHash) => {
                vec![Needs::Output, Needs::Variant]
            }
        }
    }
}

/// A grader's result: 1 or 0, and why.
#[derive(Debug)]
pub struct Graded {
    pub score: f64,
    pub reason: String,
}

fn graded(pass: bool, reason: String) -> Result<Graded, String> {
    Ok(Graded {
        score: if pass { 1.0 } else { 0.0 },
        reason,
    })
}

fn names(calls: &[ToolCall]) -> Vec<&str> {
    calls.iter().map(|c| c.name.as_str()).collect()
}

/// `want` appears in `have` in order, other items between.
fn subsequence(want: &[&str], have: &[&str]) -> bool {
    let mut it = have.iter();
    want.iter().all(|w| it.any(|h| h == w))
}

/// A call matches an expected one by name and, when the expected one gives them, arguments
/// (compared as JSON values).
fn call_matches(expected: &ToolCall, actual: &ToolCall) -> bool {
    if expected.name != actual.name {
        return false;
    }
    match &expected.arguments {
        None => true,
        Some(want) => actual.arguments.as_ref().is_some_and(|have| have == want),
    }
}

fn list(calls: &[&str]) -> String {
    format!("[{}]", calls.join(", "))
}

/// Grades `case`; `related`, for a cross-variant assertion: a variant's base, or a base's
/// variants.
pub fn grade(spec: &Spec, case: &CaseView<'_>, related: &[CaseView<'_>]) -> Result<Graded, String> {
    let missing = |what: &str| format!("metric {}: the case has no {what}", spec.name);
    let calls = || case.tool_calls.ok_or_else(|| missing("tool_calls"));
    let total = |v: Option<f64>, max: f64, what: &str, unit: &str| {
        let v = v.ok_or_else(|| missing(&format!("trajectory.{what}")))?;
        graded(
            v <= max,
            format!("{v}{unit} {what}, at most {max}{unit} allowed"),
        )
    };
    let t = case.trajectory;
    match &spec.grader {
        Grader::MaxSteps(max) => total(t.steps.map(|v| v as f64), *max as f64, "steps", ""),
        Grader::MaxTokens(max) => total(t.tokens.map(|v| v as f64), *max as f64, "tokens", ""),
        Grader::MaxDurationMs(max) => total(
            t.duration_ms.map(|v| v as f64),
            *max as f64,
            "duration_ms",
            " ms",
        ),
        Grader::MaxCostUsd(max) => total(t.cost_usd, *max, "cost_usd", " USD"),
        Grader::ToolSequence(want) => {
            let have = names(calls()?);
            let want: Vec<&str> = want.iter().map(String::as_str).collect();
            let ok = subsequence(&want, &have);
            graded(
                ok,
                format!(
                    "tools called {}; {} the sequence {}",
                    list(&have),
                    if ok { "holds" } else { "lacks" },
                    list(&want)
                ),
            )
        }
        Grader::OutputSequence(want) => {
            let output = case.output.ok_or_else(|| missing("output"))?;
            let mut from = 0;
            for (i, w) in want.iter().enumerate() {
                match output[from..].find(w.as_str()) {
                    Some(at) => from += at + w.len(),
                    None => {
                        return graded(
                            false,
                            format!(
                                "item {} of the sequence is not in the output after item {i}",
                                i + 1
                            ),
                        )
                    }
                }
            }
            graded(
                true,
                format!("the output holds the {} items in order", want.len()),
            )
        }
        Grader::ToolCalled { name, times } => {
            let n = calls()?.iter().filter(|c| &c.name == name).count() as u64;
            let ok = match times {
                Some(t) => n == *t,
                None => n > 0,
            };
            let want = times.map_or("at least once".to_owned(), |t| format!("{t} times"));
            graded(ok, format!("{name} called {n} times, {want} wanted"))
        }
        Grader::ToolNotCalled(name) => {
            let n = calls()?.iter().filter(|c| &c.name == name).count();
            graded(n == 0, format!("{name} called {n} times, never wanted"))
        }
        Grader::GoldenPath(m) => {
            let have = calls()?;
            let want = case
                .expected_tools
                .ok_or_else(|| missing("expected_tools"))?;
            let ok = match m {
                PathMatch::Exact => {
                    have.len() == want.len()
                        && want.iter().zip(have).all(|(w, h)| call_matches(w, h))
                }
                PathMatch::InOrder => {
                    let mut it = have.iter();
                    want.iter().all(|w| it.any(|h| call_matches(w, h)))
                }
                PathMatch::AnyOrder => {
                    let mut used = vec![false; have.len()];
                    want.iter().all(|w| {
                        match (0..have.len()).find(|&i| !used[i] && call_matches(w, &have[i])) {
                            Some(i) => {
                                used[i] = true;
                                true
                            }
                            None => false,
                        }
                    })
                }
            };
            graded(
                ok,
                format!(
                    "tools called {}, expected {} ({})",
                    list(&names(have)),
                    list(&names(want)),
                    match m {
                        PathMatch::Exact => "exactly",
                        PathMatch::InOrder => "in order",
                        PathMatch::AnyOrder => "in any order",
                    }
                ),
            )
        }
        Grader::OutcomeEquivalent(o) => {
            // A variant against its base; a base against each of its variants.
            if related.is_empty() {
                return Err(missing("variant_of base, nor variants"));
            }
            let key = |c: &CaseView<'_>| -> Result<String, String> {
                match o {
                    Outcome::ToolCalls => c.tool_calls.map(|t| list(&names(t))).ok_or_else(|| {
                        format!("metric {}: case {:?} has no tool_calls", spec.name, c.id)
                    }),
                    Outcome::ContentHash => {
                        c.output.map(|t| t.trim().to_owned()).ok_or_else(|| {
                            format!("metric {}: case {:?} has no output", spec.name, c.id)
                        })
                    }
                }
            };
            let mine = key(case)?;
            let mut differ = Vec::new();
            for other in related {
                if key(other)? != mine {
                    differ.push(format!("{:?}", other.id));
                }
            }
            let what = match o {
                Outcome::ToolCalls => format!("tools called {mine}"),
                Outcome::ContentHash => "the output".to_owned(),
            };
            let ids: Vec<String> = related.iter().map(|c| format!("{:?}", c.id)).collect();
            graded(
                differ.is_empty(),
                if differ.is_empty() {
                    format!("{what}: the same for {}", ids.join(", "))
                } else {
                    format!("{what}: not the same for {}", differ.join(", "))
                },
            )
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::suite::cases::Case;

    fn call(name: &str, args: Option<serde_json::Value>) -> ToolCall {
        ToolCall {
            name: name.into(),
            arguments: args,
        }
    }

    fn case(have: &[&str], want: &[&str]) -> Case {
        let mut c = crate::suite::cases::read_all(
            "{\"id\":\"c\",\"input\":\"q\",\"actual_output\":\"one two three\"}",
            &[],
        )
        .unwrap()
        .remove(0);
        c.tool_calls = Some(have.iter().map(|n| call(n, None)).collect());
        c.expected_tools = Some(want.iter().map(|n| call(n, None)).collect());
        c
    }

    fn score(g: Grader, c: &Case) -> f64 {
        let s = Spec {
            name: "t".into(),
            grader: g,
        };
        grade(&s, &c.view(), &[]).unwrap().score
    }

    #[test]
    fn golden_paths_match_exactly_in_order_or_in_any_order() {
        let c = case(&["search", "log", "book"], &["search", "book"]);
        assert_eq!(score(Grader::GoldenPath(PathMatch::Exact), &c), 0.0);
        assert_eq!(score(Grader::GoldenPath(PathMatch::InOrder), &c), 1.0);
        assert_eq!(score(Grader::GoldenPath(PathMatch::AnyOrder), &c), 1.0);
        let c = case(&["book", "search"], &["search", "book"]);
        assert_eq!(score(Grader::GoldenPath(PathMatch::InOrder), &c), 0.0);
        assert_eq!(score(Grader::GoldenPath(PathMatch::AnyOrder), &c), 1.0);
        let c = case(&["search"], &["search", "search"]);
        assert_eq!(score(Grader::GoldenPath(PathMatch::AnyOrder), &c), 0.0);
        let c = case(&["search", "book"], &["search", "book"]);
        assert_eq!(score(Grader::GoldenPath(PathMatch::Exact), &c), 1.0);
        // Arguments, when expected, are compared as JSON.
        let mut c = case(&[], &[]);
        c.tool_calls = Some(vec![call("f", Some(serde_json::json!({"a": 1, "b": 2})))]);
        c.expected_tools = Some(vec![call("f", Some(serde_json::json!({"b": 2, "a": 1})))]);
        assert_eq!(score(Grader::GoldenPath(PathMatch::Exact), &c), 1.0);
        c.expected_tools = Some(vec![call("f", Some(serde_json::json!({"a": 2})))]);
        assert_eq!(score(Grader::GoldenPath(PathMatch::Exact), &c), 0.0);
    }

    #[test]
    fn sequences_budgets_and_variants() {
        let mut c = case(&["a", "x", "b", "a"], &[]);
        assert_eq!(
            score(Grader::ToolSequence(vec!["a".into(), "b".into()]), &c),
            1.0
        );
        assert_eq!(
            score(Grader::ToolSequence(vec!["b".into(), "x".into()]), &c),
            0.0
        );
        let seq = |v: &[&str]| Grader::OutputSequence(v.iter().map(|s| s.to_string()).collect());
        assert_eq!(score(seq(&["one", "three"]), &c), 1.0);
        assert_eq!(score(seq(&["three", "one"]), &c), 0.0);
        assert_eq!(
            score(
                Grader::ToolCalled {
                    name: "a".into(),
                    times: Some(2)
                },
                &c
            ),
            1.0
        );
        assert_eq!(score(Grader::ToolNotCalled("x".into()), &c), 0.0);
        c.trajectory.steps = Some(4);
        assert_eq!(score(Grader::MaxSteps(4), &c), 1.0);
        assert_eq!(score(Grader::MaxSteps(3), &c), 0.0);
        let s = Spec {
            name: "t".into(),
            grader: Grader::MaxTokens(10),
        };
        assert!(grade(&s, &c.view(), &[])
            .unwrap_err()
            .contains("trajectory.tokens"));
        let base = case(&["a", "x", "b", "a"], &[]);
        let s = Spec {
            name: "t".into(),
            grader: Grader::OutcomeEquivalent(Outcome::ToolCalls),
        };
        assert_eq!(grade(&s, &c.view(), &[base.view()]).unwrap().score, 1.0);
        let other = case(&["a"], &[]);
        assert_eq!(grade(&s, &c.view(), &[other.view()]).unwrap().score, 0.0);
    }
}
