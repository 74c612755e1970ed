//! The proxies under test as child processes: guardwire (its config, start, readiness), the
//! bare hyper relay (relay.rs, this binary started again) and nginx as the anchor (a plain
//! reverse proxy in front of the same mock), and their CPU and RSS from `/proc` — for nginx
//! summed over the master and its workers.

use crate::common;
use crate::common::fixtures::yaml_quote;
use crate::relay::SERVE_RELAY;
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
    /// guardwire answers `/readyz` itself; the relay passes it to the mock (404): any answer
    /// then says it relays.
    readyz_ok_only: bool,
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
    extra: &str,
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
         reload:\n  poll_ms: 0\n{extra}"
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
    let mut command = Command::new(guardwire_bin());
    command
        .args(["serve", "--config"])
        .arg(config)
        .env_remove("RUST_LOG");
    spawn(command, label, port, true)
}

/// The bare hyper relay (relay.rs) in front of `upstream`, with `workers` runtime threads: this
/// bench binary, started again with [`SERVE_RELAY`].
pub(super) fn spawn_relay(upstream: SocketAddr, port: u16, workers: usize) -> Proxy {
    let mut command = Command::new(std::env::current_exe().expect("the bench's own path"));
    command.arg(SERVE_RELAY).args([
        format!("127.0.0.1:{port}"),
        upstream.to_string(),
        workers.to_string(),
    ]);
    spawn(command, "bare hyper relay", port, false)
}

/// Starts `command`, a proxy that will listen on `port` on 127.0.0.1: no input, its output
/// dropped, its errors on the bench's.
fn spawn(mut command: Command, label: &'static str, port: u16, readyz_ok_only: bool) -> Proxy {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {label}: {e}"));
    Proxy {
        label,
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        readyz_ok_only,
    }
}

pub(super) async fn wait_ready(p: &mut Proxy) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("{} exited during startup: {status}", p.label);
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
                    if r.status() == StatusCode::OK || !p.readyz_ok_only {
                        return;
                    }
                }
            }
        }
        assert!(Instant::now() < deadline, "{} not ready in 120 s", p.label);
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

/// (voluntary, involuntary) context switches of every live thread of `pid`, from
/// `/proc/PID/task/*/status` (a thread that has exited is no longer counted: the proxies' threads
/// live as long as they do).
pub(super) fn switches(pid: u32) -> (u64, u64) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0, 0);
    };
    let mut sum = (0, 0);
    for task in tasks.flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        sum.0 += field("voluntary_ctxt_switches:");
        sum.1 += field("nonvoluntary_ctxt_switches:");
    }
    sum
}

/// VmRSS of `pid` in KiB.
pub(super) fn rss_kib(pid: u32) -> u64 {
    common::status_kib(pid, "VmRSS:")
}

/// What a phase measures CPU and memory of: one process (guardwire), or a process and its
/// children (nginx's master and workers).
#[derive(Clone, Copy, Debug)]
pub(super) enum Meter {
    Process(u32),
    Tree(u32),
}

impl Meter {
    fn pids(self) -> Vec<u32> {
        match self {
            Meter::Process(pid) => vec![pid],
            Meter::Tree(pid) => {
                let mut pids = vec![pid];
                pids.extend(children(pid));
                pids
            }
        }
    }

    /// (utime, stime) in seconds, summed over the processes.
    pub(super) fn cpu(self) -> (f64, f64) {
        self.pids()
            .into_iter()
            .map(cpu_seconds)
            .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    /// (voluntary, involuntary) context switches, summed over the processes' threads.
    pub(super) fn switches(self) -> (u64, u64) {
        self.pids()
            .into_iter()
            .map(switches)
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    /// VmRSS in KiB, summed over the processes (pages nginx's workers share with the master,
    /// its code, count once per process: a difference between two samples cancels them).
    pub(super) fn rss_kib(self) -> u64 {
        self.pids().into_iter().map(rss_kib).sum()
    }
}

/// The live children of `parent` (field 4 of `/proc/PID/stat`).
fn children(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
            rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) == Some(parent)
        })
        .collect()
}

/// nginx running as a plain reverse proxy in front of the mock (`-g 'daemon off;'`, so the
/// child is the master); killed with the bench.
pub(super) struct Nginx {
    child: Child,
    pub(super) addr: SocketAddr,
    pub(super) workers: usize,
}

impl Nginx {
    pub(super) fn meter(&self) -> Meter {
        Meter::Tree(self.child.id())
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its workers and exits; SIGKILL if it has not in 5 s.
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The nginx binary: `GUARDWIRE_NGINX`, `NGINX`, or `nginx` on PATH or in the sbin
/// directories (Debian's place, not on a normal user's PATH).
pub(super) fn nginx_bin() -> Option<PathBuf> {
    if let Some(p) = ["GUARDWIRE_NGINX", "NGINX"]
        .iter()
        .find_map(std::env::var_os)
    {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join("nginx"))
        .find(|p| p.is_file())
}

/// Starts nginx as a production-like plain reverse proxy in front of `mock`: one worker
/// process per core, `proxy_buffering off` (every chunk relayed as it comes), HTTP/1.1
/// keep-alive connections to the upstream, no access log. `nofile` sizes its connection
/// table. Err with the reason when nginx is missing or does not start.
pub(super) fn start_nginx(dir: &Path, mock: SocketAddr, nofile: u64) -> Result<Nginx, String> {
    let bin = nginx_bin().ok_or("nginx not found (set GUARDWIRE_NGINX or NGINX)")?;
    let prefix = dir.join("nginx");
    std::fs::create_dir_all(prefix.join("tmp")).map_err(|e| e.to_string())?;
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut last_error = String::new();
    // The port is chosen before nginx binds it; another process may take it in between.
    for _ in 0..5 {
        let port = common::free_port();
        let conf = format!(
            r#"worker_processes {workers};
worker_rlimit_nofile {nofile};
error_log {prefix}/error.log error;
pid {prefix}/nginx.pid;
events {{ worker_connections {nofile}; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    upstream mock {{
        server {mock};
        keepalive 1024;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port} backlog=8192;
        location / {{
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"#,
            prefix = prefix.display(),
        );
        let conf_path = prefix.join("nginx.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        // Its log goes to a file: a pipe nobody reads could fill and block a worker.
        let child = Command::new(&bin)
            .arg("-e")
            .arg(prefix.join("error.log"))
            .arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&conf_path)
            .arg("-g")
            .arg("daemon off;")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut nginx = Nginx {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            workers,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = nginx.child.try_wait() {
                break;
            }
            if std::net::TcpStream::connect(nginx.addr).is_ok()
                && children(nginx.child.id()).len() >= workers
            {
                return Ok(nginx);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = nginx.child.kill();
        let _ = nginx.child.wait();
        last_error = std::fs::read_to_string(prefix.join("error.log")).unwrap_or_default();
    }
    Err(format!("nginx did not start: {}", last_error.trim()))
}
