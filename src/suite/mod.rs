//! `guardwire eval`: the packs run offline, on the runtime the proxy builds from the same
//! config ([`crate::proxy::Runtime`]) and through the same decoders, guard and frame checker.
//! Today: the replay of recorded exchanges ("what would this pack have blocked?"), its
//! reports (terminal table, JSON, JUnit XML) and thresholds; see docs/evaluation.md.
//!
//! - `record.rs`: one line of a replay file → the route, protocol, request and answer;
//! - `replay.rs`: one exchange through BeforeCall, OnChunk (per SSE frame or whole) and
//!   AfterCall → its [`replay::Outcome`];
//! - `pool.rs`: the file read line by line, the lines checked on every core;
//! - `tally.rs`: outcomes counted per validator, phase and route (order-independent);
//! - `metrics.rs`: the metrics a run may ask for, their thresholds and scoring;
//! - `judged/`: the judged metrics, on the config's judges; `trajectory.rs`: the trajectory
//!   graders; `needs.rs`: what a metric reads, the case view both score;
//!   `metric_file.rs`: `--metric-file`, metrics with parameters;
//! - `holodeck/`: `--holodeck`, a HoloDeck agent.yaml run live and scored as HoloDeck does;
//!   `deterministic.rs`: HoloDeck's equality, numeric and response_path, Puck's matches;
//! - `report/`: the terminal table, the JSON and JUnit files, the progress line.

pub mod cases;
pub mod deterministic;
pub mod holodeck;
pub mod judged;
pub mod live;
pub mod metric_file;
pub mod metrics;
pub mod needs;
pub mod observed;
pub mod pool;
pub mod record;
pub mod replay;
pub mod report;
pub mod scenario;
pub mod tally;
pub mod trajectory;

use crate::config::Config;
use crate::proxy::Runtime;
use std::path::PathBuf;

/// What `guardwire eval` was asked to do.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    pub config: PathBuf,
    /// Recorded exchanges to replay (JSONL).
    pub replay: Option<PathBuf>,
    /// Cases to check and score (JSONL).
    pub cases: Option<PathBuf>,
    /// Check every exchange under this route's policy, whatever its line says.
    pub route: Option<String>,
    /// Metrics asked for on the command line (`--metric NAME[:MIN]`).
    pub metrics: Vec<String>,
    /// `--rouge-variant`, `--rouge-stem`, `--wordnet-dir`.
    pub metric_options: metrics::MetricOptions,
    pub json: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    /// A self-contained HTML report of a cases run.
    pub html: Option<PathBuf>,
    /// The pass rate (exchanges the pack lets through unchanged or redacted) below which the
    /// run fails.
    pub fail_under: Option<f64>,
    /// Worker threads (default: every core).
    pub jobs: Option<usize>,
    /// The longest line read; a longer one is an error for that line.
    pub max_line_bytes: usize,
    /// Example ids kept per count.
    pub examples: usize,
    /// `--live`: the cases are sent to the config's upstreams through guardwire.
    pub live: Option<live::LiveOptions>,
    /// `--scenario`: PromptKit scenario files, run live turn by turn.
    pub scenarios: Vec<PathBuf>,
    /// `--holodeck`: a HoloDeck agent.yaml, its test cases run live and scored.
    pub holodeck: Option<holodeck::HolodeckOptions>,
}

/// Why a run could not be done (exit status 2), as opposed to a threshold that failed (1).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{0}")]
    Setup(String),
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
}

/// The end of a run: every threshold passed, or one failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    ThresholdFailed,
}

