//! End-to-end load harness: guardwire between a fast mock upstream and a load client, all on
//! loopback, against the direct-to-mock baseline in the same run.
//!
//! Run: `cargo bench --bench load` (options after `--`: `--quick`, `--protocol chat|responses|
//! anthropic|gemini|all`, `--duration SECS`, `--concurrency N`, `--rate REQ_PER_S`,
//! `--gap-ms MS`, `--streams 1,100,1000,5000`, `--pii auto|on|off`, `--no-rss`, `--deltas N`,
//! `--throughput-only`).
//!
//! Processes and threads:
//! - guardwire runs as a child process (`target/release/guardwire serve`), twice: one with no
//!   packs, one with the realistic pack. Its CPU time (utime + stime from `/proc/<pid>/stat`)
//!   and RSS (`VmRSS`) are therefore the proxy's alone.
//! - The mock upstream runs in this process on its own single-worker tokio runtime. It answers
//!   every streaming call with 40 (`--deltas`) content deltas (~5 tokens each) framed as the
//!   provider does,
//!   either back to back (throughput) or one every `--gap-ms` (latency), and stamps each delta
//!   with the time it handed it to hyper (so the client can measure each chunk's transit time).
//! - The client runs on its own two-worker runtime: N keep-alive HTTP/1.1 connections, each
//!   sending streaming requests one after another, timing the first body byte, every SSE event
//!   and the end of each stream.
//!
//! Why not oha/wrk: neither is installed here, and neither sees SSE events inside a body (gaps
//! between chunks, per-chunk transit), which is most of what this measures. One client for all
//! phases also keeps the baseline and the proxied runs strictly comparable.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bytes::{Bytes, BytesMut};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

mod common;

use common::fixtures::{answer_deltas, realistic_pack, yaml_quote};

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Protocol {
    Chat,
    Responses,
    Anthropic,
    Gemini,
}

impl Protocol {
    const ALL: [Protocol; 4] = [
        Protocol::Chat,
        Protocol::Responses,
        Protocol::Anthropic,
        Protocol::Gemini,
    ];

