//! The never-reading-clients soak (issue 32): clients that send a streaming request and never
//! read a byte (a tiny receive buffer, no reads), against an upstream that streams megabytes,
//! beside a normal client's traffic through the same guardwire.
//!
//! guardwire here runs with its `timeouts.client_send_ms` from `--soak-send-ms` and
//! `admin.listen` (so `/metrics` needs no token). Two shapes:
//! - **A population** (the default): [`Soak::streams`] never-reading clients, opened over
//!   [`Soak::ramp`] before the normal traffic starts and kept up while it runs: each client
//!   sends its request, waits until guardwire resets its connection (a stream guardwire ends
//!   because its client stopped reading is closed with a reset, which raises an error on the
//!   client's socket without a read) or [`Soak::hold`] passes, and connects again at once. So
//!   about `streams` are open at every moment, and how often they come back is up to how
//!   soon guardwire ends them: the attacker the issue describes.
//! - **Arrivals at a fixed rate** (`--soak-rate`): a new never-reading client every 1/rate s
//!   for as long as the normal traffic runs, each keeping its socket for [`Soak::hold`]. Two
//!   configurations then meet the same load whatever they do with it.
//!
//! guardwire ends each never-reading stream about `client_send_ms` after its write blocks,
//! counted in `guardwire_client_timeouts_total{deadline="send"}`. The soak's clients present a
//! key of their own ([`SOAK_KEY`]) and may come from an address of their own (`--soak-source`),
//! so that `keys[].max_concurrent_requests` and
//! `limits.max_concurrent_requests_per_client_address` can be shown protecting the normal
//! traffic's key and address. Reported: how many were sent, the refusals, guardwire's RSS over
//! time beside its requests in flight, its open connections and the kernel's TCP memory,
//! `guardwire_requests_in_flight` back to 0 and the mock's flood answers all cancelled once the
//! soak stops, and the normal traffic's figures beside the same traffic without the soak.
//!
//! So that what the normal traffic loses is guardwire's share, the bench's own parts of the
//! soak run apart from it: the flood is answered by a mock of its own (own thread and runtime,
//! reached through the route under [`FLOOD_PREFIX`]), and the clients, the scrapes and the
//! monitor run on a runtime of their own (one thread). They still share the machine's cores.

use crate::client::NORMAL_KEYS;
use crate::clock::FLOOD_MARK;
use crate::mock::MockState;
use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::{TcpSocket, TcpStream};

/// The path prefix of the soak guardwire's flood route (its upstream: the flood's own mock).
pub(super) const FLOOD_PREFIX: &str = "/flood/";

/// SO_SNDBUF of the flood mock's connections (the kernel doubles it): a flood answer blocked
/// behind a never-reading client waits mostly in guardwire's sockets, not in the bench's.
pub(super) const FLOOD_SEND_BUFFER: u32 = 64 * 1024;

/// The monitor scrapes `/metrics` every this many of its 100 ms samples.
const SCRAPE_EVERY: u64 = 10;

/// The key the never-reading clients present; the normal client's keys are [`NORMAL_KEYS`].
const SOAK_KEY: &str = "sk-load-soak";

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

/// A streaming Chat request naming the flood answer, sent over HTTP/1.1 with the soak's key
/// from a socket with a tiny receive buffer (bound to `source` when given); the caller never
/// reads from it.
async fn never_reading_client(addr: SocketAddr, source: Option<Ipv4Addr>) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.set_recv_buffer_size(2048).ok()?;
    if let Some(ip) = source {
        socket.bind(SocketAddr::from((ip, 0))).ok()?;
    }
    let mut sock = socket.connect(addr).await.ok()?;
    let body = serde_json::json!({
        "model": FLOOD_MARK, "stream": true,
        "messages": [{"role": "user", "content": "Say a lot."}]
    })
    .to_string();
    let head = format!(
        "POST {FLOOD_PREFIX}v1/chat/completions HTTP/1.1\r\nhost: guardwire\r\ncontent-type: application/json\r\n\
         authorization: Bearer {SOAK_KEY}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await.ok()?;
    sock.write_all(body.as_bytes()).await.ok()?;
    Some(sock)
}

