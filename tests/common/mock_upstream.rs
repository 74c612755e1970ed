//! In-process mock LLM upstream for integration tests.
//!
//! `MockUpstream::start(handler)` binds `127.0.0.1:0` and serves HTTP/1.1 and
//! HTTP/2 (prior knowledge / h2c) via `hyper_util::server::conn::auto`. Every
//! request is fully read, recorded, and then passed to `handler`, whose
//! [`Reply`] decides what goes back on the wire: a body streamed chunk by
//! chunk (each chunk its own body frame, optionally delayed), a response that
//! never starts, a body that never ends, or a connection reset.
//!
//! `MockUpstream::start_tls(config, handler)` serves the same over TLS with the
//! given rustls server config (its ALPN list decides HTTP/2 or HTTP/1.1).
//!
//! Response bodies carry a drop guard so the mock can tell how many bodies
//! were fully handed to hyper (`completed_count`) versus dropped early because
//! the client went away (`cancelled_count`).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, Sleep};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Handler = dyn Fn(&RecordedRequest) -> Reply + Send + Sync + 'static;

/// A request as seen by the mock (body fully buffered).
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: Method,
    /// Path plus query, e.g. `/v1/chat/completions?x=1` (`/` if absent).
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// HTTP/1.1 or HTTP/2, as the request arrived.
    pub version: http::Version,
    /// The request target as hyper parsed it: for HTTP/1.1, origin form (`/v1/…`) has no
    /// scheme or authority, absolute form does; for HTTP/2 they come from the pseudo-headers.
    pub uri: http::Uri,
}

impl RecordedRequest {
    /// Asserts what a strict HTTP server needs from the request line (RFC 9112 §3.2, RFC 9113
    /// §8.3.1): over HTTP/1.1 an origin-form target and exactly one `Host` equal to
    /// `authority`; over HTTP/2 `:authority` equal to it and no `Host`.
    pub fn assert_target_for(&self, authority: &str) {
        if self.version == http::Version::HTTP_2 {
            assert_eq!(
                self.uri.authority().map(|a| a.as_str()),
                Some(authority),
                "{self:?}"
            );
            assert!(self.headers.get("host").is_none(), "{self:?}");
        } else {
            assert!(self.uri.scheme().is_none(), "absolute form: {self:?}");
            assert!(self.uri.authority().is_none(), "absolute form: {self:?}");
            let hosts: Vec<_> = self.headers.get_all("host").iter().collect();
            assert_eq!(hosts, [authority], "{self:?}");
        }
    }

    /// First value of header `name`, if present and valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Body as (lossy) UTF-8 text.
    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Body parsed as JSON, if it is valid JSON.
    pub fn body_json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// One body frame: sleep `delay_before`, then write `bytes` as its own frame.
#[derive(Debug, Clone)]
pub struct Chunk {
    pub bytes: Bytes,
    pub delay_before: Duration,
}

impl Chunk {
    pub fn new(bytes: impl Into<Bytes>, delay_before: Duration) -> Self {
        Self {
            bytes: bytes.into(),
            delay_before,
        }
    }

    /// A chunk written without delay.
    pub fn now(bytes: impl Into<Bytes>) -> Self {
        Self::new(bytes, Duration::ZERO)
    }
}

/// What the mock does with a request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Send `status` + `headers`, then stream `chunks` (one body frame each),
    /// then end the body.
    Chunks {
        status: u16,
        headers: Vec<(String, String)>,
        chunks: Vec<Chunk>,
    },
    /// Read the request and never send response headers.
    Hang,
    /// Like `Chunks`, but after the last chunk the body stays open forever.
    HangAfter {
        status: u16,
        headers: Vec<(String, String)>,
        chunks: Vec<Chunk>,
    },
    /// Close the connection without any response (HTTP/1: connection closed;
    /// HTTP/2: stream reset).
    Reset,
}

impl Reply {
    /// 200 `text/event-stream`, whole body in a single chunk.
    pub fn sse(body: &[u8]) -> Self {
        Self::Chunks {
            status: 200,
            headers: vec![sse_content_type()],
            chunks: vec![Chunk::now(Bytes::copy_from_slice(body))],
        }
    }

    /// 200 `text/event-stream`, body split at the given byte offsets.
    ///
    /// Offsets may be unsorted; duplicates, `0` and offsets `>= body.len()`
    /// are ignored (they would only produce empty pieces). The first piece is
    /// sent immediately, every later piece after sleeping `delay`.
    pub fn sse_split(body: &[u8], split_points: &[usize], delay: Duration) -> Self {
        let mut points: Vec<usize> = split_points
            .iter()
            .copied()
            .filter(|&p| p > 0 && p < body.len())
            .collect();
        points.sort_unstable();
        points.dedup();
        let body = Bytes::copy_from_slice(body);
        let mut chunks = Vec::with_capacity(points.len() + 1);
        let mut start = 0;
        for end in points.into_iter().chain(std::iter::once(body.len())) {
            let delay_before = if start == 0 { Duration::ZERO } else { delay };
            chunks.push(Chunk::new(body.slice(start..end), delay_before));
            start = end;
        }
        Self::Chunks {
            status: 200,
            headers: vec![sse_content_type()],
            chunks,
        }
    }

