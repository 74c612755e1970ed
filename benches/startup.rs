//! Startup with many client keys: time until `/readyz` answers, and memory (VmRSS, VmHWM) then,
//! for `target/release/guardwire serve` with the realistic pack (1,000 banned words and phrases,
//! 20 regexes, `max_length`, `pii`) and 0, 50 or 500 client keys each naming that pack.
//! Each distinct pack list is compiled once (src/policy/cache.rs), so keys should cost next to
//! nothing; before that, every key compiled its own copy.
//!
//! Run: `cargo bench --bench startup` (after `--`: `--runs N`, default 3, alternating the key
//! counts; `--keys 0,50,500`; `GUARDWIRE_BIN=path` starts another build). Prints a markdown
//! table of medians. Not part of `tests/run`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::fixtures::realistic_pack;
use common::{free_port, status_kib};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Sample {
    ready: Duration,
    rss_kib: u64,
    hwm_kib: u64,
}

/// A config listening on `port` with `keys` client keys, each naming `pack`.
fn write_config(dir: &Path, pack: &Path, keys: usize, port: u16) -> PathBuf {
    let pack = pack.display();
    let mut yaml = format!(
        "listen: \"127.0.0.1:{port}\"\nupstreams: {{ openai: \"http://127.0.0.1:9\" }}\npacks: [\"{pack}\"]\nreload: {{ poll_ms: 0 }}\n"
    );
    if keys > 0 {
        yaml.push_str("keys:\n");
        for i in 0..keys {
            yaml.push_str(&format!(
                "  - {{ id: key-{i}, key: secret-{i}, packs: [\"{pack}\"] }}\n"
            ));
        }
    }
    let path = dir.join(format!("guardwire-{keys}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    path
}

fn ready(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /readyz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

fn start(dir: &Path, pack: &Path, keys: usize) -> Sample {
    let port = free_port();
    let config = write_config(dir, pack, keys, port);
    let started = Instant::now();
    let mut child = Command::new(common::guardwire_bin())
        .args(["serve", "--config"])
        .arg(&config)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start target/release/guardwire");
    while !ready(port) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("guardwire with {keys} keys exited during startup: {status}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "not ready in 600 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let sample = Sample {
        ready: started.elapsed(),
        rss_kib: status_kib(child.id(), "VmRSS:"),
        hwm_kib: status_kib(child.id(), "VmHWM:"),
    };
    let _ = child.kill();
    let _ = child.wait();
    sample
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` without `--bench startup` runs every bench binary with `--bench`; plain
    // `cargo test --benches` without it: return at once.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let runs: usize = arg("--runs").map_or(3, |v| v.parse().expect("--runs N"));
    let counts: Vec<usize> = arg("--keys").map_or(vec![0, 50, 500], |v| {
        v.split(',')
            .map(|n| n.parse().expect("--keys 0,50,500"))
            .collect()
    });
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("realistic.yaml");
    std::fs::write(&pack, realistic_pack(true, 0)).unwrap();

    let mut samples: Vec<Vec<Sample>> = counts.iter().map(|_| Vec::new()).collect();
    for run in 0..runs {
        // Alternate the order, so drift in the machine's speed falls on every count alike.
        let order: Vec<usize> = if run % 2 == 0 {
            (0..counts.len()).collect()
        } else {
            (0..counts.len()).rev().collect()
        };
        for i in order {
            samples[i].push(start(dir.path(), &pack, counts[i]));
        }
    }
    let base = &samples[0];
    let base_ready = median(base.iter().map(|s| s.ready.as_secs_f64()).collect());
    let base_rss = median(base.iter().map(|s| s.rss_kib as f64).collect());
    let mut report = format!(
        "| client keys (each naming the realistic pack) | ready after (median of {runs}) | × | VmRSS | × | VmHWM |\n|---|---|---|---|---|---|\n"
    );
    for (i, keys) in counts.iter().enumerate() {
        let ready = median(samples[i].iter().map(|s| s.ready.as_secs_f64()).collect());
        let rss = median(samples[i].iter().map(|s| s.rss_kib as f64).collect());
        let hwm = median(samples[i].iter().map(|s| s.hwm_kib as f64).collect());
        report.push_str(&format!(
            "| {keys} | {:.0} ms | {:.2} | {:.1} MiB | {:.2} | {:.1} MiB |\n",
            ready * 1000.0,
            ready / base_ready,
            rss / 1024.0,
            rss / base_rss,
            hwm / 1024.0
        ));
    }
    print!("{report}");
}
