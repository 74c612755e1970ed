//! Upstream connections: HTTP/1 keep-alive (a cut stream closes only its own connection; an idle
//! connection the upstream closed is not used again), TLS upstreams speaking HTTP/2 or HTTP/1.1
//! by ALPN, an extra CA from `upstream_tls.ca_path`, and verification without it; the
//! smallest upstream buffers (`limits.upstream_*_buffer_bytes`) still carry large answers whole.
//! On a shared HTTP/2 connection, streams whose clients never read hold neither the
//! connection's flow-control window nor the upstream's concurrent-stream slots from other
//! requests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{chat_flood_chunks, openai_chat_stream, Chunk, MockUpstream, Reply};
use common::proxy::{
    block_frame, never_reading_client, post_chat, start_proxy, PLAIN_REQUEST, STREAM_REQUEST,
};
use http::{StatusCode, Version};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PACK: &str = "validators:\n  - type: banned_words\n    params: { words: [forbidden] }\n    message: \"Blocked.\"\n";

const WHOLE: &str = r#"{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"fine"},"finish_reason":"stop"}]}"#;

/// Streams a clean answer, or (for a prompt asking for it) one with a banned word,
/// or a whole JSON answer to a non-streaming request.
fn handler(req: &common::mock_upstream::RecordedRequest) -> Reply {
    let body = req.body_str();
    if !body.contains("\"stream\":true") {
        return Reply::json(200, WHOLE);
    }
    if body.contains("say it") {
        // The body stays open after the banned word: only guardwire can end the exchange.
        return Reply::sse(&openai_chat_stream(&["all ", "forbidden ", "words"])).then_hang();
    }
    Reply::sse(&openai_chat_stream(&["Hello", ", world"]))
}

#[tokio::test]
async fn http1_connections_are_reused_and_a_cut_stream_closes_only_its_own() {
    let mock = MockUpstream::start(handler).await;
    let proxy = start_proxy(&mock.base_url(), PACK, "").await;
    let clean = openai_chat_stream(&["Hello", ", world"]);

    for _ in 0..3 {
        let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
        assert_eq!(a.status, StatusCode::OK);
        assert_eq!(a.body, clean);
    }
    let a = post_chat(proxy.addr(), PLAIN_REQUEST).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.text(), WHOLE);
    assert_eq!(
        mock.connection_count(),
        1,
        "one kept-alive connection served all four"
    );
    for r in mock.requests() {
        r.assert_target_for(&format!("127.0.0.1:{}", mock.addr.port()));
    }

    let a = post_chat(
        proxy.addr(),
        r#"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"say it"}]}"#,
    )
    .await;
    assert!(a.text().ends_with(&block_frame("Blocked.")), "{}", a.text());
    assert!(!a.text().contains("forbidden"));
    assert!(
        mock.wait_for_cancelled(1, Duration::from_secs(5)).await,
        "the cut stream's upstream request was cancelled"
    );

    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body, clean);
    assert_eq!(
        mock.connection_count(),
        2,
        "the cut stream's connection was closed, the next request opened a new one"
    );
}

#[tokio::test]
async fn the_smallest_upstream_buffers_still_carry_large_answers_whole() {
    // Megabytes each way, through an 8 KiB read buffer and a 4 KiB kernel receive buffer.
    let pieces: Vec<String> = (0..2000)
        .map(|i| format!("{i:04} {} ", "y".repeat(995)))
        .collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let stream = openai_chat_stream(&pieces);
    let whole = WHOLE.replace("fine", &"z".repeat(3 << 20));
    let (reply_stream, reply_whole) = (stream.clone(), whole.clone());
    let mock = MockUpstream::start(move |req| {
        if req.body_str().contains("big head") {
            Reply::json(200, WHOLE).with_header("x-big", "h".repeat(10_000))
        } else if req.body_str().contains("\"stream\":true") {
            Reply::sse(&reply_stream)
        } else {
            Reply::json(200, &reply_whole)
        }
    })
    .await;
    let extra =
        "limits: { upstream_read_buffer_bytes: 8192, upstream_receive_buffer_bytes: 4096 }\n";
    let proxy = start_proxy(&mock.base_url(), PACK, extra).await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.body == stream, "the stream came through changed");
    let a = post_chat(proxy.addr(), PLAIN_REQUEST).await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.text() == whole, "the answer came through changed");
    // The read buffer is also the largest response head: past it, the upstream is not trusted.
    let a = post_chat(
        proxy.addr(),
        r#"{"model":"gpt-4o","messages":[{"role":"user","content":"big head"}]}"#,
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_GATEWAY, "{}", a.text());
}