    fn name(self) -> &'static str {
        match self {
            Protocol::Chat => "OpenAI Chat Completions",
            Protocol::Responses => "OpenAI Responses",
            Protocol::Anthropic => "Anthropic Messages",
            Protocol::Gemini => "Gemini",
        }
    }

    fn path(self, hold: bool) -> String {
        match self {
            Protocol::Chat => "/v1/chat/completions".into(),
            Protocol::Responses => "/v1/responses".into(),
            Protocol::Anthropic => "/v1/messages".into(),
            Protocol::Gemini => {
                let model = if hold { HOLD_MARK } else { "gemini-2.5-flash" };
                format!("/v1beta/models/{model}:streamGenerateContent?alt=sse")
            }
        }
    }

    fn request_body(self, hold: bool) -> Bytes {
        let prompt = "Write a short note about planning a summer garden near the river, with \
                      practical advice on water, light and which plants go well together.";
        let model = |m: &'static str| if hold { HOLD_MARK } else { m };
        let body = match self {
            Protocol::Chat => serde_json::json!({
                "model": model("gpt-4o-mini"), "stream": true,
                "messages": [
                    {"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": prompt}
                ]
            }),
            Protocol::Responses => serde_json::json!({
                "model": model("gpt-4o-mini"), "stream": true, "input": prompt
            }),
            Protocol::Anthropic => serde_json::json!({
                "model": model("claude-sonnet-4-5"), "max_tokens": 1024, "stream": true,
                "messages": [{"role": "user", "content": prompt}]
            }),
            Protocol::Gemini => serde_json::json!({
                "contents": [{"role": "user", "parts": [{"text": prompt}]}]
            }),
        };
        Bytes::from(body.to_string())
    }

    /// What the last event of a complete, unblocked stream contains.
    fn terminal_mark(self) -> &'static [u8] {
        match self {
            Protocol::Chat => b"[DONE]",
            Protocol::Responses => b"response.completed",
            Protocol::Anthropic => b"message_stop",
            Protocol::Gemini => b"finishReason",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pii {
    Auto,
    On,
    Off,
}

#[derive(Clone)]
struct Opts {
    quick: bool,
    protocols: Vec<Protocol>,
    duration: Duration,
    warmup: Duration,
    concurrency: usize,
    rate: u64,
    paced_connections: usize,
    gap: Duration,
    streams: Vec<usize>,
    pii: Pii,
    rss: bool,
    /// Content deltas per answer (~27 bytes of text each).
    deltas: usize,
    /// Only the throughput phase: no paced latency phase, no RSS steps (long answers).
    throughput_only: bool,
}

fn usage() -> ! {
    eprintln!(
        "usage: cargo bench --bench load -- [--quick] [--protocol chat|responses|anthropic|gemini|all]\n\
         \x20      [--duration SECS] [--concurrency N] [--rate REQ_PER_S] [--gap-ms MS]\n\
         \x20      [--streams 1,100,1000,5000] [--pii auto|on|off] [--no-rss]\n\
         \x20      [--deltas N] [--throughput-only]\n\
         env: GUARDWIRE_LOAD_PII=auto|on|off (same as --pii)"
    );
    std::process::exit(2)
}

fn parse_opts() -> Opts {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let mut o = Opts {
        quick,
        protocols: vec![Protocol::Chat],
        duration: Duration::from_secs(if quick { 1 } else { 10 }),
        warmup: Duration::from_millis(if quick { 300 } else { 1000 }),
        concurrency: 64,
        rate: if quick { 250 } else { 1000 },
        paced_connections: 256,
        gap: Duration::from_millis(2),
        streams: if quick {
            vec![1, 100, 1000]
        } else {
            vec![1, 100, 1000, 5000]
        },
        pii: match std::env::var("GUARDWIRE_LOAD_PII").as_deref() {
            Ok("on" | "1" | "true") => Pii::On,
            Ok("off" | "0" | "false") => Pii::Off,
            _ => Pii::Auto,
        },
        rss: true,
        deltas: 40,
        throughput_only: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().unwrap_or_else(|| usage());
        match a.as_str() {
            "--quick" => {}
            "--bench" => {} // cargo bench passes this to harness = false targets
            "--no-rss" => o.rss = false,
            "--throughput-only" => {
                o.throughput_only = true;
                o.rss = false;
            }
            "--deltas" => {
                o.deltas = val().parse().unwrap_or_else(|_| usage());
                if o.deltas == 0 {
                    usage()
                }
            }
            "--protocol" => {
                o.protocols = match val().as_str() {
                    "chat" => vec![Protocol::Chat],
                    "responses" => vec![Protocol::Responses],
                    "anthropic" => vec![Protocol::Anthropic],
                    "gemini" => vec![Protocol::Gemini],
                    "all" => Protocol::ALL.to_vec(),
                    _ => usage(),
                }
            }
            "--duration" => {
                o.duration = Duration::from_secs_f64(val().parse().unwrap_or_else(|_| usage()))
            }
            "--concurrency" => o.concurrency = val().parse().unwrap_or_else(|_| usage()),
            "--rate" => o.rate = val().parse().unwrap_or_else(|_| usage()),
            "--gap-ms" => {
                o.gap =
                    Duration::from_secs_f64(val().parse::<f64>().unwrap_or_else(|_| usage()) / 1e3)
            }
            "--streams" => {
                o.streams = val()
                    .split(',')
                    .map(|s| s.trim().parse().unwrap_or_else(|_| usage()))
                    .collect()
            }
            "--pii" => {
                o.pii = match val().as_str() {
                    "auto" => Pii::Auto,
                    "on" => Pii::On,
                    "off" => Pii::Off,
                    _ => usage(),
                }
            }
            // Filters cargo passes through (e.g. `cargo bench -- foo`) are not ours: ignore.
            s if !s.starts_with("--") => {}
            _ => usage(),
        }
    }
    o
}

// ---------------------------------------------------------------------------------------------
// Clock shared by the mock and the client (chunk transit times)
// ---------------------------------------------------------------------------------------------

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

/// Placeholder the mock overwrites with the send time (16 decimal digits of ns since `epoch`).
const STAMP: &str = "@T0000000000000000";
const STAMP_DIGITS: usize = 16;
const HOLD_MARK: &str = "gw-hold";

// ---------------------------------------------------------------------------------------------
// The mock upstream
// ---------------------------------------------------------------------------------------------

/// One SSE event, with the offset of its stamp digits if it carries one.
#[derive(Clone)]
struct Event {
    bytes: Bytes,
    stamp: Option<usize>,
}

fn event(text: String) -> Event {
    let stamp = text.find(STAMP).map(|i| i + 2);
    Event {
        bytes: Bytes::from(text),
        stamp,
    }
}

fn data(v: &serde_json::Value) -> Event {
    event(format!("data: {v}\n\n"))
}

fn named(kind: &str, v: &serde_json::Value) -> Event {
    event(format!("event: {kind}\ndata: {v}\n\n"))
}

/// The stream the mock sends for `p`: framing as the provider sends it, stamped text deltas.
fn stream_events(p: Protocol, deltas: &[String]) -> Vec<Event> {
    use serde_json::json;
    let full: String = deltas.concat();
    match p {
        Protocol::Chat => {
            let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
                data(&json!({
                    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion.chunk",
                    "created": 1_735_689_600, "model": "gpt-4o-mini-2024-07-18",
                    "system_fingerprint": format!("fp_{STAMP}"),
                    "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
                }))
            };
            let mut ev = vec![chunk(
                json!({"role": "assistant", "content": "", "refusal": null}),
                json!(null),
            )];
            ev.extend(
                deltas
                    .iter()
                    .map(|t| chunk(json!({"content": t}), json!(null))),
            );
            ev.push(chunk(json!({}), json!("stop")));
            ev.push(event("data: [DONE]\n\n".into()));
            ev
        }
        Protocol::Responses => {
            let mut seq = 0u64;
            let mut e = |kind: &str, mut v: serde_json::Value| {
                v["type"] = json!(kind);
                v["sequence_number"] = json!(seq);
                seq += 1;
                named(kind, &v)
            };
            let resp = |status: &str| {
                json!({"id": "resp_67ccd2bed1ec8190", "object": "response", "created_at": 1_741_476_542,
                       "status": status, "model": "gpt-4o-mini-2024-07-18", "output": [],
                       "error": null, "incomplete_details": null, "tools": [], "metadata": {}})
            };
            let item = json!({"id": "msg_67ccd2bf17f0", "type": "message", "status": "in_progress",
                              "role": "assistant", "content": []});
            let mut ev = vec![
                e("response.created", json!({"response": resp("in_progress")})),
                e(
                    "response.in_progress",
                    json!({"response": resp("in_progress")}),
                ),
                e(
                    "response.output_item.added",
                    json!({"output_index": 0, "item": item}),
                ),
                e(
                    "response.content_part.added",
                    json!({"item_id": "msg_67ccd2bf17f0", "output_index": 0,
                    "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
                ),
            ];
            for t in deltas {
                ev.push(e(
                    "response.output_text.delta",
                    json!({"item_id": "msg_67ccd2bf17f0",
                    "output_index": 0, "content_index": 0, "delta": t, "logprobs": [],
                    "obfuscation": STAMP}),
                ));
            }
            let part = json!({"type": "output_text", "text": full, "annotations": []});
            ev.push(e(
                "response.output_text.done",
                json!({"item_id": "msg_67ccd2bf17f0",
                "output_index": 0, "content_index": 0, "text": full, "logprobs": []}),
            ));
            ev.push(e(
                "response.content_part.done",
                json!({"item_id": "msg_67ccd2bf17f0",
                "output_index": 0, "content_index": 0, "part": part}),
            ));
            let done_item = json!({"id": "msg_67ccd2bf17f0", "type": "message", "status": "completed",
                "role": "assistant", "content": [part]});
            ev.push(e(
                "response.output_item.done",
                json!({"output_index": 0, "item": done_item}),
            ));
            let mut r = resp("completed");
            r["output"] = json!([done_item]);
            r["usage"] = json!({"input_tokens": 36, "output_tokens": 200, "total_tokens": 236});
            ev.push(e("response.completed", json!({"response": r})));
            ev
        }
        Protocol::Anthropic => {
            let mut ev = vec![
                named(
                    "message_start",
                    &json!({"type": "message_start", "message": {
                    "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
                    "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null,
                    "stop_sequence": null, "usage": {"input_tokens": 36, "output_tokens": 1}}}),
                ),
                named(
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
                ),
                named("ping", &json!({"type": "ping"})),
            ];
            for t in deltas {
                // Anthropic deltas have no free-form string field: the stamp rides in an
                // extra one, which clients and guardwire ignore.
                ev.push(named(
                    "content_block_delta",
                    &json!({"type": "content_block_delta",
                    "index": 0, "delta": {"type": "text_delta", "text": t}, "ts": STAMP}),
                ));
            }
            ev.push(named(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": 0}),
            ));
            ev.push(named(
                "message_delta",
                &json!({"type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"output_tokens": 200}}),
            ));
            ev.push(named("message_stop", &json!({"type": "message_stop"})));
            ev
        }
        Protocol::Gemini => {
            let mut ev: Vec<Event> = deltas
                .iter()
                .map(|t| {
                    data(&json!({"candidates": [{"content": {"parts": [{"text": t}], "role": "model"},
                        "index": 0}], "modelVersion": "gemini-2.5-flash", "responseId": STAMP}))
                })
                .collect();
            ev.push(data(
                &json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"},
                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 36, "candidatesTokenCount": 200,
                "totalTokenCount": 236}, "modelVersion": "gemini-2.5-flash", "responseId": STAMP}),
            ));
            ev
        }
    }
}

/// Behaviour the bench switches between phases (read at the start of each upstream response).
struct MockState {
    /// Pause before every event but the first.
    gap_ns: AtomicU64,
    /// Held streams (request names [`HOLD_MARK`]) wait after their first event until this
    /// moves past the value it had when they started.
    release: watch::Sender<u64>,
    events: Vec<(Protocol, Arc<Vec<Event>>)>,
    held: AtomicUsize,
    /// Connections the mock accepted (from clients or from guardwire's pool).
    accepted: AtomicUsize,
}

impl MockState {
    fn events(&self, path: &str) -> Option<Arc<Vec<Event>>> {
        let p = if path.starts_with("/v1/chat/completions") {
            Protocol::Chat
        } else if path.starts_with("/v1/responses") {
            Protocol::Responses
        } else if path.starts_with("/v1/messages") {
            Protocol::Anthropic
        } else if path.starts_with("/v1beta/models/") {
            Protocol::Gemini
        } else {
            return None;
        };
        self.events
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, e)| Arc::clone(e))
    }
}

