//! Statistics and the report: percentiles, the Markdown tables, the machine line.

use crate::client::PhaseResult;
use crate::opts::Protocol;
use std::fmt::Write as _;
use std::time::Duration;

fn pct(sorted: &[u64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[i] as f64 / 1e6)
}

pub(super) struct Summary {
    pub(super) reqs: u64,
    pub(super) errors: u64,
    pub(super) rps: f64,
    pub(super) ttfb: [Option<f64>; 2],
    gap: [Option<f64>; 2],
    transit: [Option<f64>; 2],
    total: [Option<f64>; 3],
    cpu_ms_per_req: Option<f64>,
    /// Share of that CPU time spent in the kernel.
    cpu_sys_share: Option<f64>,
    rss_mib: Option<f64>,
    /// The proxy's context switches per request (voluntary, involuntary).
    pub(super) switches_per_req: Option<(f64, f64)>,
}

impl Summary {
    /// Context switches per stream, for the progress lines.
    pub(super) fn switches_note(&self) -> String {
        self.switches_per_req.map_or(String::new(), |(v, i)| {
            format!(", {v:.2} voluntary / {i:.2} involuntary context switches per stream")
        })
    }

    /// Proxy CPU ms per request (user + system), when the phase measured a proxy.
    pub(super) fn cpu_ms(&self) -> Option<f64> {
        self.cpu_ms_per_req
    }
}

/// "4.02×": a CPU per request as a multiple of another's (nginx's, the relay's).
pub(super) fn ratio(v: Option<f64>, anchor: Option<f64>) -> String {
    match (v, anchor) {
        (Some(v), Some(a)) if a > 0.0 => format!("{:.2}×", v / a),
        _ => "—".into(),
    }
}

/// One phase's proxy CPU per stream (ms), by target; `None`: not run in this phase.
#[derive(Clone, Copy, Default)]
pub(super) struct PhaseCpu {
    pub(super) nginx: Option<f64>,
    /// The bare hyper relay (relay.rs).
    pub(super) relay: Option<f64>,
    /// guardwire with no packs and with the realistic pack.
    pub(super) none: Option<f64>,
    pub(super) real: Option<f64>,
}