    /// 200 `text/event-stream`, body in pieces of `n` bytes (`n == 0` is
    /// treated as 1). First piece immediately, later pieces after `delay`.
    pub fn sse_every(body: &[u8], n: usize, delay: Duration) -> Self {
        let n = n.max(1);
        let points: Vec<usize> = (n..body.len()).step_by(n).collect();
        Self::sse_split(body, &points, delay)
    }

    /// `status` with `content-type: application/json` and `body` in one chunk.
    pub fn json(status: u16, body: &str) -> Self {
        Self::Chunks {
            status,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            chunks: vec![Chunk::now(Bytes::copy_from_slice(body.as_bytes()))],
        }
    }

    /// Arbitrary status/headers/chunks.
    pub fn chunks(status: u16, chunks: Vec<Chunk>) -> Self {
        Self::Chunks {
            status,
            headers: Vec::new(),
            chunks,
        }
    }

    /// Add a response header (no-op for `Hang` / `Reset`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Self::Chunks { headers, .. } | Self::HangAfter { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }

    /// Turn a `Chunks` reply into `HangAfter` (same status/headers/chunks,
    /// but the body never ends). Other variants are returned unchanged.
    pub fn then_hang(self) -> Self {
        match self {
            Self::Chunks {
                status,
                headers,
                chunks,
            } => Self::HangAfter {
                status,
                headers,
                chunks,
            },
            other => other,
        }
    }
}

fn sse_content_type() -> (String, String) {
    ("content-type".to_owned(), "text/event-stream".to_owned())
}

#[derive(Default)]
struct Stats {
    requests: Mutex<Vec<RecordedRequest>>,
    request_count: AtomicUsize,
    cancelled: AtomicUsize,
    completed: AtomicUsize,
    open: AtomicUsize,
    connections: AtomicUsize,
    /// Body bytes handed to hyper (over HTTP/2 hyper takes a frame only once the peer's flow
    /// control has room for it, give or take its send buffer).
    body_bytes: AtomicUsize,
}

impl Stats {
    fn requests(&self) -> MutexGuard<'_, Vec<RecordedRequest>> {
        self.requests.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct Shared {
    handler: Box<Handler>,
    stats: Arc<Stats>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// The HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS` announced (hyper's default, 200, if `None`).
    h2_max_streams: Option<u32>,
}

/// Handle to a running mock upstream. Dropping it stops the accept loop and
/// aborts every open connection.
pub struct MockUpstream {
    pub addr: SocketAddr,
    stats: Arc<Stats>,
    task: JoinHandle<()>,
}

impl MockUpstream {
    /// Bind `127.0.0.1:0` and start serving. Must be called inside a tokio
    /// runtime.
    pub async fn start<F>(handler: F) -> Self
    where
        F: Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    {
        Self::start_with(None, None, Box::new(handler)).await
    }

    /// Like [`start`](Self::start), over TLS with `config`. Only some test binaries use it.
    #[allow(dead_code)]
    pub async fn start_tls<F>(config: Arc<rustls::ServerConfig>, handler: F) -> Self
    where
        F: Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    {
        Self::start_tls_with_streams(config, None, handler).await
    }

    /// Like [`start_tls`](Self::start_tls), announcing `h2_max_streams` as HTTP/2's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` when it is given.
    #[allow(dead_code)]
    pub async fn start_tls_with_streams<F>(
        config: Arc<rustls::ServerConfig>,
        h2_max_streams: Option<u32>,
        handler: F,
    ) -> Self
    where
        F: Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    {
        Self::start_with(
            Some(tokio_rustls::TlsAcceptor::from(config)),
            h2_max_streams,
            Box::new(handler),
        )
        .await
    }

    async fn start_with(
        tls: Option<tokio_rustls::TlsAcceptor>,
        h2_max_streams: Option<u32>,
        handler: Box<Handler>,
    ) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("mock upstream: bind 127.0.0.1:0");
        let addr = listener
            .local_addr()
            .expect("mock upstream: local_addr of bound listener");
        let stats = Arc::new(Stats::default());
        let shared = Arc::new(Shared {
            handler,
            stats: Arc::clone(&stats),
            tls,
            h2_max_streams,
        });
        let task = tokio::spawn(accept_loop(listener, shared));
        Self { addr, stats, task }
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// All requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.stats.requests().clone()
    }

