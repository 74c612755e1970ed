//! What a run reports: the thresholds judged, the terminal table (`terminal.rs`), the JSON
//! (`json.rs`) and JUnit XML (`junit.rs`) files, the HTML page of a cases run (`html.rs`),
//! and the progress line (`progress.rs`).

pub mod cases;
pub mod html;
pub mod json;
pub mod junit;
pub mod progress;
pub mod terminal;

use super::tally::Tally;
use super::{EvalError, EvalOptions};
use std::path::Path;

/// A threshold of the run and how it came out.
#[derive(Debug, Clone)]
pub struct Threshold {
    pub name: String,
    /// The lowest value that passes.
    pub min: f64,
    pub value: f64,
    pub passed: bool,
}

/// What every report is made from.
pub struct Summary<'a> {
    pub config: &'a Path,
    pub file: &'a Path,
    pub tally: &'a Tally,
    pub thresholds: &'a [Threshold],
}

/// The run's thresholds: `--fail-under` on the pass rate.
pub fn thresholds(tally: &Tally, opts: &EvalOptions) -> Vec<Threshold> {
    let mut out = Vec::new();
    if let Some(min) = opts.fail_under {
        let value = tally.pass_rate();
        out.push(Threshold {
            name: "pass_rate".into(),
            min,
            value,
            passed: value >= min,
        });
    }
    out
}

/// Writes a report file whole (through a temporary file beside it, renamed into place).
pub fn write_file(path: &Path, text: &str) -> Result<(), EvalError> {
    let io = |error| EvalError::Io {
        path: path.display().to_string(),
        error,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// A rate as a percentage with one decimal.
pub fn percent(n: u64, of: u64) -> String {
    if of == 0 {
        "-".into()
    } else {
        format!("{:.1}%", n as f64 * 100.0 / of as f64)
    }
}