/// The soak's shape, from the command line.
#[derive(Clone, Copy)]
pub(super) struct Soak {
    /// Never-reading clients kept open (`--soak`; the population shape).
    pub(super) streams: usize,
    /// guardwire's `timeouts.client_send_ms`.
    pub(super) send_ms: u64,
    /// Arrivals a second instead of a population (`--soak-rate`).
    pub(super) rate: Option<f64>,
    /// Over how long the population's first connections are spread (`--soak-ramp-ms`).
    pub(super) ramp: Duration,
    /// The soak key's `max_concurrent_requests` (`--soak-key-limit`).
    pub(super) key_limit: Option<usize>,
    /// `limits.max_concurrent_requests_per_client_address` (`--soak-address-limit`).
    pub(super) address_limit: Option<usize>,
    /// The never-reading clients' source address (`--soak-source`; with an address limit and
    /// none given, 127.0.0.2, so the normal traffic's 127.0.0.1 is not the capped one).
    pub(super) source: Option<Ipv4Addr>,
}

impl Soak {
    /// The longest a never-reading client keeps its socket: well past the time guardwire takes
    /// to end its stream (its buffers filled, then `client_send_ms`), so that the stream ends
    /// by that deadline, not by the client going. (A population's client goes sooner: when it
    /// sees guardwire's reset.)
    pub(super) fn hold(&self) -> Duration {
        Duration::from_millis(self.send_ms) + Duration::from_secs(15)
    }

    /// Sockets the bench holds at once for the soak (for the open-files limit).
    pub(super) fn sockets(&self) -> usize {
        match self.rate {
            Some(rate) => (rate * self.hold().as_secs_f64()).ceil() as usize,
            None => self.streams,
        }
    }

    /// The soak's shape in words, for the report's heading.
    pub(super) fn shape(&self) -> String {
        match self.rate {
            Some(rate) => format!("{rate:.0} never-reading clients a second"),
            None => format!("{} never-reading clients", self.streams),
        }
    }

    pub(super) fn source(&self) -> Option<Ipv4Addr> {
        self.source
            .or(self.address_limit.map(|_| Ipv4Addr::new(127, 0, 0, 2)))
    }

    /// Which protections the soak guardwire has, for the report.
    pub(super) fn protections(&self) -> String {
        let key = self.key_limit.map_or(
            "the soak's key has no `max_concurrent_requests`".to_owned(),
            |n| format!("the soak's key has `max_concurrent_requests: {n}`"),
        );
        let address = self.address_limit.map_or(
            "no `limits.max_concurrent_requests_per_client_address`".to_owned(),
            |n| format!("`limits.max_concurrent_requests_per_client_address: {n}`"),
        );
        let source = self
            .source()
            .map_or("127.0.0.1 (the normal traffic's too)".to_owned(), |ip| {
                ip.to_string()
            });
        format!("{key}; {address}; never-reading clients from {source}")
    }
}

/// One sample of the monitor: seconds into the soak, guardwire's RSS, its requests in flight
/// and client connections open, the kernel's TCP memory (all sockets of the machine,
/// `/proc/net/sockstat`).
#[derive(Clone, Copy)]
pub(super) struct Sample {
    pub(super) at: f64,
    pub(super) rss_kib: u64,
    pub(super) in_flight: f64,
    pub(super) connections: f64,
    pub(super) tcp_kib: u64,
}

/// What the soak measured.
pub(super) struct SoakResult {
    /// How long the population took to open (0 for arrivals at a fixed rate): the normal
    /// traffic started then.
    pub(super) settle_secs: f64,
    /// How long the soak ran beside the normal traffic.
    pub(super) secs: f64,
    /// Never-reading clients that sent their request, and those that could not connect or send.
    pub(super) opened: usize,
    pub(super) failed: usize,
    /// Clients that saw guardwire reset their connection (the population's only).
    pub(super) resets_seen: usize,
    /// Flood answers the mock started, and how many were still open once the soak stopped and
    /// guardwire reported nothing in flight (0: every upstream request was cancelled).
    pub(super) upstream_started: usize,
    pub(super) upstream_open_after: usize,
    /// Before the soak, then every 100 ms (the peak is the sample with the highest RSS).
    pub(super) before: Sample,
    pub(super) samples: Vec<Sample>,
    /// `guardwire_requests_in_flight` after the soak stopped, and how long it took to get there.
    pub(super) in_flight_after: Option<f64>,
    pub(super) drain_secs: f64,
    /// `guardwire_client_timeouts_total{deadline="send"}` and the refusals by the soak key's
    /// limit and by the address cap, over the soak.
    pub(super) send_timeouts: f64,
    pub(super) refused_key: f64,
    pub(super) refused_address: f64,
}

impl SoakResult {
    /// The sample with the highest RSS.
    pub(super) fn peak(&self) -> Sample {
        self.samples
            .iter()
            .copied()
            .max_by_key(|s| s.rss_kib)
            .unwrap_or(self.before)
    }

    /// The highest of one figure over the samples.
    pub(super) fn most(&self, figure: impl Fn(&Sample) -> f64) -> f64 {
        self.samples.iter().map(figure).fold(0.0, f64::max)
    }