fn stamped(ev: &Event) -> Bytes {
    match ev.stamp {
        None => ev.bytes.clone(),
        Some(at) => {
            let mut b = BytesMut::from(&ev.bytes[..]);
            let mut t = now_ns();
            for i in (0..STAMP_DIGITS).rev() {
                b[at + i] = b'0' + (t % 10) as u8;
                t /= 10;
            }
            b.freeze()
        }
    }
}

type MockBody = StreamBody<
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send>>,
>;

async fn mock_handle(state: Arc<MockState>, req: Request<Incoming>) -> Response<MockBody> {
    use futures_util::StreamExt;
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let hold = path.contains(HOLD_MARK) || memchr_find(&body, HOLD_MARK.as_bytes());
    let Some(events) = state.events(&path) else {
        let empty: MockBody = StreamBody::new(Box::pin(futures_util::stream::empty()));
        let mut r = Response::new(empty);
        *r.status_mut() = StatusCode::NOT_FOUND;
        return r;
    };
    let gap = Duration::from_nanos(state.gap_ns.load(Ordering::Relaxed));
    let mut release = state.release.subscribe();
    let start_gen = *release.borrow_and_update();
    let st = Arc::clone(&state);
    let stream = futures_util::stream::unfold(0usize, move |i| {
        let events = Arc::clone(&events);
        let mut release = release.clone();
        let st = Arc::clone(&st);
        async move {
            if i >= events.len() {
                return None;
            }
            if i == 1 && hold {
                st.held.fetch_add(1, Ordering::Relaxed);
                let _ = release.wait_for(|g| *g > start_gen).await;
                st.held.fetch_sub(1, Ordering::Relaxed);
            } else if i > 0 && !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            Some((Ok(Frame::data(stamped(&events[i]))), i + 1))
        }
    })
    .boxed();
    let mut r = Response::new(StreamBody::new(stream));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    r
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Starts the mock on its own thread and single-worker runtime; returns its address.
fn start_mock(state: Arc<MockState>) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("mock-upstream".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("mock-upstream")
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let sock = TcpSocket::new_v4().unwrap();
                sock.set_reuseaddr(true).unwrap();
                sock.bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
                let listener: TcpListener = sock.listen(8192).unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    state.accepted.fetch_add(1, Ordering::Relaxed);
                    let st = Arc::clone(&state);
                    tokio::spawn(async move {
                        let svc = service_fn(move |req| {
                            let st = Arc::clone(&st);
                            async move { Ok::<_, Infallible>(mock_handle(st, req).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
            });
        })
        .unwrap();
    rx.recv().unwrap()
}

// ---------------------------------------------------------------------------------------------
// guardwire as a child process
// ---------------------------------------------------------------------------------------------

struct Proxy {
    label: &'static str,
    child: Child,
    addr: SocketAddr,
}

impl Proxy {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn write_config(
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
fn guardwire_bin() -> PathBuf {
    common::guardwire_bin()
}

/// `guardwire check` on a config: Ok, or the first error line.
fn check(config: &Path) -> Result<(), String> {
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

fn spawn_proxy(label: &'static str, config: &Path, port: u16) -> Proxy {
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

async fn wait_ready(p: &mut Proxy) {
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
fn cpu_seconds(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) as f64 / 100.0, ticks(12) as f64 / 100.0)
}

/// VmRSS of `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------------

/// What one worker measured (all times in ns).
#[derive(Default)]
struct Samples {
    ttfb: Vec<u64>,
    total: Vec<u64>,
    gaps: Vec<u64>,
    transit: Vec<u64>,
    ok: u64,
    errors: u64,
}

impl Samples {
    fn merge(&mut self, o: Samples) {
        self.ttfb.extend(o.ttfb);
        self.total.extend(o.total);
        self.gaps.extend(o.gaps);
        self.transit.extend(o.transit);
        self.ok += o.ok;
        self.errors += o.errors;
    }
}

/// Splits a body into SSE events as it arrives, noting each event's completion.
struct SseSplitter {
    cur: Vec<u8>,
    last_was_lf: bool,
}

impl SseSplitter {
    fn new() -> Self {
        SseSplitter {
            cur: Vec::with_capacity(1024),
            last_was_lf: false,
        }
    }

    /// Calls `on_event` for every event completed by `chunk`.
    fn push(&mut self, chunk: &[u8], mut on_event: impl FnMut(&[u8])) {
        for &b in chunk {
            self.cur.push(b);
            if b == b'\n' {
                if self.last_was_lf {
                    on_event(&self.cur);
                    self.cur.clear();
                    self.last_was_lf = false;
                    continue;
                }
                self.last_was_lf = true;
            } else if b != b'\r' {
                self.last_was_lf = false;
            }
        }
    }
}

/// The send time the mock stamped into an event, if any.
fn stamp_of(ev: &[u8]) -> Option<u64> {
    let at = ev.windows(2).position(|w| w == b"@T")? + 2;
    let digits = ev.get(at..at + STAMP_DIGITS)?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(addr: SocketAddr) -> Option<Sender> {
    let stream = TcpStream::connect(addr).await.ok()?;
    let _ = stream.set_nodelay(true);
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(conn);
    Some(send)
}

fn make_request(addr: SocketAddr, p: Protocol, body: &Bytes) -> Request<Full<Bytes>> {
    let mut b = Request::post(p.path(false))
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .header("accept", "text/event-stream");
    b = match p {
        Protocol::Chat | Protocol::Responses => b.header("authorization", "Bearer sk-load-test"),
        Protocol::Anthropic => b
            .header("x-api-key", "sk-ant-load-test")
            .header("anthropic-version", "2023-06-01"),
        Protocol::Gemini => b.header("x-goog-api-key", "load-test"),
    };
    b.body(Full::new(body.clone())).unwrap()
}

/// One streaming request; records into `s` when `record`.
async fn one_request(
    send: &mut Sender,
    addr: SocketAddr,
    p: Protocol,
    body: &Bytes,
    detail: bool,
    record: bool,
    s: &mut Samples,
) -> bool {
    if send.ready().await.is_err() {
        return false;
    }
    let t0 = Instant::now();
    let resp = match send.send_request(make_request(addr, p, body)).await {
        Ok(r) => r,
        Err(_) => return false,
    };
    let ok_status = resp.status() == StatusCode::OK;
    let mut body = resp.into_body();
    let mut splitter = SseSplitter::new();
    let mut first: Option<Instant> = None;
    let mut last_event: Option<Instant> = None;
    let mut terminal = false;
    let mut gaps = Vec::new();
    let mut transit = Vec::new();
    let mark = p.terminal_mark();
    let mut failed = false;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            failed = true;
            break;
        };
        let Some(chunk) = frame.data_ref() else {
            continue;
        };
        let now = Instant::now();
        let now_epoch = now.duration_since(epoch()).as_nanos() as u64;
        first.get_or_insert(now);
        splitter.push(chunk, |ev| {
            terminal = memchr_find(ev, mark);
            if detail {
                if let Some(prev) = last_event {
                    gaps.push(now.duration_since(prev).as_nanos() as u64);
                }
                if let Some(sent) = stamp_of(ev) {
                    transit.push(now_epoch.saturating_sub(sent));
                }
            }
            last_event = Some(now);
        });
    }
    let end = Instant::now();
    let good = ok_status && !failed && terminal;
    if record {
        if good {
            s.ok += 1;
            if let Some(f) = first {
                s.ttfb.push(f.duration_since(t0).as_nanos() as u64);
            }
            s.total.push(end.duration_since(t0).as_nanos() as u64);
            s.gaps.extend(gaps);
            s.transit.extend(transit);
        } else {
            s.errors += 1;
        }
    }
    !failed
}

/// How requests are issued.
#[derive(Clone, Copy)]
enum Load {
    /// `n` connections, each sending the next request as soon as the last one ended.
    Closed { connections: usize },
    /// Requests scheduled at `rate`/s over `connections` connections (open loop; a request
    /// whose slot finds every connection busy starts late).
    Paced { connections: usize, rate: u64 },
}

struct PhaseResult {
    samples: Samples,
    /// Measured window (after warm-up), seconds.
    secs: f64,
    /// Proxy CPU seconds (user, system) over the measured window.
    cpu: Option<(f64, f64)>,
    rss_kib: Option<u64>,
}

async fn run_phase(
    addr: SocketAddr,
    p: Protocol,
    load: Load,
    warmup: Duration,
    duration: Duration,
    detail: bool,
    pid: Option<u32>,
) -> PhaseResult {
    let body = p.request_body(false);
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let (connections, rate) = match load {
        Load::Closed { connections } => (connections, None),
        Load::Paced { connections, rate } => (connections, Some(rate)),
    };
    let next = Arc::new(AtomicU64::new(0));
    let cpu_at_start = Arc::new(Mutex::new(None::<(f64, f64)>));
    // Sample the proxy's CPU exactly at the start of the measured window.
    let sampler = pid.map(|pid| {
        let cell = Arc::clone(&cpu_at_start);
        tokio::spawn(async move {
            tokio::time::sleep_until(measure_from.into()).await;
            *cell.lock().unwrap() = Some(cpu_seconds(pid));
        })
    });
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let body = body.clone();
        let next = Arc::clone(&next);
        tasks.push(tokio::spawn(async move {
            let mut s = Samples::default();
            let mut send = None;
            loop {
                let slot = match rate {
                    Some(r) => {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let at = start + Duration::from_nanos(i * 1_000_000_000 / r);
                        if at >= end {
                            break;
                        }
                        tokio::time::sleep_until(at.into()).await;
                        at
                    }
                    None => Instant::now(),
                };
                if slot >= end {
                    break;
                }
                if send.is_none() {
                    send = connect(addr).await;
                    if send.is_none() {
                        s.errors += 1;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                }
                let record = slot >= measure_from;
                let sender = send.as_mut().unwrap();
                if !one_request(sender, addr, p, &body, detail, record, &mut s).await {
                    send = None;
                }
            }
            s
        }));
    }
    let mut samples = Samples::default();
    for t in tasks {
        samples.merge(t.await.unwrap());
    }
    if let Some(s) = sampler {
        let _ = s.await;
    }
    // Rate = requests started in the measured window / its length (the ones started near its
    // end finish after it, and are counted: closed and paced loads are measured alike).
    let secs = duration.as_secs_f64();
    let cpu = pid.and_then(|pid| {
        let before = (*cpu_at_start.lock().unwrap())?;
        let now = cpu_seconds(pid);
        Some((now.0 - before.0, now.1 - before.1))
    });
    PhaseResult {
        samples,
        secs,
        cpu,
        rss_kib: pid.map(rss_kib),
    }
}

/// Opens `n` streams through `addr` that the mock holds open after their first event, samples
/// the proxy's RSS once all are open, then releases them. Returns (RSS before, RSS with n open,
/// streams actually open).
async fn open_streams_rss(
    addr: SocketAddr,
    p: Protocol,
    n: usize,
    pid: u32,
    mock: &Arc<MockState>,
) -> (u64, u64, usize) {
    let before = rss_kib(pid);
    let body = p.request_body(true);
    let opened = Arc::new(AtomicUsize::new(0));
    let connect_gate = Arc::new(tokio::sync::Semaphore::new(256));
    let (go_tx, go_rx) = watch::channel(false);
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let body = body.clone();
        let opened = Arc::clone(&opened);
        let gate = Arc::clone(&connect_gate);
        let mut go = go_rx.clone();
        tasks.push(tokio::spawn(async move {
            let permit = gate.acquire_owned().await.ok()?;
            let mut send = connect(addr).await?;
            send.ready().await.ok()?;
            let mut req = make_request(addr, p, &body);
            *req.uri_mut() = p.path(true).parse().ok()?;
            let resp = send.send_request(req).await.ok()?;
            let mut b = resp.into_body();
            // The first event arrived: the stream is open end to end.
            b.frame().await?.ok()?;
            drop(permit);
            opened.fetch_add(1, Ordering::Relaxed);
            let _ = go.wait_for(|g| *g).await;
            while let Some(f) = b.frame().await {
                f.ok()?;
            }
            Some(())
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while opened.load(Ordering::Relaxed) < n && Instant::now() < deadline {
        if tasks.iter().all(|t| t.is_finished()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let the proxy settle (buffers filled, nothing in flight) before sampling.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let open = opened.load(Ordering::Relaxed);
    let with = rss_kib(pid);
    eprintln!(
        "load:   {open} streams open at the client, {} held at the mock",
        mock.held.load(Ordering::Relaxed)
    );
    mock.release.send_modify(|g| *g += 1);
    let _ = go_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    (before, with, open)
}

// ---------------------------------------------------------------------------------------------
// Statistics and the report
// ---------------------------------------------------------------------------------------------

fn pct(sorted: &[u64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[i] as f64 / 1e6)
}

struct Summary {
    reqs: u64,
    errors: u64,
    rps: f64,
    ttfb: [Option<f64>; 2],
    gap: [Option<f64>; 2],
    transit: [Option<f64>; 2],
    total: [Option<f64>; 3],
    cpu_ms_per_req: Option<f64>,
    /// Share of that CPU time spent in the kernel.
    cpu_sys_share: Option<f64>,
    rss_mib: Option<f64>,
}

/// "0.466 (58 % sys)": proxy CPU per request and the kernel's share of it.
fn cpu_cell(s: &Summary) -> String {
    match (s.cpu_ms_per_req, s.cpu_sys_share) {
        (Some(v), Some(k)) => format!("{v:.3} ({:.0} % sys)", k * 100.0),
        (Some(v), None) => format!("{v:.3}"),
        (None, _) => "—".into(),
    }
}

fn summarize(mut r: PhaseResult) -> Summary {
    let s = &mut r.samples;
    s.ttfb.sort_unstable();
    s.gaps.sort_unstable();
    s.transit.sort_unstable();
    s.total.sort_unstable();
    let done = s.ok + s.errors;
    Summary {
        reqs: s.ok,
        errors: s.errors,
        rps: s.ok as f64 / r.secs,
        ttfb: [pct(&s.ttfb, 0.5), pct(&s.ttfb, 0.99)],
        gap: [pct(&s.gaps, 0.5), pct(&s.gaps, 0.99)],
        transit: [pct(&s.transit, 0.5), pct(&s.transit, 0.99)],
        total: [
            pct(&s.total, 0.5),
            pct(&s.total, 0.99),
            pct(&s.total, 0.999),
        ],
        cpu_ms_per_req: r
            .cpu
            .filter(|_| done > 0)
            .map(|(u, s)| (u + s) * 1e3 / done as f64),
        cpu_sys_share: r.cpu.filter(|(u, s)| u + s > 0.0).map(|(u, s)| s / (u + s)),
        rss_mib: r.rss_kib.map(|k| k as f64 / 1024.0),
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| {
        if v.abs() < 10.0 {
            format!("{v:.3}")
        } else {
            format!("{v:.1}")
        }
    })
}

fn diff(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? - b?)
}

/// Percentiles as "p50 / p99 [/ p999]" in ms.
fn ms_list(v: &[Option<f64>]) -> String {
    v.iter().map(|&x| ms(x)).collect::<Vec<_>>().join(" / ")
}

fn added(a: Option<f64>, b: Option<f64>) -> String {
    diff(a, b).map_or("—".into(), |d| format!("{d:+.3}"))
}

fn machine_line() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let load = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    format!("{cpus} CPUs ({model}), Linux {kernel}, load average at start {load}")
}

fn throughput_table(out: &mut String, rows: &[(&str, Summary)], c: usize, text_bytes: usize) {
    let _ = writeln!(
        out,
        "\n**Throughput** — {c} connections, back-to-back streaming requests, mock sends the \
         whole stream at once\n"
    );
    out.push_str("| target | req/s | errors | TTFB p50 / p99 | total p50 / p99 / p999 | proxy CPU ms/req | proxy CPU µs per KiB of text | proxy RSS MiB |\n|---|---|---|---|---|---|---|---|\n");
    for (name, s) in rows {
        let per_kib = s.cpu_ms_per_req.map_or("—".into(), |v| {
            format!("{:.1}", v * 1e3 * 1024.0 / text_bytes as f64)
        });
        let _ = writeln!(
            out,
            "| {name} | {:.0} | {} | {} | {} | {} | {per_kib} | {} |",
            s.rps,
            s.errors,
            ms_list(&s.ttfb),
            ms_list(&s.total),
            cpu_cell(s),
            s.rss_mib.map_or("—".into(), |v| format!("{v:.1}")),
        );
    }
}

fn latency_table(out: &mut String, rows: &[(&str, Summary)], rate: u64, gap: Duration) {
    let _ = writeln!(
        out,
        "\n**Latency** — paced at {rate} req/s, mock sends one event every {} ms; all times ms; \
         \"+\" = proxied minus direct at the same percentile\n",
        gap.as_secs_f64() * 1e3
    );
    out.push_str("| target | req/s | errors | TTFB p50 / p99 | +TTFB p50 / p99 | gap p50 / p99 | +gap p50 / p99 | chunk transit p50 / p99 | +transit p50 / p99 | total p50 / p99 / p999 | proxy CPU ms/req |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    let base = &rows[0].1;
    for (i, (name, s)) in rows.iter().enumerate() {
        let plus = |v: &[Option<f64>; 2], b: &[Option<f64>; 2]| {
            if i == 0 {
                "—".to_owned()
            } else {
                format!("{} / {}", added(v[0], b[0]), added(v[1], b[1]))
            }
        };
        let _ = writeln!(
            out,
            "| {name} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.rps,
            s.errors,
            ms_list(&s.ttfb),
            plus(&s.ttfb, &base.ttfb),
            ms_list(&s.gap),
            plus(&s.gap, &base.gap),
            ms_list(&s.transit),
            plus(&s.transit, &base.transit),
            ms_list(&s.total),
            cpu_cell(s),
        );
    }
}

/// Raises the soft open-files limit toward what `streams` needs (client + mock + slack, all
/// in this process; the proxy inherits it). Returns the limit in force.
fn raise_nofile(streams: usize) -> u64 {
    let want = (streams as u64) * 2 + 1024;
    match rlimit::getrlimit(rlimit::Resource::NOFILE) {
        Ok((soft, hard)) if soft < want => {
            let new = want.min(hard);
            if rlimit::setrlimit(rlimit::Resource::NOFILE, new, hard).is_ok() {
                new
            } else {
                soft
            }
        }
        Ok((soft, _)) => soft,
        Err(_) => 1024,
    }
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` (tests/run) runs bench targets
    // without it, and a minutes-long load run must not happen there.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("load: not run under `cargo test`; use `cargo bench --bench load`");
        return;
    }
    let opts = parse_opts();
    let _ = epoch();
    let max_streams = opts.streams.iter().copied().max().unwrap_or(0);
    let nofile = raise_nofile(max_streams);
    let machine = machine_line();
    eprintln!("load: {machine}");
    eprintln!("load: guardwire binary {}", guardwire_bin().display());

    let deltas = answer_deltas(42, opts.deltas);
    let text_bytes: usize = deltas.iter().map(String::len).sum();
    let text_chars: usize = deltas.iter().map(|d| d.chars().count()).sum();
    let mock_state = Arc::new(MockState {
        gap_ns: AtomicU64::new(0),
        release: watch::channel(0).0,
        events: Protocol::ALL
            .iter()
            .map(|&p| (p, Arc::new(stream_events(p, &deltas))))
            .collect(),
        held: AtomicUsize::new(0),
        accepted: AtomicUsize::new(0),
    });
    let mock = start_mock(Arc::clone(&mock_state));
    eprintln!("load: mock upstream on {mock}");

    // Configs and the realistic pack.
    let dir = tempfile::tempdir().unwrap();
    let pack_path = dir.path().join("realistic.yaml");
    let (p_none, p_real) = (free_port(), free_port());
    let none_cfg = write_config(dir.path(), "none.yaml", mock, None, p_none);
    let real_cfg = write_config(
        dir.path(),
        "realistic-cfg.yaml",
        mock,
        Some(&pack_path),
        p_real,
    );
    let (with_pii, pii_note) = match opts.pii {
        Pii::Off => (false, "pii: off (--pii off)".to_owned()),
        Pii::On | Pii::Auto => {
            std::fs::write(&pack_path, realistic_pack(true, text_chars)).unwrap();
            match check(&real_cfg) {
                Ok(()) => (true, "pii: included".to_owned()),
                Err(e) if opts.pii == Pii::Auto => (
                    false,
                    format!("pii: NOT included — this build rejects it ({e})"),
                ),
                Err(e) => panic!("--pii on, but guardwire check rejects the pack: {e}"),
            }
        }
    };
    if !with_pii {
        std::fs::write(&pack_path, realistic_pack(false, text_chars)).unwrap();
        if let Err(e) = check(&real_cfg) {
            panic!("guardwire check rejects the realistic pack: {e}");
        }
    }
    eprintln!("load: realistic pack: 1,000 banned words, 20 regexes, max_length; {pii_note}");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("load-client")
        .enable_all()
        .build()
        .unwrap();
    let mut report = String::new();
    let _ = writeln!(
        report,
        "## guardwire load benchmark{}\n\nMachine: {machine}.  ",
        if opts.quick {
            " (--quick smoke run)"
        } else {
            ""
        }
    );
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let cmd = if args.is_empty() {
        "cargo bench --bench load".to_owned()
    } else {
        format!("cargo bench --bench load -- {}", args.join(" "))
    };
    let _ = writeln!(
        report,
        "Stream: {} content deltas of ~5 tokens ({text_bytes} bytes of text) plus the protocol's \
         framing events. Realistic pack: 1,000 banned words (word boundaries), 20 regexes, \
         max_length; {pii_note}. Run: `{cmd}`.",
        opts.deltas
    );

    rt.block_on(async {
        let t_start = Instant::now();
        let mut none = spawn_proxy("no packs", &none_cfg, p_none);
        let mut real = spawn_proxy("realistic pack", &real_cfg, p_real);
        wait_ready(&mut none).await;
        wait_ready(&mut real).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle_none = rss_kib(none.pid());
        let idle_real = rss_kib(real.pid());
        eprintln!(
            "load: proxies ready in {:.1} s; idle RSS: no packs {:.1} MiB, realistic pack {:.1} MiB",
            t_start.elapsed().as_secs_f64(),
            idle_none as f64 / 1024.0,
            idle_real as f64 / 1024.0
        );

        for &p in &opts.protocols {
            let _ = writeln!(report, "\n### {}\n", p.name());
            let targets: [(&str, SocketAddr, Option<u32>); 3] = [
                ("direct to mock", mock, None),
                ("guardwire, no packs", none.addr, Some(none.pid())),
                ("guardwire, realistic pack", real.addr, Some(real.pid())),
            ];
            // Throughput: no gaps.
            mock_state.gap_ns.store(0, Ordering::Relaxed);
            let mut rows = Vec::new();
            for (name, addr, pid) in targets {
                eprintln!("load: {} throughput, {name} …", p.name());
                let acc = mock_state.accepted.load(Ordering::Relaxed);
                let r = run_phase(
                    addr,
                    p,
                    Load::Closed {
                        connections: opts.concurrency,
                    },
                    opts.warmup,
                    opts.duration,
                    false,
                    pid,
                )
                .await;
                let s = summarize(r);
                eprintln!(
                    "load:   {} streams, {:.0} req/s, {} errors, {} new upstream connections",
                    s.reqs,
                    s.rps,
                    s.errors,
                    mock_state.accepted.load(Ordering::Relaxed) - acc
                );
                rows.push((name, s));
            }
            throughput_table(&mut report, &rows, opts.concurrency, text_bytes);
            if opts.throughput_only {
                continue;
            }
            // Latency: paced, with gaps.
            mock_state
                .gap_ns
                .store(opts.gap.as_nanos() as u64, Ordering::Relaxed);
            let mut rows = Vec::new();
            for (name, addr, pid) in targets {
                eprintln!("load: {} latency at {} req/s, {name} …", p.name(), opts.rate);
                let r = run_phase(
                    addr,
                    p,
                    Load::Paced {
                        connections: opts.paced_connections,
                        rate: opts.rate,
                    },
                    opts.warmup,
                    opts.duration,
                    true,
                    pid,
                )
                .await;
                let s = summarize(r);
                eprintln!(
                    "load:   {:.0} req/s, {} errors, TTFB p50 {} ms",
                    s.rps,
                    s.errors,
                    ms(s.ttfb[0])
                );
                rows.push((name, s));
            }
            latency_table(&mut report, &rows, opts.rate, opts.gap);
            mock_state.gap_ns.store(0, Ordering::Relaxed);
        }

        // Memory by open streams.
        let _ = writeln!(
            report,
            "\n### Proxy RSS by open streams ({})\n\nIdle after start: no packs {:.1} MiB, \
             realistic pack {:.1} MiB. Streams are held open by the mock after their first \
             event; \"per stream\" = (RSS with N open − RSS just before) / N. Open-files \
             limit: {nofile}.\n",
            opts.protocols[0].name(),
            idle_none as f64 / 1024.0,
            idle_real as f64 / 1024.0,
        );
        if opts.rss {
            report.push_str("| open streams | no packs: RSS MiB | per stream KiB | realistic pack: RSS MiB | per stream KiB |\n|---|---|---|---|---|\n");
            let p = opts.protocols[0];
            for &n in &opts.streams {
                // Each stream: a client socket and a mock socket here, two in the proxy.
                if (n as u64) * 2 + 256 > nofile {
                    let _ = writeln!(
                        report,
                        "| {n} | skipped: open-files limit {nofile} is too low (raise `ulimit -n`) | | | |"
                    );
                    continue;
                }
                let mut cells = Vec::new();
                for proxy in [&none, &real] {
                    eprintln!("load: {n} open streams through {} …", proxy.label);
                    let (before, with, open) =
                        open_streams_rss(proxy.addr, p, n, proxy.pid(), &mock_state).await;
                    let per = (with.saturating_sub(before)) as f64 / open.max(1) as f64;
                    let note = if open < n {
                        format!(" (only {open} opened)")
                    } else {
                        String::new()
                    };
                    cells.push(format!("{:.1}{note} | {per:.1}", with as f64 / 1024.0));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                let _ = writeln!(report, "| {n} | {} | {} |", cells[0], cells[1]);
            }
        } else {
            report.push_str("(skipped: --no-rss)\n");
        }
        let _ = writeln!(
            report,
            "\nWhole run: {:.0} s.",
            t_start.elapsed().as_secs_f64()
        );
        drop(none);
        drop(real);
    });

    println!("{report}");
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/load-report.md");
    if std::fs::write(&target, &report).is_ok() {
        eprintln!("load: report written to {}", target.display());
    }
    rt.shutdown_timeout(Duration::from_secs(1));
}