/// The ratio table, one line per protocol (`cpu`: burst, paced): nginx's CPU per stream (ms, and
/// µs per KiB of text) and guardwire's as a multiple of it; with the relay (`relay`), also the
/// relay's CPU per stream, as a multiple of nginx's, and guardwire's as a multiple of the
/// relay's — how much of guardwire's cost its stack alone already costs. Printed when either
/// reference ran.
pub(super) fn ratio_table(
    out: &mut String,
    cpu: &[(Protocol, PhaseCpu, PhaseCpu)],
    text_bytes: usize,
    nginx: bool,
    relay: bool,
) {
    if !nginx && !relay {
        return;
    }
    let ms = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.4}"));
    let per_kib = |v: Option<f64>| {
        v.map_or("—".into(), |v| {
            format!("{:.1}", v * 1e3 * 1024.0 / text_bytes as f64)
        })
    };
    let mut columns = vec![
        "protocol",
        "nginx ms/stream burst / paced",
        "nginx µs per KiB burst / paced",
        "burst, no packs",
        "burst, realistic pack",
        "paced, no packs",
        "paced, realistic pack",
    ];
    if relay {
        columns.extend([
            "bare hyper relay ms/stream burst / paced",
            "relay × nginx burst / paced",
            "no packs ÷ relay burst / paced",
            "realistic pack ÷ relay burst / paced",
        ]);
    }
    let _ = writeln!(
        out,
        "\n### guardwire's CPU per stream as a ratio to nginx's{}\n\n| {} |\n|{}",
        if relay {
            " and to the bare hyper relay's"
        } else {
            ""
        },
        columns.join(" | "),
        "---|".repeat(columns.len())
    );
    for (p, b, l) in cpu {
        // "burst / paced" of one figure.
        let both = |f: &dyn Fn(&PhaseCpu) -> String| format!("{} / {}", f(b), f(l));
        let mut cells = vec![
            p.name().to_owned(),
            both(&|c| ms(c.nginx)),
            both(&|c| per_kib(c.nginx)),
            ratio(b.none, b.nginx),
            ratio(b.real, b.nginx),
            ratio(l.none, l.nginx),
            ratio(l.real, l.nginx),
        ];
        if relay {
            cells.extend([
                both(&|c| ms(c.relay)),
                both(&|c| ratio(c.relay, c.nginx)),
                both(&|c| ratio(c.none, c.relay)),
                both(&|c| ratio(c.real, c.relay)),
            ]);
        }
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

/// "0.466 (58 % sys)": proxy CPU per request and the kernel's share of it.
fn cpu_cell(s: &Summary) -> String {
    match (s.cpu_ms_per_req, s.cpu_sys_share) {
        (Some(v), Some(k)) => format!("{v:.3} ({:.0} % sys)", k * 100.0),
        (Some(v), None) => format!("{v:.3}"),
        (None, _) => "—".into(),
    }
}

pub(super) fn summarize(mut r: PhaseResult) -> Summary {
    let s = &mut r.samples;
    s.ttfb.sort_unstable();
    s.gaps.sort_unstable();
    s.transit.sort_unstable();
    s.total.sort_unstable();
    let done = s.ok + s.errors;
    Summary {
        reqs: s.ok,
        errors: s.errors,
        rps: s.ok as f64 / r.secs,
        ttfb: [pct(&s.ttfb, 0.5), pct(&s.ttfb, 0.99)],
        gap: [pct(&s.gaps, 0.5), pct(&s.gaps, 0.99)],
        transit: [pct(&s.transit, 0.5), pct(&s.transit, 0.99)],
        total: [
            pct(&s.total, 0.5),
            pct(&s.total, 0.99),
            pct(&s.total, 0.999),
        ],
        cpu_ms_per_req: r
            .cpu
            .filter(|_| done > 0)
            .map(|(u, s)| (u + s) * 1e3 / done as f64),
        cpu_sys_share: r.cpu.filter(|(u, s)| u + s > 0.0).map(|(u, s)| s / (u + s)),
        rss_mib: r.rss_kib.map(|k| k as f64 / 1024.0),
        switches_per_req: r
            .switches
            .filter(|_| done > 0)
            .map(|(v, i)| (v as f64 / done as f64, i as f64 / done as f64)),
    }
}

pub(super) fn ms(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| {
        if v.abs() < 10.0 {
            format!("{v:.3}")
        } else {
            format!("{v:.1}")
        }
    })
}

fn diff(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? - b?)
}

/// Percentiles as "p50 / p99 [/ p999]" in ms.
fn ms_list(v: &[Option<f64>]) -> String {
    v.iter().map(|&x| ms(x)).collect::<Vec<_>>().join(" / ")
}

fn added(a: Option<f64>, b: Option<f64>) -> String {
    diff(a, b).map_or("—".into(), |d| format!("{d:+.3}"))
}

pub(super) fn machine_line() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let load = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    format!("{cpus} CPUs ({model}), Linux {kernel}, load average at start {load}")
}