/// Runs `guardwire eval`.
pub fn run(opts: &EvalOptions) -> Result<Verdict, EvalError> {
    if let Some(rate) = opts.fail_under {
        if !(0.0..=1.0).contains(&rate) {
            return Err(EvalError::Setup(format!(
                "--fail-under {rate}: a pass rate between 0 and 1"
            )));
        }
    }
    if let Some(h) = &opts.holodeck {
        return holodeck::run(opts, h);
    }
    if !opts.scenarios.is_empty() {
        return run_scenarios(opts);
    }
    let file = match (&opts.replay, &opts.cases) {
        (Some(file), None) => file,
        (None, Some(file)) => {
            // Every metric resolved (and WordNet loaded for METEOR) before any case is read.
            let asked_in_file = match &opts.metric_options.metric_file {
                Some(path) => {
                    let f = metric_file::load(path).map_err(EvalError::Setup)?;
                    Some((f.asked, f.judge))
                }
                None => None,
            };
            let scorer = metrics::Scorer::resolve(&opts.metrics, &opts.metric_options, asked_in_file)
                .map_err(EvalError::Setup)?;
            return run_cases(opts, file, scorer);
        }
        (Some(_), Some(_)) => return Err(EvalError::Setup("--replay or --cases, not both".into())),
        (None, None) => {
            return Err(EvalError::Setup(
                "nothing to evaluate: give --replay FILE.jsonl or --cases FILE.jsonl (with --live to ask the upstream)"
                    .into(),
            ))
        }
    };
    if opts.live.is_some() {
        return Err(EvalError::Setup(
            "--live: a replay checks recorded answers; live runs are of --cases (or --scenario)"
                .into(),
        ));
    }
    if opts.html.is_some() {
        return Err(EvalError::Setup(
            "--html: the HTML report is of a cases run (--cases); a replay writes --json and --junit"
                .into(),
        ));
    }
    if !opts.metrics.is_empty() || opts.metric_options.metric_file.is_some() {
        return Err(EvalError::Setup(
            "--metric: a replay checks the packs only; metrics score cases (--cases)".into(),
        ));
    }
    let runtime = runtime(opts, false)?;
    let tally = pool::replay_file(&runtime, file, opts)?;
    let thresholds = report::thresholds(&tally, opts);
    let summary = report::Summary {
        config: &opts.config,
        file,
        tally: &tally,
        thresholds: &thresholds,
    };
    report::terminal::print(&summary);
    if let Some(path) = &opts.json {
        report::write_file(path, &report::json::render(&summary))?;
    }
    if let Some(path) = &opts.junit {
        report::write_file(path, &report::junit::render(&summary))?;
    }
    let failed = thresholds.iter().any(|t| !t.passed) || tally.invalid > 0;
    Ok(if failed {
        Verdict::ThresholdFailed
    } else {
        Verdict::Passed
    })
}

/// The runtime `serve` would build from `--config`; `--route` must name one of its routes.
/// `keep_matches`: findings carry the text that matched (`audit.include_match`), for the
/// blocked spans of a cases run's HTML report (its texts are the cases file's own).
fn runtime(opts: &EvalOptions, keep_matches: bool) -> Result<Runtime, EvalError> {
    let mut config = Config::load(&opts.config).map_err(|e| EvalError::Setup(e.to_string()))?;
    if keep_matches {
        config.audit.include_match = true;
    }
    // A run writes its reports, not the proxy's body capture.
    config.capture.path = None;
    let runtime = Runtime::build(config).map_err(|e| EvalError::Setup(e.to_string()))?;
    if let Some(name) = &opts.route {
        if !runtime.routes.iter().any(|r| r.name == name) {
            let names: Vec<&str> = runtime.routes.iter().map(|r| r.name).collect();
            return Err(EvalError::Setup(format!(
                "--route {name}: no such route in {} (routes: {})",
                opts.config.display(),
                names.join(", ")
            )));
        }
    }
    Ok(runtime)
}

/// `--cases`: every case read and its metrics' parameters checked before any runs, then each
/// case run (in order, on this thread: suites are small).
fn run_cases(
    opts: &EvalOptions,
    file: &std::path::Path,
    mut scorer: metrics::Scorer,
) -> Result<Verdict, EvalError> {
    let metrics: Vec<metrics::Metric> = scorer.asked.iter().map(|a| a.metric.clone()).collect();
    let io = |error| EvalError::Io {
        path: file.display().to_string(),
        error,
    };
    let size = std::fs::metadata(file).map_err(io)?.len();
    if size > cases::MAX_CASES_BYTES {
        return Err(EvalError::Setup(format!(
            "{}: a cases file is read whole, at most {} bytes",
            file.display(),
            cases::MAX_CASES_BYTES
        )));
    }
    let text = std::fs::read_to_string(file).map_err(io)?;
    let all = cases::read_all_for(&text, &metrics, opts.live.is_some()).map_err(|errors| {
        EvalError::Setup(format!("{}:\n  {}", file.display(), errors.join("\n  ")))
    })?;
    let results: Vec<cases::CaseResult> = match &opts.live {
        Some(live) => {
            if opts.route.is_some() {
                return Err(EvalError::Setup(
                    "--route: a live run sends each case to its own route (the case's `route`)"
                        .into(),
                ));
            }
            live.retry.check().map_err(EvalError::Setup)?;
            // The judges judged metrics name, checked before any case is sent.
            scorer
                .attach(&runtime(opts, false)?)
                .map_err(EvalError::Setup)?;
            let harness = live::Harness::start(&opts.config).map_err(EvalError::Setup)?;
            let results = live::run_cases(&harness, &all, live, &scorer);
            harness.stop();
            results
        }
        None => {
            let runtime = runtime(opts, true)?;
            // The judges judged metrics name, checked before any case runs.
            scorer.attach(&runtime).map_err(EvalError::Setup)?;
            // For cross-variant assertions: a variant's base, a base's variants.
            let related = cases::relations(&all);
            all.iter()
                .zip(&related)
                .map(|(c, rel)| {
                    let rel: Vec<&cases::Case> = rel.iter().map(|&i| &all[i]).collect();
                    cases::run(&runtime, opts.route.as_deref(), c, &rel, &scorer)
                })
                .collect()
        }
    };
    // As set up for the run: G-Eval's generated steps go in the reports.
    let metrics: Vec<metrics::Metric> = scorer.asked.iter().map(|a| a.metric.clone()).collect();
    report_cases(opts, file, &results, &metrics)
}

