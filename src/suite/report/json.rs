//! The JSON report (`--json FILE`): everything the terminal table shows, as data. Its shape
//! is documented in docs/evaluation.md.

use super::Summary;
use crate::suite::replay::Stage;
use serde_json::{json, Map, Value};

fn rate(n: u64, of: u64) -> Value {
    if of == 0 {
        Value::Null
    } else {
        json!(n as f64 / of as f64)
    }
}

pub fn value(s: &Summary<'_>) -> Value {
    let t = s.tally;
    let n = t.exchanges;
    let ids =
        |e: &crate::suite::tally::Examples| -> Vec<String> { e.ids().map(str::to_owned).collect() };
    let mut stages = Map::new();
    for stage in Stage::ALL {
        let c = t.by_stage.get(&stage).cloned().unwrap_or_default();
        stages.insert(
            stage.as_str().into(),
            json!({ "blocked": c.blocked, "refused": c.refused, "examples": ids(&c.examples) }),
        );
    }
    let routes: Map<String, Value> = t
        .by_route
        .iter()
        .map(|(name, r)| {
            (
                name.clone(),
                json!({
                    "exchanges": r.exchanges, "passed": r.passed, "blocked": r.blocked,
                    "refused": r.refused, "pass_rate": rate(r.passed, r.exchanges),
                }),
            )
        })
        .collect();
    let validators: Vec<Value> = t
        .by_validator
        .iter()
        .map(|(k, v)| {
            let by_stage: Map<String, Value> = v
                .stages
                .iter()
                .map(|(s, n)| (s.as_str().to_owned(), json!(n)))
                .collect();
            json!({
                "validator": k.label, "type": k.type_name, "pack": k.file, "index": k.index,
                "mode": k.mode, "blocked": v.blocked, "block_rate": rate(v.blocked, n),
                "blocked_by_stage": by_stage, "monitored": v.monitored,
                "redacted": v.redacted, "examples": ids(&v.examples),
            })
        })
        .collect();
    let refusals: Vec<Value> = t
        .refusals
        .iter()
        .map(|(reason, (count, ex))| json!({ "reason": reason, "count": count, "examples": ids(ex) }))
        .collect();
    let invalid: Vec<Value> = t
        .invalid_lines
        .iter()
        .map(|(line, e)| json!({ "line": line, "error": e }))
        .collect();
    let thresholds: Vec<Value> = s
        .thresholds
        .iter()
        .map(|th| json!({ "name": th.name, "min": th.min, "value": th.value, "passed": th.passed }))
        .collect();
    json!({
        "mode": "replay",
        "config": s.config.display().to_string(),
        "input": s.file.display().to_string(),
        "bytes": t.bytes,
        "exchanges": n,
        "passed": t.passed,
        "blocked": t.blocked,
        "refused": t.refused,
        "redacted": t.redacted,
        "monitored": t.monitored,
        "request_only": t.request_only,
        "judged_not_run": t.judged_skipped,
        "pass_rate": rate(t.passed, n),
        "block_rate": rate(t.blocked, n),
        "invalid": t.invalid,
        "invalid_lines": invalid,
        "by_stage": stages,
        "by_route": routes,
        "by_validator": validators,
        "refusals": refusals,
        "thresholds": thresholds,
        "passed_thresholds": s.thresholds.iter().all(|t| t.passed) && t.invalid == 0,
    })
}

pub fn render(s: &Summary<'_>) -> String {
    let mut text = serde_json::to_string_pretty(&value(s)).unwrap_or_default();
    text.push('\n');
    text
}
