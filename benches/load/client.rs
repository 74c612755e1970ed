//! The client: keep-alive connections sending streaming requests, timing every SSE event.

use crate::clock::{epoch, STAMP_DIGITS};
use crate::mock::{memchr_find, MockState};
use crate::opts::Protocol;
use crate::proxy::Meter;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// What one worker measured (all times in ns).
#[derive(Default)]
pub(super) struct Samples {
    pub(super) ttfb: Vec<u64>,
    pub(super) total: Vec<u64>,
    pub(super) gaps: Vec<u64>,
    pub(super) transit: Vec<u64>,
    pub(super) ok: u64,
    pub(super) errors: u64,
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

pub(super) type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

pub(super) async fn connect(addr: SocketAddr) -> Option<Sender> {
    let stream = TcpStream::connect(addr).await.ok()?;
    let _ = stream.set_nodelay(true);
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(conn);
    Some(send)
}

/// The keys the normal client presents: OpenAI's (Chat and Responses), Anthropic's, Gemini's.
pub(super) const NORMAL_KEYS: [&str; 3] = ["sk-load-test", "sk-ant-load-test", "load-test"];

pub(super) fn make_request(addr: SocketAddr, p: Protocol, body: &Bytes) -> Request<Full<Bytes>> {
    let mut b = Request::post(p.path(false))
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .header("accept", "text/event-stream");
    b = match p {
        Protocol::Chat | Protocol::Responses => {
            b.header("authorization", format!("Bearer {}", NORMAL_KEYS[0]))
        }
        Protocol::Anthropic => b
            .header("x-api-key", NORMAL_KEYS[1])
            .header("anthropic-version", "2023-06-01"),
        Protocol::Gemini => b.header("x-goog-api-key", NORMAL_KEYS[2]),
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
pub(super) enum Load {
    /// `n` connections, each sending the next request as soon as the last one ended.
    Closed { connections: usize },
    /// Requests scheduled at `rate`/s over `connections` connections (open loop; a request
    /// whose slot finds every connection busy starts late).
    Paced { connections: usize, rate: u64 },
}

pub(super) struct PhaseResult {
    pub(super) samples: Samples,
    /// Measured window (after warm-up), seconds.
    pub(super) secs: f64,
    /// Proxy CPU seconds (user, system) over the measured window.
    pub(super) cpu: Option<(f64, f64)>,
    /// The proxy's context switches (voluntary, involuntary) over the measured window.
    pub(super) switches: Option<(u64, u64)>,
    pub(super) rss_kib: Option<u64>,
}

pub(super) async fn run_phase(
    addr: SocketAddr,
    p: Protocol,
    load: Load,
    warmup: Duration,
    duration: Duration,
    detail: bool,
    meter: Option<Meter>,
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
    let cpu_at_start = Arc::new(Mutex::new(None::<((f64, f64), (u64, u64))>));
    // Sample the proxy's CPU (and context switches) exactly at the start of the measured window.
    let sampler = meter.map(|m| {
        let cell = Arc::clone(&cpu_at_start);
        tokio::spawn(async move {
            tokio::time::sleep_until(measure_from.into()).await;
            *cell.lock().unwrap() = Some((m.cpu(), m.switches()));
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
    let at_start = *cpu_at_start.lock().unwrap();
    let cpu = meter.zip(at_start).map(|(m, (before, _))| {
        let now = m.cpu();
        (now.0 - before.0, now.1 - before.1)
    });
    let switches = meter.zip(at_start).map(|(m, (_, before))| {
        let now = m.switches();
        (
            now.0.saturating_sub(before.0),
            now.1.saturating_sub(before.1),
        )
    });
    PhaseResult {
        samples,
        secs,
        cpu,
        switches,
        rss_kib: meter.map(Meter::rss_kib),
    }
}

/// Opens `n` concurrent streams through `addr`, which the mock keeps open after their first
/// content delta, sending one delta every `--rss-gap-ms` until released (paced streams, read
/// by the client as they come); samples the proxy's RSS once all are open, then releases them.
/// Returns (RSS before, RSS with n open, streams actually open).
pub(super) async fn open_streams_rss(
    addr: SocketAddr,
    p: Protocol,
    n: usize,
    meter: Meter,
    mock: &Arc<MockState>,
) -> (u64, u64, usize) {
    let before = meter.rss_kib();
    let body = p.request_body(true);
    let opened = Arc::new(AtomicUsize::new(0));
    let connect_gate = Arc::new(tokio::sync::Semaphore::new(256));
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let body = body.clone();
        let opened = Arc::clone(&opened);
        let gate = Arc::clone(&connect_gate);
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
    // Let the proxy settle (every stream past its start, events flowing) before sampling.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let open = opened.load(Ordering::Relaxed);
    let with = meter.rss_kib();
    eprintln!(
        "load:   {open} streams open at the client, {} held at the mock",
        mock.held.load(Ordering::Relaxed)
    );
    mock.release.send_modify(|g| *g += 1);
    for t in tasks {
        let _ = t.await;
    }
    (before, with, open)
}
