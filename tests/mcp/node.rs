//! The official TypeScript MCP SDK (`@modelcontextprotocol/sdk`, pinned in
//! tests/sdk/node/package-lock.json; `tests/run` installs it with `npm ci`) on both sides of
//! guardwire: its McpServer behind it (tests/sdk/node/mcp_server.mjs, one process serving the
//! SDK's four transport modes: stateful or stateless, SSE or JSON answers) and its Client
//! through it (tests/sdk/node/mcp_client.mjs), the TypeScript client to the Python server and
//! the Python client (tests/mcp/client.py) to the TypeScript server. The servers log every call
//! they serve, which proves what never reached them. `#[ignore]`d: they need `$GUARDWIRE_SDK_NODE`
//! (and `$GUARDWIRE_SDK_PYTHON` for the Python side).

use super::sdk::{self, free_port};
use super::{proxy_for, BLOCKED, PACK};
use crate::common::proxy::{start_config, Proxy};
use crate::common::sdk::client_output;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn node() -> PathBuf {
    match std::env::var_os("GUARDWIRE_SDK_NODE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!("GUARDWIRE_SDK_NODE (the node binary) is not set; see tests/common/sdk.rs"),
    }
}

fn node_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sdk/node")
        .join(name)
}

/// The TypeScript server: one process, every mode at its own path (`/sse`, `/json`,
/// `/stateless`, `/stateless-sse`).
pub(crate) struct TsServer {
    child: Child,
    pub(crate) port: u16,
    log: tempfile::NamedTempFile,
}

impl Drop for TsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TsServer {
    pub(crate) async fn start() -> TsServer {
        let port = free_port();
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new(node())
            .arg(node_script("mcp_server.mjs"))
            .arg(port.to_string())
            .arg(log.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = TsServer { child, port, log };
        for _ in 0..1200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the TypeScript MCP server did not start on port {port}");
    }

    pub(crate) fn url(&self, mode: &str) -> String {
        format!("http://127.0.0.1:{}/{mode}", self.port)
    }

    /// The log lines of one mode (endpoint).
    pub(crate) fn log(&self, mode: &str) -> Vec<Value> {
        std::fs::read_to_string(self.log.path())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["mode"] == mode)
            .collect()
    }
}

/// Runs the TypeScript client against `url` (`extra`: more steps, see mcp_client.mjs).
pub(crate) async fn ts_client(url: &str, banned: &str, extra: &[&str]) -> Value {
    let url = url.to_owned();
    let banned = banned.to_owned();
    let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    let stdout = client_output(node(), move |c| {
        c.arg(node_script("mcp_client.mjs"))
            .arg(url)
            .args(extra)
            .env("GUARDWIRE_BANNED_WORD", banned);
    })
    .await;
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The TypeScript server's violating texts say "classified": the SDK lists every tool with
/// `execution: {taskSupport: "forbidden"}`, which the tests' pack (banning "forbidden") reads
/// as text and would refuse, tool by tool.
const TS_BANNED: &str = "classified";

async fn ts_proxy(upstream: &str) -> Proxy {
    let routes = format!(
        "routes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"{upstream}\"\n"
    );
    start_config("", &PACK.replace("forbidden", TS_BANNED), &routes).await
}

fn blocked(r: &Value, key: &str, validator: &str, ctx: &str) {
    assert_eq!(r[key]["error"]["code"], BLOCKED, "{key}: {ctx}");
    let message = r[key]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(validator), "{key}: {ctx}");
}

