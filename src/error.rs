//! The one place where failures become HTTP statuses. Each protocol renders the body in its own
//! provider's error shape ([`crate::protocol::Protocol::error_body`]).

use crate::state::limits::Limit;
use http::StatusCode;

/// Everything that can end a request with an error answer from guardwire itself.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    /// A guardrail blocked the request or the response.
    #[error("{message}")]
    Blocked { message: String },
    /// The client sent something guardwire cannot read (malformed JSON, wrong shape).
    #[error("{0}")]
    InvalidRequest(String),
    /// No valid client key (only when `keys` are configured).
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    /// A request body guardwire cannot read as its checks do (not JSON, or compressed).
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("request body larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// The client did not send its request body within `timeouts.client_body_ms`.
    #[error("the request body did not arrive within {ms} ms")]
    BodyTimeout { ms: u64 },
    /// The upstream could not be reached, refused, reset, or answered something unusable.
    #[error("{0}")]
    Upstream(String),
    #[error("{0}")]
    UpstreamTimeout(String),
    /// The upstream's stream ended without its protocol's terminal event: the answer was cut
    /// short, and must not pass for complete.
    #[error("the upstream's answer ended before it was complete")]
    UpstreamIncomplete,
    /// A stream held back more than the limit while a check was still undecided: failing
    /// closed, since releasing the text could leak a violation.
    #[error("the answer was held back past {limit} bytes while a guardrail check was undecided")]
    HoldbackExceeded { limit: usize },
    /// More requests in flight than `limits.max_concurrent_requests`: try again shortly.
    #[error("too many requests in flight; retry shortly")]
    Overloaded,
    /// Request bodies being held would pass `limits.max_buffered_request_bytes`: try again
    /// shortly.
    #[error("too many request bytes being read at once; retry shortly")]
    BufferFull,
    /// The caller's key has its `max_concurrent_requests` in flight, or holds its share of
    /// request-body bytes (`limits.max_buffered_request_bytes_per_key`): try again shortly.
    #[error("this key has too many requests or request bytes in flight; retry shortly")]
    KeyLimit,
    /// The client's address (or IPv6 /64) has `limits.max_concurrent_requests_per_client_address`
    /// requests in flight, or holds its share of request-body bytes
    /// (`limits.max_buffered_request_bytes_per_client_address`): try again shortly.
    #[error("this client address has too many requests or request bytes in flight; retry shortly")]
    AddressLimit,
    /// The caller's key is over its `rpm_limit`, `tpm_limit` or `max_budget`: 429, nothing sent
    /// upstream.
    #[error("{}", rate_limited_message(*limit))]
    RateLimited {
        limit: Limit,
        /// When a retry could pass (None: not while this budget lasts).
        retry_after_ms: Option<u64>,
    },
    /// The caller's key has limits over time, the state store cannot count them, and
    /// `state.on_error` is `fail_closed`: 503, nothing sent upstream.
    #[error("this key's limits cannot be counted right now; retry shortly")]
    StateUnavailable,
    /// guardwire is shutting down and its drain deadline passed.
    #[error("guardwire is shutting down; retry the request")]
    ShuttingDown,
    #[error("{0}")]
    Internal(String),
}

impl GatewayError {
    pub fn status(&self) -> StatusCode {
        match self {
            GatewayError::Blocked { .. }
            | GatewayError::InvalidRequest(_)
            | GatewayError::HoldbackExceeded { .. } => StatusCode::BAD_REQUEST,
            GatewayError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            GatewayError::NotFound(_) => StatusCode::NOT_FOUND,
            GatewayError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            GatewayError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            GatewayError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            GatewayError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            GatewayError::Upstream(_) | GatewayError::UpstreamIncomplete => StatusCode::BAD_GATEWAY,
            GatewayError::UpstreamTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            GatewayError::Overloaded
            | GatewayError::BufferFull
            | GatewayError::ShuttingDown
            | GatewayError::StateUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            GatewayError::KeyLimit
            | GatewayError::AddressLimit
            | GatewayError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            GatewayError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// OpenAI-style (`type`, `code`) pair; other protocols map these to their own vocabulary.
    pub fn type_and_code(&self) -> (&'static str, &'static str) {
        match self {
            GatewayError::Blocked { .. } => ("guardrail_violation", "content_blocked"),
            GatewayError::InvalidRequest(_) => ("invalid_request_error", "invalid_request"),
            GatewayError::Unauthorized(_) => ("invalid_request_error", "invalid_api_key"),
            GatewayError::NotFound(_) => ("invalid_request_error", "not_found"),
            GatewayError::MethodNotAllowed(_) => ("invalid_request_error", "method_not_allowed"),
            GatewayError::PayloadTooLarge { .. } => ("invalid_request_error", "request_too_large"),
            GatewayError::UnsupportedMediaType(_) => {
                ("invalid_request_error", "unsupported_media_type")
            }
            GatewayError::BodyTimeout { .. } => ("invalid_request_error", "request_timeout"),
            GatewayError::Upstream(_) => ("upstream_error", "upstream_unavailable"),
            GatewayError::UpstreamTimeout(_) => ("upstream_error", "upstream_timeout"),
            GatewayError::UpstreamIncomplete => ("upstream_error", "upstream_incomplete"),
            GatewayError::HoldbackExceeded { .. } => ("guardrail_violation", "holdback_exceeded"),
            GatewayError::Overloaded | GatewayError::BufferFull => ("server_error", "overloaded"),
            // As OpenAI answers a rate limit.
            GatewayError::KeyLimit | GatewayError::AddressLimit => {
                ("requests", "rate_limit_exceeded")
            }
            // As OpenAI answers its own rate limits and an exhausted quota.
            GatewayError::RateLimited { limit, .. } => match limit {
                Limit::Requests => ("requests", "rate_limit_exceeded"),
                Limit::Tokens => ("tokens", "rate_limit_exceeded"),
                Limit::Budget => ("insufficient_quota", "insufficient_quota"),
            },
            GatewayError::StateUnavailable => ("server_error", "state_unavailable"),
            GatewayError::ShuttingDown => ("server_error", "shutting_down"),
            GatewayError::Internal(_) => ("server_error", "internal_error"),
        }
    }
}

fn rate_limited_message(limit: Limit) -> &'static str {
    match limit {
        Limit::Requests => {
            "this key is over its rpm_limit (requests per minute); retry after the time retry-after gives"
        }
        Limit::Tokens => {
            "this key is over its tpm_limit (tokens per minute); retry after the time retry-after gives"
        }
        Limit::Budget => {
            "this key has spent its max_budget for the current budget_duration"
        }
    }
}

/// Why guardwire could not start, or why a reload was refused: the config, a pack, or a part of
/// the runtime built from them. Each message names the file or config key at fault.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] crate::config::error::ConfigError),
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    /// A pack list of the config: `origin` says which key named it, in which file.
    #[error("{origin}: {source}")]
    Packs {
        origin: String,
        source: crate::policy::PolicyError,
    },
    /// A part of the runtime built with the policies: the audit log, upstream base URLs,
    /// client keys, TLS.
    #[error("{0}")]
    Setup(String),
    #[error("upstream client setup failed: {0}")]
    Upstream(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
}
