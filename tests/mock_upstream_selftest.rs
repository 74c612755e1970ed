#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::mock_upstream::{openai_chat_stream, sse_data_frames, Chunk, MockUpstream, Reply};
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

type TestClient = Client<HttpConnector, Full<Bytes>>;

const WAIT: Duration = Duration::from_secs(10);

fn h1_client() -> TestClient {
    Client::builder(TokioExecutor::new()).build_http()
}

fn h2_client() -> TestClient {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http()
}

fn get(url: &str) -> Request<Full<Bytes>> {
    Request::get(url)
        .body(Full::new(Bytes::new()))
        .expect("build GET request")
}

fn small_sse() -> Vec<u8> {
    // Multi-byte UTF-8 on purpose, so some splits land inside a character.
    openai_chat_stream(&["Hé", "llo wörld ✓", "\"quoted\"\n"])
}

#[test]
fn openai_chat_stream_exact_format() {
    let got = String::from_utf8(openai_chat_stream(&["Hi", "a\"b\n"])).expect("utf8");
    let expected = concat!(
        r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"a\"b\n"},"finish_reason":null}]}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "\n\n",
        "data: [DONE]\n\n",
    );
    assert_eq!(got, expected);

    // Every data line except [DONE] is valid JSON.
    for line in got.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if line != "[DONE]" {
            serde_json::from_str::<serde_json::Value>(line).expect("frame is valid JSON");
        }
    }
}

#[test]
fn sse_data_frames_format() {
    assert_eq!(
        sse_data_frames(&["{\"a\":1}", "{}"]),
        b"data: {\"a\":1}\n\ndata: {}\n\n".to_vec()
    );
    assert!(sse_data_frames(&[]).is_empty());
}

fn chunk_bytes(reply: &Reply) -> Vec<(Vec<u8>, Duration)> {
    match reply {
        Reply::Chunks { chunks, .. } | Reply::HangAfter { chunks, .. } => chunks
            .iter()
            .map(|c| (c.bytes.to_vec(), c.delay_before))
            .collect(),
        _ => panic!("reply has no chunks"),
    }
}

#[test]
fn split_constructors_shape() {
    let d = Duration::from_millis(7);
    let pieces = chunk_bytes(&Reply::sse_split(b"abcdef", &[4, 0, 2, 2, 99, 6], d));
    assert_eq!(
        pieces,
        vec![
            (b"ab".to_vec(), Duration::ZERO),
            (b"cd".to_vec(), d),
            (b"ef".to_vec(), d),
        ]
    );
    let pieces = chunk_bytes(&Reply::sse_every(b"abcdefg", 3, d));
    assert_eq!(
        pieces,
        vec![
            (b"abc".to_vec(), Duration::ZERO),
            (b"def".to_vec(), d),
            (b"g".to_vec(), d),
        ]
    );
    let pieces = chunk_bytes(&Reply::sse(b"xyz"));
    assert_eq!(pieces, vec![(b"xyz".to_vec(), Duration::ZERO)]);

    match Reply::json(404, "{}").with_header("x-a", "b").then_hang() {
        Reply::HangAfter {
            status, headers, ..
        } => {
            assert_eq!(status, 404);
            assert!(headers.contains(&("content-type".into(), "application/json".into())));
            assert!(headers.contains(&("x-a".into(), "b".into())));
        }
        other => panic!("unexpected {other:?}"),
    }
}

async fn split_at_every_byte(client: TestClient) {
    let body = small_sse();
    let len = body.len();
    let served = body.clone();
    let mock = MockUpstream::start(move |req| {
        let path = req.path_and_query.as_str();
        if path == "/every" {
            Reply::sse_every(&served, 1, Duration::ZERO)
        } else if let Some(i) = path.strip_prefix("/split/") {
            let i: usize = i.parse().expect("split index");
            Reply::sse_split(&served, &[i], Duration::ZERO)
        } else {
            Reply::json(404, "{}")
        }
    })
    .await;

    let mut paths: Vec<String> = (0..=len).map(|i| format!("/split/{i}")).collect();
    paths.push("/every".to_owned());
    for path in &paths {
        let resp = client
            .request(get(&format!("{}{path}", mock.base_url())))
            .await
            .expect("request");
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("text/event-stream")
        );
        let got = resp.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(got.as_ref(), body.as_slice(), "path {path}");
    }
    assert_eq!(mock.request_count(), paths.len());
    assert!(mock.wait_for_completed(paths.len(), WAIT).await);
    assert_eq!(mock.cancelled_count(), 0);
}

#[tokio::test]
async fn split_at_every_byte_http1() {
    split_at_every_byte(h1_client()).await;
}

#[tokio::test]
async fn split_at_every_byte_http2() {
    split_at_every_byte(h2_client()).await;
}

#[tokio::test]
async fn delayed_chunks_arrive_intact() {
    let body = small_sse();
    let served = body.clone();
    let mock = MockUpstream::start(move |_| {
        Reply::sse_every(&served, 17, Duration::from_millis(2)).with_header("x-mock", "1")
    })
    .await;
    let resp = h1_client()
        .request(get(&mock.base_url()))
        .await
        .expect("request");
    assert_eq!(resp.headers().get("x-mock").expect("x-mock"), "1");
    let got = resp.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(got.as_ref(), body.as_slice());
    assert!(mock.wait_for_completed(1, WAIT).await);
    assert_eq!(mock.cancelled_count(), 0);
    assert_eq!(mock.concurrent_open(), 0);
}