    /// The lowest requests in flight while the normal traffic ran (a population's floor).
    pub(super) fn in_flight_low(&self) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.at >= self.settle_secs)
            .map(|s| s.in_flight)
            .fold(f64::INFINITY, f64::min)
    }
}

/// The kernel's TCP memory in KiB (`/proc/net/sockstat`'s `TCP: … mem` pages; 0 if unread).
fn kernel_tcp_kib() -> u64 {
    let text = std::fs::read_to_string("/proc/net/sockstat").unwrap_or_default();
    let pages = text
        .lines()
        .find(|l| l.starts_with("TCP:"))
        .and_then(|l| l.split_whitespace().skip_while(|w| *w != "mem").nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    pages * 4
}

/// The soak's counters from one `/metrics` text: send timeouts, refusals by the soak key's
/// limit and by the address cap.
fn counters(metrics: &str) -> [f64; 3] {
    let rejected = |reason: &str| {
        series_sum(
            metrics,
            "guardwire_rejected_total",
            &format!("reason=\"{reason}\""),
        )
        .unwrap_or(0.0)
    };
    [
        series_sum(
            metrics,
            "guardwire_client_timeouts_total",
            "deadline=\"send\"",
        )
        .unwrap_or(0.0),
        rejected("key_max_concurrent_requests"),
        rejected("max_concurrent_requests_per_client_address"),
    ]
}

/// The soak's client counters, shared by its tasks.
#[derive(Default)]
struct Tally {
    opened: AtomicUsize,
    failed: AtomicUsize,
    resets_seen: AtomicUsize,
}

impl Tally {
    /// One never-reading client: connects and sends its request (counted), or counts the
    /// failure and waits a little (so a refused connect is not retried in a spin).
    async fn open(&self, addr: SocketAddr, source: Option<Ipv4Addr>) -> Option<TcpStream> {
        let sock = never_reading_client(addr, source).await;
        match sock {
            Some(_) => self.opened.fetch_add(1, Ordering::Relaxed),
            None => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                self.failed.fetch_add(1, Ordering::Relaxed)
            }
        };
        sock
    }
}

