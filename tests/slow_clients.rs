//! Clients that stop reading do not hold a stream: with a tiny receive buffer and not one
//! read, against an upstream that streams megabytes, a stream still ends at its total deadline
//! (`timeouts.total_ms`) or once a write to the client has been blocked for
//! `timeouts.client_send_ms`: the upstream sees its request cancelled, the in-flight permits
//! come back, the HTTP/1 connection is closed, the HTTP/2 stream reset (its connection serves
//! on), and the ends are counted in `guardwire_client_timeouts_total`.
//!
//! A connection guardwire ends for a client that does not read is reset (RST), over plain TCP
//! and TLS, so that its socket is not left in guardwire's kernel holding the bytes the client
//! refuses; a client that reads its answers sees an orderly close (FIN).
//!
//! With `limits.client_notsent_lowat_bytes`, what guardwire takes from the upstream for such a
//! client before its write blocks is bounded (counted by the upstream's own socket), and
//! `limits.upstream_receive_buffer_bytes` bounds it further.
//!
//! No timing assertions: every wait is for a condition, failing only after [`BOUND`].
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use common::mock_upstream::{chat_flood_chunks, sse_data_frames, Chunk, MockUpstream, Reply};
use common::proxy::{metrics, never_reading_client, start_proxy, PLAIN_REQUEST, STREAM_REQUEST};
use http::StatusCode;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const PACK: &str = "validators: []\n";
/// The total and idle deadlines far away: only `client_send_ms` (1 s) can end a stream.
const ONLY_CLIENT_SEND: &str =
    "timeouts: { total_ms: 600000, idle_ms: 600000, client_send_ms: 1000 }\n";
/// Far longer than any deadline under test: a condition not met by then never will be.
const BOUND: Duration = Duration::from_secs(30);

/// 32 MiB of answer text in 64 KiB chunks, with no terminal event, and then the body stays
/// open: only a deadline can end this stream, and no kernel buffer holds all of it.
async fn megabytes_upstream() -> MockUpstream {
    MockUpstream::start(|_| {
        Reply::chunks(200, chat_flood_chunks())
            .with_header("content-type", "text/event-stream")
            .then_hang()
    })
    .await
}

/// guardwire in front of [`megabytes_upstream`] with `timeouts` (and any further config lines).
async fn megabytes_proxy(timeouts: &str) -> (MockUpstream, common::proxy::Proxy) {
    let mock = megabytes_upstream().await;
    let proxy = start_proxy(&mock.base_url(), PACK, timeouts).await;
    (mock, proxy)
}

/// A socket with a tiny receive buffer, connected to `addr`.
async fn tiny_window_socket(addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(2048).unwrap();
    socket.connect(addr).await.unwrap()
}