    /// Drops the recorded requests (counts stay): long tests keep the mock's memory flat.
    #[allow(dead_code)]
    pub fn forget_requests(&self) {
        self.stats.requests().clear();
    }

    /// Connections accepted so far (a keep-alive client reuses them).
    #[allow(dead_code)]
    pub fn connection_count(&self) -> usize {
        self.stats.connections.load(Ordering::SeqCst)
    }

    /// Number of requests received (recorded before the reply starts).
    pub fn request_count(&self) -> usize {
        self.stats.request_count.load(Ordering::SeqCst)
    }

    /// Response bodies dropped before they were fully sent (the client went
    /// away mid-stream). A `HangAfter` body always ends up here once dropped.
    pub fn cancelled_count(&self) -> usize {
        self.stats.cancelled.load(Ordering::SeqCst)
    }

    /// Response bodies whose every chunk was handed to hyper.
    pub fn completed_count(&self) -> usize {
        self.stats.completed.load(Ordering::SeqCst)
    }

    /// Body bytes handed to hyper so far, over every response.
    #[allow(dead_code)]
    pub fn body_bytes_sent(&self) -> usize {
        self.stats.body_bytes.load(Ordering::SeqCst)
    }

    /// Response bodies currently being streamed.
    pub fn concurrent_open(&self) -> usize {
        self.stats.open.load(Ordering::SeqCst)
    }

    /// Wait until `cancelled_count() >= n`; `false` if `timeout` passes first.
    pub async fn wait_for_cancelled(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, || self.cancelled_count() >= n)
            .await
    }

    /// Wait until `completed_count() >= n`; `false` if `timeout` passes first.
    pub async fn wait_for_completed(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, || self.completed_count() >= n)
            .await
    }

    /// Wait until `request_count() >= n`; `false` if `timeout` passes first.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, || self.request_count() >= n).await
    }

    async fn wait_until(&self, timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for MockUpstream {
    fn drop(&mut self) {
        // Dropping the accept task drops its JoinSet, aborting all connections.
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    conns.spawn(serve_connection(stream, Arc::clone(&shared)));
                }
                Err(e) => {
                    eprintln!("mock upstream: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    shared.stats.connections.fetch_add(1, Ordering::SeqCst);
    // Small chunks must leave immediately so split points survive on the wire.
    let _ = stream.set_nodelay(true);
    match shared.tls.clone() {
        None => serve_io(stream, shared).await,
        Some(acceptor) => {
            if let Ok(tls) = acceptor.accept(stream).await {
                serve_io(tls, shared).await;
            }
        }
    }
}

async fn serve_io<S>(io: S, shared: Arc<Shared>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let h2_max_streams = shared.h2_max_streams;
    let service = hyper::service::service_fn(move |req| handle(req, Arc::clone(&shared)));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if let Some(max) = h2_max_streams {
        builder.http2().max_concurrent_streams(max);
    }
    // Errors here are expected (resets, clients hanging up); ignore them.
    let _ = builder.serve_connection(TokioIo::new(io), service).await;
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<MockBody>, BoxError> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await?.to_bytes();
    let recorded = RecordedRequest {
        uri: parts.uri.clone(),
        method: parts.method,
        path_and_query: parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |pq| pq.as_str().to_owned()),
        headers: parts.headers,
        body,
        version: parts.version,
    };
    shared.stats.requests().push(recorded.clone());
    shared.stats.request_count.fetch_add(1, Ordering::SeqCst);

    match (shared.handler)(&recorded) {
        Reply::Hang => std::future::pending().await,
        Reply::Reset => Err("mock upstream: Reply::Reset".into()),
        Reply::Chunks {
            status,
            headers,
            chunks,
        } => build_response(status, &headers, chunks, false, &shared.stats),
        Reply::HangAfter {
            status,
            headers,
            chunks,
        } => build_response(status, &headers, chunks, true, &shared.stats),
    }
}

fn build_response(
    status: u16,
    headers: &[(String, String)],
    chunks: Vec<Chunk>,
    hang_at_end: bool,
    stats: &Arc<Stats>,
) -> Result<Response<MockBody>, BoxError> {
    let mut header_map = HeaderMap::new();
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| format!("mock upstream: bad header name {name:?}: {e}"))?;
        let value = HeaderValue::from_str(value)
            .map_err(|e| format!("mock upstream: bad header value {value:?}: {e}"))?;
        header_map.append(name, value);
    }
    let status = StatusCode::from_u16(status)
        .map_err(|e| format!("mock upstream: bad status {status}: {e}"))?;
    let mut response = Response::new(MockBody::new(chunks, hang_at_end, Arc::clone(stats)));
    *response.status_mut() = status;
    *response.headers_mut() = header_map;
    Ok(response)
}

