//! The config's operational sections: reload, the admin endpoints, metrics labels, upstream
//! base URLs, timeouts and the log. (Limits have a file of their own: `limits.rs`.)

use super::{BaseUrl, Provider};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;

/// Live reload: the config file and every pack it names are re-read and swapped in atomically
/// when they change, on SIGHUP, or on `POST /admin/reload`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Reload {
    /// How often to look for changed files (modification time and size); 0 turns watching off.
    pub poll_ms: u64,
}

impl Default for Reload {
    fn default() -> Self {
        Reload { poll_ms: 2000 }
    }
}

/// How `serve` runs its connections (docs/architecture.md, "Runtime shapes"). Read at start.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Server {
    pub runtime: RuntimeShape,
    /// Threads serving clients; 0: one per available core.
    pub workers: usize,
}

/// The most `server.workers` accepted.
pub const MAX_WORKERS: usize = 1024;

impl Server {
    /// The threads that serve clients: `workers`, or one per available core.
    pub fn worker_count(&self) -> usize {
        match self.workers {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        }
    }
}

/// `server.runtime`: the shape of the threads that serve clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeShape {
    /// One multi-thread tokio runtime: a connection's tasks may run on any worker, idle
    /// workers steal queued tasks from busy ones.
    #[default]
    WorkStealing,
    /// One single-thread runtime per worker, each with its own `SO_REUSEPORT` listener on the
    /// same address (the kernel spreads connections by a hash of their addresses); a
    /// connection and everything it spawns stays on the worker that accepted it.
    PerCore,
}

/// The operators' endpoints. `POST /admin/reload` answers only when a token is set, and only to
/// `Authorization: Bearer <token>`. `/metrics` is served on `listen`; on the clients' listener
/// it (and `/admin/*`) needs the token, and without one is not served there at all.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admin {
    pub token: Option<String>,
    /// A listener of its own for the operators' endpoints (`/metrics`, `/admin/reload`,
    /// `/healthz`, `/readyz`; plain HTTP/1.1), where `/metrics` needs no token: keep it on
    /// loopback or a network only operators reach. Read at start.
    #[serde(default)]
    pub listen: Option<SocketAddr>,
}

/// What `/metrics` labels traffic with.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Model names the `model` label may take, besides those in `prices`; a model is labelled
    /// with the longest of them it starts with, else `other` (so the label stays bounded).
    #[serde(default)]
    pub models: Vec<String>,
}

/// Base URLs of the providers, by their key under `upstreams:`. The keys are the registered
/// protocols' providers' ([`Provider::upstream_keys`]: `openai`, `anthropic`, `gemini`), so a
/// protocol of a new provider brings its key; any other key is refused, naming it and the known
/// ones, as `deny_unknown_fields` would. An omitted provider's paths answer 404.
#[derive(Clone, Default)]
pub struct Upstreams(Vec<(&'static str, BaseUrl)>);

impl Upstreams {
    /// The configured base URL of `provider`.
    pub fn get(&self, provider: Provider) -> Option<&BaseUrl> {
        self.by_key(provider.upstream_key()?)
    }

    /// The configured base URL under `upstreams.<key>`.
    pub fn by_key(&self, key: &str) -> Option<&BaseUrl> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, url)| url)
    }
}

/// As a struct with one optional field per key would print (the config hash reads it).
impl fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Upstreams");
        for key in Provider::upstream_keys() {
            s.field(key, &self.by_key(key));
        }
        s.finish()
    }
}

impl<'de> Deserialize<'de> for Upstreams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = Upstreams;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("struct Upstreams")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Upstreams, A::Error> {
                let known = Provider::upstream_keys();
                let mut urls: Vec<(&'static str, Option<BaseUrl>)> = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let Some(&key) = known.iter().find(|k| **k == key) else {
                        return Err(de::Error::unknown_field(&key, known));
                    };
                    if urls.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::duplicate_field(key));
                    }
                    urls.push((key, map.next_value()?));
                }
                let urls = urls.into_iter().filter_map(|(k, url)| Some((k, url?)));
                Ok(Upstreams(urls.collect()))
            }
        }
        d.deserialize_struct("Upstreams", Provider::upstream_keys(), Keys)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// Connecting to the upstream (TCP + TLS).
    pub connect_ms: u64,
    /// From sending the request to the upstream's response headers (504 after).
    pub response_headers_ms: u64,
    /// Longest silence between two chunks of an upstream body.
    pub idle_ms: u64,
    /// Time a client has to send its request head (slow clients are cut off). A new connection
    /// must bring its first request head (TLS handshake and HTTP/2 preface included) within it;
    /// HTTP/1 also has it for each later head, from the end of the previous answer on.
    pub client_header_ms: u64,
    /// Time a client has to send its request body, from the end of its head (408 after). The
    /// in-flight permit is taken only once the body is in, so slow bodies do not hold one
    /// (only their share of `limits.max_buffered_request_bytes`).
    pub client_body_ms: u64,
    /// A client connection with no request in flight for this long is closed (HTTP/2 with a
    /// GOAWAY). For HTTP/1 the wait for the next head is also bounded by `client_header_ms`.
    pub client_idle_ms: u64,
    /// HTTP/2 keep-alive: a ping every this often; a peer that does not answer one within the
    /// same time is taken for dead and its connection closed. 0 turns pings off.
    pub client_ping_ms: u64,
    /// Longest a write to the client may stay blocked: the answer has bytes ready and the
    /// client takes none of them (nginx's `send_timeout`). The response then ends without
    /// more: the upstream request is cancelled, the permit released, the HTTP/1 connection
    /// closed or the HTTP/2 stream reset.
    pub client_send_ms: u64,
    /// Longest a whole exchange may take, streamed answer included (504, or an error frame).
    pub total_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect_ms: 10_000,
            response_headers_ms: 300_000,
            idle_ms: 120_000,
            client_header_ms: 30_000,
            client_body_ms: 60_000,
            client_idle_ms: 120_000,
            client_ping_ms: 30_000,
            client_send_ms: 60_000,
            total_ms: 900_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// A tracing filter (`info`, `guardwire=debug`, …); `RUST_LOG` wins when set.
    pub level: String,
    /// `text` or `json`.
    pub format: LogFormat,
    /// One JSON line per request on stdout (`"log":"access"`): route, status, duration,
    /// outcome, the validator that blocked, model, key id and tokens — never bodies or keys.
    pub access: bool,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            level: "info".into(),
            format: LogFormat::Text,
            access: false,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}
