//! Client connections held to account: a peer that sends nothing (or stops inside the HTTP/2
//! preface) is dropped after `timeouts.client_header_ms`; idle HTTP/1 and HTTP/2 connections
//! are closed after `timeouts.client_idle_ms`; HTTP/2 pings find a dead peer; a slow request
//! body gets 408 after `timeouts.client_body_ms` without holding an in-flight permit. Each
//! connection guardwire drops is counted in `guardwire_connections_dropped_total`. The closes
//! here are orderly (FIN), a peer that sent no request included; only clients that do not read
//! are reset (tests/slow_clients.rs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use common::mock_upstream::{openai_chat_stream, Chunk, MockUpstream, Reply};
use common::proxy::{post_chat, start_proxy, Proxy, PLAIN_REQUEST, STREAM_REQUEST};
use guardwire::metrics::Exposition;
use http::StatusCode;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PACK: &str = "validators: []\n";
/// Far longer than any deadline under test: a connection still open then was not closed.
const BOUND: Duration = Duration::from_secs(20);

/// Reads (and drops) whatever `sock` gets until the peer closes it; panics if it stays open
/// for [`BOUND`], or is reset rather than closed. Returns what was read.
async fn read_until_closed(sock: &mut TcpStream, what: &str) -> Vec<u8> {
    let mut seen = Vec::new();
    let closed = tokio::time::timeout(BOUND, async {
        let mut buf = [0u8; 4096];
        loop {
            match sock.read(&mut buf).await {
                Ok(0) => return Ok(()),
                Err(e) => return Err(e),
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    match closed {
        Ok(Ok(())) => seen,
        Ok(Err(e)) => panic!("{what}: the connection ended with an error, not a close: {e}"),
        Err(_) => panic!("{what}: the connection is still open"),
    }
}

/// guardwire in front of a mock streaming "fine", with these `timeouts` / `limits` lines.
async fn proxy_with(settings: &str) -> (MockUpstream, Proxy) {
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["fine"]))).await;
    let proxy = start_proxy(&mock.base_url(), PACK, settings).await;
    (mock, proxy)
}

#[tokio::test]
async fn clients_that_send_no_request_in_time_are_dropped() {
    // Idle and ping deadlines far away: only the first-request deadline can close these.
    let (_mock, proxy) = proxy_with(
        "timeouts: { client_header_ms: 300, client_idle_ms: 600000, client_ping_ms: 0 }\n",
    )
    .await;
    let partial: [(&str, &[u8]); 4] = [
        ("nothing sent", b""),
        ("part of the HTTP/2 preface", b"PRI * HTTP/2.0\r\n"),
        (
            "the HTTP/2 preface, no SETTINGS",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        ),
        (
            "part of an HTTP/1 head",
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n",
        ),
    ];
    for (what, bytes) in partial {
        let mut sock = TcpStream::connect(proxy.addr()).await.unwrap();
        sock.write_all(bytes).await.unwrap();
        read_until_closed(&mut sock, what).await;
    }
    // Each drop is counted (before the socket is closed).
    let rendered = proxy.server.gateway.metrics.render(Exposition::Text004);
    assert!(
        rendered.contains("guardwire_connections_dropped_total{reason=\"header\"} 4\n"),
        "{rendered}"
    );
    // A client that asks in time is served.
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert_eq!(a.status, StatusCode::OK);
}

#[tokio::test]
async fn idle_http1_connections_are_closed() {
    // The next-head deadline far away: only the idle deadline can close it.
    let (_mock, proxy) =
        proxy_with("timeouts: { client_header_ms: 600000, client_idle_ms: 300 }\n").await;
    let mut sock = TcpStream::connect(proxy.addr()).await.unwrap();
    sock.write_all(b"GET /healthz HTTP/1.1\r\nhost: guardwire\r\n\r\n")
        .await
        .unwrap();
    let seen = read_until_closed(&mut sock, "idle HTTP/1.1 keep-alive connection").await;
    let text = String::from_utf8_lossy(&seen);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.ends_with("ok\n"), "{text}");
}

