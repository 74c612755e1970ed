//! guardwire in front of real HTTP servers, started by the tests on 127.0.0.1: nginx (Debian's
//! package, serving recorded answers as static files), a uvicorn ASGI app (h11: what vLLM,
//! SGLang and LiteLLM serve with), Node's `http` server (default `requireHostHeader`), Node's
//! `https` server (HTTP/1.1 over TLS, no ALPN) and hyper (the mock upstream). Each serves the
//! same recorded answers; for every protocol a streamed answer and a whole one must arrive
//! byte for byte, over one kept-alive upstream connection, and a stream carrying a banned
//! phrase must end with the protocol's error frame. uvicorn (vLLM's way) and Node (OpenAI's
//! way, `"usage":null` in every chunk) also report a streamed Chat answer's usage when asked:
//! guardwire asks on the client's behalf, counts the server's figures and relays the stream the
//! client asked for, byte for byte.
//!
//! Every strict server answers 400 to an HTTP/1.1 request without `Host` or with an
//! absolute-form target it does not serve; each also echoes the `Host` it saw and the client
//! port, which the tests compare with the upstream's authority and across requests.
//!
//! `#[ignore]`d like the SDK tests (they need nginx, the venv's uvicorn and node): `tests/run`
//! installs those and runs them. A server that cannot be started fails its test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{MockUpstream, Reply};
use common::protocols::{all, Proto};
use common::proxy::{metrics, send, start_config, Answer, Proxy};
use http::StatusCode;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PACK: &str = r#"
validators:
  - id: no-forbidden
    type: banned_words
    message: "Blocked: forbidden word."
    params: { words: ["forbidden fruit"] }
"#;
const MESSAGE: &str = "Blocked: forbidden word.";
const BANNED: &str = "forbidden fruit";
/// How long a server may take to start.
const START: Duration = Duration::from_secs(20);

// ---- the recorded answers ----

/// The three answer kinds, each a directory of the tree and a path prefix of the upstream.
const STREAM: &str = "stream";
const WHOLE: &str = "whole";
const BLOCKED: &str = "blocked";

/// The upstream path an answer is stored under (the request path without its query).
fn stored_path(p: &Proto, kind: &str) -> String {
    let path = if kind == WHOLE {
        p.plain_path
    } else {
        p.stream_path
    };
    format!("{kind}{}", path.split('?').next().unwrap())
}

fn recorded(p: &Proto, kind: &str) -> String {
    match kind {
        STREAM => (p.text_frames)(&["Hello", ", wor", "ld"]).0.concat(),
        WHOLE => (p.whole)("A whole answer."),
        _ => (p.text_frames)(&["All ", "forbidden ", "fruit", " is sweet"])
            .0
            .concat(),
    }
}

/// Writes every protocol's recorded answers under `dir` (readable by nginx's worker, which
/// may run as another user).
fn write_answers(dir: &Path) {
    for p in all() {
        for kind in [STREAM, WHOLE, BLOCKED] {
            let file = dir.join(stored_path(&p, kind));
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, recorded(&p, kind)).unwrap();
        }
    }
    make_world_readable(dir);
}

fn make_world_readable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            }
        }
    }
}

// ---- guardwire in front of a server ----

/// guardwire with one route per answer kind and protocol: `/<kind>/<protocol>/…` goes to
/// `<base>/<kind>/…` (base URLs with a path, as for a gateway under a prefix).
async fn guardwire_before(base: &str, extra: &str) -> Proxy {
    let mut routes = String::from("routes:\n");
    for p in all() {
        for kind in [STREAM, WHOLE, BLOCKED] {
            let prefix = format!("/{kind}/{}", p.name);
            routes += &format!(
                "  - {{ name: {kind}-{name}, protocol: {name}, path_prefix: \"{prefix}\", strip_prefix: \"{prefix}\", upstream: \"{base}/{kind}\" }}\n",
                name = p.name
            );
        }
    }
    start_config("", PACK, &format!("{routes}{extra}")).await
}