#[tokio::test]
async fn a_body_that_ends_after_its_terminal_event_keeps_its_connection() {
    // The stream's [DONE] arrives at once, the end of the HTTP body 200 ms later: the client's
    // answer is complete at [DONE], and the connection is returned once the end is read.
    let stream = openai_chat_stream(&["Hello"]);
    let mock = MockUpstream::start(move |_| {
        Reply::chunks(
            200,
            vec![
                Chunk::now(stream.clone()),
                Chunk::new(Vec::new(), Duration::from_millis(200)),
            ],
        )
        .with_header("content-type", "text/event-stream")
    })
    .await;
    let proxy = start_proxy(&mock.base_url(), PACK, "").await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert_eq!(a.body, openai_chat_stream(&["Hello"]));
    assert!(mock.wait_for_completed(1, Duration::from_secs(5)).await);
    // The mock has sent the body's end; give the proxy's background read time to take it and
    // return the connection (generous for a loaded CI machine).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert_eq!(a.body, openai_chat_stream(&["Hello"]));
    assert_eq!(mock.connection_count(), 1);
}

/// A raw HTTP/1.1 upstream that answers one request per connection without `connection:
/// close`, then closes the connection shortly after, as servers do with idle keep-alive
/// connections.
async fn closing_upstream() -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                // Head, then as many body bytes as content-length says.
                loop {
                    let n = sock.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len: usize = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse().unwrap());
                        if seen.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let body = openai_chat_stream(&["Hello"]);
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                sock.write_all(head.as_bytes()).await.unwrap();
                sock.write_all(&body).await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
                // Dropping the socket closes it while the proxy holds it idle.
            });
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn an_idle_connection_the_upstream_closed_is_not_used_again() {
    let (addr, accepted) = closing_upstream().await;
    let proxy = start_proxy(&format!("http://{addr}"), PACK, "").await;
    for round in 1..=3 {
        let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
        assert_eq!(a.status, StatusCode::OK, "round {round}: {}", a.text());
        assert_eq!(a.body, openai_chat_stream(&["Hello"]));
        // Long enough for the upstream to close the connection the proxy now holds idle.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
}

/// A self-signed certificate for `localhost`, as a rustls server config offering `alpn`, and
/// its PEM (the CA file the proxy is given).
fn tls_server(alpn: &[&[u8]]) -> (Arc<rustls::ServerConfig>, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![certified.cert.der().clone()], key)
    .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    (Arc::new(config), certified.cert.pem())
}

/// guardwire in front of the TLS upstream `mock`, trusting `ca_pem`, with `extra` config lines.
async fn proxy_trusting(mock: &MockUpstream, ca_pem: &str, extra: &str) -> common::proxy::Proxy {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    // The CA file is read at start: the directory may go once the proxy runs.
    start_proxy(
        &format!("https://localhost:{}", mock.addr.port()),
        PACK,
        &format!("upstream_tls:\n  ca_path: \"{}\"\n{extra}", ca.display()),
    )
    .await
}

async fn tls_upstream_round_trip(alpn: &[&[u8]], expect: Version) {
    let (config, ca_pem) = tls_server(alpn);
    let mock = MockUpstream::start_tls(config, handler).await;
    let upstream = format!("https://localhost:{}", mock.addr.port());
    let proxy = proxy_trusting(&mock, &ca_pem, "").await;
    let clean = openai_chat_stream(&["Hello", ", world"]);
    for _ in 0..2 {
        let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text());
        assert_eq!(a.body, clean);
    }
    let a = post_chat(proxy.addr(), PLAIN_REQUEST).await;
    assert_eq!(a.text(), WHOLE);
    for r in mock.requests() {
        assert_eq!(r.version, expect);
        r.assert_target_for(&format!("localhost:{}", mock.addr.port()));
    }
    assert_eq!(
        mock.connection_count(),
        1,
        "one connection served all three"
    );

    // Without the CA file the upstream's certificate is not trusted: 502, nothing sent.
    let strict = start_proxy(&upstream, PACK, "").await;
    let a = post_chat(strict.addr(), STREAM_REQUEST).await;
    assert_eq!(a.status, StatusCode::BAD_GATEWAY, "{}", a.text());
    // The client is told it was TLS, with which upstream.
    let message = a.json()["error"]["message"].as_str().unwrap().to_owned();
    let tls_failed = format!("TLS with localhost:{} failed: ", mock.addr.port());
    assert!(message.contains(&tls_failed), "{message}");
    assert_eq!(mock.request_count(), 3);
}