/// An HTTP/2 client that asks for a whole answer larger than its stream window and never reads
/// it: guardwire hands the answer to h2, the request ends, the idle close (GOAWAY) begins and
/// cannot finish (the answer's bytes wait for window the client never gives);
/// `client_send_ms` later the connection is dropped, and counted.
#[tokio::test]
async fn an_idle_connection_whose_last_answer_is_not_read_is_dropped_and_counted() {
    // ≈ 1 MiB: far more than the client's 16 KiB stream window.
    let content = "fine ".repeat(200_000);
    let answer = common::mock_upstream::openai_chat_answer(&content);
    let mock = MockUpstream::start(move |_| Reply::json(200, &answer)).await;
    let proxy = start_proxy(
        &mock.base_url(),
        PACK,
        "timeouts: { client_header_ms: 600000, client_idle_ms: 300, client_send_ms: 300, client_ping_ms: 0 }\n",
    )
    .await;
    let addr = proxy.addr();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(16 * 1024)
        .handshake::<_, Full<Bytes>>(TokioIo::new(tcp))
        .await
        .unwrap();
    let conn = tokio::spawn(conn);
    let req = http::Request::post(format!("http://{addr}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(PLAIN_REQUEST.as_bytes())))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    // The body is held, never read.
    let ended = tokio::time::timeout(BOUND, conn).await;
    assert!(ended.is_ok(), "the connection is still open");
    let rendered = proxy.server.gateway.metrics.render(Exposition::Text004);
    assert!(
        rendered.contains("guardwire_connections_dropped_total{reason=\"unread\"} 1\n"),
        "{rendered}"
    );
    // The answer was whole when handed over: not a send timeout of a body being relayed.
    assert!(
        rendered.contains(
            "guardwire_client_timeouts_total{route=\"openai_chat\",deadline=\"send\"} 0\n"
        ),
        "{rendered}"
    );
    drop(resp);
}

/// An HTTP/2 connection (prior knowledge) that asks once, then nothing.
async fn h2_connection(
    addr: SocketAddr,
) -> (
    hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    hyper::client::conn::http2::Connection<TokioIo<TcpStream>, Empty<Bytes>, TokioExecutor>,
) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
        .await
        .unwrap()
}

#[tokio::test]
async fn idle_http2_connections_get_a_goaway_and_are_closed() {
    let (_mock, proxy) =
        proxy_with("timeouts: { client_header_ms: 600000, client_idle_ms: 300 }\n").await;
    let (mut sender, conn) = h2_connection(proxy.addr()).await;
    let conn = tokio::spawn(conn);
    let req = http::Request::get(format!("http://{}/healthz", proxy.addr()))
        .body(Empty::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.into_body().collect().await.unwrap().to_bytes(), "ok\n");
    // The client keeps its side open; the server ends the connection.
    let ended = tokio::time::timeout(BOUND, conn).await;
    assert!(ended.is_ok(), "the idle HTTP/2 connection is still open");
}

#[tokio::test]
async fn http2_pings_find_a_peer_that_stopped_answering() {
    // Only the ping deadline is short.
    let (_mock, proxy) = proxy_with(
        "timeouts: { client_header_ms: 600000, client_idle_ms: 600000, client_ping_ms: 200 }\n",
    )
    .await;
    let mut sock = TcpStream::connect(proxy.addr()).await.unwrap();
    // The preface and an empty SETTINGS frame: a valid HTTP/2 client, which then falls silent
    // (never acknowledges the server's SETTINGS or answers its pings).
    sock.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let seen = read_until_closed(&mut sock, "HTTP/2 connection of a silent peer").await;
    // Among what the server sent: a PING frame (type 6) that went unanswered.
    let mut frames = Vec::new();
    let mut at = 0;
    while at + 9 <= seen.len() {
        let len = usize::from(seen[at]) << 16
            | usize::from(seen[at + 1]) << 8
            | usize::from(seen[at + 2]);
        frames.push(seen[at + 3]);
        at += 9 + len;
    }
    assert!(frames.contains(&6), "no PING among frame types {frames:?}");
}

#[tokio::test]
async fn a_slow_body_gets_408_and_holds_no_permit() {
    let (_mock, proxy) =
        proxy_with("limits: { max_concurrent_requests: 1 }\ntimeouts: { client_body_ms: 1000 }\n")
            .await;
    // A head announcing a body of which only part ever comes.
    let mut slow = TcpStream::connect(proxy.addr()).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: guardwire\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        STREAM_REQUEST.len()
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    slow.write_all(&STREAM_REQUEST.as_bytes()[..10])
        .await
        .unwrap();
    // Meanwhile the one permit is free for a request whose body is in.
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    assert_eq!(a.body, openai_chat_stream(&["fine"]));
    // The slow one is answered 408 in the provider's shape once its deadline passes.
    let seen = read_until_closed(&mut slow, "the slow body's connection").await;
    let text = String::from_utf8_lossy(&seen);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"code\":\"request_timeout\""), "{text}");
}