/// What every client sees through guardwire, whichever SDKs are on the two sides: clean calls,
/// lists, resources and prompts unchanged; each violation the SDK's error, with nothing of its
/// text; the poisoned `weather` gone from the list.
fn assert_guarded(r: &Value, banned: &str, tools: &[&str], progress: bool, ctx: &str) {
    let ctx = format!("{ctx}: {r}");
    assert!(r.get("fatal").is_none(), "{ctx}");
    assert_eq!(r["tools"]["ok"], json!(tools), "{ctx}");
    assert_eq!(r["add"]["ok"], "5", "{ctx}");
    assert_eq!(r["echo_clean"]["ok"], "echo: hello", "{ctx}");
    blocked(r, "echo_banned", "banned-words", &ctx);
    blocked(r, "leak", "banned-words", &ctx);
    assert_eq!(r["count"]["ok"], "counted to 3", "{ctx}");
    let steps = r["progress"].as_array().map_or(0, Vec::len);
    if progress {
        assert_eq!(steps, 3, "progress notifications survive: {ctx}");
        assert_eq!(r["progress"][2]["message"], "step 3", "{ctx}");
    }
    assert_eq!(
        r["resource_clean"]["ok"],
        json!(["a clean resource"]),
        "{ctx}"
    );
    blocked(r, "resource_bad", "banned-words", &ctx);
    assert_eq!(
        r["prompt_clean"]["ok"],
        json!(["Say hello to Ada."]),
        "{ctx}"
    );
    blocked(r, "prompt_bad", "banned-words", &ctx);
    if r.get("weather").is_some() {
        // The tool guardwire removed from the list cannot be called in the session either.
        blocked(r, "weather", "no-injection", &ctx);
        let message = r["weather"]["error"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(message.contains("removed"), "{ctx}");
    }
    let all = r.to_string().to_lowercase();
    assert!(!all.contains(banned), "nothing of a blocked text: {ctx}");
    assert!(!all.contains("ignore previous"), "{ctx}");
}

/// What the server's own log proves: the violating echo never reached it, the calls whose
/// results were held did; every call came in the client's session.
fn assert_server_log(log: &[Value], session: &Value, ctx: &str) {
    let ctx = format!("{ctx}: {log:?}");
    let echoed: Vec<&Value> = log.iter().filter(|e| e["name"] == "echo").collect();
    assert_eq!(
        echoed.len(),
        1,
        "only the clean echo reached the server: {ctx}"
    );
    assert_eq!(echoed[0]["arguments"]["text"], "hello", "{ctx}");
    for ran in ["add", "leak", "count"] {
        assert!(log.iter().any(|e| e["name"] == ran), "{ran}: {ctx}");
    }
    assert!(
        log.iter()
            .all(|e| e["name"] != "weather" && e["name"] != "run_shell"),
        "{ctx}"
    );
    if !session.is_null() {
        assert!(
            log.iter().all(|e| e["session"] == *session),
            "every call in the client's session {session}: {ctx}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the MCP TypeScript SDK (GUARDWIRE_SDK_NODE, node_modules from tests/run)"]
async fn typescript_sdk_server_behind_guardwire_every_mode() {
    let server = TsServer::start().await;
    let modes = ["sse", "json", "stateless", "stateless-sse"];
    let mut proxies = Vec::new();
    for mode in modes {
        proxies.push(ts_proxy(&server.url(mode)).await);
    }
    // The clients run at once (each is a node process).
    let runs = proxies.iter().map(|p| {
        let url = format!("http://{}/mcp", p.addr());
        async move { ts_client(&url, TS_BANNED, &["profile", "weather"]).await }
    });
    let reports = futures_util::future::join_all(runs).await;
    let tools = ["add", "echo", "leak", "count", "profile"];
    for (mode, r) in modes.iter().zip(&reports) {
        let ctx = format!("TypeScript client, TypeScript server /{mode}");
        assert_guarded(r, TS_BANNED, &tools, mode.ends_with("sse"), &ctx);
        blocked(r, "profile", "banned-words", &ctx);
        assert_eq!(r["protocol_version"], "2025-11-25", "{ctx}: {r}");
        let stateful = !mode.starts_with("stateless");
        assert_eq!(r["session_id"].is_string(), stateful, "{ctx}: {r}");
        assert_eq!(r["session_id_at_end"], r["session_id"], "{ctx}: {r}");
        if stateful {
            assert_eq!(
                r["terminate"]["ok"], true,
                "DELETE ends the session: {ctx}: {r}"
            );
        }
        let log: Vec<Value> = server.log(mode);
        assert_server_log(&log, &r["session_id"], &ctx);
        assert!(log.iter().any(|e| e["name"] == "profile"), "{ctx}: {log:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the MCP TypeScript SDK (GUARDWIRE_SDK_NODE, node_modules from tests/run) and the Python SDK (GUARDWIRE_SDK_PYTHON)"]
async fn typescript_client_through_guardwire_to_the_python_server() {
    let server = sdk::Server::start("sse").await;
    let p = proxy_for(&format!("http://127.0.0.1:{}/mcp", server.port), "", "").await;
    let r = ts_client(
        &format!("http://{}/mcp", p.addr()),
        "forbidden",
        &["weather"],
    )
    .await;
    let ctx = "TypeScript client, Python server (SSE)";
    assert_guarded(
        &r,
        "forbidden",
        &["add", "echo", "leak", "count"],
        true,
        ctx,
    );
    assert!(r["session_id"].is_string(), "{ctx}: {r}");
    assert_eq!(r["terminate"]["ok"], true, "{ctx}: {r}");
    assert_server_log(&server.log(), &Value::Null, ctx);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the MCP TypeScript SDK (GUARDWIRE_SDK_NODE, node_modules from tests/run) and the Python SDK (GUARDWIRE_SDK_PYTHON)"]
async fn python_client_through_guardwire_to_the_typescript_server() {
    let server = TsServer::start().await;
    // Both words banned: the Python client's violating argument says "forbidden", the
    // TypeScript server's texts "classified" — and the SDK's `execution.taskSupport:
    // "forbidden"` on every listed tool is structure, so the list comes whole.
    let pack = PACK.replace(
        r#"["forbidden"]"#,
        &format!(r#"["forbidden", "{TS_BANNED}"]"#),
    );
    assert_ne!(pack, PACK);
    // Stateful with SSE answers (progress), and stateless with JSON answers.
    let modes = ["sse", "stateless"];
    let mut proxies = Vec::new();
    for mode in modes {
        let routes = format!(
            "routes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"{}\"\n",
            server.url(mode)
        );
        proxies.push(start_config("", &pack, &routes).await);
    }
    let runs = proxies.iter().map(|p| {
        let url = format!("http://{}/mcp", p.addr());
        async move { sdk::client(&url, "legacy").await }
    });
    let reports = futures_util::future::join_all(runs).await;
    let tools = ["add", "echo", "leak", "count", "profile"];
    for (mode, r) in modes.iter().zip(&reports) {
        let ctx = format!("Python client, TypeScript server /{mode}");
        assert_guarded(r, TS_BANNED, &tools, *mode == "sse", &ctx);
        assert!(!r.to_string().contains("forbidden"), "{ctx}: {r}");
        assert_server_log(&server.log(mode), &Value::Null, &ctx);
    }
}
