//! What operators run against guardwire, run for real: Prometheus' own tools on the alerting
//! rules (`deploy/prometheus/`), and a live Prometheus server scraping guardwire while it
//! proxies traffic, against which every query of the Grafana dashboard (`deploy/grafana/`)
//! must return data. Both need Debian's prometheus package (tests/run installs it), so they are
//! `#[ignore]`d in a plain `cargo test`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use common::mock_upstream::{openai_chat_stream_with_usage, MockUpstream, Reply};
use common::proxy::*;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A Prometheus tool: `GUARDWIRE_<VAR>` when set (tests/run sets it), else `name` on PATH.
fn tool(var: &str, name: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(|| PathBuf::from(name), PathBuf::from)
}

fn run(program: &Path, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(ROOT)
        .output()
        .unwrap_or_else(|e| panic!("{} (Debian package prometheus): {e}", program.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{} {args:?}: {text}",
        program.display()
    );
    text
}

#[test]
#[ignore = "needs promtool (Debian package prometheus; tests/run installs it)"]
fn alert_rules_pass_promtool_and_their_unit_tests() {
    let promtool = tool("GUARDWIRE_PROMTOOL", "promtool");
    let out = run(
        &promtool,
        &["check", "rules", "deploy/prometheus/alerts.yaml"],
    );
    assert!(out.contains("SUCCESS: 8 rules found"), "{out}");
    let out = run(
        &promtool,
        &["test", "rules", "deploy/prometheus/alerts_test.yaml"],
    );
    assert!(out.contains("SUCCESS"), "{out}");
}

/// A Prometheus server, stopped when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Prometheus scraping `target` every second as job `guardwire`.
async fn start_prometheus(target: SocketAddr) -> Prometheus {
    let binary = tool("GUARDWIRE_PROMETHEUS", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{ scrape_interval: 1s, evaluation_interval: 1s }}\n\
             scrape_configs:\n  - job_name: guardwire\n    static_configs:\n      \
             - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    // The port is chosen before Prometheus binds it; it is retried if another process took it.
    for _ in 0..5 {
        let addr: SocketAddr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} (Debian package prometheus): {e}", binary.display()));
        let mut child = child;
        for _ in 0..300 {
            if let Ok(Some(_)) = child.try_wait() {
                break; // exited: the port was taken, or worse; try again
            }
            if tokio::net::TcpStream::connect(addr).await.is_ok()
                && send(addr, "GET", "/-/ready", Bytes::new(), &[])
                    .await
                    .status
                    == 200
            {
                return Prometheus {
                    child,
                    addr,
                    _dir: dir,
                };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("Prometheus did not start");
}

/// Percent-encodes a query-string value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The instant vector (or scalar) Prometheus answers `query` with now.
async fn query(prometheus: SocketAddr, query: &str) -> Vec<serde_json::Value> {
    let path = format!("/api/v1/query?query={}", encode(query));
    let a = send(prometheus, "GET", &path, Bytes::new(), &[]).await;
    let v: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(v["status"], "success", "{query}: {v}");
    match &v["data"]["result"] {
        serde_json::Value::Array(r) => r.clone(),
        other => vec![other.clone()],
    }
}

/// The dashboard's queries, with Grafana's range variables given values Prometheus can use.
fn dashboard_queries() -> Vec<(String, String)> {
    let path = Path::new(ROOT).join("deploy/grafana/guardwire.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let expr = expr
                .replace("$__rate_interval", "1m")
                .replace("$__range", "5m");
            assert!(!expr.contains('$'), "an unknown variable in {expr}");
            queries.push((panel["title"].as_str().unwrap().to_owned(), expr));
        }
    }
    queries
}

#[tokio::test]
#[ignore = "needs prometheus (Debian package prometheus; tests/run installs it)"]
async fn every_dashboard_query_returns_data_from_a_live_prometheus() {
    // Streams that end with the provider's usage, a pack that blocks, redacts and monitors, a
    // price for the model: traffic for every panel.
    let answer = openai_chat_stream_with_usage(&["card 4111 1111 1111 1111 ok"], 5, 9);
    let mock = MockUpstream::start(move |_| Reply::sse(&answer)).await;
    let pack = ONE_OF_EACH_MODE_PACK;
    // Scraped where deployments scrape it: the operators' listener.
    let extra = "prices: { gpt-4o: { input_per_mtok: 2.5, output_per_mtok: 10.0 } }\n\
                 admin: { listen: \"127.0.0.1:0\" }";
    let proxy = start_proxy(&mock.base_url(), pack, extra).await;
    let prometheus = start_prometheus(proxy.server.admin_addr.unwrap()).await;

    let blocked = STREAM_REQUEST.replace("\"content\":\"", "\"content\":\"forbidden ");
    let queries = dashboard_queries();
    assert!(queries.len() >= 20, "{queries:?}");
    let mut missing = queries.clone();
    // Traffic between scrapes until every query has data (rates need two samples of a series
    // in their window); bounded, so a query that never returns data fails the test.
    for _ in 0..60 {
        for _ in 0..3 {
            assert_eq!(post_chat(proxy.addr(), STREAM_REQUEST).await.status, 200);
        }
        assert_eq!(post_chat(proxy.addr(), &blocked).await.status, 400);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut still = Vec::new();
        for (title, expr) in missing {
            if query(prometheus.addr, &expr).await.is_empty() {
                still.push((title, expr));
            }
        }
        missing = still;
        if missing.is_empty() {
            break;
        }
    }
    assert!(
        missing.is_empty(),
        "dashboard queries without data: {missing:#?}"
    );
    // The scrape itself is healthy.
    let up = query(prometheus.addr, "up{job=\"guardwire\"}").await;
    assert_eq!(up[0]["value"][1], "1", "{up:?}");
}
