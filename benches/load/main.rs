//! End-to-end load harness: guardwire between a fast mock upstream and a load client, all on
//! loopback, against the direct-to-mock baseline and nginx (a plain reverse proxy, the anchor
//! every CPU figure is also given as a ratio to) in the same run. docs/performance.md says what
//! each mode and column means.
//!
//! Run: `cargo bench --bench load` (options after `--`: `--quick`, `--protocol chat|responses|
//! anthropic|gemini|all`, `--duration SECS`, `--concurrency N`, `--rate REQ_PER_S`,
//! `--gap-ms MS`, `--streams 1000,4000`, `--rss-gap-ms MS`, `--pii auto|on|off`, `--no-rss`,
//! `--deltas N`, `--throughput-only`, `--no-nginx`, `--no-relay`, `--soak N`,
//! `--soak-rate CLIENTS_PER_S`, `--soak-ramp-ms MS`, `--soak-send-ms MS`, `--soak-send-buffer BYTES`,
//! `--soak-notsent-lowat BYTES`, `--soak-key-limit N`, `--soak-address-limit N`,
//! `--soak-source IPV4`, `--soak-only`, `--no-soak`).
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
//! - nginx (`GUARDWIRE_NGINX`, `NGINX`, or the one on PATH or in /usr/sbin) runs as a child
//!   process: master and one worker per core, `proxy_buffering off`, keep-alive HTTP/1.1 to the
//!   mock. Its CPU and RSS are summed over the master and its workers. Without nginx the report
//!   says so and has no ratios.
//! - The bare hyper relay (relay.rs) runs as a child process too: this binary started again
//!   with `--serve-relay`, guardwire's stack (hyper server, tokio runtime, guardwire's upstream
//!   client) with nothing of guardwire's work, the floor guardwire's CPU is also given against.
//!   Under `cargo test` (no `--bench`) only its check runs: a few streams through it.
//! - The soak (soak.rs) runs a third guardwire with the soak's `timeouts.client_send_ms`; its
//!   flood is answered by a second mock (own thread and runtime) through a route of its own,
//!   and its clients, scrapes and monitor run on a runtime of their own (one thread).
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
// The tests' throwaway redis-server (`--limits`).
#[path = "../common/mod.rs"]
mod common;
mod mock;
mod opts;
mod proxy;
#[allow(dead_code, clippy::all)]
#[path = "../../tests/common/redis.rs"]
mod redis_server;
mod relay;
mod report;
mod soak;

use client::{open_streams_rss, run_phase, Load};
use clock::epoch;
use common::fixtures::{answer_deltas, realistic_pack};
use common::free_port;
use mock::{start_mock, MockState};
use opts::{parse_opts, Opts, Pii, Protocol};
use proxy::{
    check, guardwire_bin, rss_kib, spawn_proxy, spawn_relay, start_nginx, wait_ready, write_config,
    Meter,
};
use report::{
    latency_table, machine_line, ms, raise_nofile, ratio, ratio_table, summarize, throughput_table,
    PhaseCpu, Summary,
};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The rows of the throughput and latency tables whose CPU the ratio table compares.
const NGINX_ROW: &str = "nginx (plain reverse proxy)";
const RELAY_ROW: &str = "bare hyper relay (guardwire's stack, no checks)";
const NONE_ROW: &str = "guardwire, no packs";
const REAL_ROW: &str = "guardwire, realistic pack";
const KEYS_ROW: &str = "guardwire, realistic pack, client keys";
const LIMITS_ROW: &str = "guardwire, realistic pack, keys with limits (Redis)";
const SESSION_ROW: &str = "guardwire, keys with limits and a session cost_budget (Redis)";