/// One client of the population, from `first` on: a never-reading client, again and again,
/// each kept until guardwire resets its connection (seen as an error on the socket: no read
/// needed) or `hold` passes.
async fn keep_one(
    addr: SocketAddr,
    source: Option<Ipv4Addr>,
    first: Instant,
    hold: Duration,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) {
    tokio::time::sleep_until(first.into()).await;
    while !stop.load(Ordering::Relaxed) {
        let Some(sock) = tally.open(addr, source).await else {
            continue;
        };
        if let Ok(Ok(ready)) = tokio::time::timeout(hold, sock.ready(Interest::ERROR)).await {
            if ready.is_error() {
                tally.resets_seen.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Runs the soak while `normal` (the normal client's phases) runs; returns what `normal`
/// returned and what the soak measured. A population is opened before `normal` starts.
pub(super) async fn soak<T>(
    addr: SocketAddr,
    admin: SocketAddr,
    pid: u32,
    shape: Soak,
    mock: &Arc<MockState>,
    normal: impl std::future::Future<Output = T>,
) -> (T, SoakResult) {
    let sample = move |at: f64, metrics: &str| Sample {
        at,
        rss_kib: crate::proxy::rss_kib(pid),
        in_flight: series_sum(metrics, "guardwire_requests_in_flight", "").unwrap_or(0.0),
        connections: series_sum(metrics, "guardwire_connections_open", "").unwrap_or(0.0),
        tcp_kib: kernel_tcp_kib(),
    };
    let first = scrape(admin).await;
    let before = sample(0.0, &first);
    let counters_before = counters(&first);
    // The clients, their scrapes and the monitor: off the normal client's runtime.
    let own = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("load-soak")
        .enable_all()
        .build()
        .unwrap();
    let flood_before = mock.flood_started.load(Ordering::Relaxed);
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let start = Instant::now();
    let (hold, source) = (shape.hold(), shape.source());
    // guardwire's RSS and the kernel's TCP memory every 100 ms (read from /proc: no work for
    // guardwire), its requests in flight and connections every second (a `/metrics` render is
    // guardwire's work, on the workers that serve the normal traffic: scraped every 100 ms it
    // added ~1 ms to the paced TTFB p99 with every never-reading stream parked; every second,
    // nothing measurable).
    let samples = Arc::new(Mutex::new(Vec::new()));
    let monitor = {
        let (stop, samples) = (Arc::clone(&stop), Arc::clone(&samples));
        own.spawn(async move {
            let mut m = String::new();
            let mut tick = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if tick.is_multiple_of(SCRAPE_EVERY) {
                    m = scrape(admin).await;
                }
                tick += 1;
                let s = sample(start.elapsed().as_secs_f64(), &m);
                samples.lock().unwrap().push(s);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let arrivals = shape.rate.map(|rate| {
        let (stop, tally) = (Arc::clone(&stop), Arc::clone(&tally));
        own.spawn(async move {
            // Arrival i is due at i / rate: a late one is sent at once, so the rate holds on
            // average.
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let due = start + Duration::from_secs_f64(i as f64 / rate);
                tokio::time::sleep_until(due.into()).await;
                i += 1;
                let tally = Arc::clone(&tally);
                tokio::spawn(async move {
                    if let Some(sock) = tally.open(addr, source).await {
                        tokio::time::sleep(hold).await;
                        drop(sock);
                    }
                });
            }
        })
    });
    if arrivals.is_none() {
        let n = shape.streams;
        for i in 0..n {
            let first = start + shape.ramp.mul_f64(i as f64 / n as f64);
            let (stop, tally) = (Arc::clone(&stop), Arc::clone(&tally));
            own.spawn(keep_one(addr, source, first, hold, stop, tally));
        }
        // The normal traffic starts once every client has sent its first request (or a bound
        // has passed), and a second more for guardwire to fill their buffers.
        let bound = start + shape.ramp + Duration::from_secs(30);
        while tally.opened.load(Ordering::Relaxed) + tally.failed.load(Ordering::Relaxed) < n
            && Instant::now() < bound
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let settle_secs = if shape.rate.is_some() {
        0.0
    } else {
        start.elapsed().as_secs_f64()
    };
    let out = normal.await;
    stop.store(true, Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64() - settle_secs;
    if let Some(arrivals) = arrivals {
        let _ = arrivals.await;
    }
    let _ = monitor.await;
    // Dropping a runtime may block, which an async context must not. The held sockets go
    // with it: guardwire ends what it still had of them as clients gone.
    own.shutdown_background();
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
    let after = counters(&m);
    let grew = |i: usize| after[i] - counters_before[i];
    let samples = std::mem::take(&mut *samples.lock().unwrap());
    let result = SoakResult {
        settle_secs,
        secs,
        opened: tally.opened.load(Ordering::Relaxed),
        failed: tally.failed.load(Ordering::Relaxed),
        resets_seen: tally.resets_seen.load(Ordering::Relaxed),
        upstream_started: mock.flood_started.load(Ordering::Relaxed) - flood_before,
        upstream_open_after: mock.flood_open.load(Ordering::Relaxed),
        before,
        samples,
        in_flight_after,
        drain_secs: drain_start.elapsed().as_secs_f64(),
        send_timeouts: grew(0),
        refused_key: grew(1),
        refused_address: grew(2),
    };
    (out, result)
}

/// The soak guardwire's config beyond the run's common part: the small `client_send_ms`,
/// metrics on `admin`, the flood's route to its own mock at `flood`, the client sockets'
/// options under test, the normal traffic's keys and the soak's (with its limit), and the
/// address cap.
pub(super) fn config(opts: &crate::opts::Opts, admin: SocketAddr, flood: SocketAddr) -> String {
    let shape = opts.soak;
    let mut extra = format!(
        "timeouts:\n  client_send_ms: {}\nadmin:\n  listen: \"{admin}\"\n{}routes:\n  - {{ name: flood, \
         protocol: openai_chat, path_prefix: {}, strip_prefix: /flood, upstream: \"http://{flood}\" }}\n\
         keys:\n",
        shape.send_ms,
        opts.server_yaml(),
        FLOOD_PREFIX,
    );
    for (i, key) in NORMAL_KEYS.iter().enumerate() {
        let _ = writeln!(extra, "  - {{ id: normal-{i}, key: {key} }}");
    }
    let _ = write!(extra, "  - {{ id: soak, key: {SOAK_KEY}");
    if let Some(n) = shape.key_limit {
        let _ = write!(extra, ", max_concurrent_requests: {n}");
    }
    let _ = writeln!(
        extra,
        " }}\nlimits:\n  max_concurrent_requests: 20000\n  client_send_buffer_bytes: {}",
        opts.soak_send_buffer
    );
    if let Some(n) = opts.soak_notsent_lowat {
        let _ = writeln!(extra, "  client_notsent_lowat_bytes: {n}");
    }
    if let Some(n) = shape.address_limit {
        let _ = writeln!(extra, "  max_concurrent_requests_per_client_address: {n}");
    }
    extra
}