#[tokio::test]
async fn tls_upstream_speaking_http2_is_shared_and_verified() {
    tls_upstream_round_trip(&[b"h2", b"http/1.1"], Version::HTTP_2).await;
}

#[tokio::test]
async fn tls_upstream_speaking_http1_is_kept_alive_and_verified() {
    tls_upstream_round_trip(&[b"http/1.1"], Version::HTTP_11).await;
}

/// A burst of first requests to a TLS upstream that speaks HTTP/2 waits for one connection
/// and shares it, instead of each request opening (and handshaking) its own.
#[tokio::test]
async fn first_requests_to_an_http2_upstream_share_one_connection() {
    let (config, ca_pem) = tls_server(&[b"h2", b"http/1.1"]);
    let mock = MockUpstream::start_tls(config, handler).await;
    let proxy = proxy_trusting(&mock, &ca_pem, "").await;
    let addr = proxy.addr();
    let burst: Vec<_> = (0..16)
        .map(|_| tokio::spawn(async move { post_chat(addr, STREAM_REQUEST).await }))
        .collect();
    let clean = openai_chat_stream(&["Hello", ", world"]);
    for answer in burst {
        let a = answer.await.unwrap();
        assert_eq!(a.status, StatusCode::OK, "{}", a.text());
        assert_eq!(a.body, clean);
    }
    assert_eq!(mock.request_count(), 16);
    assert_eq!(
        mock.connection_count(),
        1,
        "the burst shared one connection"
    );
}

/// Far longer than anything awaited here needs: a condition not met by then never will be.
const BOUND: Duration = Duration::from_secs(30);

const FLOOD_REQUEST: &str =
    r#"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"flood"}]}"#;

/// Streams 32 MiB without end for a prompt asking for a flood, a short answer otherwise.
fn flood_or_short(req: &common::mock_upstream::RecordedRequest) -> Reply {
    if req.body_str().contains("flood") {
        return Reply::chunks(200, chat_flood_chunks())
            .with_header("content-type", "text/event-stream")
            .then_hang();
    }
    Reply::sse(&openai_chat_stream(&["Hello", ", world"]))
}

/// An HTTP/2 upstream behind guardwire, with flood streams opened by clients that never read,
/// held for `client_send_ms` (300 s) once their writes block.
struct Flooded {
    mock: MockUpstream,
    proxy: common::proxy::Proxy,
    floods: usize,
    _never_reading: Vec<tokio::net::TcpStream>,
    /// Flood bytes the upstream handed over once flow control had stopped it.
    sent: usize,
}

/// `floods` never-reading clients open flood streams through guardwire to an HTTP/2 upstream
/// announcing `h2_max_streams` (hyper's 200 if `None`); returns once the upstream has sent all
/// that flow control lets it (no more for a second).
async fn flooded(floods: usize, h2_max_streams: Option<u32>) -> Flooded {
    let (config, ca_pem) = tls_server(&[b"h2"]);
    let mock = MockUpstream::start_tls_with_streams(config, h2_max_streams, flood_or_short).await;
    let proxy = proxy_trusting(
        &mock,
        &ca_pem,
        "timeouts: { client_send_ms: 300000, total_ms: 600000, idle_ms: 600000 }\n",
    )
    .await;
    let mut never_reading = Vec::new();
    for n in 1..=floods {
        never_reading.push(never_reading_client(proxy.addr(), FLOOD_REQUEST).await);
        assert!(
            mock.wait_for_requests(n, BOUND).await,
            "flood {n} never reached the upstream"
        );
    }
    let settle_until = tokio::time::Instant::now() + BOUND;
    let mut sent = mock.body_bytes_sent();
    let mut still = 0;
    while still < 10 && tokio::time::Instant::now() < settle_until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = mock.body_bytes_sent();
        still = if now == sent { still + 1 } else { 0 };
        sent = now;
    }
    Flooded {
        mock,
        proxy,
        floods,
        _never_reading: never_reading,
        sent,
    }
}

