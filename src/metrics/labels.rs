//! The label sets of the proxy's core metric families, and the closed enums their label values
//! come from (each with the `&'static str` it is exposed as).

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: &'static str,
    /// The model asked for: one of the configured models, else `other`.
    pub model: &'static str,
    pub status: u16,
}

/// A latency's route and the model asked for (one of the configured models, else `other`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    pub route: &'static str,
    pub model: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabels {
    pub validator: String,
    pub phase: &'static str,
    pub route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: &'static str,
}

/// An exchange's traffic: the route, the model asked for (one of the configured models, else
/// `other`) and the client key (`none` without keys).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TrafficLabels {
    pub route: &'static str,
    pub model: &'static str,
    pub key_id: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub route: &'static str,
    pub model: &'static str,
    pub key_id: &'static str,
    /// `input` or `output`.
    pub kind: &'static str,
    /// `provider` (reported usage) or `estimated` (counted by guardwire's tokenizer).
    pub source: &'static str,
}

/// Spend's traffic labels, and whether its tokens were reported or estimated (`estimated` when
/// either count was).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SpendLabels {
    pub route: &'static str,
    pub model: &'static str,
    pub key_id: &'static str,
    pub source: &'static str,
}

/// A reference to provider-stored content in a request: route, protocol and what it refers to
/// (`previous_response`, `conversation`, `cached_content`, `file`, `url`, `prompt`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoredContextLabels {
    pub route: &'static str,
    pub protocol: &'static str,
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    pub result: ReloadResult,
}

/// How a config reload ended (a failed one keeps the running policy).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ReloadResult {
    Success,
    Failure,
}

impl ReloadResult {
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadResult::Success => "success",
            ReloadResult::Failure => "failure",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamErrorLabels {
    pub route: &'static str,
    pub kind: UpstreamErrorKind,
}

/// Why an exchange with the upstream failed.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum UpstreamErrorKind {
    /// Could not connect, or the request could not be sent.
    Connect,
    /// No response head within `timeouts.response_headers_ms`.
    Timeout,
    /// The body failed or was cut mid-way.
    Reset,
    /// Silence between chunks past `timeouts.idle_ms`.
    Idle,
    /// The exchange passed `timeouts.total_ms`.
    Total,
    /// A body or frame the protocol cannot read.
    Malformed,
    /// A `Content-Encoding` or charset guardwire cannot check.
    Encoded,
    /// The stream ended without its protocol's terminal event.
    Incomplete,
}

impl UpstreamErrorKind {
    pub const ALL: [UpstreamErrorKind; 8] = [
        UpstreamErrorKind::Connect,
        UpstreamErrorKind::Timeout,
        UpstreamErrorKind::Reset,
        UpstreamErrorKind::Idle,
        UpstreamErrorKind::Total,
        UpstreamErrorKind::Malformed,
        UpstreamErrorKind::Encoded,
        UpstreamErrorKind::Incomplete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamErrorKind::Connect => "connect",
            UpstreamErrorKind::Timeout => "timeout",
            UpstreamErrorKind::Reset => "reset",
            UpstreamErrorKind::Idle => "idle",
            UpstreamErrorKind::Total => "total",
            UpstreamErrorKind::Malformed => "malformed",
            UpstreamErrorKind::Encoded => "encoded",
            UpstreamErrorKind::Incomplete => "incomplete",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectedLabels {
    pub reason: RejectReason,
}

/// Which limit turned a client away.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum RejectReason {
    /// `limits.max_connections`: the connection was closed as it was accepted.
    Connections,
    /// `limits.max_concurrent_requests`: 503.
    ConcurrentRequests,
    /// `limits.max_buffered_request_bytes`: 503.
    RequestBytes,
    /// A key's `max_concurrent_requests`: 429.
    KeyConcurrency,
    /// `limits.max_concurrent_requests_per_client_address`: 429.
    AddressConcurrency,
    /// `limits.max_buffered_request_bytes_per_key`: 429.
    KeyRequestBytes,
    /// `limits.max_buffered_request_bytes_per_client_address`: 429.
    AddressRequestBytes,
    /// `limits.max_h2_streams`: an HTTP/2 stream over the cap, reset with `REFUSED_STREAM`.
    H2Streams,
}

impl RejectReason {
    pub const ALL: [RejectReason; 8] = [
        RejectReason::Connections,
        RejectReason::ConcurrentRequests,
        RejectReason::RequestBytes,
        RejectReason::KeyConcurrency,
        RejectReason::AddressConcurrency,
        RejectReason::KeyRequestBytes,
        RejectReason::AddressRequestBytes,
        RejectReason::H2Streams,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Connections => "max_connections",
            RejectReason::ConcurrentRequests => "max_concurrent_requests",
            RejectReason::RequestBytes => "max_buffered_request_bytes",
            RejectReason::KeyConcurrency => "key_max_concurrent_requests",
            RejectReason::AddressConcurrency => "max_concurrent_requests_per_client_address",
            RejectReason::KeyRequestBytes => "max_buffered_request_bytes_per_key",
            RejectReason::AddressRequestBytes => "max_buffered_request_bytes_per_client_address",
            RejectReason::H2Streams => "max_h2_streams",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClientTimeoutLabels {
    pub route: &'static str,
    pub deadline: ClientDeadline,
}

/// Which deadline ended a response whose client stopped taking it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ClientDeadline {
    /// A write stayed blocked for `timeouts.client_send_ms`.
    Send,
    /// `timeouts.total_ms` passed while a write was blocked.
    Total,
}

impl ClientDeadline {
    pub const ALL: [ClientDeadline; 2] = [ClientDeadline::Send, ClientDeadline::Total];

    pub fn as_str(self) -> &'static str {
        match self {
            ClientDeadline::Send => "send",
            ClientDeadline::Total => "total",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DroppedLabels {
    pub reason: DropReason,
}

/// Why guardwire dropped a client connection (closed it without a graceful end). `Unread`,
/// `Blocked`, and `Drain` when the connection's write stayed blocked through the drain's last
/// second, are clients that do not read, whose sockets are reset
/// (src/server/client_socket.rs); the others are closed with a FIN.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum DropReason {
    /// No request (or, HTTP/1, no next request head) within `timeouts.client_header_ms`.
    Header,
    /// Idle, but its last answer still unread `timeouts.client_send_ms` after the close began.
    Unread,
    /// Still open at the drain deadline (plus the error frames' flush time).
    Drain,
    /// HTTP/1: a write of an answer blocked for `timeouts.client_send_ms`, or still blocked at
    /// the stream's total deadline (also counted, by route, in `guardwire_client_timeouts_total`).
    Blocked,
}

impl DropReason {
    pub const ALL: [DropReason; 4] = [
        DropReason::Header,
        DropReason::Unread,
        DropReason::Drain,
        DropReason::Blocked,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Header => "header",
            DropReason::Unread => "unread",
            DropReason::Drain => "drain",
            DropReason::Blocked => "blocked",
        }
    }
}

/// Label values as their lowercase names.
macro_rules! label_value_as_str {
    ($($t:ty),*) => {$(
        impl EncodeLabelValue for $t {
            fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
                EncodeLabelValue::encode(&self.as_str(), encoder)
            }
        }
    )*};
}
label_value_as_str!(
    ReloadResult,
    UpstreamErrorKind,
    RejectReason,
    ClientDeadline,
    DropReason
);