async fn ask(proxy: &Proxy, p: &Proto, kind: &str) -> Answer {
    let (path, body) = if kind == WHOLE {
        (p.plain_path, (p.plain_body)("hi"))
    } else {
        (p.stream_path, (p.stream_body)("hi"))
    };
    send(
        proxy.addr(),
        "POST",
        &format!("/{kind}/{}{path}", p.name),
        body,
        &[("content-type", "application/json")],
    )
    .await
}

fn header(a: &Answer, name: &str) -> String {
    a.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Runs every protocol's streamed, whole and blocked exchange through `proxy` to the server
/// named `server` at `authority`. Returns the client ports the server reported for the clean
/// exchanges (one per kept-alive connection), when it reports them.
async fn exchanges(proxy: &Proxy, server: &str, authority: &str) -> BTreeSet<String> {
    let mut peers = BTreeSet::new();
    for p in all() {
        for kind in [STREAM, WHOLE] {
            let a = ask(proxy, &p, kind).await;
            let what = format!("{server}, {}, {kind}", p.name);
            assert_eq!(a.status, StatusCode::OK, "{what}: {}", a.text());
            assert_eq!(a.text(), recorded(&p, kind), "{what}");
            assert_eq!(header(&a, "x-upstream-saw-host"), authority, "{what}");
            peers.insert(header(&a, "x-upstream-peer"));
        }
    }
    // Blocked streams last: a stream guardwire cuts closes its own upstream connection.
    for p in all() {
        let a = ask(proxy, &p, BLOCKED).await;
        let what = format!("{server}, {}, blocked stream", p.name);
        assert_eq!(a.status, StatusCode::OK, "{what}: {}", a.text());
        let text = a.text();
        let frame = (p.block_frame)(MESSAGE);
        assert!(text.ends_with(&frame), "{what}: {text}");
        assert!(!text.contains(BANNED), "{what}: {text}");
        let released = &text[..text.len() - frame.len()];
        assert!(
            recorded(&p, BLOCKED).starts_with(released),
            "{what}: released text is not a prefix of the answer: {text}"
        );
    }
    peers
}

/// Connections were kept alive and reused. Not exactly one: a stream's connection returns to
/// the pool once the end of its body is read, which the next request may beat.
fn assert_reused(peers: &BTreeSet<String>) {
    let exchanges = 2 * all().len();
    assert!(
        !peers.is_empty() && peers.len() <= exchanges / 2,
        "{exchanges} exchanges over {} connections: {peers:?}",
        peers.len()
    );
}

// ---- child processes ----

/// A server process, killed when dropped.
struct Server {
    child: Child,
    name: &'static str,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `cmd`, which prints its port on the first line of stdout.
    fn start_printing_port(name: &'static str, mut cmd: Command) -> (Server, u16) {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: cannot start {cmd:?}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(START).unwrap_or_default();
        let mut server = Server { child, name };
        match line.trim().parse::<u16>() {
            Ok(port) => (server, port),
            Err(_) => {
                let stderr = server.stderr_now();
                panic!("{name}: did not print its port (got {line:?}); stderr:\n{stderr}");
            }
        }
    }

    /// What the process wrote to stderr, once it has exited (or after killing it).
    fn stderr_now(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut text = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut text);
        }
        format!("[{}] {text}", self.name)
    }
}

fn interpreter(var: &str, what: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{var} is not set: {what} (tests/run sets it; run the tests with tests/run)")
    })
}

