//! The `guardwire` binary: `serve` runs the proxy, `check` validates a config and its packs,
//! `eval` runs them offline (src/suite/).

use clap::{Parser, Subcommand};
use guardwire::config::{Config, RuntimeShape};
use guardwire::policy::Policy;
use guardwire::proxy::Runtime;
use guardwire::upstream::UpstreamClient;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "guardwire",
    version,
    about = "Streaming guardrail proxy for LLM APIs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy.
    Serve {
        /// Config file (YAML); GUARDWIRE_… environment variables override it.
        #[arg(long, short, default_value = "config/guardwire.yaml")]
        config: PathBuf,
    },
    /// Load and validate the config and every pack it names, print what was loaded, and exit
    /// non-zero on any error.
    Check {
        #[arg(long, short, default_value = "config/guardwire.yaml")]
        config: PathBuf,
    },
    /// Run the config's packs offline: `--replay FILE.jsonl` checks recorded exchanges (what
    /// would the packs have blocked?) without calling any model. Exit status: 0 when every
    /// threshold passed, 1 when one failed (or a line was invalid), 2 when the run could not
    /// be done. See docs/evaluation.md.
    Eval(Box<EvalArgs>),
    /// Internal: supervises one `exec:` handler (src/judge/supervisor.rs).
    #[cfg(target_os = "linux")]
    #[command(name = "exec-supervise", hide = true)]
    ExecSupervise {
        command: std::ffi::OsString,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

#[derive(clap::Args)]
struct EvalArgs {
    /// Config file (YAML), loaded as `serve` loads it.
    #[arg(long, short, default_value = "config/guardwire.yaml")]
    config: PathBuf,
    /// Recorded exchanges, one JSON object a line (`-`: standard input).
    #[arg(long, value_name = "FILE.jsonl")]
    replay: Option<PathBuf>,
    /// Cases (JSONL) to check with the packs and score with the metrics.
    #[arg(long, value_name = "FILE.jsonl")]
    cases: Option<PathBuf>,
    /// Check every exchange under this route's policy (default: the line's `route`, else the
    /// first route of its protocol).
    #[arg(long, value_name = "NAME")]
    route: Option<String>,
    /// A metric to score (repeatable), with the score a case needs to pass it after `:`
    /// (default 1 for equals/contains, 0.5 for bleu/rouge/meteor).
    #[arg(long = "metric", value_name = "NAME[:MIN]")]
    metrics: Vec<String>,
    /// Metrics with parameters (G-Eval, trajectory graders), thresholds and the judge of the
    /// judged metrics, in YAML (docs/metrics.md).
    #[arg(long, value_name = "FILE.yaml")]
    metric_file: Option<PathBuf>,
    /// The ROUGE F-measure thresholded: rouge1, rouge2 or rougeL (all three are reported).
    #[arg(long, value_name = "VARIANT", default_value = "rougeL")]
    rouge_variant: String,
    /// ROUGE with the Porter stemmer (rouge-score's `use_stemmer=True`).
    #[arg(long)]
    rouge_stem: bool,
    /// The WordNet 3.0 folder METEOR reads (default: Debian's /usr/share/wordnet).
    #[arg(long, value_name = "DIR")]
    wordnet_dir: Option<PathBuf>,
    /// Write the JSON report here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write a JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write a self-contained HTML report of a cases run here.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Fail (exit status 1) when a pass rate (of the exchanges; of the cases, per assertion) is
    /// below this (0–1).
    #[arg(long, value_name = "RATE")]
    fail_under: Option<f64>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// The longest input line read; a longer line is reported invalid.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    max_line_bytes: usize,
    /// Example ids kept per count in the reports.
    #[arg(long, value_name = "N", default_value_t = 5)]
    examples: usize,
    /// Send each case to its route's configured upstream through guardwire (started in
    /// process), instead of checking a recorded answer.
    #[arg(long)]
    live: bool,
    /// Live runs: cases in flight at once [default: 4; --holodeck: the agent's
    /// execution.parallel_test_cases, else 4].
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,
    /// Live runs: the longest a case may take, retries and their waits included (seconds)
    /// [default: 60; --holodeck: the agent's execution.llm_timeout, else 60].
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Live runs: retries after a 429, a 5xx or a connection error (HoloDeck's max_retries).
    #[arg(long, value_name = "N", default_value_t = 3)]
    max_retries: u32,
    /// Live runs: the wait before the first retry (seconds).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    retry_base_delay: f64,
    /// Live runs: the longest wait between retries (seconds).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    retry_max_delay: f64,
    /// Live runs: each retry waits this many times longer than the one before.
    #[arg(long, value_name = "X", default_value_t = 2.0)]
    retry_exponential_base: f64,
    /// Live runs: ask every case for a streamed answer.
    #[arg(long)]
    stream: bool,
    /// Live runs: the model of cases given as `input`, and of scenarios' turns.
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// A PromptKit scenario file (YAML, `kind: Scenario`) to run live, turn by turn, with its
    /// assertions (repeatable).
    #[arg(long = "scenario", value_name = "FILE.yaml")]
    scenarios: Vec<PathBuf>,
    /// A HoloDeck agent.yaml: its test_cases sent live to the config's upstream, its
    /// evaluations scored as HoloDeck scores them (docs/evaluation.md).
    #[arg(long, value_name = "AGENT.yaml")]
    holodeck: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `exec:` handlers run under this same binary as their supervisor: /proc/self/exe, which
    // names it even once the file was replaced or removed (an upgrade under a running proxy).
    #[cfg(target_os = "linux")]
    guardwire::judge::supervisor::use_binary(PathBuf::from("/proc/self/exe"));
    match cli.command {
        Command::Check { config } => check(&config),
        Command::Serve { config } => serve(&config),
        Command::Eval(args) => eval(*args),
        #[cfg(target_os = "linux")]
        Command::ExecSupervise { command, args } => {
            ExitCode::from(guardwire::judge::supervisor::supervise(&command, &args))
        }
    }
}

fn eval(a: EvalArgs) -> ExitCode {
    let secs = a.timeout.unwrap_or(60.0);
    let Some(timeout) = std::time::Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
    else {
        eprintln!("error: --timeout {secs}: a positive number of seconds");
        return ExitCode::from(2);
    };
    let opts = guardwire::suite::EvalOptions {
        config: a.config,
        replay: a.replay,
        cases: a.cases,
        route: a.route,
        metrics: a.metrics,
        metric_options: guardwire::suite::metrics::MetricOptions {
            rouge_variant: a.rouge_variant,
            rouge_stem: a.rouge_stem,
            wordnet_dir: a
                .wordnet_dir
                .unwrap_or_else(|| guardwire::scoring::meteor::Meteor::default_dir().to_path_buf()),
            metric_file: a.metric_file,
        },
        json: a.json,
        junit: a.junit,
        html: a.html,
        fail_under: a.fail_under,
        jobs: a.jobs,
        max_line_bytes: a.max_line_bytes,
        examples: a.examples,
        live: (a.live || !a.scenarios.is_empty() || a.holodeck.is_some()).then_some(
            guardwire::suite::live::LiveOptions {
                concurrency: a.concurrency.unwrap_or(4),
                timeout,
                retry: guardwire::suite::live::RetryConfig {
                    max_retries: a.max_retries,
                    base_delay: a.retry_base_delay,
                    max_delay: a.retry_max_delay,
                    exponential_base: a.retry_exponential_base,
                },
                stream: a.stream,
                model: a.model,
            },
        ),
        scenarios: a.scenarios,
        holodeck: a
            .holodeck
            .map(|agent| guardwire::suite::holodeck::HolodeckOptions {
                agent,
                timeout_given: a.timeout.is_some(),
                concurrency_given: a.concurrency.is_some(),
            }),
    };
    match guardwire::suite::run(&opts) {
        Ok(guardwire::suite::Verdict::Passed) => ExitCode::SUCCESS,
        Ok(guardwire::suite::Verdict::ThresholdFailed) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn check(path: &std::path::Path) -> ExitCode {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match Runtime::build(config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The upstream client too (its extra CA file), as `serve` would build it.
    if let Err(e) = UpstreamClient::for_config(&runtime.config) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    println!("config {}: ok", path.display());
    println!("listen {}", runtime.config.listen);
    // Every distinct compiled policy once, numbered, with the routes and keys that use it.
    fn number<'a>(policies: &mut Vec<&'a Arc<Policy>>, p: &'a Arc<Policy>) -> usize {
        match policies.iter().position(|q| Arc::ptr_eq(q, p)) {
            Some(i) => i + 1,
            None => {
                policies.push(p);
                policies.len()
            }
        }
    }
    let mut policies: Vec<&Arc<Policy>> = Vec::new();
    for route in &runtime.routes {
        let upstream = route
            .upstream
            .as_ref()
            .map_or("(not configured: answers 404)".to_owned(), |u| {
                format!("{}://{}{}", u.scheme(), u.authority(), u.prefix)
            });
        println!(
            "route {} ({}) -> {}, policy {}",
            route.name,
            route.protocol.name(),
            upstream,
            number(&mut policies, &route.policy)
        );
    }
    for key in &runtime.keys {
        match &key.policy {
            Some(p) => println!("key {}: policy {}", key.id, number(&mut policies, p)),
            None => println!("key {}: the route's policy", key.id),
        }
    }
    for (i, policy) in policies.iter().enumerate() {
        println!("policy {}:", i + 1);
        for pack in policy.packs() {
            println!("  pack {pack}");
        }
        for v in policy.validators() {
            println!(
                "    validators[{}] {} ({}) direction={:?} reasoning={} mode={:?}{}",
                v.index,
                v.type_name,
                v.canonical,
                v.direction,
                if v.reasoning { "check" } else { "skip" },
                v.mode,
                v.id.as_ref()
                    .map(|i| format!(" id={i}"))
                    .unwrap_or_default()
            );
        }
        for e in policy.evals() {
            println!(
                "    evals[{}] {} {} ({}) trigger={:?}",
                e.validator.index, e.id, e.validator.type_name, e.validator.canonical, e.trigger
            );
        }
        println!(
            "  {} validators, {} evals, automata {} KiB",
            policy.validators().len(),
            policy.evals().len(),
            policy.memory_usage() / 1024
        );
    }
    ExitCode::SUCCESS
}

fn serve(path: &std::path::Path) -> ExitCode {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shape = config.server;
    let built = match shape.runtime {
        // The clients are served by threads of their own (src/server/per_core.rs); this one
        // thread runs the signals, the reload watcher, the operators' listener and the evals.
        RuntimeShape::PerCore => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        RuntimeShape::WorkStealing => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(shape.worker_count())
            .enable_all()
            .build(),
    };
    let rt = match built {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async {
        // Inside the runtime: the trace exporter sends on it.
        let traces = match guardwire::telemetry::init(&config) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        // Signal handlers first: a SIGTERM or SIGHUP that arrives while starting (or right
        // after "listening") must drain or reload, not kill the process by default action.
        let stop = shutdown_signal();
        #[cfg(unix)]
        let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
        let server = match guardwire::server::start_from(config, Some(path.to_path_buf())).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        tracing::info!(addr = %server.addr, "guardwire listening");
        if let Some(addr) = server.admin_addr {
            tracing::info!(addr = %addr, "operators' endpoints listening");
        } else if server.gateway.runtime().config.admin.token.is_none() {
            tracing::warn!(
                "/metrics is served nowhere: set admin.listen (or admin.token, to serve it on \
                 this listener to that bearer token)"
            );
        }
        #[cfg(unix)]
        reload_on_sighup(hup, std::sync::Arc::clone(&server.gateway));
        stop.await;
        tracing::info!("shutting down: draining open connections");
        server.shutdown(Duration::from_secs(30)).await;
        // The spans still batched go out before the process does.
        let _ = tokio::task::spawn_blocking(move || traces.shutdown()).await;
        ExitCode::SUCCESS
    })
}

/// SIGHUP reloads the config and packs (kept as they are if anything is invalid).
#[cfg(unix)]
fn reload_on_sighup(
    hup: std::io::Result<tokio::signal::unix::Signal>,
    gateway: std::sync::Arc<guardwire::proxy::Gateway>,
) {
    let Ok(mut hup) = hup else {
        tracing::warn!("cannot listen for SIGHUP; reload with POST /admin/reload instead");
        return;
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the config");
            let _ = gateway.reload().await;
        }
    });
}

/// Registers SIGTERM and SIGINT now and returns the wait for the first of them.
#[cfg(unix)]
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let (term, int) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            (Ok(mut one), Err(_)) | (Err(_), Ok(mut one)) => {
                one.recv().await;
            }
            (Err(_), Err(_)) => std::future::pending().await,
        }
    }
}

#[cfg(not(unix))]
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    let ctrl_c = tokio::signal::ctrl_c();
    async move {
        let _ = ctrl_c.await;
    }
}