/// `--scenario`: every file read and its assertions compiled before any turn is sent.
fn run_scenarios(opts: &EvalOptions) -> Result<Verdict, EvalError> {
    if opts.replay.is_some() || opts.cases.is_some() {
        return Err(EvalError::Setup(
            "--scenario runs on its own: not with --replay or --cases".into(),
        ));
    }
    if !opts.metrics.is_empty() {
        return Err(EvalError::Setup(
            "--metric: a scenario's turns are checked by their own assertions".into(),
        ));
    }
    let Some(live) = &opts.live else {
        return Err(EvalError::Setup(
            "--scenario: a live run's options are missing".into(),
        ));
    };
    live.retry.check().map_err(EvalError::Setup)?;
    if live.model.is_none() {
        return Err(EvalError::Setup(
            "--scenario: give --model, the model every turn asks for".into(),
        ));
    }
    let mut scenarios = Vec::new();
    let mut errors = Vec::new();
    // Judged assertions name the config's judges.
    let config = Config::load(&opts.config).map_err(|e| EvalError::Setup(e.to_string()))?;
    let refs = crate::proxy::check_refs(&config).map_err(|e| EvalError::Setup(e.to_string()))?;
    for path in &opts.scenarios {
        match scenario::load(path, &refs) {
            Ok(s) => scenarios.push(s),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(EvalError::Setup(errors.join("\n")));
    }
    let harness = live::Harness::start(&opts.config).map_err(EvalError::Setup)?;
    let results = scenario::run(&harness, &scenarios, opts.route.as_deref(), live);
    harness.stop();
    let label = match &opts.scenarios[..] {
        [one] => one.clone(),
        _ => PathBuf::from(format!("{} scenario files", opts.scenarios.len())),
    };
    report_cases(opts, &label, &results, &[])
}

/// The reports of a cases or scenario run, and its verdict.
fn report_cases(
    opts: &EvalOptions,
    file: &std::path::Path,
    results: &[cases::CaseResult],
    metrics: &[metrics::Metric],
) -> Result<Verdict, EvalError> {
    let rows = report::cases::rows(results, metrics);
    let thresholds = report::cases::thresholds(&rows, opts.fail_under);
    print!(
        "{}",
        report::cases::terminal(file, results, &rows, &thresholds)
    );
    if let Some(path) = &opts.json {
        report::write_file(
            path,
            &report::cases::json(file, results, &rows, &thresholds),
        )?;
    }
    if let Some(path) = &opts.junit {
        report::write_file(path, &report::cases::junit(file, results, &thresholds))?;
    }
    if let Some(path) = &opts.html {
        report::write_file(
            path,
            &report::html::render(file, results, &rows, &thresholds),
        )?;
    }
    Ok(if thresholds.iter().any(|t| !t.passed) {
        Verdict::ThresholdFailed
    } else {
        Verdict::Passed
    })
}

/// Why a line of a cases or replay file did not parse, by position and kind, never by content
/// (a log line may hold secrets); an unknown key is named (the line's structure), with the keys
/// a line may have when `known` lists them.
fn line_error(e: &serde_json::Error, what: &str, known: Option<&str>) -> String {
    let text = e.to_string();
    match text.strip_prefix("unknown field ") {
        Some(rest) => {
            let key = rest.split(',').next().unwrap_or(rest);
            match known {
                Some(known) => format!("unknown key {key} (known: {known})"),
                None => format!("unknown key {key}"),
            }
        }
        None => format!("{what}: {}", crate::protocol::DecodeError::json("line", e)),
    }
}

/// A line's id: its own (a string as it is, any other JSON as its text), else `line N`.
fn line_id(id: Option<serde_json::Value>, n: u64) -> String {
    match id {
        None | Some(serde_json::Value::Null) => format!("line {n}"),
        Some(serde_json::Value::String(s)) => s,
        Some(other) => other.to_string(),
    }
}