/// The throughput table; `anchor` is nginx's CPU ms per request (the "× nginx" column).
pub(super) fn throughput_table(
    out: &mut String,
    rows: &[(&str, Summary)],
    c: usize,
    text_bytes: usize,
    anchor: Option<f64>,
) {
    let _ = writeln!(
        out,
        "\n**Throughput (burst)** — {c} connections, back-to-back streaming requests, mock sends \
         the whole stream at once\n"
    );
    out.push_str("| target | req/s | errors | TTFB p50 / p99 | total p50 / p99 / p999 | proxy CPU ms/req | proxy CPU µs per KiB of text | CPU × nginx | proxy RSS MiB |\n|---|---|---|---|---|---|---|---|---|\n");
    for (name, s) in rows {
        let per_kib = s.cpu_ms_per_req.map_or("—".into(), |v| {
            format!("{:.1}", v * 1e3 * 1024.0 / text_bytes as f64)
        });
        let _ = writeln!(
            out,
            "| {name} | {:.0} | {} | {} | {} | {} | {per_kib} | {} | {} |",
            s.rps,
            s.errors,
            ms_list(&s.ttfb),
            ms_list(&s.total),
            cpu_cell(s),
            ratio(s.cpu_ms_per_req, anchor),
            s.rss_mib.map_or("—".into(), |v| format!("{v:.1}")),
        );
    }
    switches_line(out, rows);
}

/// The proxies' context switches per stream (voluntary / involuntary, all their threads), for
/// the rows that measured a proxy: the hand-overs between threads `server.runtime` is about.
pub(super) fn switches_line(out: &mut String, rows: &[(&str, Summary)]) {
    let cells: Vec<String> = rows
        .iter()
        .filter_map(|(name, s)| {
            let (v, i) = s.switches_per_req?;
            Some(format!("{name} {v:.2} / {i:.2}"))
        })
        .collect();
    if !cells.is_empty() {
        let _ = writeln!(
            out,
            "\nContext switches per stream (voluntary / involuntary, every thread of the proxy): {}.",
            cells.join("; ")
        );
    }
}

/// The paced table; "+" columns are each row minus `rows[0]` (`plus` says what that is), and
/// `anchor` is nginx's CPU ms per request (the "× nginx" column).
pub(super) fn latency_table(
    out: &mut String,
    rows: &[(&str, Summary)],
    rate: u64,
    gap: Duration,
    plus: &str,
    anchor: Option<f64>,
) {
    let _ = writeln!(
        out,
        "\n**Latency (paced)** — paced at {rate} req/s, mock sends one event every {} ms; all \
         times ms; \"+\" = {plus} at the same percentile\n",
        gap.as_secs_f64() * 1e3
    );
    out.push_str("| target | req/s | errors | TTFB p50 / p99 | +TTFB p50 / p99 | gap p50 / p99 | +gap p50 / p99 | chunk transit p50 / p99 | +transit p50 / p99 | total p50 / p99 / p999 | proxy CPU ms/req | CPU × nginx |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let base = &rows[0].1;
    for (i, (name, s)) in rows.iter().enumerate() {
        let plus = |v: &[Option<f64>; 2], b: &[Option<f64>; 2]| {
            if i == 0 {
                "—".to_owned()
            } else {
                format!("{} / {}", added(v[0], b[0]), added(v[1], b[1]))
            }
        };
        let _ = writeln!(
            out,
            "| {name} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.rps,
            s.errors,
            ms_list(&s.ttfb),
            plus(&s.ttfb, &base.ttfb),
            ms_list(&s.gap),
            plus(&s.gap, &base.gap),
            ms_list(&s.transit),
            plus(&s.transit, &base.transit),
            ms_list(&s.total),
            cpu_cell(s),
            ratio(s.cpu_ms_per_req, anchor),
        );
    }
    switches_line(out, rows);
}

/// Raises the soft open-files limit toward what `streams` needs (client + mock + slack, all
/// in this process; the proxies inherit it, and nginx sizes its connection table by it).
/// Returns the limit in force.
pub(super) fn raise_nofile(streams: usize) -> u64 {
    let want = (streams as u64) * 2 + 1024;
    match rlimit::getrlimit(rlimit::Resource::NOFILE) {
        Ok((soft, hard)) if soft < want => {
            let new = want.min(hard);
            if rlimit::setrlimit(rlimit::Resource::NOFILE, new, hard).is_ok() {
                new
            } else {
                soft
            }
        }
        Ok((soft, _)) => soft,
        Err(_) => 1024,
    }
}
