//! The never-reading-clients soak (issue 32): clients that send a streaming request and never
//! read a byte (a tiny receive buffer, no reads), against an upstream that streams megabytes,
//! beside a normal client's traffic through the same guardwire.
//!
//! guardwire here runs with a small `timeouts.client_send_ms` and `admin.listen` (so `/metrics`
//! needs no token). The soak runs in waves for as long as the normal traffic runs: a wave opens
//! `n` never-reading clients and ends once guardwire has ended all `n` streams
//! (`guardwire_client_timeouts_total{deadline="send"}` grew by `n`: each write stayed blocked
//! for `client_send_ms`); its sockets are then dropped and the next wave opens. The client
//! cannot see guardwire's close without reading: the FIN queues behind the bytes its zero
//! window refuses. Reported: the first wave's release (how long it took), guardwire's peak RSS,
//! `guardwire_requests_in_flight` back to 0 and the mock's flood answers all cancelled once the
//! soak stops, and the normal traffic's figures beside the same traffic without the soak.
//!
//! So that what the normal traffic loses is guardwire's share, the bench's own parts of the
//! soak run apart from it: the flood is answered by a mock of its own (own thread and runtime,
//! reached through the route under [`FLOOD_PREFIX`]), and the waves, the scrapes and the monitor
//! run on a runtime of their own (one thread). They still share the machine's cores.

use crate::clock::FLOOD_MARK;
use crate::mock::MockState;
use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

/// The path prefix of the soak guardwire's flood route (its upstream: the flood's own mock).
pub(super) const FLOOD_PREFIX: &str = "/flood/";

/// `/metrics` from guardwire's admin listener (empty when it cannot be read).
pub(super) async fn scrape(admin: SocketAddr) -> String {
    let Ok(stream) = TcpStream::connect(admin).await else {
        return String::new();
    };
    let Ok((mut send, conn)) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await
    else {
        return String::new();
    };
    tokio::spawn(conn);
    let req = Request::get("/metrics")
        .header("host", "localhost")
        .body(Empty::new())
        .unwrap();
    let Ok(resp) = send.send_request(req).await else {
        return String::new();
    };
    match resp.into_body().collect().await {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
        Err(_) => String::new(),
    }
}

/// The sum of every series of metric `name` whose labels contain `label` ("" = all).
pub(super) fn series_sum(metrics: &str, name: &str, label: &str) -> Option<f64> {
    let mut found = None;
    for l in metrics.lines() {
        let Some(rest) = l.strip_prefix(name) else {
            continue;
        };
        let (labels, value) = match rest.strip_prefix('{') {
            Some(r) => match r.split_once("} ") {
                Some((labels, v)) => (labels, v),
                None => continue,
            },
            None => match rest.strip_prefix(' ') {
                Some(v) => ("", v),
                None => continue,
            },
        };
        if !labels.contains(label) {
            continue;
        }
        if let Ok(v) = value.trim().parse::<f64>() {
            *found.get_or_insert(0.0) += v;
        }
    }
    found
}

/// A streaming Chat request (whatever protocol the normal traffic speaks) naming the flood answer, sent over HTTP/1.1 from a socket with a
/// tiny receive buffer; the caller never reads from it.
async fn never_reading_client(addr: SocketAddr) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.set_recv_buffer_size(2048).ok()?;
    let mut sock = socket.connect(addr).await.ok()?;
    let body = serde_json::json!({
        "model": FLOOD_MARK, "stream": true,
        "messages": [{"role": "user", "content": "Say a lot."}]
    })
    .to_string();
    let head = format!(
        "POST {FLOOD_PREFIX}v1/chat/completions HTTP/1.1\r\nhost: guardwire\r\ncontent-type: application/json\r\n\
         authorization: Bearer sk-load-test\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await.ok()?;
    sock.write_all(body.as_bytes()).await.ok()?;
    Some(sock)
}

/// What the soak measured.
pub(super) struct SoakResult {
    pub(super) clients: usize,
    /// Never-reading clients opened in all, in how many waves.
    pub(super) opened: usize,
    pub(super) waves: usize,
    /// First wave: streams guardwire ended (of `clients`), and when the last was, in seconds
    /// after the wave began (opening included).
    pub(super) first_wave_ended: usize,
    pub(super) first_wave_secs: Option<f64>,
    /// Flood answers the mock started, and how many were still open once the soak stopped and
    /// guardwire reported nothing in flight (0: every upstream request was cancelled).
    pub(super) upstream_started: usize,
    pub(super) upstream_open_after: usize,
    pub(super) rss_before_kib: u64,
    pub(super) rss_peak_kib: u64,
    pub(super) in_flight_peak: f64,
    /// `guardwire_requests_in_flight` after the soak stopped, and how long it took to get there.
    pub(super) in_flight_after: Option<f64>,
    pub(super) drain_secs: f64,
    pub(super) send_timeouts: f64,
}

