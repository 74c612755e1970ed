//! What judged checks add to a streamed answer, in each placement, with a judge of fixed
//! latency: time to the first text byte at the client (TTFT) and to the answer's end, against
//! the same stream with no judge.
//!
//! In process: a mock upstream streams 8 sentences, one frame each, `--gap` ms apart (default
//! 25); a mock judge answers every call after `--judge-ms` (default 50) with a passing verdict;
//! guardwire runs with one `llm_judge` per placement (the last as an eval, off the request
//! path). Each placement's median over `--runs`
//! requests (default 20), placements alternated run by run.
//!
//! Run: `cargo bench --bench judged [-- --runs N --judge-ms MS --gap MS]`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code, clippy::all)]
#[path = "../tests/common/mock_upstream.rs"]
mod mock_upstream;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mock_upstream::{Chunk, MockUpstream, Reply};
use std::time::{Duration, Instant};

const SENTENCES: usize = 8;

/// The answer to request `n`: its sentences name `n`, so no verdict is answered from the
/// judge's cache.
fn stream(gap: Duration, n: &str) -> Reply {
    let mut chunks = Vec::new();
    let frame = |delta: &str| {
        format!("data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":null}}]}}\n\n")
    };
    chunks.push(Chunk::now(frame(
        "{\"role\":\"assistant\",\"content\":\"\"}",
    )));
    for i in 0..SENTENCES {
        chunks.push(Chunk::new(
            frame(&format!(
                "{{\"content\":\"Sentence number {i} of {n} is here. \"}}"
            )),
            gap,
        ));
    }
    chunks.push(Chunk::new(
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        Duration::ZERO,
    ));
    Reply::chunks(200, chunks).with_header("content-type", "text/event-stream")
}

struct Placement {
    name: &'static str,
    pack: &'static str,
}

const PLACEMENTS: [Placement; 6] = [
    Placement {
        name: "no judge",
        pack: "validators: []\n",
    },
    Placement {
        name: "input, before the call",
        pack: "validators:\n  - type: llm_judge\n    params: {criteria: c, direction: input}\n",
    },
    Placement {
        name: "input, parallel",
        pack: "validators:\n  - type: llm_judge\n    params: {criteria: c, direction: input, parallel: true}\n",
    },
    Placement {
        name: "output, windowed (sentence)",
        pack: "validators:\n  - type: llm_judge\n    params: {criteria: c, window: sentence}\n",
    },
    Placement {
        name: "output, at the end (held)",
        pack: "validators:\n  - type: llm_judge\n    params: {criteria: c}\n",
    },
    Placement {
        name: "eval, every turn (off the path)",
        pack: "evals:\n  - {id: e, type: llm_judge, trigger: every_turn, params: {criteria: c}}\n",
    },
];

/// (time to the first text, time to the end) of one streamed request.
async fn one(addr: std::net::SocketAddr, n: usize) -> (Duration, Duration) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    // A distinct prompt per request: the judge's verdict cache must not answer.
    let body = format!(
        "{{\"model\":\"m\",\"stream\":true,\"messages\":[{{\"role\":\"user\",\"content\":\"go {n}\"}}]}}"
    );
    let req = http::Request::post(format!("http://{addr}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let started = Instant::now();
    let resp = client.request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut first = None;
    let mut seen = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            seen.extend_from_slice(&data);
            if first.is_none() && seen.windows(8).any(|w| w == b"Sentence") {
                first = Some(started.elapsed());
            }
        }
    }
    let text = String::from_utf8_lossy(&seen);
    assert!(
        text.contains(&format!("number {} of {n}", SENTENCES - 1)),
        "{text}"
    );
    (first.unwrap_or_default(), started.elapsed())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo test --benches` runs this without `--bench`: return at once.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let arg = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect("a number"))
    };
    let runs = arg("--runs", 20) as usize;
    let judge_ms = arg("--judge-ms", 50);
    let gap = Duration::from_millis(arg("--gap", 25));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let upstream = MockUpstream::start(move |req| {
            let body = req.body_str();
            let n = body.split("go ").nth(1).and_then(|s| s.split('"').next()).unwrap_or("0");
            stream(gap, n)
        })
        .await;
        let verdict = "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"{\\\"score\\\": 1}\"}}]}";
        let judge = MockUpstream::start(move |_| {
            Reply::chunks(200, vec![Chunk::new(verdict, Duration::from_millis(judge_ms))])
                .with_header("content-type", "application/json")
        })
        .await;
        let mut servers = Vec::new();
        let dir = tempfile::tempdir().unwrap();
        for (i, p) in PLACEMENTS.iter().enumerate() {
            let pack = dir.path().join(format!("p{i}.yaml"));
            std::fs::write(&pack, p.pack).unwrap();
            let yaml = format!(
                "listen: \"127.0.0.1:0\"\nupstreams:\n  openai: \"{}\"\npacks: [\"{}\"]\nlog: {{level: error}}\njudges:\n  - {{name: j, protocol: openai_chat, base_url: \"{}\", model: m, timeout_ms: 10000}}\n",
                upstream.base_url(),
                pack.display(),
                judge.base_url()
            );
            let config = guardwire::config::Config::from_yaml(&yaml).unwrap();
            servers.push(guardwire::server::start(config).await.unwrap());
        }
        let mut samples: Vec<(Vec<Duration>, Vec<Duration>)> =
            PLACEMENTS.iter().map(|_| (Vec::new(), Vec::new())).collect();
        let mut n = 0;
        for run in 0..runs + 1 {
            for i in 0..PLACEMENTS.len() {
                // Alternate the order run by run; the first run warms connections up.
                let i = if run % 2 == 0 { i } else { PLACEMENTS.len() - 1 - i };
                n += 1;
                let (ttft, total) = one(servers[i].addr, n).await;
                if run > 0 {
                    samples[i].0.push(ttft);
                    samples[i].1.push(total);
                }
            }
        }
        println!(
            "judge latency {judge_ms} ms; {SENTENCES} sentences {} ms apart; median of {runs} runs",
            gap.as_millis()
        );
        println!("| placement | time to first text | added | time to the end | added |");
        println!("|---|---|---|---|---|");
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let base = (median(samples[0].0.clone()), median(samples[0].1.clone()));
        for (p, (ttft, total)) in PLACEMENTS.iter().zip(samples) {
            let (ttft, total) = (median(ttft), median(total));
            println!(
                "| {} | {:.1} ms | {:+.1} ms | {:.1} ms | {:+.1} ms |",
                p.name,
                ms(ttft),
                ms(ttft) - ms(base.0),
                ms(total),
                ms(total) - ms(base.1)
            );
        }
    });
}