/// HTTP/2 takes new streams for a while after its first GOAWAY (until the client answers the
/// PING sent with it). Such a stream, begun after the idle close began and lasting longer than
/// `client_send_ms`, is served whole while its client reads it: the close waits for it rather
/// than take the connection for one whose last answer is not read. Raw frames, so that the
/// stream opens after the GOAWAY and the PING stays unanswered until the stream is done.
#[tokio::test]
async fn an_http2_stream_opened_as_the_idle_close_began_is_served_whole() {
    use common::h2_frames::*;
    // About 2.5 s of answer, a frame every 100 ms: longer than client_idle_ms and
    // client_send_ms together.
    let answer = openai_chat_stream(&["fine"; 23]);
    let chunks: Vec<Chunk> = answer
        .split_inclusive(|&b| b == b'\n')
        .map(|line| Chunk::new(Bytes::copy_from_slice(line), Duration::from_millis(50)))
        .collect();
    let mock = MockUpstream::start(move |_| {
        Reply::chunks(200, chunks.clone()).with_header("content-type", "text/event-stream")
    })
    .await;
    let proxy = start_proxy(
        &mock.base_url(),
        PACK,
        "timeouts: { client_header_ms: 600000, client_idle_ms: 300, client_send_ms: 1000, client_ping_ms: 0 }\n",
    )
    .await;
    let mut sock = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut buf = Vec::new();
    sock.write_all(PREFACE).await.unwrap();
    sock.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
    frame_where(&mut sock, &mut buf, BOUND, |f| {
        f.kind == SETTINGS && f.flags & ACK == 0
    })
    .await;
    sock.write_all(&frame(SETTINGS, ACK, 0, &[])).await.unwrap();
    // HPACK: :method GET (static 2) or POST (3), :scheme http (6); :path, :authority and
    // content-type as literals with indexed names.
    let head = |method: u8, path: &str, json: bool| {
        let mut head = vec![method, 0x86, 0x04, path.len() as u8];
        head.extend_from_slice(path.as_bytes());
        head.extend_from_slice(&[0x01, 9]);
        head.extend_from_slice(b"guardwire");
        if json {
            head.extend_from_slice(&[0x0f, 0x10, 16]);
            head.extend_from_slice(b"application/json");
        }
        head
    };
    // One request, answered: then the connection is idle.
    let healthz = head(0x82, "/healthz", false);
    sock.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, 1, &healthz))
        .await
        .unwrap();
    frame_where(&mut sock, &mut buf, BOUND, |f| {
        f.stream == 1 && f.flags & END_STREAM != 0
    })
    .await;
    // The idle close: a GOAWAY that still takes streams, and a PING left unanswered.
    let (mut goaway, mut ping) = (false, None);
    while !goaway || ping.is_none() {
        let f = frame_where(&mut sock, &mut buf, BOUND, |f| {
            f.kind == GOAWAY || (f.kind == PING && f.flags & ACK == 0)
        })
        .await;
        if f.kind == GOAWAY {
            goaway = true;
        } else {
            ping = Some(f.payload);
        }
    }
    // A stream opened as the close began, read as it comes.
    let chat = head(0x83, "/v1/chat/completions", true);
    sock.write_all(&frame(HEADERS, END_HEADERS, 3, &chat))
        .await
        .unwrap();
    sock.write_all(&frame(DATA, END_STREAM, 3, STREAM_REQUEST.as_bytes()))
        .await
        .unwrap();
    let mut body = Vec::new();
    loop {
        let f = frame_where(&mut sock, &mut buf, BOUND, |f| f.stream == 3).await;
        assert_ne!(f.kind, RST_STREAM, "the stream was reset");
        if f.kind == DATA {
            body.extend_from_slice(&f.payload);
        }
        if f.flags & END_STREAM != 0 {
            break;
        }
    }
    let body = String::from_utf8_lossy(&body);
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    // The PING answered: the close completes, orderly, and nothing was dropped.
    let ping = ping.unwrap();
    sock.write_all(&frame(PING, ACK, 0, &ping)).await.unwrap();
    read_until_closed(&mut sock, "the HTTP/2 connection after its last stream").await;
    let rendered = proxy.server.gateway.metrics.render(Exposition::Text004);
    let unread = rendered
        .lines()
        .find_map(|l| l.strip_prefix("guardwire_connections_dropped_total{reason=\"unread\"} "));
    assert_eq!(unread.unwrap_or("0").trim(), "0", "{rendered}");
}
