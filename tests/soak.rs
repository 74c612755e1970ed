//! Soak: hundreds of concurrent streams through a realistic pack for a bounded time
//! (`GUARDWIRE_SOAK_SECS`, default 20), asserting every answer is exact, nothing is left in
//! flight, and memory stays flat while requests keep coming.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use common::mock_upstream::{openai_chat_stream, Chunk, MockUpstream, Reply};
use common::proxy::*;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CONCURRENCY: usize = 300;

const PACK: &str = r#"
validators:
  - id: words
    type: banned_words
    params: { words: [forbidden fruit, project bluebird, nightjar] }
  - id: secrets
    type: regex
    params: { pattern: "sk-[A-Za-z0-9]{20,}", expect_match: false }
  - id: cards
    type: pii
    mode: redact
    params: { types: [credit_card, email] }
  - id: length
    type: max_length
    params: { max: 100000 }
"#;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_concurrent_streams_stay_exact_and_memory_stays_flat() {
    let secs: u64 = std::env::var("GUARDWIRE_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    // 40 deltas, a few ms apart, one with an e-mail address to mask, split mid-frame.
    let pieces: Vec<String> = (0..40)
        .map(|i| {
            if i == 20 {
                "write to ann@example.com ".to_owned()
            } else {
                format!("word{i} and more ")
            }
        })
        .collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let body = openai_chat_stream(&refs);
    let masked: Vec<String> = pieces
        .iter()
        .map(|p| p.replace("ann@example.com", "[REDACTED:email]"))
        .collect();
    let masked_refs: Vec<&str> = masked.iter().map(String::as_str).collect();
    let expected = Bytes::from(openai_chat_stream(&masked_refs));
    let chunks: Vec<Chunk> = body
        .chunks(97)
        .enumerate()
        .map(|(i, c)| {
            Chunk::new(
                Bytes::copy_from_slice(c),
                Duration::from_millis(if i % 10 == 0 { 1 } else { 0 }),
            )
        })
        .collect();
    let mock = MockUpstream::start(move |_| {
        Reply::chunks(200, chunks.clone()).with_header("content-type", "text/event-stream")
    })
    .await;
    let proxy = start_proxy(&mock.base_url(), PACK, "").await;
    let addr = proxy.addr();
    // The mock records every request; forget them so only guardwire's memory can grow.
    let mock = Arc::new(mock);
    let forgetter = {
        let mock = Arc::clone(&mock);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                mock.forget_requests();
            }
        })
    };

    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let mid = started + Duration::from_secs(secs / 2);
    let rss_mid = Arc::new(AtomicUsize::new(0));
    let done_mid = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENCY {
        let (done, expected) = (Arc::clone(&done), expected.clone());
        let (rss_mid, done_mid) = (Arc::clone(&rss_mid), Arc::clone(&done_mid));
        tasks.push(tokio::spawn(async move {
            let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
            while Instant::now() < deadline {
                let req = Request::post(format!("http://{addr}/v1/chat/completions"))
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from_static(STREAM_REQUEST.as_bytes())))
                    .unwrap();
                let resp = client.request(req).await.unwrap();
                assert_eq!(resp.status(), 200);
                let got = resp.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(got, expected, "a stream came back different");
                done.fetch_add(1, Ordering::Relaxed);
                if Instant::now() >= mid && rss_mid.load(Ordering::Relaxed) == 0 {
                    // The first task past half time takes the mid-run sample.
                    if rss_mid
                        .compare_exchange(
                            0,
                            rss_kib() as usize,
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        )
                        .is_ok()
                    {
                        done_mid.store(done.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    forgetter.abort();
    mock.forget_requests();
    let total = done.load(Ordering::Relaxed);
    let rss_end = rss_kib() as usize;
    let (rss_mid, done_mid) = (
        rss_mid.load(Ordering::Relaxed),
        done_mid.load(Ordering::Relaxed),
    );
    eprintln!(
        "soak: {total} streams in {secs} s by {CONCURRENCY} clients; RSS {rss_mid} KiB at {done_mid} streams, {rss_end} KiB at the end"
    );
    assert!(
        total >= CONCURRENCY * 2,
        "too few streams completed: {total}"
    );
    // Flat memory: the second half (thousands of streams) may not grow RSS by more than 16 MiB,
    // i.e. well under the cost of keeping even a few KiB per finished stream.
    let second_half = total - done_mid;
    assert!(
        rss_end <= rss_mid + 16 * 1024,
        "RSS grew from {rss_mid} to {rss_end} KiB over {second_half} streams"
    );
    let m = metrics(addr).await;
    assert!(m.contains("guardwire_streams_in_flight 0"), "{m}");
    // Blocks are declared at zero from the start; none may have counted.
    assert!(
        m.lines()
            .filter(|l| l.starts_with("guardwire_blocked_total{"))
            .all(|l| l.ends_with(" 0")),
        "{m}"
    );
    assert!(
        m.contains(
            r#"guardwire_redactions_total{validator="cards",phase="stream",route="openai_chat"}"#
        ),
        "{m}"
    );
}