/// The first of `names` found as a file on PATH or in the sbin directories, where Debian puts
/// nginx (not on a normal user's PATH).
fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .collect();
    names
        .iter()
        .flat_map(|n| dirs.iter().map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

/// A free port on 127.0.0.1 for a server that cannot bind port 0 and tell (nginx).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// nginx serving `answers` as static files on a free port: POSTs are answered with the file at
/// the path (`error_page 405` turns the static module's refusal into the file), SSE under
/// every directory but /whole/. nginx answers 400 to an HTTP/1.1 request without `Host`.
fn start_nginx(dir: &Path, answers: &Path) -> (Server, u16) {
    let nginx = std::env::var_os("GUARDWIRE_NGINX")
        .map(PathBuf::from)
        .or_else(|| find_program(&["nginx"]))
        .expect("nginx is not installed (Debian package nginx; tests/run installs it)");
    let prefix = dir.join("nginx");
    std::fs::create_dir_all(prefix.join("tmp")).unwrap();
    let mut last_error = String::new();
    // The port is chosen before nginx binds it; another process may take it in between.
    for _ in 0..5 {
        let port = free_port();
        let conf = format!(
            r#"daemon off;
master_process off;
worker_processes 1;
error_log stderr warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    types {{ }}
    keepalive_requests 1000;
    server {{
        listen 127.0.0.1:{port};
        root {answers};
        add_header x-upstream-saw-host $http_host always;
        add_header x-upstream-peer $remote_port always;
        location /whole/ {{ default_type application/json; error_page 405 =200 $uri; }}
        location / {{ default_type text/event-stream; error_page 405 =200 $uri; }}
    }}
}}
"#,
            prefix = prefix.display(),
            answers = answers.display(),
        );
        let conf_path = prefix.join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(&nginx)
            .arg("-e")
            .arg("stderr")
            .arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", nginx.display()));
        let mut server = Server {
            child,
            name: "nginx",
        };
        let deadline = Instant::now() + START;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = server.child.try_wait() {
                break;
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return (server, port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        last_error = server.stderr_now();
    }
    panic!("nginx did not start: {last_error}");
}

/// guardwire in front of the server at `base_url` (whose authority is `authority`), with
/// `extra` config lines; every exchange, over reused connections. A server that reports usage
/// when asked reports `usage` (prompt, completion tokens) for a streamed Chat answer.
async fn through_guardwire(
    server: &str,
    base_url: &str,
    authority: &str,
    extra: &str,
    usage: Option<(u64, u64)>,
) {
    let proxy = guardwire_before(base_url, extra).await;
    let peers = exchanges(&proxy, server, authority).await;
    assert_reused(&peers);
    if let Some(usage) = usage {
        usage_on_every_stream(&proxy, server, usage).await;
    }
}

/// guardwire asked the server for the streamed Chat answer's usage on the client's behalf (the
/// client's bytes were compared with the recorded answer in [`exchanges`]: the usage chunk and
/// any `"usage":null` members were kept from it) and counted the server's figures; a client
/// that asks for usage itself gets the server's usage chunk.
async fn usage_on_every_stream(proxy: &Proxy, server: &str, (input, output): (u64, u64)) {
    let route = format!("guardwire_tokens_total{{route=\"{STREAM}-openai_chat\"");
    let counted = |body: &str, kind: &str, n: u64| {
        body.lines().any(|l| {
            l.starts_with(&route)
                && l.contains(&format!("kind=\"{kind}\",source=\"provider\"}}"))
                && l.ends_with(&format!(" {n}"))
        })
    };
    let mut body = String::new();
    for _ in 0..200 {
        body = metrics(proxy.addr()).await;
        if counted(&body, "input", input) && counted(&body, "output", output) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        counted(&body, "input", input) && counted(&body, "output", output),
        "{server}: provider usage {input}/{output} not counted:\n{body}"
    );

    let p = common::protocols::chat();
    let asked = (p.stream_body)("hi");
    let asked =
        asked.trim_end_matches('}').to_owned() + r#","stream_options":{"include_usage":true}}"#;
    let a = send(
        proxy.addr(),
        "POST",
        &format!("/{STREAM}/{}{}", p.name, p.stream_path),
        asked,
        &[("content-type", "application/json")],
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{server}: {}", a.text());
    let reported = format!(r#""usage":{{"prompt_tokens":{input},"completion_tokens":{output}"#);
    assert!(
        a.text().contains(&reported),
        "{server}: the client asked for usage: {}",
        a.text()
    );
}

fn answers_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("answers");
    write_answers(&answers);
    make_world_readable(dir.path());
    (dir, answers)
}

// ---- the servers ----

#[tokio::test]
#[ignore = "needs nginx: run tests/run"]
async fn nginx_upstream() {
    let (dir, answers) = answers_dir();
    let (_nginx, port) = start_nginx(dir.path(), &answers);
    let authority = format!("127.0.0.1:{port}");
    through_guardwire(
        "nginx",
        &format!("http://{authority}"),
        &authority,
        "",
        None,
    )
    .await;
}

#[tokio::test]
#[ignore = "needs the venv's uvicorn: run tests/run"]
async fn uvicorn_upstream() {
    let (_dir, answers) = answers_dir();
    let python = interpreter(
        "GUARDWIRE_SDK_PYTHON",
        "the Python of the venv with uvicorn",
    );
    let mut cmd = Command::new(python);
    cmd.arg("tests/interop/asgi_upstream.py").arg(&answers);
    let (_uvicorn, port) = Server::start_printing_port("uvicorn", cmd);
    let authority = format!("127.0.0.1:{port}");
    let base = format!("http://{authority}");
    through_guardwire("uvicorn", &base, &authority, "", Some((11, 17))).await;
}

#[tokio::test]
#[ignore = "needs node: run tests/run"]
async fn node_http_upstream() {
    let (_dir, answers) = answers_dir();
    let node = interpreter("GUARDWIRE_SDK_NODE", "node");
    let mut cmd = Command::new(node);
    cmd.arg("tests/interop/node_upstream.mjs").arg(&answers);
    let (_node, port) = Server::start_printing_port("node http", cmd);
    let authority = format!("127.0.0.1:{port}");
    let base = format!("http://{authority}");
    through_guardwire("node http", &base, &authority, "", Some((13, 19))).await;
}

/// HTTP/1.1 over TLS to a real server: Node's `https` offers no ALPN, so rustls and the server
/// settle on HTTP/1.1; its certificate is trusted through `upstream_tls.ca_path`.
#[tokio::test]
#[ignore = "needs node: run tests/run"]
async fn node_https_upstream_speaks_http1_over_tls() {
    let (dir, answers) = answers_dir();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let node = interpreter("GUARDWIRE_SDK_NODE", "node");
    let mut cmd = Command::new(node);
    cmd.arg("tests/interop/node_upstream.mjs")
        .arg(&answers)
        .arg("--tls")
        .arg(&cert)
        .arg(&key);
    let (_node, port) = Server::start_printing_port("node https", cmd);
    let authority = format!("localhost:{port}");
    let ca = format!("upstream_tls:\n  ca_path: \"{}\"\n", cert.display());
    through_guardwire(
        "node https",
        &format!("https://{authority}"),
        &authority,
        &ca,
        Some((13, 19)),
    )
    .await;
}

/// hyper's server, through the mock upstream serving the same files in pieces; it records each
/// request, so the request line itself is checked.
#[tokio::test]
async fn hyper_upstream() {
    let (_dir, answers) = answers_dir();
    let root = answers.clone();
    let mock = MockUpstream::start(move |req| {
        let path = req.path_and_query.split('?').next().unwrap().to_owned();
        let host = req.header("host").unwrap_or_default().to_owned();
        match std::fs::read(root.join(path.trim_start_matches('/'))) {
            Ok(body) if path.starts_with("/whole/") => {
                Reply::json(200, &String::from_utf8(body).unwrap())
            }
            Ok(body) => Reply::sse_every(&body, 7, Duration::from_millis(1)),
            Err(_) => Reply::json(404, r#"{"error":{"message":"no recorded answer here"}}"#),
        }
        .with_header("x-upstream-saw-host", host)
    })
    .await;
    let authority = format!("127.0.0.1:{}", mock.addr.port());
    let proxy = guardwire_before(&mock.base_url(), "").await;
    exchanges(&proxy, "hyper", &authority).await;
    for r in mock.requests() {
        r.assert_target_for(&authority);
    }
}
