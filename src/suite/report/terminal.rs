//! The summary printed at the end of a run: totals, then tables per stage, route and
//! validator, the refusals, the invalid lines and the thresholds. Ids come from the input
//! (anyone's text): control characters are escaped before they reach the terminal.

use super::{percent, Summary};
use crate::suite::replay::Stage;
use crate::suite::tally::Examples;
use std::fmt::Write as _;

/// Text from the input, safe to print: control characters escaped, at most 60 characters.
pub fn clean(s: &str) -> String {
    clean_to(s, 60)
}

/// [`clean`], at most `max` characters.
pub fn clean_to(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if c.is_control() || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}') {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

fn examples(e: &Examples) -> String {
    e.ids().map(clean).collect::<Vec<_>>().join(", ")
}

/// The summary as text.
pub fn render(s: &Summary<'_>) -> String {
    let t = s.tally;
    let mut o = String::new();
    let n = t.exchanges;
    let _ = writeln!(
        o,
        "replay of {} under {}: {n} exchanges, {} bytes",
        s.file.display(),
        s.config.display(),
        t.bytes
    );
    let _ = writeln!(
        o,
        "  passed {} ({}), blocked {} ({}), refused {} ({}); redacted {}, monitored {}; request only {}; invalid lines {}",
        t.passed,
        percent(t.passed, n),
        t.blocked,
        percent(t.blocked, n),
        t.refused,
        percent(t.refused, n),
        t.redacted,
        t.monitored,
        t.request_only,
        t.invalid
    );
    if t.judged_skipped > 0 {
        let _ = writeln!(
            o,
            "  judged checks not run on {} exchanges (a replay calls no model)",
            t.judged_skipped
        );
    }
    let _ = writeln!(
        o,
        "\n{:<12} {:>9} {:>9}  examples",
        "stage", "blocked", "refused"
    );
    for stage in Stage::ALL {
        let c = t.by_stage.get(&stage).cloned().unwrap_or_default();
        let _ = writeln!(
            o,
            "{:<12} {:>9} {:>9}  {}",
            stage.as_str(),
            c.blocked,
            c.refused,
            examples(&c.examples)
        );
    }
    let w = t.by_route.keys().map(String::len).max().unwrap_or(0).max(5);
    let _ = writeln!(
        o,
        "\n{:<w$} {:>9} {:>9} {:>9} {:>9}",
        "route", "exchanges", "passed", "blocked", "refused"
    );
    for (name, r) in &t.by_route {
        let _ = writeln!(
            o,
            "{:<w$} {:>9} {:>9} {:>9} {:>9}",
            name, r.exchanges, r.passed, r.blocked, r.refused
        );
    }
    let names: Vec<String> = t
        .by_validator
        .keys()
        .map(|k| format!("{} ({} validators[{}])", k.label, k.file, k.index))
        .collect();
    let w = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(9);
    let _ = writeln!(
        o,
        "\n{:<w$} {:<8} {:>8} {:>7} {:>9} {:>8}  examples",
        "validator", "mode", "blocked", "rate", "monitored", "redacted"
    );
    for ((k, v), name) in t.by_validator.iter().zip(&names) {
        let _ = writeln!(
            o,
            "{:<w$} {:<8} {:>8} {:>7} {:>9} {:>8}  {}",
            name,
            k.mode,
            v.blocked,
            percent(v.blocked, n),
            v.monitored,
            v.redacted,
            examples(&v.examples)
        );
    }
    if !t.refusals.is_empty() {
        let _ = writeln!(o, "\nrefused (nothing a validator decided; fail closed):");
        for (reason, (count, ex)) in &t.refusals {
            let _ = writeln!(o, "  {count} × {}: {}", clean(reason), examples(ex));
        }
    }
    if t.invalid > 0 {
        let _ = writeln!(o, "\ninvalid lines ({}):", t.invalid);
        for (line, e) in &t.invalid_lines {
            // `file:line`, as compilers name a place in a file.
            let _ = writeln!(
                o,
                "  {}:{line}: {}",
                clean(&s.file.display().to_string()),
                clean(e)
            );
        }
    }
    for th in s.thresholds {
        let _ = writeln!(
            o,
            "\nthreshold {}: {:.4} (at least {}): {}",
            th.name,
            th.value,
            th.min,
            if th.passed { "passed" } else { "FAILED" }
        );
    }
    o
}

pub fn print(s: &Summary<'_>) {
    print!("{}", render(s));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let c = clean("a\x1b[2Jb\u{202e}c\n");
        assert!(!c.chars().any(|c| c.is_control() || c == '\u{202e}'), "{c}");
        assert!(c.starts_with('a') && c.contains('b'));
        assert_eq!(clean(&"x".repeat(70)).chars().count(), 61);
    }
}
