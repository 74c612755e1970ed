//! Harness of the SDK conformance tests (tests/sdk_*.rs): a mock upstream, guardwire in front of
//! it (every provider's upstream pointing at the mock), and one run of an official SDK's scenario
//! script against guardwire's address.
//!
//! The Python scripts (tests/sdk/*.py) run with `$GUARDWIRE_SDK_PYTHON`, the interpreter of the
//! venv that `tests/run` builds from tests/sdk/requirements.txt; the Node script
//! (tests/sdk/node/openai.mjs) runs with `$GUARDWIRE_SDK_NODE`, next to the node_modules that
//! `tests/run` installs there with `npm ci`. The tests are `#[ignore]`d so a plain `cargo test`
//! works without either; `tests/run` runs them with `--include-ignored`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::mock_upstream::{MockUpstream, Reply};
use super::proxy::{start_proxy_all, Proxy};

pub const BANNED: &str = "forbidden";
pub const OUTPUT_MESSAGE: &str = "The answer used a banned word.";
pub const INPUT_MESSAGE: &str = "The prompt contained a secret.";
pub const PACK: &str = r#"
name: sdk-conformance
validators:
  - id: no-forbidden
    type: banned_words
    message: "The answer used a banned word."
    params: { words: ["forbidden"] }
  - id: no-secrets-in-prompts
    type: regex
    message: "The prompt contained a secret."
    params: { pattern: "secret-\\d+", expect_match: false, direction: input }
"#;
/// Masks card numbers (pii) and a code name (content_excludes) in answers.
#[allow(dead_code)]
pub const REDACT_PACK: &str = r#"
validators:
  - id: cards
    type: pii
    mode: redact
    params: { types: [credit_card] }
  - id: codename
    type: content_excludes
    mode: redact
    mask: "[codename]"
    params: { patterns: ["bluebird"] }
"#;
pub const WAIT: Duration = Duration::from_secs(10);
/// Between two pieces of an upstream body: enough for each piece to travel on its own.
pub const PIECE_DELAY: Duration = Duration::from_millis(3);
/// The name of the one tool the scripts declare (tests/sdk/sdk_harness.py, openai.mjs).
pub const TOOL_NAME: &str = "search_archive";

// ---- the SDKs ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runtime {
    Python,
    Node,
}

/// One SDK scenario script and the interpreter that runs it.
pub struct Sdk {
    runtime: Runtime,
    interpreter: PathBuf,
    /// Relative to the crate root.
    script: &'static str,
    /// Appended to `http://127.0.0.1:PORT` to make the SDK's base URL.
    base_path: &'static str,
}

impl Sdk {
    /// `openai` (Python): Chat Completions. Panics (failing the test) without the venv.
    pub fn openai_chat() -> Sdk {
        Sdk::python("tests/sdk/openai_chat.py", "/v1")
    }

    /// `openai` (Python): Responses.
    pub fn openai_responses() -> Sdk {
        Sdk::python("tests/sdk/openai_responses.py", "/v1")
    }

    /// `anthropic` (Python): Messages. Its base URL is the bare origin.
    pub fn anthropic() -> Sdk {
        Sdk::python("tests/sdk/anthropic_messages.py", "")
    }

    /// `google-genai` (Python): Gemini. Its base URL is the bare origin (it adds `/v1beta`).
    pub fn gemini() -> Sdk {
        Sdk::python("tests/sdk/gemini.py", "")
    }

    /// `openai` (npm): Chat Completions and Responses. Panics without `$GUARDWIRE_SDK_NODE`.
    pub fn node_openai() -> Sdk {
        Sdk {
            runtime: Runtime::Node,
            interpreter: interpreter("GUARDWIRE_SDK_NODE", "the Node.js binary"),
            script: "tests/sdk/node/openai.mjs",
            base_path: "/v1",
        }
    }

    fn python(script: &'static str, base_path: &'static str) -> Sdk {
        Sdk {
            runtime: Runtime::Python,
            interpreter: interpreter("GUARDWIRE_SDK_PYTHON", "the SDK venv's python"),
            script,
            base_path,
        }
    }
}

/// The interpreter named by `var`; without it these tests fail (never pass silently).
fn interpreter(var: &str, what: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!(
            "{var} ({what}) is not set. The SDK conformance tests drive the official SDKs that \
             `tests/run` installs (a venv at target/sdk-venv, node_modules under \
             tests/sdk/node): run `tests/run`, or after it ran once: \
             `GUARDWIRE_SDK_PYTHON=$PWD/target/sdk-venv/bin/python \
             GUARDWIRE_SDK_NODE=$(command -v node) cargo test --test <sdk_...> -- \
             --include-ignored`."
        ),
    }
}

// ---- guardwire in front of a mock ----

pub struct Harness {
    pub mock: MockUpstream,
    pub proxy: Proxy,
}

impl Harness {
    /// A mock answering every request with `reply`, and guardwire (with [`PACK`]) in front of
    /// it for every provider.
    pub async fn start(reply: Reply) -> Harness {
        Self::start_with(reply, PACK).await
    }

    /// Like [`Harness::start`], with another pack.
    #[allow(dead_code)]
    pub async fn start_with(reply: Reply, pack: &str) -> Harness {
        let mock = MockUpstream::start(move |_| reply.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
        Harness { mock, proxy }
    }

    /// Like [`Harness::start_with`], with `extra` config lines (keys, limits, …).
    #[allow(dead_code)]
    pub async fn start_config(reply: Reply, pack: &str, extra: &str) -> Harness {
        let mock = MockUpstream::start(move |_| reply.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), pack, extra).await;
        Harness { mock, proxy }
    }

    /// Runs one scenario of `sdk`'s script against this guardwire; its JSON report.
    pub async fn run(&self, sdk: &Sdk, scenario: &str) -> Value {
        run_sdk(sdk, self.proxy.addr(), scenario).await
    }

