//! Bounded in total (issue 32, item 2), over real sockets: client connections
//! (`limits.max_connections`), HTTP/2 streams per connection (`limits.max_h2_streams`),
//! request-body bytes held at once (`limits.max_buffered_request_bytes`), a key's requests
//! in flight (`keys[].max_concurrent_requests`) and a client address's
//! (`limits.max_concurrent_requests_per_client_address`, from sockets bound to 127.0.0.2 and
//! 127.0.0.3 beside 127.0.0.1). Each refusal answers in the provider's shape
//! and is counted in `guardwire_rejected_total{reason}`; capacity comes back once the holder
//! goes. No timing assertions: every wait is for a condition, within a generous bound.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use common::h2_frames::{frame, frame_where, PREFACE};
use common::mock_upstream::{openai_chat_stream, sse_data_frames, MockUpstream, Reply};
use common::proxy::{metrics, post_chat, start_proxy, start_proxy_all, PLAIN_REQUEST};
use guardwire::metrics::Exposition;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PACK: &str = "validators: []\n";
/// Far longer than any wait here should take.
const BOUND: Duration = Duration::from_secs(20);

/// Polls `check` until it returns true; panics naming `what` after [`BOUND`].
async fn eventually<F: Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + BOUND;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a raw HTTP/1.1 `GET /healthz` on a new connection gets before the server closes it.
async fn healthz_over_new_connection(addr: SocketAddr) -> String {
    let Ok(mut sock) = TcpStream::connect(addr).await else {
        return String::new();
    };
    let _ = sock
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: guardwire\r\nconnection: close\r\n\r\n")
        .await;
    let mut seen = Vec::new();
    let read = tokio::time::timeout(BOUND, sock.read_to_end(&mut seen)).await;
    assert!(
        read.is_ok(),
        "the connection was neither answered nor closed"
    );
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test]
async fn connections_over_max_connections_are_closed_counted_and_come_back() {
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["fine"]))).await;
    let proxy = start_proxy(
        &mock.base_url(),
        PACK,
        "limits: { max_connections: 2 }\ntimeouts: { client_header_ms: 600000, client_idle_ms: 600000 }\n",
    )
    .await;
    let addr = proxy.addr();
    // Two keep-alive connections, each answered once (so both are surely counted), kept open.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut sock = TcpStream::connect(addr).await.unwrap();
        sock.write_all(b"GET /healthz HTTP/1.1\r\nhost: guardwire\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 1024];
        let n = sock.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        held.push(sock);
    }
    // The third is closed without an answer.
    let third = healthz_over_new_connection(addr).await;
    assert_eq!(third, "", "a connection over the limit was served");
    let rendered = proxy.server.gateway.metrics.render(Exposition::Text004);
    assert!(
        rendered.contains("guardwire_rejected_total{reason=\"max_connections\"} 1"),
        "{rendered}"
    );
    // Once one of the two closes, a new connection is served again.
    drop(held.pop());
    eventually("a connection is served after one closed", || async {
        healthz_over_new_connection(addr)
            .await
            .starts_with("HTTP/1.1 200")
    })
    .await;
}

#[tokio::test]
async fn http2_streams_per_connection_are_capped() {
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["fine"]))).await;
    let proxy = start_proxy(
        &mock.base_url(),
        PACK,
        "limits: { max_h2_streams: 2 }\ntimeouts: { client_ping_ms: 0 }\n",
    )
    .await;
    let mut sock = TcpStream::connect(proxy.addr()).await.unwrap();
    // The preface and an empty SETTINGS frame.
    sock.write_all(PREFACE).await.unwrap();
    sock.write_all(&frame(4, 0, 0, &[])).await.unwrap();
    let mut buf = Vec::new();
    // The server announces the cap: SETTINGS_MAX_CONCURRENT_STREAMS (0x3) = 2.
    let settings = frame_where(&mut sock, &mut buf, BOUND, |f| {
        f.kind == 4 && !f.payload.is_empty()
    })
    .await;
    let announced: Vec<(u16, u32)> = settings
        .payload
        .chunks_exact(6)
        .map(|s| {
            (
                u16::from_be_bytes([s[0], s[1]]),
                u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
            )
        })
        .collect();
    assert!(announced.contains(&(3, 2)), "SETTINGS {announced:?}");
    sock.write_all(&frame(4, 1, 0, &[])).await.unwrap(); // ACK
                                                         // Three requests whose bodies never come: the first two stay open, the third is refused.
                                                         // HPACK: :method POST (static 3), :scheme http (6), :path and :authority as literals.
    let mut head = vec![0x83, 0x86, 0x04, 20];
    head.extend_from_slice(b"/v1/chat/completions");
    head.extend_from_slice(&[0x01, 9]);
    head.extend_from_slice(b"guardwire");
    for stream in [1u32, 3, 5] {
        // END_HEADERS, not END_STREAM.
        sock.write_all(&frame(1, 0x4, stream, &head)).await.unwrap();
    }
    let reset = frame_where(&mut sock, &mut buf, BOUND, |f| f.kind == 3).await;
    assert_eq!(reset.stream, 5, "the stream over the cap is the one reset");
    assert_eq!(
        reset.payload,
        7u32.to_be_bytes(),
        "RST_STREAM REFUSED_STREAM"
    );
    // h2 refuses it inside hyper; guardwire counts it from the frame it writes.
    let rendered = proxy.server.gateway.metrics.render(Exposition::Text004);
    assert!(
        rendered.contains("guardwire_rejected_total{reason=\"max_h2_streams\"} 1\n"),
        "{rendered}"
    );
}