/// Counts the body as completed or cancelled when dropped.
struct BodyGuard {
    stats: Arc<Stats>,
    finished: bool,
}

impl Drop for BodyGuard {
    fn drop(&mut self) {
        self.stats.open.fetch_sub(1, Ordering::SeqCst);
        if self.finished {
            self.stats.completed.fetch_add(1, Ordering::SeqCst);
        } else {
            self.stats.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Response body: yields each chunk as its own data frame after its delay.
struct MockBody {
    chunks: VecDeque<Chunk>,
    hang_at_end: bool,
    sleep: Option<Pin<Box<Sleep>>>,
    guard: BodyGuard,
}

impl MockBody {
    fn new(chunks: Vec<Chunk>, hang_at_end: bool, stats: Arc<Stats>) -> Self {
        stats.open.fetch_add(1, Ordering::SeqCst);
        Self {
            chunks: chunks.into(),
            hang_at_end,
            sleep: None,
            guard: BodyGuard {
                stats,
                finished: false,
            },
        }
    }

    fn mark_finished_if_done(&mut self) {
        if self.chunks.is_empty() && !self.hang_at_end {
            self.guard.finished = true;
        }
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        loop {
            let Some(delay) = this.chunks.front().map(|c| c.delay_before) else {
                if this.hang_at_end {
                    // Stay open forever; hyper drops us when the client leaves.
                    return Poll::Pending;
                }
                this.guard.finished = true;
                return Poll::Ready(None);
            };
            if !delay.is_zero() {
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(delay)));
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.sleep = None;
            }
            let Some(chunk) = this.chunks.pop_front() else {
                continue;
            };
            this.mark_finished_if_done();
            if chunk.bytes.is_empty() {
                // Empty frames are skipped by hyper anyway; keep going.
                continue;
            }
            let stats = &this.guard.stats;
            stats
                .body_bytes
                .fetch_add(chunk.bytes.len(), Ordering::SeqCst);
            return Poll::Ready(Some(Ok(Frame::data(chunk.bytes))));
        }
    }

    fn is_end_stream(&self) -> bool {
        !self.hang_at_end && self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        // Unknown length: forces chunked encoding (HTTP/1) unless the reply
        // sets content-length itself.
        SizeHint::default()
    }
}

/// 32 MiB of Chat answer text in 64 KiB chunks (each sent at once), with no terminal event:
/// a flood no kernel buffer holds, for bodies a client never reads.
#[allow(dead_code)]
pub fn chat_flood_chunks() -> Vec<Chunk> {
    let text = "x".repeat(1000);
    let frame = format!(
        r#"{{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}]}}"#
    );
    let frames: Vec<&str> = std::iter::repeat_n(frame.as_str(), 64).collect();
    let chunk = Bytes::from(sse_data_frames(&frames));
    (0..512).map(|_| Chunk::now(chunk.clone())).collect()
}

/// `data: {json}\n\n` for each json string, concatenated.
pub fn sse_data_frames(jsons: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for json in jsons {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(json.as_bytes());
        out.extend_from_slice(b"\n\n");
    }
    out
}

/// A whole (not streamed) OpenAI Chat Completions answer with `content`.
pub fn openai_chat_answer(content: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
    })
    .to_string()
}

/// A realistic OpenAI Chat Completions stream: role chunk, one content chunk
/// per text piece, a `finish_reason: "stop"` chunk, then `data: [DONE]`.
pub fn openai_chat_stream(texts: &[&str]) -> Vec<u8> {
    const PREFIX: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":"#;
    let mut frames = Vec::with_capacity(texts.len() + 2);
    frames.push(format!(
        r#"{PREFIX}{{"role":"assistant","content":""}},"finish_reason":null}}]}}"#
    ));
    for text in texts {
        let escaped = serde_json::Value::String((*text).to_owned()).to_string();
        frames.push(format!(
            r#"{PREFIX}{{"content":{escaped}}},"finish_reason":null}}]}}"#
        ));
    }
    frames.push(format!(r#"{PREFIX}{{}},"finish_reason":"stop"}}]}}"#));
    let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
    let mut out = sse_data_frames(&refs);
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

/// [`openai_chat_stream`] ending with the provider's usage: `input` prompt tokens, `output`
/// completion tokens (the chunk `stream_options.include_usage` asks for).
#[allow(dead_code)]
pub fn openai_chat_stream_with_usage(texts: &[&str], input: u64, output: u64) -> Vec<u8> {
    let mut answer = openai_chat_stream(texts);
    let done = answer.len() - "data: [DONE]\n\n".len();
    let usage = format!(
        "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\
         \"usage\":{{\"prompt_tokens\":{input},\"completion_tokens\":{output},\
         \"total_tokens\":{}}}}}\n\n",
        input + output
    );
    answer.splice(done..done, usage.bytes());
    answer
}