    pub async fn stop(self) {
        self.proxy.server.shutdown(Duration::from_secs(1)).await;
    }
}

async fn run_sdk(sdk: &Sdk, addr: SocketAddr, scenario: &str) -> Value {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = manifest.join(sdk.script);
    // Node resolves `openai` from the script's directory (its node_modules); run it there.
    let cwd = match sdk.runtime {
        Runtime::Python => manifest.to_path_buf(),
        Runtime::Node => script.parent().unwrap_or(manifest).to_path_buf(),
    };
    let base_url = format!("http://{addr}{}", sdk.base_path);
    let interpreter = sdk.interpreter.clone();
    let runtime = sdk.runtime;
    let scenario = scenario.to_owned();
    let label = format!("{} {} {scenario}", interpreter.display(), script.display());
    let output = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(&interpreter);
        cmd.arg(&script)
            .arg(&scenario)
            .current_dir(cwd)
            // A clean environment: no proxies, no API keys or SDK settings leaking into the
            // client.
            .env_clear()
            .env("GUARDWIRE_BASE_URL", &base_url);
        if runtime == Runtime::Python {
            cmd.env("PYTHONDONTWRITEBYTECODE", "1")
                .env("PYTHONUTF8", "1");
        }
        for name in ["PATH", "LD_LIBRARY_PATH", "TMPDIR"] {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd.output()
    })
    .await
    .expect("SDK runner task")
    .unwrap_or_else(|e| panic!("could not run `{label}`: {e} (run tests/run to install the SDKs)"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let context = format!(
        "`{label}` ({})\n--- stdout\n{stdout}--- stderr\n{stderr}",
        output.status
    );
    assert!(output.status.success(), "SDK scenario failed: {context}");
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected exactly one JSON object on stdout: {context}"
    );
    let report: Value = serde_json::from_str(lines[0])
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {context}"));
    assert_eq!(report["ok"], json!(true), "{context}");
    // Shown for failing tests (and with --nocapture).
    eprintln!("{label}: {report}");
    report
}

// ---- upstream bodies ----

/// Byte offsets inside every occurrence of each needle (after its first byte and at its middle),
/// so the upstream's body frames split words, `data:` field names and UTF-8 characters.
pub fn points_inside(body: &[u8], needles: &[&str]) -> Vec<usize> {
    let mut points = Vec::new();
    for needle in needles {
        let n = needle.as_bytes();
        assert!(n.len() >= 2, "needle {needle:?} too short to split");
        let mut from = 0;
        while let Some(i) = body[from..].windows(n.len()).position(|w| w == n) {
            let at = from + i;
            points.push(at + 1);
            points.push(at + n.len() / 2);
            from = at + 1;
        }
    }
    assert!(!points.is_empty(), "no needle of {needles:?} in the body");
    points
}

/// Many more pieces after the violation: a long answer the upstream is still producing.
pub fn long_tail(n: usize) -> Vec<String> {
    (0..n).map(|i| format!(" and more words ({i})")).collect()
}

/// `event: <name>` + `data: <json>` frames, concatenated.
pub fn sse_events(events: &[(&str, Value)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in events {
        out.extend_from_slice(format!("event: {name}\ndata: {data}\n\n").as_bytes());
    }
    out
}

// ---- assertions ----

/// `yielded` holds nothing at or after the position of the banned word: it is `clean_prefix`
/// or a prefix of it (frames may be held back whole), so not even a first character of the
/// banned word reached the application.
pub fn assert_no_leak(yielded: &str, clean_prefix: &str, report: &Value) {
    assert!(
        clean_prefix.starts_with(yielded),
        "the application received {yielded:?}, which is not a prefix of the clean text \
         {clean_prefix:?} before {BANNED:?}: {report:#}"
    );
}

/// An openai SDK (Python or Node) saw guardwire's mid-stream error event as its `APIError`,
/// with guardwire's code, type and message.
pub fn assert_openai_stream_blocked(report: &Value) {
    assert_eq!(report["exception"], json!("APIError"), "{report:#}");
    assert_eq!(report["code"], json!("content_blocked"), "{report:#}");
    assert_eq!(report["type"], json!("guardrail_violation"), "{report:#}");
    assert_eq!(report["message"], json!(OUTPUT_MESSAGE), "{report:#}");
}

/// The upstream saw the request cancelled after a block, and never finished sending its reply.
pub async fn assert_cancelled(mock: &MockUpstream) {
    assert!(
        mock.wait_for_cancelled(1, WAIT).await,
        "the upstream request was not cancelled after the block"
    );
    assert_eq!(mock.completed_count(), 0);
}

/// An OpenAI SDK request reached the upstream once, at `path`, with the client's key and
/// the `stream` flag as the test set it.
pub fn assert_openai_forwarded(mock: &MockUpstream, path: &str, stream: bool) {
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "exactly one upstream request");
    let r = &requests[0];
    assert_eq!(r.path_and_query, path);
    assert_eq!(r.header("authorization"), Some("Bearer test-key"));
    let body = r.body_json().expect("upstream request body is JSON");
    assert_eq!(body["model"], json!("gpt-4o"));
    assert_eq!(body["stream"].as_bool().unwrap_or(false), stream, "{body}");
}

/// Runs a client program (an SDK script) to its end and returns what it printed. It runs on
/// the blocking pool: the test's async workers serve the proxy it talks to. A client that
/// fails fails the test, with its output and its stderr.
pub async fn client_output(
    program: impl AsRef<std::ffi::OsStr>,
    args: impl FnOnce(&mut std::process::Command),
) -> String {
    let mut cmd = std::process::Command::new(program);
    args(&mut cmd);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "client failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
