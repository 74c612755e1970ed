//! The real `guardwire` binary as a test starts it: `serve` with a config, JSON logs on stdout.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_guardwire");

/// `guardwire serve --config <path>`, from the repository, stdout piped.
pub fn spawn_serve(path: &std::path::Path) -> std::process::Child {
    Command::new(BIN)
        .args(["serve", "--config", path.to_str().unwrap()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// guardwire started as `serve` with `config` (`log.format: json`; run from the repository, so
/// relative pack paths such as `config/packs/default.yaml` resolve); its stdout lines, once it
/// has exited.
pub struct Serve {
    child: std::process::Child,
    pub addr: SocketAddr,
    lines: tokio::task::JoinHandle<Vec<String>>,
}

pub async fn serve(config: &str) -> (Serve, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.yaml");
    std::fs::write(&path, config).unwrap();
    let mut child = spawn_serve(&path);
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let lines = tokio::task::spawn_blocking(move || {
        let mut tx = Some(tx);
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let v: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            if v["fields"]["message"] == "guardwire listening" {
                let addr: SocketAddr = v["fields"]["addr"].as_str().unwrap().parse().unwrap();
                if let Some(tx) = tx.take() {
                    let _ = tx.send(addr);
                }
            }
            lines.push(line);
        }
        lines
    });
    let addr = rx.await.expect("guardwire never said it was listening");
    (Serve { child, addr, lines }, dir)
}

impl Serve {
    /// The process id of guardwire.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then its stdout lines once it has exited (cleanly).
    pub async fn stop(mut self) -> Vec<String> {
        let kill = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let status = tokio::task::spawn_blocking(move || self.child.wait().unwrap())
            .await
            .unwrap();
        assert!(status.success(), "exit status {status}");
        self.lines.await.unwrap()
    }
}

/// `guardwire eval ARGS` from the repository, without standard input or `GUARDWIRE_EVAL_KEY`:
/// (exit status, stdout and stderr).
pub fn eval(args: &[&str]) -> (i32, String) {
    let mut all = vec!["eval"];
    all.extend_from_slice(args);
    run(&all)
}

/// [`eval`] on tokio's blocking pool: a run that calls servers this test's runtime serves
/// must not hold one of its workers.
pub async fn eval_off_workers(args: &[&str]) -> (i32, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        eval(&refs)
    })
    .await
    .unwrap()
}

/// `guardwire eval --config C --scenario S --model gpt-4o-mini --json R` with the config and
/// scenario texts written to a temporary folder, off the async workers: the exit status, the
/// JSON report, and what the command printed.
pub async fn scenario_report(config: &str, scenario: &str) -> (i32, serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let (config_path, scenario_path, report) = (
        dir.path().join("config.yaml"),
        dir.path().join("scenario.yaml"),
        dir.path().join("report.json"),
    );
    std::fs::write(&config_path, config).unwrap();
    std::fs::write(&scenario_path, scenario).unwrap();
    let (code, out) = eval_off_workers(&[
        "--config",
        config_path.to_str().unwrap(),
        "--scenario",
        scenario_path.to_str().unwrap(),
        "--model",
        "gpt-4o-mini",
        "--json",
        report.to_str().unwrap(),
    ])
    .await;
    let r = serde_json::from_slice(&std::fs::read(&report).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {out}"));
    (code, r, out)
}

/// `guardwire ARGS` (any subcommand) the same way.
pub fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("GUARDWIRE_EVAL_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}