/// A reading client's streamed request is answered beside the floods (only isolation can
/// answer it: the floods hold their streams for 300 s); returns the upstream connections used.
async fn a_reader_is_served(f: &Flooded) -> usize {
    let answer = tokio::time::timeout(BOUND, post_chat(f.proxy.addr(), STREAM_REQUEST))
        .await
        .unwrap_or_else(|_| {
            panic!(
                "a reading client was not answered beside {} never-reading streams \
                 ({} bytes of flood sent upstream)",
                f.floods, f.sent
            )
        });
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    assert_eq!(answer.body, openai_chat_stream(&["Hello", ", world"]));
    assert_eq!(f.mock.request_count(), f.floods + 1);
    f.mock.connection_count()
}

/// Unread DATA of a stream keeps its share of the connection's window until the stream is
/// read or ends: with hyper's default windows (2 MiB a stream, 5 MiB the connection) three
/// never-reading streams used the whole connection window and every other stream on it
/// stalled. Each stream's window is now bounded, and the connection's covers every stream it
/// carries.
#[tokio::test]
async fn never_reading_streams_do_not_stall_a_shared_http2_connection() {
    let f = flooded(8, None).await;
    let connections = a_reader_is_served(&f).await;
    assert_eq!(connections, 1, "all nine streams shared one connection");
}

/// What an HTTP/2 upstream sends for a client that stopped reading is bounded by the stream's
/// window (256 KiB) plus what guardwire took for the client before its write blocked (with the
/// default `client_notsent_lowat_bytes`): 367,360 bytes when written; with hyper's 2 MiB window
/// it was 2,204,160.
#[tokio::test]
async fn a_never_reading_http2_stream_holds_at_most_its_window() {
    let f = flooded(1, None).await;
    assert!(
        f.sent < 1 << 20,
        "{} bytes sent upstream for a client that never reads",
        f.sent
    );
}

/// An upstream announcing 4 concurrent streams, 4 of them held by never-reading clients: the
/// fifth request used to wait in h2's queue for a slot (until `response_headers_ms`); it now
/// goes out on a second connection.
#[tokio::test]
async fn a_full_http2_connection_does_not_queue_a_request_behind_its_streams() {
    let f = flooded(4, Some(4)).await;
    let connections = a_reader_is_served(&f).await;
    assert_eq!(
        connections, 2,
        "the fifth request opened a second connection"
    );
}

const HOLD_REQUEST: &str =
    r#"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hold"}]}"#;

/// Starts an answer for a prompt asking to be held and keeps its stream open (no terminal
/// event); a short answer otherwise.
fn held_or_short(req: &common::mock_upstream::RecordedRequest) -> Reply {
    let answer = openai_chat_stream(&["Hello", ", world"]);
    if req.body_str().contains("hold") {
        let start = answer.len() - b"data: [DONE]\n\n".len();
        return Reply::chunks(200, vec![Chunk::now(answer[..start].to_vec())])
            .with_header("content-type", "text/event-stream")
            .then_hang();
    }
    Reply::sse(&answer)
}

/// A burst of requests to an HTTP/2 upstream allowing 4 streams, whose first connection is
/// full: the connects are made one at a time and each new connection takes 4 of the waiting
/// requests. Each waiter used to connect on its own after one wait (one connection per request),
/// and a new connection took every waiter before the upstream's SETTINGS were seen on it (most
/// then queued in h2 behind its 4 streams).
#[tokio::test]
async fn a_burst_to_a_full_http2_upstream_opens_a_connection_per_four_requests() {
    const BURST: usize = 60;
    let (config, ca_pem) = tls_server(&[b"h2"]);
    let mock = MockUpstream::start_tls_with_streams(config, Some(4), held_or_short).await;
    let proxy = proxy_trusting(&mock, &ca_pem, "").await;
    let addr = proxy.addr();
    // Two answers in turn: the second is sent after the upstream's SETTINGS were read, so the
    // connection knows the upstream's limit.
    for _ in 0..2 {
        let a = post_chat(addr, STREAM_REQUEST).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    }
    let burst: Vec<_> = (0..BURST)
        .map(|_| tokio::spawn(async move { post_chat(addr, HOLD_REQUEST).await }))
        .collect();
    assert!(
        mock.wait_for_requests(2 + BURST, BOUND).await,
        "{} of {BURST} held requests reached the upstream over {} connections",
        mock.request_count() - 2,
        mock.connection_count()
    );
    // Every stream is still held: each connection carries 4.
    assert_eq!(mock.connection_count(), BURST / 4);
    for held in burst {
        held.abort();
    }
}