/// A raw HTTP/1.1 request head announcing a body of `len` bytes (`None`: chunked) on a new
/// connection, followed by `sent` bytes of that body; the connection is returned open.
async fn slow_body(addr: SocketAddr, len: Option<usize>, sent: usize) -> TcpStream {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    let framing = match len {
        Some(n) => format!("content-length: {n}"),
        None => "transfer-encoding: chunked".to_owned(),
    };
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: guardwire\r\ncontent-type: application/json\r\n{framing}\r\n\r\n"
    );
    sock.write_all(head.as_bytes()).await.unwrap();
    let body = vec![b' '; sent];
    match len {
        Some(_) => sock.write_all(&body).await.unwrap(),
        None => {
            sock.write_all(format!("{sent:x}\r\n").as_bytes())
                .await
                .unwrap();
            sock.write_all(&body).await.unwrap();
            sock.write_all(b"\r\n").await.unwrap();
        }
    }
    sock
}

/// The value of the metric line starting with `series ` in `/metrics`, if any.
async fn metric(addr: SocketAddr, series: &str) -> Option<f64> {
    let text = metrics(addr).await;
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn request_bodies_share_a_byte_budget_taken_as_they_arrive() {
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["fine"]))).await;
    let proxy = start_proxy(
        &mock.base_url(),
        PACK,
        "limits: { max_request_bytes: 1000, max_buffered_request_bytes: 2000 }\n",
    )
    .await;
    let addr = proxy.addr();
    // One slow client announces 1000 bytes and sends 990 (counted as they arrive: announcing
    // costs nothing); another sends 950 bytes chunked; neither body ever ends.
    let announced = slow_body(addr, Some(1000), 990).await;
    let _chunked = slow_body(addr, None, 950).await;
    eventually("both slow bodies hold their bytes", || async {
        metric(addr, "guardwire_buffered_request_bytes").await == Some(1940.0)
    })
    .await;
    // A whole small request does not fit in the 60 bytes left: 503, retry-after, the
    // provider's error shape; nothing is sent upstream.
    let a = post_chat(addr, PLAIN_REQUEST).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{}", a.text());
    assert_eq!(a.headers["retry-after"], "1");
    assert_eq!(a.json()["error"]["type"], "server_error");
    assert_eq!(a.json()["error"]["code"], "overloaded");
    assert_eq!(mock.request_count(), 0);
    assert_eq!(
        metric(
            addr,
            "guardwire_rejected_total{reason=\"max_buffered_request_bytes\"}"
        )
        .await,
        Some(1.0)
    );
    // The client that sent 990 bytes goes away: its share comes back.
    drop(announced);
    eventually("a request fits once a slow body is gone", || async {
        post_chat(addr, PLAIN_REQUEST).await.status == StatusCode::OK
    })
    .await;
    // The answered request gives its bytes back once its exchange ends.
    eventually("only the chunked body holds bytes", || async {
        metric(addr, "guardwire_buffered_request_bytes").await == Some(950.0)
    })
    .await;
}

/// Sends a request and returns its response once the head is in (the body left unread).
async fn head_of(
    addr: SocketAddr,
    path: &str,
    key: &str,
    body: &'static str,
) -> Response<Incoming> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let req = Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {key}"))
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap();
    tokio::time::timeout(BOUND, client.request(req))
        .await
        .expect("no response head in time")
        .unwrap()
}