#[tokio::test]
async fn records_requests() {
    let mock = MockUpstream::start(|req| {
        if req.method == Method::POST {
            Reply::json(201, r#"{"ok":true}"#)
        } else {
            Reply::json(405, "{}")
        }
    })
    .await;
    assert!(mock.base_url().starts_with("http://127.0.0.1:"));
    assert_eq!(
        mock.base_url(),
        format!("http://127.0.0.1:{}", mock.addr.port())
    );

    let req_body = r#"{"model":"gpt-4o","stream":true}"#;
    let req = Request::post(format!("{}/v1/chat/completions?stream=1", mock.base_url()))
        .header("authorization", "Bearer sk-test")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(req_body.as_bytes())))
        .expect("build POST");
    let resp = h1_client().request(req).await.expect("request");
    assert_eq!(resp.status(), 201);
    assert_eq!(
        resp.headers().get("content-type").expect("content-type"),
        "application/json"
    );
    let got = resp.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(got.as_ref(), br#"{"ok":true}"#);

    let resp = h2_client()
        .request(get(&format!("{}/v1/models", mock.base_url())))
        .await
        .expect("h2 request");
    assert_eq!(resp.status(), 405);

    assert_eq!(mock.request_count(), 2);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].method, Method::POST);
    assert_eq!(reqs[0].path_and_query, "/v1/chat/completions?stream=1");
    assert_eq!(reqs[0].body.as_ref(), req_body.as_bytes());
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        reqs[0].body_json().expect("json body")["model"],
        serde_json::json!("gpt-4o")
    );
    assert_eq!(reqs[1].method, Method::GET);
    assert_eq!(reqs[1].path_and_query, "/v1/models");
    assert!(reqs[1].body.is_empty());
}

async fn cancel_hang_after(client: TestClient) {
    let mock = MockUpstream::start(|_| Reply::sse(b"data: {\"first\":true}\n\n").then_hang()).await;
    let resp = client
        .request(get(&mock.base_url()))
        .await
        .expect("request");
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let frame = body
        .frame()
        .await
        .expect("a frame")
        .expect("frame ok")
        .into_data()
        .expect("data frame");
    assert_eq!(frame.as_ref(), b"data: {\"first\":true}\n\n");
    assert_eq!(mock.concurrent_open(), 1);
    assert_eq!(mock.cancelled_count(), 0);

    drop(body);
    drop(client);
    assert!(
        mock.wait_for_cancelled(1, WAIT).await,
        "cancel not observed"
    );
    assert_eq!(mock.completed_count(), 0);
    assert_eq!(mock.concurrent_open(), 0);
}

#[tokio::test]
async fn cancellation_counted_http1() {
    cancel_hang_after(h1_client()).await;
}

#[tokio::test]
async fn cancellation_counted_http2() {
    cancel_hang_after(h2_client()).await;
}

#[tokio::test]
async fn cancellation_mid_delayed_stream() {
    // Long stream with delays; the client walks away after the first frame.
    let chunks: Vec<Chunk> = (0..200)
        .map(|i| Chunk::new(format!("data: {i}\n\n"), Duration::from_millis(20)))
        .collect();
    let mock = MockUpstream::start(move |_| Reply::chunks(200, chunks.clone())).await;
    let client = h1_client();
    let resp = client
        .request(get(&mock.base_url()))
        .await
        .expect("request");
    let mut body = resp.into_body();
    let first = body.frame().await.expect("frame").expect("ok");
    assert!(first.is_data());
    drop(body);
    drop(client);
    assert!(mock.wait_for_cancelled(1, WAIT).await);
    assert_eq!(mock.completed_count(), 0);
}

#[tokio::test]
async fn hang_times_out_on_client() {
    let mock = MockUpstream::start(|_| Reply::Hang).await;
    let client = h1_client();
    let res = tokio::time::timeout(
        Duration::from_millis(200),
        client.request(get(&format!("{}/slow", mock.base_url()))),
    )
    .await;
    assert!(res.is_err(), "expected client-side timeout, got {res:?}");
    assert!(mock.wait_for_requests(1, WAIT).await);
    assert_eq!(mock.requests()[0].path_and_query, "/slow");
    // No body was ever created.
    assert_eq!(mock.cancelled_count() + mock.completed_count(), 0);
}

async fn reset_is_client_error(client: TestClient) {
    let mock = MockUpstream::start(|_| Reply::Reset).await;
    let res = client.request(get(&mock.base_url())).await;
    assert!(res.is_err(), "expected error, got {res:?}");
    assert!(mock.request_count() >= 1);
}

#[tokio::test]
async fn reset_gives_client_error_http1() {
    reset_is_client_error(h1_client()).await;
}

#[tokio::test]
async fn reset_gives_client_error_http2() {
    reset_is_client_error(h2_client()).await;
}

#[tokio::test]
async fn drop_stops_server() {
    let mock = MockUpstream::start(|_| Reply::sse(b"data: x\n\n")).await;
    let addr = mock.addr;
    let resp = h1_client()
        .request(get(&mock.base_url()))
        .await
        .expect("request");
    assert_eq!(resp.status(), 200);
    drop(resp);
    drop(mock);
    // The abort takes effect asynchronously; poll until connects are refused.
    let refused = tokio::time::timeout(WAIT, async {
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(refused.is_ok(), "server still accepting after drop");
}
