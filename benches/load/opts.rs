//! Options: the protocols under test and the command line (`--quick`, `--protocol`, ...).

use crate::clock::HOLD_MARK;
use crate::soak::Soak;
use bytes::Bytes;
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Protocol {
    Chat,
    Responses,
    Anthropic,
    Gemini,
}

impl Protocol {
    pub(super) const ALL: [Protocol; 4] = [
        Protocol::Chat,
        Protocol::Responses,
        Protocol::Anthropic,
        Protocol::Gemini,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Protocol::Chat => "OpenAI Chat Completions",
            Protocol::Responses => "OpenAI Responses",
            Protocol::Anthropic => "Anthropic Messages",
            Protocol::Gemini => "Gemini",
        }
    }

    pub(super) fn path(self, hold: bool) -> String {
        match self {
            Protocol::Chat => "/v1/chat/completions".into(),
            Protocol::Responses => "/v1/responses".into(),
            Protocol::Anthropic => "/v1/messages".into(),
            Protocol::Gemini => {
                let model = if hold { HOLD_MARK } else { "gemini-2.5-flash" };
                format!("/v1beta/models/{model}:streamGenerateContent?alt=sse")
            }
        }
    }

    pub(super) fn request_body(self, hold: bool) -> Bytes {
        let prompt = "Write a short note about planning a summer garden near the river, with \
                      practical advice on water, light and which plants go well together.";
        let model = |m: &'static str| if hold { HOLD_MARK } else { m };
        let body = match self {
            Protocol::Chat => serde_json::json!({
                "model": model("gpt-4o-mini"), "stream": true,
                "messages": [
                    {"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": prompt}
                ]
            }),
            Protocol::Responses => serde_json::json!({
                "model": model("gpt-4o-mini"), "stream": true, "input": prompt
            }),
            Protocol::Anthropic => serde_json::json!({
                "model": model("claude-sonnet-4-5"), "max_tokens": 1024, "stream": true,
                "messages": [{"role": "user", "content": prompt}]
            }),
            Protocol::Gemini => serde_json::json!({
                "contents": [{"role": "user", "parts": [{"text": prompt}]}]
            }),
        };
        Bytes::from(body.to_string())
    }

    /// What the last event of a complete, unblocked stream contains.
    pub(super) fn terminal_mark(self) -> &'static [u8] {
        match self {
            Protocol::Chat => b"[DONE]",
            Protocol::Responses => b"response.completed",
            Protocol::Anthropic => b"message_stop",
            Protocol::Gemini => b"finishReason",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Pii {
    Auto,
    On,
    Off,
}

#[derive(Clone)]
pub(super) struct Opts {
    pub(super) quick: bool,
    pub(super) protocols: Vec<Protocol>,
    pub(super) duration: Duration,
    pub(super) warmup: Duration,
    pub(super) concurrency: usize,
    pub(super) rate: u64,
    pub(super) paced_connections: usize,
    pub(super) gap: Duration,
    pub(super) streams: Vec<usize>,
    pub(super) pii: Pii,
    pub(super) rss: bool,
    /// Content deltas per answer (~27 bytes of text each).
    pub(super) deltas: usize,
    /// Only the throughput phase: no paced latency phase, no RSS steps (long answers).
    pub(super) throughput_only: bool,
    /// Pause between the events of the open streams in the RSS steps.
    pub(super) rss_gap: Duration,
    /// nginx as the anchor (unless `--no-nginx`).
    pub(super) nginx: bool,
    /// The bare hyper relay (relay.rs) as the floor (unless `--no-relay`).
    pub(super) relay: bool,
    /// The never-reading-clients soak (`soak.streams` 0: no soak).
    pub(super) soak: Soak,
    /// Only the soak section: no protocol tables, no RSS steps (`--soak-only`).
    pub(super) soak_only: bool,
    /// guardwire's `limits.client_send_buffer_bytes` in the soak (0: the kernel's autotuning).
    pub(super) soak_send_buffer: usize,
    /// guardwire's `limits.client_notsent_lowat_bytes` in the soak (None: its default).
    pub(super) soak_notsent_lowat: Option<usize>,
    /// guardwire's `server.runtime` (`--runtime`; `None`: the build's default, and no
    /// `server:` key, so an older build without it runs too) and `server.workers`.
    pub(super) runtime: Option<String>,
    pub(super) workers: Option<usize>,
    /// Three more rows (`--limits`): the realistic pack with client keys, the same keys with
    /// `rpm_limit`, `tpm_limit` and `max_budget` counted in a local redis-server, and those
    /// with a session `cost_budget` validator too.
    pub(super) limits: bool,
}

impl Opts {
    /// The `server:` section every guardwire config of the run gets ("" without `--runtime`
    /// and `--workers`).
    pub(super) fn server_yaml(&self) -> String {
        let mut yaml = String::new();
        if let Some(r) = &self.runtime {
            yaml += &format!("  runtime: {r}\n");
        }
        if let Some(n) = self.workers {
            yaml += &format!("  workers: {n}\n");
        }
        if yaml.is_empty() {
            yaml
        } else {
            format!("server:\n{yaml}")
        }
    }

    /// The relay's runtime threads: guardwire's `--workers`, else one per core (guardwire's
    /// default).
    pub(super) fn relay_workers(&self) -> usize {
        self.workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// How the report names guardwire's runtime.
    pub(super) fn runtime_note(&self) -> String {
        format!(
            "guardwire `server.runtime`: {}, workers: {}",
            self.runtime
                .as_deref()
                .unwrap_or("the build's default (work_stealing)"),
            self.workers
                .map_or("one per core".to_owned(), |n| n.to_string())
        )
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: cargo bench --bench load -- [--quick] [--protocol chat|responses|anthropic|gemini|all]\n\
         \x20      [--duration SECS] [--concurrency N] [--rate REQ_PER_S] [--gap-ms MS]\n\
         \x20      [--streams 1,100,1000,5000] [--pii auto|on|off] [--no-rss]\n\
         \x20      [--deltas N] [--throughput-only] [--rss-gap-ms MS] [--no-nginx] [--no-relay]\n\
         \x20      [--soak N] [--soak-rate CLIENTS_PER_S] [--soak-ramp-ms MS] [--soak-send-ms MS]\n\
         \x20      [--soak-send-buffer BYTES] [--soak-notsent-lowat BYTES]\n\
         \x20      [--soak-key-limit N] [--soak-address-limit N] [--soak-source IPV4]\n\
         \x20      [--soak-only] [--no-soak]\n\
         \x20      [--runtime work_stealing|per_core] [--workers N]\n\
         env: GUARDWIRE_LOAD_PII=auto|on|off (same as --pii)"
    );
    std::process::exit(2)
}

pub(super) fn parse_opts() -> Opts {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let mut o = Opts {
        quick,
        protocols: vec![Protocol::Chat],
        duration: Duration::from_secs(if quick { 1 } else { 10 }),
        warmup: Duration::from_millis(if quick { 300 } else { 1000 }),
        concurrency: 64,
        rate: if quick { 250 } else { 1000 },
        paced_connections: 256,
        gap: Duration::from_millis(2),
        streams: if quick {
            vec![100, 1000]
        } else {
            vec![1000, 4000]
        },
        pii: match std::env::var("GUARDWIRE_LOAD_PII").as_deref() {
            Ok("on" | "1" | "true") => Pii::On,
            Ok("off" | "0" | "false") => Pii::Off,
            _ => Pii::Auto,
        },
        rss: true,
        deltas: 40,
        throughput_only: false,
        rss_gap: Duration::from_millis(20),
        nginx: true,
        relay: true,
        soak: Soak {
            streams: if quick { 100 } else { 1000 },
            send_ms: 10_000,
            rate: None,
            ramp: Duration::from_secs(2),
            key_limit: None,
            address_limit: None,
            source: None,
        },
        soak_only: false,
        soak_send_buffer: 0,
        soak_notsent_lowat: None,
        runtime: None,
        workers: None,
        limits: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().unwrap_or_else(|| usage());
        match a.as_str() {
            "--quick" => {}
            "--bench" => {} // cargo bench passes this to harness = false targets
            "--no-rss" => o.rss = false,
            "--no-nginx" => o.nginx = false,
            "--no-relay" => o.relay = false,
            "--limits" => o.limits = true,
            "--no-soak" => o.soak.streams = 0,
            "--soak" => o.soak.streams = val().parse().unwrap_or_else(|_| usage()),
            "--soak-send-ms" => o.soak.send_ms = val().parse().unwrap_or_else(|_| usage()),
            "--soak-rate" => {
                let r: f64 = val().parse().unwrap_or_else(|_| usage());
                if !(r > 0.0 && r.is_finite()) {
                    usage()
                }
                o.soak.rate = Some(r);
            }
            "--soak-ramp-ms" => {
                o.soak.ramp = Duration::from_millis(val().parse().unwrap_or_else(|_| usage()))
            }
            "--soak-key-limit" => {
                o.soak.key_limit = Some(val().parse().unwrap_or_else(|_| usage()))
            }
            "--soak-address-limit" => {
                o.soak.address_limit = Some(val().parse().unwrap_or_else(|_| usage()));
            }
            "--soak-source" => o.soak.source = Some(val().parse().unwrap_or_else(|_| usage())),
            "--soak-only" => {
                o.soak_only = true;
                o.rss = false;
                o.relay = false;
            }
            "--runtime" => {
                let r = val();
                if r != "work_stealing" && r != "per_core" {
                    usage()
                }
                o.runtime = Some(r);
            }
            "--workers" => o.workers = Some(val().parse().unwrap_or_else(|_| usage())),
            "--soak-send-buffer" => o.soak_send_buffer = val().parse().unwrap_or_else(|_| usage()),
            "--soak-notsent-lowat" => {
                o.soak_notsent_lowat = Some(val().parse().unwrap_or_else(|_| usage()));
            }
            "--rss-gap-ms" => {
                o.rss_gap =
                    Duration::from_secs_f64(val().parse::<f64>().unwrap_or_else(|_| usage()) / 1e3)
            }
            "--throughput-only" => {
                o.throughput_only = true;
                o.rss = false;
            }
            "--deltas" => {
                o.deltas = val().parse().unwrap_or_else(|_| usage());
                if o.deltas == 0 {
                    usage()
                }
            }
            "--protocol" => {
                o.protocols = match val().as_str() {
                    "chat" => vec![Protocol::Chat],
                    "responses" => vec![Protocol::Responses],
                    "anthropic" => vec![Protocol::Anthropic],
                    "gemini" => vec![Protocol::Gemini],
                    "all" => Protocol::ALL.to_vec(),
                    _ => usage(),
                }
            }
            "--duration" => {
                o.duration = Duration::from_secs_f64(val().parse().unwrap_or_else(|_| usage()))
            }
            "--concurrency" => o.concurrency = val().parse().unwrap_or_else(|_| usage()),
            "--rate" => o.rate = val().parse().unwrap_or_else(|_| usage()),
            "--gap-ms" => {
                o.gap =
                    Duration::from_secs_f64(val().parse::<f64>().unwrap_or_else(|_| usage()) / 1e3)
            }
            "--streams" => {
                o.streams = val()
                    .split(',')
                    .map(|s| s.trim().parse().unwrap_or_else(|_| usage()))
                    .collect()
            }
            "--pii" => {
                o.pii = match val().as_str() {
                    "auto" => Pii::Auto,
                    "on" => Pii::On,
                    "off" => Pii::Off,
                    _ => usage(),
                }
            }
            // Filters cargo passes through (e.g. `cargo bench -- foo`) are not ours: ignore.
            s if !s.starts_with("--") => {}
            _ => usage(),
        }
    }
    o
}