/// An HTTP/1.1 chat request with `body`.
fn chat_request(body: &str) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: guardwire\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Waits, without reading, until the peer has reset `sock` (the error the kernel keeps on the
/// socket); panics after [`BOUND`]. A FIN would never show here: it waits behind the bytes
/// the client does not read, and is no error.
async fn wait_for_reset(sock: &TcpStream) {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        match sock.take_error().unwrap() {
            Some(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            Some(e) => panic!("the client socket failed, but not with a reset: {e}"),
            None => {}
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the client connection was never reset"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value of the series `series` (name and labels, as exposed), if present.
fn value(metrics: &str, series: &str) -> Option<u64> {
    metrics.lines().find_map(|l| {
        let v = l.strip_prefix(series)?.strip_prefix(' ')?;
        v.trim().parse().ok()
    })
}

/// Polls `/metrics` until `series` reads `want`; panics with the last scrape after [`BOUND`].
async fn wait_for_series(addr: SocketAddr, series: &str, want: u64) {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let m = metrics(addr).await;
        if value(&m, series) == Some(want) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{series} never reached {want}:\n{m}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reads whatever is buffered for `sock` until the peer closes it; panics if it stays open
/// for [`BOUND`].
async fn assert_closed(sock: &mut TcpStream) {
    let closed = tokio::time::timeout(BOUND, async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the client connection is still open");
}

/// `n` never-reading clients against guardwire with `timeouts`: every stream ends (upstream
/// cancelled, permits back, connection closed), counted under `deadline`. Returns the proxy's
/// metrics.
async fn never_reading_clients_end(n: usize, timeouts: &str, deadline: &str) -> String {
    let (mock, proxy) = megabytes_proxy(timeouts).await;
    let addr = proxy.addr();
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(never_reading_client(addr, STREAM_REQUEST).await);
    }
    assert!(
        mock.wait_for_requests(n, BOUND).await,
        "the streams never began"
    );
    wait_for_series(addr, "guardwire_requests_in_flight", 0).await;
    assert!(
        mock.wait_for_cancelled(n, BOUND).await,
        "only {} of {n} upstream requests were cancelled",
        mock.cancelled_count()
    );
    for sock in &mut clients {
        assert_closed(sock).await;
    }
    let m = metrics(addr).await;
    let series =
        format!("guardwire_client_timeouts_total{{route=\"openai_chat\",deadline=\"{deadline}\"}}");
    assert_eq!(value(&m, &series), Some(n as u64), "{m}");
    // The proxy serves on.
    let a = common::proxy::send(addr, "GET", "/healthz", Bytes::new(), &[]).await;
    assert_eq!(a.status, StatusCode::OK);
    m
}

#[tokio::test]
async fn clients_that_never_read_are_cut_at_the_total_deadline() {
    // client_send_ms keeps its default (60 s): only the total deadline can end these in time.
    let timeouts = "timeouts: { total_ms: 3000, idle_ms: 2000 }\n";
    let m = never_reading_clients_end(5, timeouts, "total").await;
    assert_eq!(value(&m, "guardwire_streams_in_flight"), Some(0), "{m}");
}

#[tokio::test]
async fn a_write_blocked_for_client_send_ms_ends_the_stream() {
    never_reading_clients_end(2, ONLY_CLIENT_SEND, "send").await;
}

/// The connection of a blocked write ended by `client_send_ms` is reset: the client's socket
/// has the error without reading a byte, and the drop is counted.
#[tokio::test]
async fn a_connection_whose_write_stays_blocked_is_reset() {
    let (mock, proxy) = megabytes_proxy(ONLY_CLIENT_SEND).await;
    let addr = proxy.addr();
    let sock = never_reading_client(addr, STREAM_REQUEST).await;
    wait_for_reset(&sock).await;
    assert!(
        mock.wait_for_cancelled(1, BOUND).await,
        "the upstream request was not cancelled"
    );
    let m = metrics(addr).await;
    assert_eq!(
        value(
            &m,
            "guardwire_connections_dropped_total{reason=\"blocked\"}"
        ),
        Some(1),
        "{m}"
    );
}

/// The same over TLS: the reset is of the TCP socket under the TLS session.
#[tokio::test]
async fn over_tls_a_connection_whose_write_stays_blocked_is_reset() {
    let dir = tempfile::tempdir().unwrap();
    let cert = common::tls::write_cert(dir.path());
    let extra = format!(
        "{ONLY_CLIENT_SEND}tls: {{ cert_path: \"{}\", key_path: \"{}\" }}\n",
        dir.path().join("cert.pem").display(),
        dir.path().join("key.pem").display()
    );
    let (mock, proxy) = megabytes_proxy(&extra).await;
    let tcp = tiny_window_socket(proxy.addr()).await;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(common::tls::client_config(&cert)));
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    tls.write_all(chat_request(STREAM_REQUEST).as_bytes())
        .await
        .unwrap();
    tls.flush().await.unwrap();
    wait_for_reset(tls.get_ref().0).await;
    assert!(
        mock.wait_for_cancelled(1, BOUND).await,
        "the upstream request was not cancelled"
    );
}

/// An HTTP/1 client that never reads a whole answer larger than the sockets' buffers: the
/// request ends once hyper has the answer, the idle close begins and cannot finish, and
/// `client_send_ms` later the connection is dropped: reset, and counted as `unread`.
#[tokio::test]
async fn an_idle_http1_connection_whose_last_answer_is_not_read_is_reset() {
    // ≈ 2 MB, the client's receive buffer 2 KiB and guardwire's send buffer 8 KiB (Linux
    // doubles the 4096 asked for).
    let content = "fine ".repeat(400_000);
    let answer = common::mock_upstream::openai_chat_answer(&content);
    let mock = MockUpstream::start(move |_| Reply::json(200, &answer)).await;
    // The next-head deadline far away: only the idle close and client_send_ms end it.
    let proxy = start_proxy(
        &mock.base_url(),
        PACK,
        "timeouts: { client_header_ms: 600000, client_idle_ms: 300, client_send_ms: 300 }\nlimits: { client_send_buffer_bytes: 4096 }\n",
    )
    .await;
    let addr = proxy.addr();
    let sock = never_reading_client(addr, PLAIN_REQUEST).await;
    wait_for_reset(&sock).await;
    let m = metrics(addr).await;
    assert_eq!(
        value(&m, "guardwire_connections_dropped_total{reason=\"unread\"}"),
        Some(1),
        "{m}"
    );
    // The answer was whole when handed over: not a blocked write of a body being relayed.
    let send = "guardwire_client_timeouts_total{route=\"openai_chat\",deadline=\"send\"}";
    assert_eq!(value(&m, send), Some(0), "{m}");
}

/// A client that reads its answers sees guardwire's close as an orderly end: the idle close
/// of a keep-alive connection whose streamed answer was read whole is a FIN, not a reset.
#[tokio::test]
async fn a_client_that_reads_its_answer_sees_an_orderly_close() {
    let mock =
        MockUpstream::start(|_| Reply::sse(&common::mock_upstream::openai_chat_stream(&["fine"])))
            .await;
    let proxy = start_proxy(
        &mock.base_url(),
        PACK,
        "timeouts: { client_header_ms: 600000, client_idle_ms: 300 }\n",
    )
    .await;
    let mut sock = tiny_window_socket(proxy.addr()).await;
    sock.write_all(chat_request(STREAM_REQUEST).as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(BOUND, sock.read_to_end(&mut got))
        .await
        .expect("the idle connection was never closed");
    let text = String::from_utf8_lossy(&got);
    assert!(read.is_ok(), "{read:?} after {text}");
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.ends_with("0\r\n\r\n"), "{text}");
    assert!(sock.take_error().unwrap().is_none());
}

#[tokio::test]
async fn an_http2_stream_that_is_not_read_is_reset_and_its_connection_serves_on() {
    let (mock, proxy) = megabytes_proxy(ONLY_CLIENT_SEND).await;
    let addr = proxy.addr();
    // A stream window of 16 KiB that is never released (the body is not read), and room in
    // the connection's window for more streams.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(16 * 1024)
        .initial_connection_window_size(8 << 20)
        .handshake::<_, Full<Bytes>>(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = http::Request::post(format!("http://{addr}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(STREAM_REQUEST.as_bytes())))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    wait_for_series(addr, "guardwire_requests_in_flight", 0).await;
    assert!(
        mock.wait_for_cancelled(1, BOUND).await,
        "the upstream request was not cancelled"
    );
    // What was sent before the reset, then the reset: never a clean end.
    let body = tokio::time::timeout(BOUND, resp.into_body().collect())
        .await
        .expect("the stream was neither reset nor ended");
    assert!(body.is_err(), "the stream ended as if complete");
    // The connection itself serves on.
    let req = http::Request::get(format!("http://{addr}/healthz"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let m = metrics(addr).await;
    let send = "guardwire_client_timeouts_total{route=\"openai_chat\",deadline=\"send\"}";
    assert_eq!(value(&m, send), Some(1), "{m}");
}

#[tokio::test]
async fn at_the_drain_deadline_a_client_that_does_not_read_is_reset() {
    // No other deadline can end this stream.
    let (mock, proxy) = megabytes_proxy(
        "timeouts: { total_ms: 600000, idle_ms: 600000, client_send_ms: 600000 }\n",
    )
    .await;
    let addr = proxy.addr();
    let mut sock = never_reading_client(addr, STREAM_REQUEST).await;
    wait_for_series(addr, "guardwire_streams_in_flight", 1).await;
    // Most likely blocked on the client by now (if not, the stream ends with its error frame,
    // which also closes the connection).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The drain deadline passes at once; the stream's error frame cannot reach a client that
    // does not read, so its connection is dropped.
    let gateway_metrics = std::sync::Arc::clone(&proxy.server.gateway.metrics);
    proxy.server.shutdown(Duration::from_millis(100)).await;
    // Before reading anything: reading would let the stream run and end by itself.
    assert!(
        mock.wait_for_cancelled(1, BOUND).await,
        "the upstream request was not cancelled"
    );
    wait_for_reset(&sock).await;
    assert_closed(&mut sock).await;
    let rendered = gateway_metrics.render(guardwire::metrics::Exposition::Text004);
    assert!(
        rendered.contains("guardwire_connections_dropped_total{reason=\"drain\"} 1\n"),
        "{rendered}"
    );
}

/// At the drain deadline a client still reading a long answer is not taken for one that does
/// not read: its connection, dropped a second later, is closed with a FIN after the bytes
/// already sent, not reset (which would throw them away).
#[tokio::test]
async fn at_the_drain_deadline_a_client_still_reading_gets_an_orderly_close() {
    // 32 MiB relayed unchecked (a passthrough path), then the upstream hangs: no deadline but
    // the drain's ends it, and a reader at 8 MB/s at most is still at it a second later.
    let mock = megabytes_upstream().await;
    let extra = format!(
        "timeouts: {{ total_ms: 600000, idle_ms: 600000, client_send_ms: 600000 }}\nroutes:\n  - {{ name: relay, protocol: openai_chat, path_prefix: /r/, strip_prefix: /r, upstream: \"{}\", passthrough_paths: [/v1/models] }}\n",
        mock.base_url()
    );
    let proxy = start_proxy(&mock.base_url(), PACK, &extra).await;
    let mut sock = TcpStream::connect(proxy.addr()).await.unwrap();
    sock.write_all(b"GET /r/v1/models HTTP/1.1\r\nhost: guardwire\r\n\r\n")
        .await
        .unwrap();
    // Reads 16 KiB every 2 ms until the connection ends; returns how many bytes, or the error.
    let (started, answer_began) = tokio::sync::oneshot::channel();
    let reader = tokio::spawn(async move {
        let mut started = Some(started);
        let mut buf = vec![0u8; 16 * 1024];
        let mut total = 0usize;
        loop {
            match sock.read(&mut buf).await {
                Ok(0) => return Ok(total),
                Ok(n) => total += n,
                Err(e) => return Err(e),
            }
            if let Some(started) = started.take() {
                let _ = started.send(());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    tokio::time::timeout(BOUND, answer_began)
        .await
        .expect("the answer never began")
        .unwrap();
    let gateway_metrics = Arc::clone(&proxy.server.gateway.metrics);
    proxy.server.shutdown(Duration::from_millis(100)).await;
    let read = tokio::time::timeout(BOUND, reader)
        .await
        .expect("the connection is still open")
        .unwrap()
        .expect("the connection of a client still reading was reset");
    assert!(read < 32 << 20, "the answer was read whole: nothing cut it");
    let rendered = gateway_metrics.render(guardwire::metrics::Exposition::Text004);
    assert!(
        rendered.contains("guardwire_connections_dropped_total{reason=\"drain\"} 1\n"),
        "{rendered}"
    );
}

/// An answer guardwire relays without checking (a `passthrough_paths` path, an upstream error
/// status) ends at the exchange's total deadline too, whoever stalls: here the upstream sends
/// a little and then nothing, for ever. The client gets a cut answer (never one that looks
/// whole; an error status on an LLM route: guardwire's own timeout), the upstream request is
/// cancelled and the end is counted as a `total` upstream error.
#[tokio::test]
async fn a_relayed_answer_that_never_ends_is_cut_at_the_total_deadline() {
    let mock = MockUpstream::start(|req| {
        let status = if req.path_and_query == "/v1/models" {
            200
        } else {
            429
        };
        Reply::chunks(status, vec![Chunk::now(r#"{"object":"list","data":["#)])
            .with_header("content-type", "application/json")
            .then_hang()
    })
    .await;
    let extra = format!(
        "timeouts: {{ total_ms: 1000 }}\nroutes:\n  - {{ name: relay, protocol: openai_chat, path_prefix: /r/, strip_prefix: /r, upstream: \"{}\", passthrough_paths: [/v1/models] }}\n",
        mock.base_url()
    );
    let proxy = start_proxy(&mock.base_url(), PACK, &extra).await;
    let addr = proxy.addr();
    for (n, (method, path, body)) in [
        ("GET", "/r/v1/models", ""),
        ("POST", "/r/v1/chat/completions", STREAM_REQUEST),
    ]
    .into_iter()
    .enumerate()
    {
        let mut sock = TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: guardwire\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        sock.write_all(head.as_bytes()).await.unwrap();
        let got = tokio::time::timeout(BOUND, async {
            let mut got = Vec::new();
            let _ = sock.read_to_end(&mut got).await;
            got
        })
        .await
        .expect("the relayed answer was never cut");
        let got = String::from_utf8_lossy(&got);
        if method == "GET" {
            assert!(
                got.contains(r#"{"object":"list","data":["#),
                "{path}: {got}"
            );
            // Chunked and cut: the last chunk (`0\r\n\r\n`) never came.
            assert!(got.contains("transfer-encoding: chunked"), "{path}: {got}");
            assert!(!got.ends_with("0\r\n\r\n"), "{path}: {got}");
        } else {
            // An error answer is read whole to be checked (`error_body.rs`): past the
            // deadline guardwire answers its own timeout, none of the unchecked text.
            assert!(got.starts_with("HTTP/1.1 504"), "{path}: {got}");
            assert!(!got.contains(r#""data":["#), "{path}: {got}");
        }
        assert!(
            mock.wait_for_cancelled(n + 1, BOUND).await,
            "{path}: the upstream request was not cancelled"
        );
    }
    wait_for_series(addr, "guardwire_requests_in_flight", 0).await;
    let m = metrics(addr).await;
    assert_eq!(
        value(
            &m,
            "guardwire_upstream_errors_total{route=\"relay\",kind=\"total\"}"
        ),
        Some(2),
        "{m}"
    );
}

/// What a [`counting_upstream`] counted: bytes its sockets took, and answers that ended (the
/// peer went away, or the cap was reached).
#[derive(Default)]
struct Counts {
    written: AtomicUsize,
    ended: AtomicUsize,
}

/// The most a [`counting_upstream`] answer writes: far above any kernel buffer.
const COUNTING_CAP: usize = 256 << 20;

/// A raw HTTP/1.1 upstream that answers each request with Chat chunks (1,000 characters of
/// text each) for as long as its socket takes them, up to [`COUNTING_CAP`], counting every
/// byte the socket took. Its own send buffer is the smallest the kernel allows, so the count
/// is what guardwire's end of the connection took (its receive buffer and what it read).
async fn counting_upstream() -> (SocketAddr, Arc<Counts>) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(4096).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(16).unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let text = "x".repeat(1000);
    let frame = format!(
        r#"{{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}]}}"#
    );
    let data = sse_data_frames(&[frame.as_str()]);
    let mut chunk = format!("{:x}\r\n", data.len()).into_bytes();
    chunk.extend_from_slice(&data);
    chunk.extend_from_slice(b"\r\n");
    let chunk = Bytes::from(chunk);
    let shared = Arc::clone(&counts);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (counts, chunk) = (Arc::clone(&shared), chunk.clone());
            tokio::spawn(async move {
                if read_request(&mut sock).await.is_none() {
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                let mut out = Bytes::from(head);
                let mut total = 0;
                'answer: while total < COUNTING_CAP {
                    let mut at = 0;
                    while at < out.len() {
                        match sock.write(&out[at..]).await {
                            Ok(0) | Err(_) => break 'answer,
                            Ok(n) => {
                                at += n;
                                total += n;
                                counts.written.fetch_add(n, Ordering::SeqCst);
                            }
                        }
                    }
                    out = chunk.clone();
                }
                counts.ended.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    (addr, counts)
}

/// Reads a request head and its `content-length` body; `None` if the peer went away first.
async fn read_request(sock: &mut TcpStream) -> Option<()> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let body = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + body {
                return Some(());
            }
        }
        match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Bytes guardwire took from the upstream for one never-reading client, with `limits` (YAML
/// flow mappings' entries): counted once guardwire has ended the stream (its write blocked for
/// `client_send_ms`) and the upstream's answer with it.
async fn taken_for_a_never_reading_client(limits: &str) -> usize {
    let (upstream, counts) = counting_upstream().await;
    let extra = format!("{ONLY_CLIENT_SEND}limits: {{ {limits} }}\n");
    let proxy = start_proxy(&format!("http://{upstream}"), PACK, &extra).await;
    let addr = proxy.addr();
    let _client = never_reading_client(addr, STREAM_REQUEST).await;
    let deadline = tokio::time::Instant::now() + BOUND;
    while counts.ended.load(Ordering::SeqCst) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upstream's answer never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_for_series(addr, "guardwire_requests_in_flight", 0).await;
    let send = "guardwire_client_timeouts_total{route=\"openai_chat\",deadline=\"send\"}";
    assert_eq!(value(&metrics(addr).await, send), Some(1));
    counts.written.load(Ordering::SeqCst)
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_notsent_mark_bounds_what_is_taken_for_a_client_that_never_reads() {
    let without = taken_for_a_never_reading_client("client_notsent_lowat_bytes: 0").await;
    let with = taken_for_a_never_reading_client("client_notsent_lowat_bytes: 16384").await;
    eprintln!("taken from the upstream: {without} bytes without a mark, {with} with 16 KiB");
    assert!(without < COUNTING_CAP, "the write never blocked: {without}");
    // Measured on Linux 6.18 (loopback, tcp_wmem max 4 MiB): 2.6–2.9 MB without, 0.29–0.43 MB
    // with 16 KiB (guardwire's upstream receive buffer and hyper's included in both).
    assert!(with < 1 << 20, "{with} bytes taken with the mark");
    assert!(
        with * 3 < without,
        "{with} with the mark, {without} without"
    );
}

/// `limits.upstream_receive_buffer_bytes` bounds what the kernel takes from the upstream for a
/// never-reading client (the mark bounds only the client's side), here with the smallest read
/// buffer hyper takes (`upstream_read_buffer_bytes: 8192`) too.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_small_upstream_receive_buffer_bounds_what_is_taken_for_a_client_that_never_reads() {
    let autotuned = taken_for_a_never_reading_client("upstream_receive_buffer_bytes: 0").await;
    let small = taken_for_a_never_reading_client(
        "upstream_read_buffer_bytes: 8192, upstream_receive_buffer_bytes: 4096",
    )
    .await;
    eprintln!("taken from the upstream: {autotuned} bytes autotuned, {small} with 4 KiB");
    // Measured on Linux 6.18 (loopback, tcp_rmem 4 KiB / 128 KiB / 32 MiB, the default 16 KiB
    // mark): 286–427 KB autotuned, 81 KB with 4 KiB (the kernel doubles it), 138 KB with 16 KiB.
    assert!(small < 128 << 10, "{small} bytes taken with 4 KiB");
    assert!(
        small * 2 < autotuned,
        "{small} with 4 KiB, {autotuned} autotuned"
    );
}
