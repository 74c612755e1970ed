//! Replay throughput: `guardwire eval --replay` over a generated file of recorded exchanges,
//! checked with the realistic pack of the load bench (1,000 banned words and phrases with word
//! boundaries, 20 regexes, `max_length`; benches/common/fixtures.rs), in exchanges and
//! megabytes a second (docs/evaluation.md, "Replay throughput").
//!
//! The file: OpenAI chat exchanges in the shape the body capture writes (docs/capture.md:
//! bodies as strings) — half streamed (the raw SSE text, one chunk per five words), half
//! whole — each with a prompt of a few sentences and an answer of `--answer-chars`
//! characters; one in 50 answers carries a banned word, so blocks are decided too (the
//! report's counts are checked, not only timed).
//!
//! Run: `cargo bench --bench replay` (after `--`: `--exchanges N`, default 20,000;
//! `--answer-chars N`, default 2,000; `--jobs N`, default 2, the workers of the replay;
//! `--runs N`, default 3, the median is reported; `GUARDWIRE_BIN=path` times another build).
//! Not part of `tests/run`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::fixtures::{answer_deltas, banned_words, realistic_pack, Rng};
use common::guardwire_bin;
use serde_json::{json, Value};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Opts {
    exchanges: usize,
    answer_chars: usize,
    jobs: usize,
    runs: usize,
}

fn opts() -> Opts {
    let mut o = Opts {
        exchanges: 20_000,
        answer_chars: 2_000,
        jobs: 2,
        runs: 3,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || -> usize {
            args.get(i + 1)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{} needs a number", args[i]))
        };
        match args[i].as_str() {
            "--exchanges" => o.exchanges = value(),
            "--answer-chars" => o.answer_chars = value(),
            "--jobs" => o.jobs = value(),
            "--runs" => o.runs = value(),
            // `cargo bench` passes `--bench`.
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    o
}

/// The answer's deltas: about `chars` characters of the load bench's vocabulary, and a banned
/// word in one answer in 50.
fn answer(rng: &mut Rng, n: usize, chars: usize, banned: &[String]) -> Vec<String> {
    let mut deltas = answer_deltas(rng.next_u64(), chars / 30 + 1);
    if n % 50 == 49 {
        let at = rng.range(0, deltas.len() - 1);
        let word = &banned[rng.range(0, banned.len() - 1)];
        deltas[at] = format!("{} {word} ", deltas[at].trim_end());
    }
    deltas
}

fn chunk(text: &str) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
           "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    .to_string()
}

/// Writes the replay file; returns (blocking answers written, bytes).
fn generate(path: &Path, o: &Opts) -> (usize, u64) {
    let banned = banned_words();
    let mut rng = Rng(0x5EED_4E91);
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let mut blocking = 0;
    for n in 0..o.exchanges {
        let prompt = answer_deltas(rng.next_u64(), 8).concat();
        let deltas = answer(&mut rng, n, o.answer_chars, &banned);
        blocking += usize::from(n % 50 == 49);
        let streamed = n % 2 == 0;
        let request = json!({"model": "gpt-4o", "stream": streamed,
                             "messages": [{"role": "user", "content": prompt}]});
        let mut line = json!({"id": format!("ex-{n}"), "route": "openai_chat",
                              "protocol": "openai_chat", "path": "/v1/chat/completions",
                              "request_body": request.to_string(),
                              "metadata": {"captured_by": "guardwire"}});
        if streamed {
            let mut sse = String::new();
            for d in &deltas {
                sse.push_str(&format!("data: {}\n\n", chunk(d)));
            }
            sse.push_str("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
            line["response_sse"] = Value::String(sse);
        } else {
            let whole = json!({"id": "chatcmpl-1", "object": "chat.completion",
                "created": 1, "model": "gpt-4o",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": deltas.concat()}}],
                "usage": {"prompt_tokens": 60, "completion_tokens": 450, "total_tokens": 510}});
            line["response_body"] = Value::String(whole.to_string());
        }
        serde_json::to_writer(&mut out, &line).unwrap();
        out.write_all(b"\n").unwrap();
    }
    out.flush().unwrap();
    (blocking, std::fs::metadata(path).unwrap().len())
}

fn main() {
    let o = opts();
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("realistic.yaml");
    std::fs::write(&pack, realistic_pack(false, o.answer_chars)).unwrap();
    let config = dir.path().join("replay.yaml");
    std::fs::write(
        &config,
        format!(
            "upstreams: {{ openai: \"http://127.0.0.1:9\" }}\npacks: [\"{}\"]\nreload: {{ poll_ms: 0 }}\n",
            pack.display()
        ),
    )
    .unwrap();
    let file = dir.path().join("traffic.jsonl");
    let (blocking, bytes) = generate(&file, &o);
    eprintln!(
        "replay: {} exchanges ({} with a banned word), {:.1} MB, {} answer characters; jobs {}",
        o.exchanges,
        blocking,
        bytes as f64 / 1e6,
        o.answer_chars,
        o.jobs
    );
    let report = dir.path().join("report.json");
    let mut times: Vec<Duration> = Vec::new();
    for run in 0..o.runs {
        let started = Instant::now();
        let out = Command::new(guardwire_bin())
            .args(["eval", "--config"])
            .arg(&config)
            .arg("--replay")
            .arg(&file)
            .args(["--jobs", &o.jobs.to_string(), "--json"])
            .arg(&report)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let took = started.elapsed();
        assert!(
            out.status.success(),
            "eval --replay failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(r["exchanges"], o.exchanges as u64, "{r}");
        assert_eq!(r["invalid"], 0, "{r}");
        assert_eq!(
            r["blocked"], blocking as u64,
            "every banned word blocks: {r}"
        );
        eprintln!(
            "replay: run {}: {:.2} s, {:.0} exchanges/s, {:.1} MB/s",
            run + 1,
            took.as_secs_f64(),
            o.exchanges as f64 / took.as_secs_f64(),
            bytes as f64 / 1e6 / took.as_secs_f64()
        );
        times.push(took);
    }
    times.sort();
    let median = times[times.len() / 2].as_secs_f64();
    println!("| exchanges | file MB | answer chars | jobs | median s | exchanges/s | MB/s |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {} | {:.1} | {} | {} | {:.2} | {:.0} | {:.1} |",
        o.exchanges,
        bytes as f64 / 1e6,
        o.answer_chars,
        o.jobs,
        median,
        o.exchanges as f64 / median,
        bytes as f64 / 1e6 / median
    );
}