async fn json_of(resp: Response<Incoming>) -> serde_json::Value {
    use http_body_util::BodyExt;
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

const STREAM: &str =
    r#"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
const MESSAGES: &str =
    r#"{"model":"c","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;

/// An upstream whose every answer streams its first chunk, then nothing (no terminal event, no
/// end): a stream holds its permits until its client goes.
async fn first_chunk_then_hang() -> MockUpstream {
    let first_chunk = sse_data_frames(&[
        r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"fine"},"finish_reason":null}]}"#,
    ]);
    MockUpstream::start(move |_| Reply::sse(&first_chunk).then_hang()).await
}

#[tokio::test]
async fn a_key_at_its_limit_gets_429_while_other_keys_are_proxied() {
    let mock = first_chunk_then_hang().await;
    let extra =
        "keys:\n  - { id: a, key: gw-a, max_concurrent_requests: 1 }\n  - { id: b, key: gw-b }\n";
    let proxy = start_proxy_all(&mock.base_url(), PACK, extra).await;
    let addr = proxy.addr();
    let first = head_of(addr, "/v1/chat/completions", "gw-a", STREAM).await;
    assert_eq!(first.status(), StatusCode::OK);
    // Key a's second request, in two providers' shapes: 429 with retry-after.
    let chat = head_of(addr, "/v1/chat/completions", "gw-a", STREAM).await;
    assert_eq!(chat.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(chat.headers()["retry-after"], "1");
    let json = json_of(chat).await;
    assert_eq!(json["error"]["code"], "rate_limit_exceeded", "{json}");
    let messages = head_of(addr, "/v1/messages", "gw-a", MESSAGES).await;
    assert_eq!(messages.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(messages.headers()["retry-after"], "1");
    let json = json_of(messages).await;
    assert_eq!(json["type"], "error", "{json}");
    assert_eq!(json["error"]["type"], "rate_limit_error", "{json}");
    assert_eq!(
        mock.request_count(),
        1,
        "refused requests never reach the provider"
    );
    // Key b, meanwhile, is proxied (twice: it has no limit of its own).
    let b1 = head_of(addr, "/v1/chat/completions", "gw-b", STREAM).await;
    let b2 = head_of(addr, "/v1/chat/completions", "gw-b", STREAM).await;
    assert_eq!((b1.status(), b2.status()), (StatusCode::OK, StatusCode::OK));
    let rendered = proxy.server.gateway.metrics.render(Exposition::Text004);
    assert!(
        rendered.contains("guardwire_rejected_total{reason=\"key_max_concurrent_requests\"} 2"),
        "{rendered}"
    );
    // Key a's stream ends (its client goes): a's permit comes back.
    drop(first);
    eventually("key a is admitted again once its stream ended", || async {
        head_of(addr, "/v1/chat/completions", "gw-a", STREAM)
            .await
            .status()
            == StatusCode::OK
    })
    .await;
}

#[tokio::test]
async fn a_reload_keeps_counting_a_keys_requests_in_flight() {
    let mock = first_chunk_then_hang().await;
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("pack.yaml");
    std::fs::write(&pack, PACK).unwrap();
    let path = dir.path().join("guardwire.yaml");
    let config = |limit: u32| {
        format!(
            "listen: \"127.0.0.1:0\"\nupstreams: {{ openai: \"{}\" }}\npacks: [\"{}\"]\nreload: {{ poll_ms: 0 }}\nkeys:\n  - {{ id: a, key: gw-a, max_concurrent_requests: {limit} }}\n",
            mock.base_url(),
            pack.display()
        )
    };
    std::fs::write(&path, config(1)).unwrap();
    let server = guardwire::server::start_from(
        guardwire::config::Config::load(&path).unwrap(),
        Some(path.clone()),
    )
    .await
    .unwrap();
    let addr = server.addr;
    let first = head_of(addr, "/v1/chat/completions", "gw-a", STREAM).await;
    assert_eq!(first.status(), StatusCode::OK);
    // A reload (the limit rewritten, same value) while the stream runs on the old runtime:
    // the stream still counts against key a.
    std::fs::write(&path, config(1) + "# reloaded\n").unwrap();
    server.gateway.reload().await.unwrap();
    let again = head_of(addr, "/v1/chat/completions", "gw-a", STREAM).await;
    assert_eq!(again.status(), StatusCode::TOO_MANY_REQUESTS);
    drop(first);
    eventually("key a is admitted again once its stream ended", || async {
        head_of(addr, "/v1/chat/completions", "gw-a", STREAM)
            .await
            .status()
            == StatusCode::OK
    })
    .await;
}

/// A streaming request sent from a socket bound to `source` (Linux routes all of 127/8 to
/// loopback), answered once its head is in; the connection lives as long as the value.
struct FromSource {
    resp: Response<Incoming>,
    _conn: Connection,
}

/// The client side of a connection, closed when dropped.
struct Connection(tokio::task::JoinHandle<()>);

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn stream_from(addr: SocketAddr, source: [u8; 4]) -> FromSource {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from((source, 0)))
        .expect("bind to a 127/8 source address (Linux)");
    let stream = socket.connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake::<_, Full<Bytes>>(
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    let conn = tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = Request::post("/v1/chat/completions")
        .header("host", "guardwire")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(STREAM.as_bytes())))
        .unwrap();
    let resp = tokio::time::timeout(BOUND, send.send_request(req))
        .await
        .expect("no response head in time")
        .unwrap();
    FromSource {
        resp,
        _conn: Connection(conn),
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_client_address_at_its_cap_gets_429_while_other_addresses_are_proxied() {
    let mock = first_chunk_then_hang().await;
    let proxy = start_proxy(
        &mock.base_url(),
        PACK,
        "limits: { max_concurrent_requests_per_client_address: 2 }\n",
    )
    .await;
    let addr = proxy.addr();
    let (capped, other) = ([127, 0, 0, 2], [127, 0, 0, 1]);
    let first = stream_from(addr, capped).await;
    let second = stream_from(addr, capped).await;
    assert_eq!(
        (first.resp.status(), second.resp.status()),
        (StatusCode::OK, StatusCode::OK)
    );
    // The third from the same address: 429 with retry-after, in the provider's shape.
    let third = stream_from(addr, capped).await;
    assert_eq!(third.resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(third.resp.headers()["retry-after"], "1");
    let FromSource { resp, _conn } = third;
    let json = json_of(resp).await;
    assert_eq!(json["error"]["code"], "rate_limit_exceeded", "{json}");
    assert_eq!(
        mock.request_count(),
        2,
        "the refused request never went upstream"
    );
    // Another address has a count of its own: served up to its own cap meanwhile.
    let others = [
        stream_from(addr, other).await,
        stream_from(addr, other).await,
    ];
    assert!(others.iter().all(|s| s.resp.status() == StatusCode::OK));
    let rendered = proxy.server.gateway.metrics.render(Exposition::Text004);
    assert!(
        rendered.contains(
            "guardwire_rejected_total{reason=\"max_concurrent_requests_per_client_address\"} 1\n"
        ),
        "{rendered}"
    );
    // One of the capped address's streams ends (its client goes): its share comes back.
    drop(first);
    eventually("the capped address is admitted again", || async {
        stream_from(addr, capped).await.resp.status() == StatusCode::OK
    })
    .await;
    drop((second, others));
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_client_address_is_counted_before_its_body_is_read() {
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["fine"]))).await;
    let proxy = start_proxy(
        &mock.base_url(),
        PACK,
        "limits: { max_concurrent_requests_per_client_address: 1 }\n",
    )
    .await;
    let addr = proxy.addr();
    // A body announced and never sent whole, from 127.0.0.3: it holds the address's one share.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from(([127, 0, 0, 3], 0))).unwrap();
    let mut slow = socket.connect(addr).await.unwrap();
    slow.write_all(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: guardwire\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"model\"",
    )
    .await
    .unwrap();
    let refused = "guardwire_rejected_total{reason=\"max_concurrent_requests_per_client_address\"}";
    eventually("the slow body's address is at its cap", || async {
        let s = stream_from(addr, [127, 0, 0, 3]).await;
        s.resp.status() == StatusCode::TOO_MANY_REQUESTS
    })
    .await;
    assert!(metric(addr, refused).await >= Some(1.0));
    assert_eq!(mock.request_count(), 0);
    // Its client goes: the address is served again.
    drop(slow);
    eventually(
        "the address is served once the slow body is gone",
        || async { stream_from(addr, [127, 0, 0, 3]).await.resp.status() == StatusCode::OK },
    )
    .await;
}