/// Runs the soak with `n` slots while `normal` (the normal client's phases) runs; returns
/// what `normal` returned and what the soak measured.
pub(super) async fn soak<T>(
    addr: SocketAddr,
    admin: SocketAddr,
    pid: u32,
    n: usize,
    mock: &Arc<MockState>,
    normal: impl std::future::Future<Output = T>,
) -> (T, SoakResult) {
    let rss = |pid| crate::proxy::rss_kib(pid);
    let rss_before_kib = rss(pid);
    // The waves, their scrapes and the monitor: off the normal client's runtime.
    let own = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("load-soak")
        .enable_all()
        .build()
        .unwrap();
    let flood_before = mock.flood_started.load(Ordering::Relaxed);
    let timeouts_before = series_sum(
        &scrape(admin).await,
        "guardwire_client_timeouts_total",
        "deadline=\"send\"",
    )
    .unwrap_or(0.0);
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    // (waves, first wave's streams ended, seconds it took)
    let first = Arc::new(Mutex::new((0usize, 0usize, None::<f64>)));
    let waves = {
        let (stop, opened, first) = (Arc::clone(&stop), Arc::clone(&opened), Arc::clone(&first));
        own.spawn(async move {
            let gate = Arc::new(tokio::sync::Semaphore::new(64));
            let mut ended_before = timeouts_before;
            while !stop.load(Ordering::Relaxed) {
                let start = Instant::now();
                let mut opening = Vec::with_capacity(n);
                for _ in 0..n {
                    let gate = Arc::clone(&gate);
                    opening.push(tokio::spawn(async move {
                        let _permit = gate.acquire().await.ok();
                        never_reading_client(addr).await
                    }));
                }
                let mut socks = Vec::with_capacity(n);
                for o in opening {
                    if let Ok(Some(s)) = o.await {
                        socks.push(s);
                    }
                }
                opened.fetch_add(socks.len(), Ordering::Relaxed);
                let deadline = Instant::now() + Duration::from_secs(60);
                let mut ended = 0.0;
                while Instant::now() < deadline {
                    let m = scrape(admin).await;
                    ended = series_sum(&m, "guardwire_client_timeouts_total", "deadline=\"send\"")
                        .unwrap_or(0.0)
                        - ended_before;
                    if ended >= socks.len() as f64 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                ended_before += ended;
                {
                    let mut f = first.lock().unwrap();
                    if f.0 == 0 {
                        f.1 = ended as usize;
                        f.2 = (ended >= n as f64).then(|| start.elapsed().as_secs_f64());
                    }
                    f.0 += 1;
                }
                drop(socks);
            }
        })
    };
    // guardwire's RSS and requests in flight, every 100 ms.
    let peak = Arc::new(Mutex::new((rss_before_kib, 0.0f64)));
    let monitor = {
        let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
        own.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let r = rss(pid);
                let f = series_sum(&scrape(admin).await, "guardwire_requests_in_flight", "")
                    .unwrap_or(0.0);
                {
                    let mut pk = peak.lock().unwrap();
                    pk.0 = pk.0.max(r);
                    pk.1 = pk.1.max(f);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let out = normal.await;
    // The normal traffic is over: let the current wave end, then stop.
    stop.store(true, Ordering::Relaxed);
    let _ = waves.await;
    let _ = monitor.await;
    // Dropping a runtime may block, which an async context must not.
    own.shutdown_background();
    // The soak's sockets are gone: everything in flight ends.
    let drain_start = Instant::now();
    let mut in_flight_after = None;
    let mut m = String::new();
    while drain_start.elapsed() < Duration::from_secs(30) {
        m = scrape(admin).await;
        in_flight_after = series_sum(&m, "guardwire_requests_in_flight", "");
        if in_flight_after == Some(0.0) && mock.flood_open.load(Ordering::Relaxed) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (rss_peak_kib, in_flight_peak) = *peak.lock().unwrap();
    let (waves, first_wave_ended, first_wave_secs) = *first.lock().unwrap();
    let result = SoakResult {
        clients: n,
        opened: opened.load(Ordering::Relaxed),
        waves,
        first_wave_ended,
        first_wave_secs,
        upstream_started: mock.flood_started.load(Ordering::Relaxed) - flood_before,
        upstream_open_after: mock.flood_open.load(Ordering::Relaxed),
        rss_before_kib,
        rss_peak_kib,
        in_flight_peak,
        in_flight_after,
        drain_secs: drain_start.elapsed().as_secs_f64(),
        send_timeouts: series_sum(&m, "guardwire_client_timeouts_total", "deadline=\"send\"")
            .unwrap_or(0.0)
            - timeouts_before,
    };
    (out, result)
}

/// The soak guardwire's config beyond the run's common part: the small `client_send_ms`,
/// metrics on `admin`, the flood's route to its own mock at `flood`, and the client sockets'
/// options under test.
pub(super) fn config(opts: &crate::opts::Opts, admin: SocketAddr, flood: SocketAddr) -> String {
    let mut extra = format!(
        "timeouts:\n  client_send_ms: {}\nadmin:\n  listen: \"{admin}\"\n{}routes:\n  - {{ name: flood, \
         protocol: openai_chat, path_prefix: {}, strip_prefix: /flood, upstream: \"http://{flood}\" }}\n\
         limits:\n  max_concurrent_requests: 20000\n  client_send_buffer_bytes: {}\n",
        opts.soak_send_ms,
        opts.server_yaml(),
        FLOOD_PREFIX,
        opts.soak_send_buffer
    );
    if let Some(n) = opts.soak_notsent_lowat {
        let _ = writeln!(extra, "  client_notsent_lowat_bytes: {n}");
    }
    extra
}