/// `--limits`: the client keys the load client presents (one per protocol's header), with
/// `limits` on each (and the rest of the entry: its own packs); limits high enough that nothing
/// is refused, so the row shows what counting costs.
fn keys_yaml(limits: &str) -> String {
    let mut y = String::from(
        "prices:\n  gpt: {input_per_mtok: 0.15, output_per_mtok: 0.6}\n  claude: {input_per_mtok: 3, output_per_mtok: 15}\n  gemini: {input_per_mtok: 0.3, output_per_mtok: 2.5}\nkeys:\n",
    );
    for (i, k) in client::NORMAL_KEYS.iter().enumerate() {
        let _ = writeln!(y, "  - {{id: load{i}, key: \"{k}\"{limits}}}");
    }
    y
}

/// Each compared target's CPU per stream in one phase's rows.
fn phase_cpu(rows: &[(&str, Summary)]) -> PhaseCpu {
    let cpu = |name| rows.iter().find(|r| r.0 == name).and_then(|r| r.1.cpu_ms());
    PhaseCpu {
        nginx: cpu(NGINX_ROW),
        relay: cpu(RELAY_ROW),
        none: cpu(NONE_ROW),
        real: cpu(REAL_ROW),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(relay::SERVE_RELAY) {
        relay::serve_from_args(&args[2..]);
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --all-targets` (tests/run) runs bench targets
    // without it, and a minutes-long load run must not happen there: only the relay's check
    // (a few streams over loopback), so that the relay cannot rot unnoticed.
    if !args.iter().any(|a| a == "--bench") {
        relay::check();
        eprintln!("load: the bare hyper relay relays; the bench itself runs under `cargo bench --bench load`");
        return;
    }
    let opts = parse_opts();
    let _ = epoch();
    let max_streams = opts
        .streams
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(opts.soak.sockets() + opts.paced_connections);
    let nofile = raise_nofile(max_streams);
    let machine = machine_line();
    eprintln!("load: {machine}");
    eprintln!("load: guardwire binary {}", guardwire_bin().display());

    let deltas = answer_deltas(42, opts.deltas);
    let text_bytes: usize = deltas.iter().map(String::len).sum();
    let text_chars: usize = deltas.iter().map(|d| d.chars().count()).sum();
    let mock_state = MockState::new(&deltas);
    let mock = start_mock(Arc::clone(&mock_state), "mock-upstream", None);
    eprintln!("load: mock upstream on {mock}");

    // Configs and the realistic pack.
    let dir = tempfile::tempdir().unwrap();
    let pack_path = dir.path().join("realistic.yaml");
    let (p_none, p_real) = (free_port(), free_port());
    let server = opts.server_yaml();
    let none_cfg = write_config(dir.path(), "none.yaml", mock, None, p_none, &server);
    let real_cfg = write_config(
        dir.path(),
        "realistic-cfg.yaml",
        mock,
        Some(&pack_path),
        p_real,
        &server,
    );
    check(&none_cfg).unwrap_or_else(|e| panic!("this build rejects {}: {e}", opts.runtime_note()));
    // `--limits`: the realistic pack with client keys, without and with limits over time.
    let redis = opts.limits.then(redis_server::RedisServer::start);
    let (p_keys, p_limited, p_session) = (free_port(), free_port(), free_port());
    const LIMITS: &str = ", rpm_limit: 1000000000, tpm_limit: 1000000000000, max_budget: 100000000";
    // The third: the same keys whose packs add a `cost_budget` validator, which reads the
    // session's spend before each call and adds the exchange's after it (a budget nothing
    // reaches; the load's requests share their opening, so they are one session).
    let budget_pack = dir.path().join("budget.yaml");
    std::fs::write(
        &budget_pack,
        "name: budget\nvalidators:\n  - type: cost_budget\n    params: {max_total_tokens: 1000000000000000}\n",
    )
    .unwrap();
    let limit_cfgs = redis.as_ref().map(|r| {
        let keys = keys_yaml("");
        let state = format!("state: {{url: \"{}\"}}\n", r.url());
        let limited = format!("{state}{}", keys_yaml(LIMITS));
        let session = format!(
            "{state}{}",
            keys_yaml(&format!(
                "{LIMITS}, packs: [{}, {}]",
                common::fixtures::yaml_quote(&pack_path.display().to_string()),
                common::fixtures::yaml_quote(&budget_pack.display().to_string())
            ))
        );
        let cfg = |name, port, extra: String| {
            write_config(
                dir.path(),
                name,
                mock,
                Some(&pack_path),
                port,
                &format!("{server}{extra}"),
            )
        };
        (
            cfg("keys.yaml", p_keys, keys),
            cfg("limited.yaml", p_limited, limited),
            cfg("session.yaml", p_session, session),
        )
    });
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
    // Kept for `benches/instructions.py`, which counts a build's instructions per stream
    // with this same pack.
    let kept_pack = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/load-realistic-pack.yaml");
    let _ = std::fs::create_dir_all(kept_pack.parent().unwrap());
    let _ = std::fs::copy(&pack_path, &kept_pack);
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
         max_length; {pii_note}; {}. Run: `{cmd}`.",
        opts.deltas,
        opts.runtime_note()
    );

    let nginx = if opts.nginx && !opts.soak_only {
        start_nginx(dir.path(), mock, nofile)
    } else {
        Err("not run (--no-nginx)".to_owned())
    };
    match &nginx {
        Ok(n) => {
            eprintln!("load: nginx on {} ({} workers)", n.addr, n.workers);
            let _ = writeln!(
                report,
                "\nAnchor: nginx ({}) as a plain reverse proxy in front of the same mock: {} \
                 worker processes, `proxy_buffering off`, keep-alive HTTP/1.1 upstream; its CPU \
                 and RSS are summed over the master and its workers. \"CPU × nginx\" = the row's \
                 CPU per stream ÷ nginx's in the same phase (per KiB of text the ratio is the \
                 same: every target relays the same stream).",
                proxy::nginx_bin().map_or("?".into(), |p| p.display().to_string()),
                n.workers
            );
        }
        Err(e) => {
            eprintln!("load: nginx: {e}; no ratios to nginx");
            let _ = writeln!(
                report,
                "\nAnchor: **nginx {e}** — no ratios to nginx in this run."
            );
        }
    }
    let nginx = nginx.ok();
    let _ = writeln!(
        report,
        "\nFloor: {}",
        if opts.relay {
            format!(
                "a bare hyper relay (\"{RELAY_ROW}\") in front of the same mock, its own process: \
                 this checkout's hyper server with guardwire's default settings, a work-stealing \
                 tokio runtime with {} workers and guardwire's own upstream client (whatever \
                 `GUARDWIRE_BIN` is); the request read whole, the answer relayed frame by frame, \
                 nothing decoded, checked or counted. What guardwire costs above it is its own \
                 work; what the relay costs above nginx is the stack's (hyper and tokio against \
                 nginx's event loop).",
                opts.relay_workers()
            )
        } else {
            "not run (--no-relay or --soak-only).".to_owned()
        }
    );

    rt.block_on(async {
        let t_start = Instant::now();
        let mut none = spawn_proxy("guardwire (no packs)", &none_cfg, p_none);
        let mut real = spawn_proxy("guardwire (realistic pack)", &real_cfg, p_real);
        let mut limit_proxies = limit_cfgs.as_ref().map(|(keys, limited, session)| {
            (
                spawn_proxy("guardwire (keys)", keys, p_keys),
                spawn_proxy("guardwire (keys with limits)", limited, p_limited),
                spawn_proxy("guardwire (session cost_budget)", session, p_session),
            )
        });
        if let Some((k, l, b)) = &mut limit_proxies {
            wait_ready(k).await;
            wait_ready(l).await;
            wait_ready(b).await;
        }
        let mut relay = opts
            .relay
            .then(|| spawn_relay(mock, free_port(), opts.relay_workers()));
        wait_ready(&mut none).await;
        wait_ready(&mut real).await;
        if let Some(r) = &mut relay {
            wait_ready(r).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle_none = rss_kib(none.pid());
        let idle_real = rss_kib(real.pid());
        let idle_nginx = nginx.as_ref().map(|n| n.meter().rss_kib());
        eprintln!(
            "load: proxies ready in {:.1} s; idle RSS: no packs {:.1} MiB, realistic pack {:.1} MiB",
            t_start.elapsed().as_secs_f64(),
            idle_none as f64 / 1024.0,
            idle_real as f64 / 1024.0
        );

        if !opts.soak_only {
            // Per protocol: each target's CPU per stream, burst and paced.
            let mut cpu: Vec<(Protocol, PhaseCpu, PhaseCpu)> = Vec::new();
            for &p in &opts.protocols {
                let _ = writeln!(report, "\n### {}\n", p.name());
                let mut targets: Vec<(&str, SocketAddr, Option<Meter>)> =
                    vec![("direct to mock", mock, None)];
                if let Some(n) = &nginx {
                    targets.push((NGINX_ROW, n.addr, Some(n.meter())));
                }
                if let Some(r) = &relay {
                    targets.push((RELAY_ROW, r.addr, Some(Meter::Process(r.pid()))));
                }
                targets.push((NONE_ROW, none.addr, Some(Meter::Process(none.pid()))));
                targets.push((REAL_ROW, real.addr, Some(Meter::Process(real.pid()))));
                if let Some((k, l, b)) = &limit_proxies {
                    targets.push((KEYS_ROW, k.addr, Some(Meter::Process(k.pid()))));
                    targets.push((LIMITS_ROW, l.addr, Some(Meter::Process(l.pid()))));
                    targets.push((SESSION_ROW, b.addr, Some(Meter::Process(b.pid()))));
                }
                // Throughput: no gaps.
                mock_state.gap_ns.store(0, Ordering::Relaxed);
                let mut rows = Vec::new();
                for &(name, addr, meter) in &targets {
                    eprintln!("load: {} throughput, {name} …", p.name());
                    let s = burst(addr, p, &opts, meter).await;
                    rows.push((name, s));
                }
                let burst_cpu = phase_cpu(&rows);
                throughput_table(&mut report, &rows, opts.concurrency, text_bytes, burst_cpu.nginx);
                if opts.throughput_only {
                    cpu.push((p, burst_cpu, PhaseCpu::default()));
                    continue;
                }
                // Latency: paced, with gaps.
                mock_state
                    .gap_ns
                    .store(opts.gap.as_nanos() as u64, Ordering::Relaxed);
                let mut rows = Vec::new();
                for &(name, addr, meter) in &targets {
                    eprintln!("load: {} latency at {} req/s, {name} …", p.name(), opts.rate);
                    let s = paced(addr, p, &opts, meter).await;
                    rows.push((name, s));
                }
                let paced_cpu = phase_cpu(&rows);
                latency_table(
                    &mut report,
                    &rows,
                    opts.rate,
                    opts.gap,
                    "proxied minus direct",
                    paced_cpu.nginx,
                );
                cpu.push((p, burst_cpu, paced_cpu));
                mock_state.gap_ns.store(0, Ordering::Relaxed);
            }
            ratio_table(&mut report, &cpu, text_bytes, nginx.is_some(), relay.is_some());

            // Memory by open streams.
            let _ = writeln!(
                report,
                "\n### Proxy RSS by open streams ({})\n\nIdle after start: nginx {}, no packs {:.1} \
                 MiB, realistic pack {:.1} MiB. Each stream is held open by the mock after its first \
                 content delta and sent a delta every {} ms until released (paced streams, read as \
                 they come); \"per stream\" = (RSS with N open − RSS just before) / N, sampled \
                 once all N are open. nginx's RSS is its master's plus its workers'. Open-files \
                 limit: {nofile}.\n",
                opts.protocols[0].name(),
                idle_nginx.map_or("—".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
                idle_none as f64 / 1024.0,
                idle_real as f64 / 1024.0,
                opts.rss_gap.as_secs_f64() * 1e3,
            );
            if opts.rss {
                report.push_str("| open streams | nginx: RSS MiB | per stream KiB | no packs: RSS MiB | per stream KiB | realistic pack: RSS MiB | per stream KiB | no packs per stream ÷ nginx |\n|---|---|---|---|---|---|---|---|\n");
                let p = opts.protocols[0];
                mock_state
                    .hold_gap_ns
                    .store(opts.rss_gap.as_nanos() as u64, Ordering::Relaxed);
                let mut rss_targets: Vec<(&str, SocketAddr, Option<Meter>)> = vec![(
                    "nginx",
                    nginx.as_ref().map_or(mock, |n| n.addr),
                    nginx.as_ref().map(|n| n.meter()),
                )];
                rss_targets.push(("no packs", none.addr, Some(Meter::Process(none.pid()))));
                rss_targets.push(("realistic pack", real.addr, Some(Meter::Process(real.pid()))));
                for &n in &opts.streams {
                    // Each stream: a client socket and a mock socket here, two in the proxy.
                    if (n as u64) * 2 + 256 > nofile {
                        let _ = writeln!(
                            report,
                            "| {n} | skipped: open-files limit {nofile} is too low (raise `ulimit -n`) | | | | | | |"
                        );
                        continue;
                    }
                    let mut cells = Vec::new();
                    let mut per_stream = Vec::new();
                    for &(label, addr, meter) in &rss_targets {
                        let Some(meter) = meter else {
                            cells.push("— | —".to_owned());
                            per_stream.push(None);
                            continue;
                        };
                        eprintln!("load: {n} open streams through {label} …");
                        let (before, with, open) =
                            open_streams_rss(addr, p, n, meter, &mock_state).await;
                        let per = (with.saturating_sub(before)) as f64 / open.max(1) as f64;
                        let note = if open < n {
                            format!(" (only {open} opened)")
                        } else {
                            String::new()
                        };
                        cells.push(format!("{:.1}{note} | {per:.1}", with as f64 / 1024.0));
                        per_stream.push(Some(per));
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    let _ = writeln!(
                        report,
                        "| {n} | {} | {} | {} | {} |",
                        cells[0],
                        cells[1],
                        cells[2],
                        ratio(per_stream[1], per_stream[0])
                    );
                }
                mock_state.hold_gap_ns.store(0, Ordering::Relaxed);
            } else {
                report.push_str("(skipped: --no-rss)\n");
            }

        }
        if opts.soak.streams > 0 {
            soak_section(&mut report, &opts, dir.path(), mock, &mock_state, text_bytes).await;
        }
        let _ = writeln!(
            report,
            "\nWhole run: {:.0} s.",
            t_start.elapsed().as_secs_f64()
        );
        drop(none);
        drop(real);
        drop(relay);
    });
    drop(nginx);

    println!("{report}");
    // target/ may not exist in this checkout (CARGO_TARGET_DIR elsewhere): make it.
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/load-report.md");
    let written = std::fs::create_dir_all(target.parent().unwrap())
        .and_then(|()| std::fs::write(&target, &report));
    match written {
        Ok(()) => eprintln!("load: report written to {}", target.display()),
        Err(e) => eprintln!("load: cannot write {}: {e}", target.display()),
    }
    rt.shutdown_timeout(Duration::from_secs(1));
}

/// The burst phase through `addr`: `--concurrency` connections, back to back.
async fn burst(addr: SocketAddr, p: Protocol, opts: &Opts, meter: Option<Meter>) -> Summary {
    let load = Load::Closed {
        connections: opts.concurrency,
    };
    let s = summarize(run_phase(addr, p, load, opts.warmup, opts.duration, false, meter).await);
    eprintln!(
        "load:   {} streams, {:.0} req/s, {} errors{}",
        s.reqs,
        s.rps,
        s.errors,
        s.switches_note()
    );
    s
}

/// The paced phase through `addr`: `--rate` requests a second, one event every `--gap-ms`
/// (the caller sets the mock's gap).
async fn paced(addr: SocketAddr, p: Protocol, opts: &Opts, meter: Option<Meter>) -> Summary {
    let load = Load::Paced {
        connections: opts.paced_connections,
        rate: opts.rate,
    };
    let s = summarize(run_phase(addr, p, load, opts.warmup, opts.duration, true, meter).await);
    eprintln!(
        "load:   {:.0} req/s, {} errors, TTFB p50 {} ms",
        s.rps,
        s.errors,
        ms(s.ttfb[0])
    );
    s
}

/// The never-reading-clients soak (soak.rs) against its own guardwire (no packs, a small
/// `client_send_ms`, metrics on `admin.listen`): the normal client's burst and paced phases
/// without the soak, then the same phases during it.
async fn soak_section(
    report: &mut String,
    opts: &Opts,
    dir: &Path,
    mock: SocketAddr,
    mock_state: &Arc<MockState>,
    text_bytes: usize,
) {
    let p = opts.protocols[0];
    let (port, admin_port) = (free_port(), free_port());
    let admin = SocketAddr::from(([127, 0, 0, 1], admin_port));
    // The flood's own mock (thread and runtime), reached through a route of its own.
    let flood = start_mock(
        Arc::clone(mock_state),
        "mock-flood",
        Some(soak::FLOOD_SEND_BUFFER),
    );
    let extra = soak::config(opts, admin, flood);
    let cfg = write_config(dir, "soak.yaml", mock, None, port, &extra);
    // An older build (GUARDWIRE_BIN) may not know `client_send_ms`: no soak then, but no panic.
    let shape = opts.soak;
    if let Err(e) = check(&cfg) {
        let _ = writeln!(
            report,
            "\n### Soak: never-reading clients\n\nskipped: this build rejects the soak's \
             config ({e})"
        );
        return;
    }
    let mut gw = spawn_proxy("guardwire (soak)", &cfg, port);
    wait_ready(&mut gw).await;
    let meter = Some(Meter::Process(gw.pid()));
    let addr = gw.addr;
    let phases = |label: &'static str| async move {
        eprintln!("load: soak: normal traffic, {label} …");
        mock_state.gap_ns.store(0, Ordering::Relaxed);
        let b = burst(addr, p, opts, meter).await;
        let l = if opts.throughput_only {
            None
        } else {
            mock_state
                .gap_ns
                .store(opts.gap.as_nanos() as u64, Ordering::Relaxed);
            let l = paced(addr, p, opts, meter).await;
            mock_state.gap_ns.store(0, Ordering::Relaxed);
            Some(l)
        };
        (b, l)
    };
    let (b0, l0) = phases("no soak").await;
    eprintln!("load: soak: {} …", shape.shape());
    let ((b1, l1), r) = soak::soak(
        addr,
        admin,
        gw.pid(),
        shape,
        mock_state,
        phases("during the soak"),
    )
    .await;
    let clients = match shape.rate {
        Some(_) => format!(
            "Clients arrive at a fixed rate (`--soak-rate`) for as long as the normal traffic \
             runs, and each drops its socket {:.1} s after it sent its request.",
            shape.hold().as_secs_f64()
        ),
        None => format!(
            "The {n} clients open over {:.1} s before the normal traffic starts (it started \
             {:.1} s in) and are kept up while it runs: each, once guardwire resets its \
             connection (or {:.1} s after its request), connects and sends again at once.",
            shape.ramp.as_secs_f64(),
            r.settle_secs,
            shape.hold().as_secs_f64(),
            n = shape.streams,
        ),
    };
    let _ = writeln!(
        report,
        "\n### Soak: {} beside normal traffic ({})\n\n\
         Its own guardwire (no packs, `timeouts.client_send_ms: {}`, {}, {}, metrics on \
         `admin.listen`, a key for each normal client and one for the soak). Protections: {}. \
         The flood has its own mock (thread and runtime) and route; the soak's clients, scrapes \
         and monitor have their own runtime (one thread); all share the cores. Each \
         never-reading client sends a streaming Chat request with the soak's key from a socket \
         with a 2 KiB receive buffer and reads nothing; the mock answers it with {} MiB as fast \
         as guardwire takes them. {clients}\n",
        shape.shape(),
        p.name(),
        shape.send_ms,
        match opts.soak_send_buffer {
            0 => "client send buffers autotuned by the kernel".to_string(),
            n => format!("`limits.client_send_buffer_bytes: {n}`"),
        },
        match opts.soak_notsent_lowat {
            None => "`limits.client_notsent_lowat_bytes` at its default".to_string(),
            Some(n) => format!("`limits.client_notsent_lowat_bytes: {n}`"),
        },
        shape.protections(),
        (mock_state.flood.len() * mock_state.flood_chunks) >> 20,
    );
    let peak = r.peak();
    let mib = |kib: u64| kib as f64 / 1024.0;
    let per_stream = |now: u64, before: u64, n: f64| {
        if n >= 1.0 {
            format!("{:.1} KiB", now.saturating_sub(before) as f64 / n)
        } else {
            "—".to_owned()
        }
    };
    let _ = writeln!(
        report,
        "| | |\n|---|---|\n\
         | clients | {} sent their request ({:.1} s beside the normal traffic), {} could not connect or send, {} saw guardwire reset their connection ({} upstream requests began) |\n\
         | refused during the soak | {:.0} by the soak key's limit, {:.0} by the address cap (429) |\n\
         | guardwire_client_timeouts_total{{deadline=\"send\"}} during the soak | {:.0} |\n\
         | guardwire_requests_in_flight, lowest and highest beside the normal traffic / after the soak | {:.0}, {:.0} / {} (after {:.1} s) |\n\
         | guardwire_connections_open, highest | {:.0} |\n\
         | upstream requests still open after the soak | {} |\n\
         | guardwire RSS before / peak | {:.1} / {:.1} MiB ({:.1} s in, {:.0} requests in flight then, the normal traffic's included: {} per request in flight) |\n\
         | the kernel's TCP memory (every socket of the machine) before / at guardwire's RSS peak | {:.1} / {:.1} MiB ({} per request in flight) |",
        r.opened,
        r.secs,
        r.failed,
        r.resets_seen,
        r.upstream_started,
        r.refused_key,
        r.refused_address,
        r.send_timeouts,
        r.in_flight_low(),
        r.most(|s| s.in_flight),
        r.in_flight_after
            .map_or("unknown (no /metrics)".into(), |v| format!("{v:.0}")),
        r.drain_secs,
        r.most(|s| s.connections),
        r.upstream_open_after,
        mib(r.before.rss_kib),
        mib(peak.rss_kib),
        peak.at,
        peak.in_flight,
        per_stream(peak.rss_kib, r.before.rss_kib, peak.in_flight),
        mib(r.before.tcp_kib),
        mib(peak.tcp_kib),
        per_stream(peak.tcp_kib, r.before.tcp_kib, peak.in_flight),
    );
    // RSS beside the streams in flight over time (every second): whether RSS follows the
    // streams open or grows apart from them.
    let mut line =
        String::from("\nOver time (s: guardwire RSS MiB / requests in flight / connections open / kernel TCP MiB):");
    let mut next = 0.0;
    for s in &r.samples {
        if s.at >= next {
            let _ = write!(
                line,
                " {:.0}: {:.0} / {:.0} / {:.0} / {:.0};",
                s.at,
                mib(s.rss_kib),
                s.in_flight,
                s.connections,
                mib(s.tcp_kib)
            );
            next = s.at.floor() + 1.0;
        }
    }
    eprintln!("load: soak:{line}");
    let _ = writeln!(report, "{line}\n");
    throughput_table(
        report,
        &[
            ("normal traffic, no soak", b0),
            ("normal traffic, during the soak", b1),
        ],
        opts.concurrency,
        text_bytes,
        None,
    );
    if let (Some(l0), Some(l1)) = (l0, l1) {
        latency_table(
            report,
            &[
                ("normal traffic, no soak", l0),
                ("normal traffic, during the soak", l1),
            ],
            opts.rate,
            opts.gap,
            "during the soak minus no soak",
            None,
        );
    }
    report.push_str(
        "\n(proxy CPU during the soak includes the never-reading clients' share: it is the \
         whole process's.)\n",
    );
}
