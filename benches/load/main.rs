//! End-to-end load harness: guardwire between a fast mock upstream and a load client, all on
//! loopback, against the direct-to-mock baseline in the same run.
//!
//! Run: `cargo bench --bench load` (options after `--`: `--quick`, `--protocol chat|responses|
//! anthropic|gemini|all`, `--duration SECS`, `--concurrency N`, `--rate REQ_PER_S`,
//! `--gap-ms MS`, `--streams 1,100,1000,5000`, `--pii auto|on|off`, `--no-rss`, `--deltas N`,
//! `--throughput-only`).
//!
//! Processes and threads:
//! - guardwire runs as a child process (`target/release/guardwire serve`), twice: one with no
//!   packs, one with the realistic pack. Its CPU time (utime + stime from `/proc/<pid>/stat`)
//!   and RSS (`VmRSS`) are therefore the proxy's alone.
//! - The mock upstream runs in this process on its own single-worker tokio runtime. It answers
//!   every streaming call with 40 (`--deltas`) content deltas (~5 tokens each) framed as the
//!   provider does,
//!   either back to back (throughput) or one every `--gap-ms` (latency), and stamps each delta
//!   with the time it handed it to hyper (so the client can measure each chunk's transit time).
//! - The client runs on its own two-worker runtime: N keep-alive HTTP/1.1 connections, each
//!   sending streaming requests one after another, timing the first body byte, every SSE event
//!   and the end of each stream.
//!
//! Why not oha/wrk: neither is installed here, and neither sees SSE events inside a body (gaps
//! between chunks, per-chunk transit), which is most of what this measures. One client for all
//! phases also keeps the baseline and the proxied runs strictly comparable.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod client;
mod clock;
#[path = "../common/mod.rs"]
mod common;
mod mock;
mod opts;
mod proxy;
mod report;

