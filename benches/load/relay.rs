//! The bare hyper relay: guardwire's stack with nothing of guardwire's work on it, the floor its
//! CPU per stream is measured against (issue 36: which share of guardwire's cost is inherent).
//!
//! The bench starts it as a child process of its own binary (`--serve-relay LISTEN UPSTREAM
//! WORKERS`), so its CPU is read from `/proc` like the other proxies', and no build step is
//! added. It is guardwire minus the gateway: the same hyper server settings (an HTTP/1
//! `auto::Builder`, as guardwire serves a connection whose first bytes are not HTTP/2's
//! preface; the head timeout, read-buffer limit and client socket options from guardwire's
//! default config), a work-stealing tokio runtime with one worker per core (`--workers` when
//! the run sets guardwire's), and guardwire's own upstream client (`src/upstream`: its
//! keep-alive pool, HTTP/1 connections driven by the response body). The request body is read
//! whole, as guardwire reads it; the response body goes out frame by frame as it arrives. No
//! decoding, checks, metrics, tracing or connection watch.

use crate::client::{connect, make_request};
use crate::clock::STAMP_DIGITS;
use crate::common::fixtures::answer_deltas;
use crate::common::free_port;
use crate::mock::{memchr_find, start_mock, MockState};
use crate::opts::Protocol;
use crate::proxy::{spawn_relay, wait_ready};
use bytes::Bytes;
use guardwire::config::{BaseUrl, Config};
use guardwire::proxy::headers::forwardable;
use guardwire::upstream::{UpstreamBase, UpstreamBody, UpstreamClient};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};

/// The argument that makes the bench binary a relay instead of a bench.
pub(super) const SERVE_RELAY: &str = "--serve-relay";

type RelayBody = Either<UpstreamBody, Empty<Bytes>>;

/// `--serve-relay LISTEN UPSTREAM WORKERS` (after the program name): serves until killed.
pub(super) fn serve_from_args(args: &[String]) {
    let parsed = match args {
        [listen, upstream, workers] => listen
            .parse::<SocketAddr>()
            .ok()
            .zip(upstream.parse::<SocketAddr>().ok())
            .zip(workers.parse::<usize>().ok().filter(|&n| n > 0)),
        _ => None,
    };
    let Some(((listen, upstream), workers)) = parsed else {
        eprintln!("usage: load {SERVE_RELAY} LISTEN_ADDR UPSTREAM_ADDR WORKERS");
        std::process::exit(2)
    };
    // guardwire's `serve`, default shape: one work-stealing runtime, `workers` threads.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("relay: tokio runtime");
    let config = config(upstream);
    rt.block_on(async move {
        let listener = bind(listen, &config).expect("relay: cannot bind");
        serve(listener, upstream, &config).await;
    });
}

/// guardwire's default config with every upstream at `upstream`: where the relay takes its
/// server and client settings from, so they follow guardwire's defaults.
fn config(upstream: SocketAddr) -> Config {
    Config::from_yaml(&format!("upstreams:\n  openai: \"http://{upstream}\"\n"))
        .expect("relay: guardwire's default config")
}

/// The client listener as guardwire binds it with `config` (address reuse, a
/// backlog of 1024, `limits.client_send_buffer_bytes` and `client_notsent_lowat_bytes` on the
/// listening socket, which accepted sockets inherit).
fn bind(listen: SocketAddr, config: &Config) -> std::io::Result<TcpListener> {
    let limits = &config.limits;
    let socket = if listen.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if limits.client_send_buffer_bytes > 0 {
        socket.set_send_buffer_size(
            u32::try_from(limits.client_send_buffer_bytes).unwrap_or(u32::MAX),
        )?;
    }
    #[cfg(target_os = "linux")]
    if limits.client_notsent_lowat_bytes > 0 {
        socket2::SockRef::from(&socket).set_tcp_notsent_lowat(
            u32::try_from(limits.client_notsent_lowat_bytes).unwrap_or(u32::MAX),
        )?;
    }
    socket.bind(listen)?;
    socket.listen(1024)
}

