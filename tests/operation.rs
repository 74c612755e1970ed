//! Operating limits: the concurrency cap, readiness during a drain, and the drain deadline that
//! ends open streams with the protocol's error frame.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{openai_chat_stream, Chunk, MockUpstream, Reply};
use common::proxy::*;
use std::time::Duration;

/// A stream that sends its first frames, then stays open.
fn open_stream() -> (Vec<u8>, Reply) {
    let mut head = openai_chat_stream(&["still ", "thinking"]);
    head.truncate(head.len() - "data: [DONE]\n\n".len());
    let reply = Reply::chunks(200, vec![Chunk::now(head.clone())])
        .with_header("content-type", "text/event-stream")
        .then_hang();
    (head, reply)
}

#[tokio::test]
async fn over_the_concurrency_limit_answers_503_with_retry_after() {
    let (_, reply) = open_stream();
    let mock = MockUpstream::start(move |req| {
        if req.body_str().contains("hang") {
            reply.clone()
        } else {
            Reply::sse(&openai_chat_stream(&["ok"]))
        }
    })
    .await;
    let proxy = start_proxy(
        &mock.base_url(),
        "validators: []\n",
        "limits: { max_concurrent_requests: 1 }",
    )
    .await;
    let addr = proxy.addr();
    // Hold the only slot with a stream that stays open.
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let held = client
        .request(
            http::Request::post(format!("http://{addr}/v1/chat/completions"))
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    STREAM_REQUEST.replace("hi", "hang"),
                )))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(held.status(), 200);
    let a = post_chat(addr, STREAM_REQUEST).await;
    assert_eq!(a.status, 503);
    assert_eq!(a.headers["retry-after"], "1");
    assert_eq!(a.json()["error"]["code"], "overloaded");
    // Ending the held stream frees the slot.
    drop(held);
    assert!(mock.wait_for_cancelled(1, Duration::from_secs(10)).await);
    let mut ok = false;
    for _ in 0..100 {
        if post_chat(addr, STREAM_REQUEST).await.status == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok, "the slot was never released");
}

#[tokio::test]
async fn the_drain_deadline_ends_open_streams_with_an_error_frame() {
    let (head, reply) = open_stream();
    let mock = MockUpstream::start(move |_| reply.clone()).await;
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", "").await;
    let addr = proxy.addr();
    let ready = send(addr, "GET", "/readyz", "", &[]).await;
    assert_eq!(ready.status, 200);
    let stream = tokio::spawn(async move { post_chat(addr, STREAM_REQUEST).await });
    mock.wait_for_requests(1, Duration::from_secs(10)).await;
    let gateway = std::sync::Arc::clone(&proxy.server.gateway);
    gateway.begin_drain();
    // Readiness is false while requests are still served.
    assert_eq!(send(addr, "GET", "/readyz", "", &[]).await.status, 503);
    proxy.server.shutdown(Duration::from_millis(300)).await;
    let a = stream.await.unwrap();
    let text = a.text();
    assert!(
        text.starts_with(std::str::from_utf8(&head).unwrap()),
        "{text}"
    );
    assert!(text.ends_with("\"code\":\"shutting_down\"}}\n\n"), "{text}");
    assert!(mock.wait_for_cancelled(1, Duration::from_secs(10)).await);
}