use client::{open_streams_rss, run_phase, Load};
use clock::epoch;
use common::fixtures::{answer_deltas, realistic_pack};
use common::free_port;
use mock::{start_mock, stream_events, MockState};
use opts::{parse_opts, Pii, Protocol};
use proxy::{check, guardwire_bin, rss_kib, spawn_proxy, wait_ready, write_config};
use report::{latency_table, machine_line, ms, raise_nofile, summarize, throughput_table};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` (tests/run) runs bench targets
    // without it, and a minutes-long load run must not happen there.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("load: not run under `cargo test`; use `cargo bench --bench load`");
        return;
    }
    let opts = parse_opts();
    let _ = epoch();
    let max_streams = opts.streams.iter().copied().max().unwrap_or(0);
    let nofile = raise_nofile(max_streams);
    let machine = machine_line();
    eprintln!("load: {machine}");
    eprintln!("load: guardwire binary {}", guardwire_bin().display());

    let deltas = answer_deltas(42, opts.deltas);
    let text_bytes: usize = deltas.iter().map(String::len).sum();
    let text_chars: usize = deltas.iter().map(|d| d.chars().count()).sum();
    let mock_state = Arc::new(MockState {
        gap_ns: AtomicU64::new(0),
        release: watch::channel(0).0,
        events: Protocol::ALL
            .iter()
            .map(|&p| (p, Arc::new(stream_events(p, &deltas))))
            .collect(),
        held: AtomicUsize::new(0),
        accepted: AtomicUsize::new(0),
    });
    let mock = start_mock(Arc::clone(&mock_state));
    eprintln!("load: mock upstream on {mock}");

    // Configs and the realistic pack.
    let dir = tempfile::tempdir().unwrap();
    let pack_path = dir.path().join("realistic.yaml");
    let (p_none, p_real) = (free_port(), free_port());
    let none_cfg = write_config(dir.path(), "none.yaml", mock, None, p_none);
    let real_cfg = write_config(
        dir.path(),
        "realistic-cfg.yaml",
        mock,
        Some(&pack_path),
        p_real,
    );
    let (with_pii, pii_note) = match opts.pii {
        Pii::Off => (false, "pii: off (--pii off)".to_owned()),
        Pii::On | Pii::Auto => {
            std::fs::write(&pack_path, realistic_pack(true, text_chars)).unwrap();
            match check(&real_cfg) {
                Ok(()) => (true, "pii: included".to_owned()),
                Err(e) if opts.pii == Pii::Auto => (
                    false,
                    format!("pii: NOT included — this build rejects it ({e})"),
                ),
                Err(e) => panic!("--pii on, but guardwire check rejects the pack: {e}"),
            }
        }
    };
    if !with_pii {
        std::fs::write(&pack_path, realistic_pack(false, text_chars)).unwrap();
        if let Err(e) = check(&real_cfg) {
            panic!("guardwire check rejects the realistic pack: {e}");
        }
    }
    eprintln!("load: realistic pack: 1,000 banned words, 20 regexes, max_length; {pii_note}");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("load-client")
        .enable_all()
        .build()
        .unwrap();
    let mut report = String::new();
    let _ = writeln!(
        report,
        "## guardwire load benchmark{}\n\nMachine: {machine}.  ",
        if opts.quick {
            " (--quick smoke run)"
        } else {
            ""
        }
    );
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let cmd = if args.is_empty() {
        "cargo bench --bench load".to_owned()
    } else {
        format!("cargo bench --bench load -- {}", args.join(" "))
    };
    let _ = writeln!(
        report,
        "Stream: {} content deltas of ~5 tokens ({text_bytes} bytes of text) plus the protocol's \
         framing events. Realistic pack: 1,000 banned words (word boundaries), 20 regexes, \
         max_length; {pii_note}. Run: `{cmd}`.",
        opts.deltas
    );

    rt.block_on(async {
        let t_start = Instant::now();
        let mut none = spawn_proxy("no packs", &none_cfg, p_none);
        let mut real = spawn_proxy("realistic pack", &real_cfg, p_real);
        wait_ready(&mut none).await;
        wait_ready(&mut real).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle_none = rss_kib(none.pid());
        let idle_real = rss_kib(real.pid());
        eprintln!(
            "load: proxies ready in {:.1} s; idle RSS: no packs {:.1} MiB, realistic pack {:.1} MiB",
            t_start.elapsed().as_secs_f64(),
            idle_none as f64 / 1024.0,
            idle_real as f64 / 1024.0
        );

        for &p in &opts.protocols {
            let _ = writeln!(report, "\n### {}\n", p.name());
            let targets: [(&str, SocketAddr, Option<u32>); 3] = [
                ("direct to mock", mock, None),
                ("guardwire, no packs", none.addr, Some(none.pid())),
                ("guardwire, realistic pack", real.addr, Some(real.pid())),
            ];
            // Throughput: no gaps.
            mock_state.gap_ns.store(0, Ordering::Relaxed);
            let mut rows = Vec::new();
            for (name, addr, pid) in targets {
                eprintln!("load: {} throughput, {name} …", p.name());
                let acc = mock_state.accepted.load(Ordering::Relaxed);
                let r = run_phase(
                    addr,
                    p,
                    Load::Closed {
                        connections: opts.concurrency,
                    },
                    opts.warmup,
                    opts.duration,
                    false,
                    pid,
                )
                .await;
                let s = summarize(r);
                eprintln!(
                    "load:   {} streams, {:.0} req/s, {} errors, {} new upstream connections",
                    s.reqs,
                    s.rps,
                    s.errors,
                    mock_state.accepted.load(Ordering::Relaxed) - acc
                );
                rows.push((name, s));
            }
            throughput_table(&mut report, &rows, opts.concurrency, text_bytes);
            if opts.throughput_only {
                continue;
            }
            // Latency: paced, with gaps.
            mock_state
                .gap_ns
                .store(opts.gap.as_nanos() as u64, Ordering::Relaxed);
            let mut rows = Vec::new();
            for (name, addr, pid) in targets {
                eprintln!("load: {} latency at {} req/s, {name} …", p.name(), opts.rate);
                let r = run_phase(
                    addr,
                    p,
                    Load::Paced {
                        connections: opts.paced_connections,
                        rate: opts.rate,
                    },
                    opts.warmup,
                    opts.duration,
                    true,
                    pid,
                )
                .await;
                let s = summarize(r);
                eprintln!(
                    "load:   {:.0} req/s, {} errors, TTFB p50 {} ms",
                    s.rps,
                    s.errors,
                    ms(s.ttfb[0])
                );
                rows.push((name, s));
            }
            latency_table(&mut report, &rows, opts.rate, opts.gap);
            mock_state.gap_ns.store(0, Ordering::Relaxed);
        }

        // Memory by open streams.
        let _ = writeln!(
            report,
            "\n### Proxy RSS by open streams ({})\n\nIdle after start: no packs {:.1} MiB, \
             realistic pack {:.1} MiB. Streams are held open by the mock after their first \
             event; \"per stream\" = (RSS with N open − RSS just before) / N. Open-files \
             limit: {nofile}.\n",
            opts.protocols[0].name(),
            idle_none as f64 / 1024.0,
            idle_real as f64 / 1024.0,
        );
        if opts.rss {
            report.push_str("| open streams | no packs: RSS MiB | per stream KiB | realistic pack: RSS MiB | per stream KiB |\n|---|---|---|---|---|\n");
            let p = opts.protocols[0];
            for &n in &opts.streams {
                // Each stream: a client socket and a mock socket here, two in the proxy.
                if (n as u64) * 2 + 256 > nofile {
                    let _ = writeln!(
                        report,
                        "| {n} | skipped: open-files limit {nofile} is too low (raise `ulimit -n`) | | | |"
                    );
                    continue;
                }
                let mut cells = Vec::new();
                for proxy in [&none, &real] {
                    eprintln!("load: {n} open streams through {} …", proxy.label);
                    let (before, with, open) =
                        open_streams_rss(proxy.addr, p, n, proxy.pid(), &mock_state).await;
                    let per = (with.saturating_sub(before)) as f64 / open.max(1) as f64;
                    let note = if open < n {
                        format!(" (only {open} opened)")
                    } else {
                        String::new()
                    };
                    cells.push(format!("{:.1}{note} | {per:.1}", with as f64 / 1024.0));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                let _ = writeln!(report, "| {n} | {} | {} |", cells[0], cells[1]);
            }
        } else {
            report.push_str("(skipped: --no-rss)\n");
        }
        let _ = writeln!(
            report,
            "\nWhole run: {:.0} s.",
            t_start.elapsed().as_secs_f64()
        );
        drop(none);
        drop(real);
    });

    println!("{report}");
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/load-report.md");
    if std::fs::write(&target, &report).is_ok() {
        eprintln!("load: report written to {}", target.display());
    }
    rt.shutdown_timeout(Duration::from_secs(1));
}