/// Accepts on `listener` and relays every request to `upstream`, with `config`'s server and
/// client settings, until the task is dropped.
async fn serve(listener: TcpListener, upstream: SocketAddr, config: &Config) {
    let client = Arc::new(UpstreamClient::for_config(config).expect("relay: upstream client"));
    let base = Arc::new(
        BaseUrl::parse(&format!("http://{upstream}"))
            .and_then(|url| UpstreamBase::new(&url))
            .expect("relay: upstream base URL"),
    );
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(config.timeouts.client_header_ms))
        .max_buf_size(config.limits.max_header_bytes);
    let builder = Arc::new(builder.http1_only());
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (client, base, builder) =
            (Arc::clone(&client), Arc::clone(&base), Arc::clone(&builder));
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let (client, base) = (Arc::clone(&client), Arc::clone(&base));
                async move { Ok::<_, Infallible>(relay(&client, &base, req).await) }
            });
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// One request: read whole, sent upstream with the client's end-to-end headers; the answer's
/// head and body handed back as they come (502 when the upstream gave no head).
async fn relay(
    client: &UpstreamClient,
    base: &UpstreamBase,
    req: Request<Incoming>,
) -> Response<RelayBody> {
    let (parts, body) = req.into_parts();
    let status = |code| {
        let mut r = Response::new(Either::Right(Empty::new()));
        *r.status_mut() = code;
        r
    };
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return status(StatusCode::BAD_REQUEST);
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let Ok(uri) = base.uri_for(path) else {
        return status(StatusCode::BAD_REQUEST);
    };
    let mut up = Request::new(Full::new(body));
    *up.method_mut() = parts.method;
    *up.uri_mut() = uri;
    *up.headers_mut() = forwardable(&parts.headers);
    match client.request(base, up).await {
        Ok(resp) => {
            let (mut head, body) = resp.into_parts();
            head.headers = forwardable(&head.headers);
            Response::from_parts(head, Either::Left(body))
        }
        Err(_) => status(StatusCode::BAD_GATEWAY),
    }
}

/// What `cargo test` runs of this bench (tests/run builds and runs every target): the relay,
/// started as the bench starts it, passes each protocol's stream byte for byte (the mock's
/// send-time stamps aside) with its content type, and hands on the events the mock has sent
/// while the mock still holds the rest of the stream (relayed as they come, not buffered).
pub(super) fn check() {
    let state = MockState::new(&answer_deltas(42, 40));
    let mock = start_mock(Arc::clone(&state), "mock-upstream", None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let mut relay = spawn_relay(mock, free_port(), 2);
        wait_ready(&mut relay).await;
        for p in Protocol::ALL {
            let (direct_type, direct) = fetch(mock, p).await;
            let (relayed_type, relayed) = fetch(relay.addr, p).await;
            assert_eq!(relayed_type, direct_type, "{}: content type", p.name());
            assert!(
                memchr_find(&relayed, p.terminal_mark()),
                "{}: no terminal event through the relay",
                p.name()
            );
            assert_eq!(
                unstamped(&relayed),
                unstamped(&direct),
                "{}: the relay changed the stream",
                p.name()
            );
        }
        held_stream_arrives_while_held(relay.addr, &state).await;
    });
}

/// A Chat stream the mock holds after its first content delta: those first two events reach
/// the client before the mock is told to go on, and the rest after.
async fn held_stream_arrives_while_held(relay: SocketAddr, state: &MockState) {
    let p = Protocol::Chat;
    let mut send = connect(relay).await.expect("connect to the relay");
    let mut req = make_request(relay, p, &p.request_body(true));
    *req.uri_mut() = p.path(true).parse().expect("path");
    // Not a timing check: a bound on a hang (a relay that buffers the body waits forever).
    let bound = Duration::from_secs(30);
    let resp = tokio::time::timeout(bound, send.send_request(req))
        .await
        .expect("no response head from the relay while the mock holds the stream")
        .expect("response head");
    let mut body = resp.into_body();
    let mut got = Vec::new();
    while got.windows(2).filter(|w| w == b"\n\n").count() < 2 {
        let frame = tokio::time::timeout(bound, body.frame())
            .await
            .expect("the relay held back events the mock had sent")
            .expect("the stream ended while held")
            .expect("body frame");
        got.extend_from_slice(frame.data_ref().map_or(&[][..], |d| &d[..]));
    }
    assert!(
        !memchr_find(&got, p.terminal_mark()),
        "the stream was not held"
    );
    state.release.send_modify(|g| *g += 1);
    while let Some(frame) = tokio::time::timeout(bound, body.frame())
        .await
        .expect("the rest of the stream did not come once released")
    {
        let frame = frame.expect("body frame");
        got.extend_from_slice(frame.data_ref().map_or(&[][..], |d| &d[..]));
    }
    assert!(
        memchr_find(&got, p.terminal_mark()),
        "no terminal event once released"
    );
}

/// One streamed answer of `p` from `addr`: its content type and body.
async fn fetch(addr: SocketAddr, p: Protocol) -> (Option<http::HeaderValue>, Vec<u8>) {
    let mut send = connect(addr).await.expect("connect");
    let resp = send
        .send_request(make_request(addr, p, &p.request_body(false)))
        .await
        .expect("response head");
    assert_eq!(resp.status(), StatusCode::OK, "{}", p.name());
    let content_type = resp.headers().get(http::header::CONTENT_TYPE).cloned();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (content_type, body.to_vec())
}

/// `body` with the digits of every send-time stamp zeroed.
fn unstamped(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    let mut at = 0;
    while let Some(i) = memchr::memmem::find(&out[at..], b"@T") {
        let digits = at + i + 2..(at + i + 2 + STAMP_DIGITS).min(out.len());
        out[digits.clone()].fill(b'0');
        at = digits.end;
    }
    out
}
