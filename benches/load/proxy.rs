//! guardwire as a child process: its config, start, readiness, and CPU and RSS from `/proc`.

use crate::common;
use crate::common::fixtures::yaml_quote;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

pub(super) struct Proxy {
    pub(super) label: &'static str,
    child: Child,
    pub(super) addr: SocketAddr,
}

impl Proxy {
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn write_config(
    dir: &Path,
    name: &str,
    mock: SocketAddr,
    pack: Option<&Path>,
    port: u16,
) -> PathBuf {
    let packs = pack.map_or("[]".to_owned(), |p| {
        format!("[{}]", yaml_quote(&p.display().to_string()))
    });
    let yaml = format!(
        "listen: \"127.0.0.1:{port}\"\n\
         upstreams:\n  openai: \"http://{mock}\"\n  anthropic: \"http://{mock}\"\n  gemini: \"http://{mock}\"\n\
         packs: {packs}\n\
         limits:\n  max_concurrent_requests: 20000\n\
         log:\n  level: warn\n\
         reload:\n  poll_ms: 0\n"
    );
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The binary under test: this build's, or `GUARDWIRE_BIN` (another build, for comparing two
/// in alternating runs).
pub(super) fn guardwire_bin() -> PathBuf {
    common::guardwire_bin()
}

/// `guardwire check` on a config: Ok, or the first error line.
pub(super) fn check(config: &Path) -> Result<(), String> {
    let out = Command::new(guardwire_bin())
        .args(["check", "--config"])
        .arg(config)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(err.lines().next().unwrap_or("(no message)").to_owned())
    }
}

pub(super) fn spawn_proxy(label: &'static str, config: &Path, port: u16) -> Proxy {
    let child = Command::new(guardwire_bin())
        .args(["serve", "--config"])
        .arg(config)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("cannot start target/release/guardwire");
    Proxy {
        label,
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    }
}

pub(super) async fn wait_ready(p: &mut Proxy) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("guardwire ({}) exited during startup: {status}", p.label);
        }
        if let Ok(stream) = TcpStream::connect(p.addr).await {
            if let Ok((mut send, conn)) =
                hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream)).await
            {
                tokio::spawn(conn);
                let req = Request::get("/readyz")
                    .header("host", "localhost")
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                if let Ok(r) = send.send_request(req).await {
                    if r.status() == StatusCode::OK {
                        return;
                    }
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "guardwire ({}) not ready in 120 s",
            p.label
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// (utime, stime) of `pid`, in seconds (USER_HZ = 100 on Linux). stime includes the kernel's
/// TCP work done in the proxy's system calls — on loopback also the receiving side's.
pub(super) fn cpu_seconds(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) as f64 / 100.0, ticks(12) as f64 / 100.0)
}

/// VmRSS of `pid` in KiB.
pub(super) fn rss_kib(pid: u32) -> u64 {
    common::status_kib(pid, "VmRSS:")
}
