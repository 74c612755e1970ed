//! guardwire: a streaming guardrail proxy for LLM APIs.
#![forbid(unsafe_code)]

pub mod audit;
pub mod config;
pub mod delta;
pub mod error;
pub mod metrics;
pub mod policy;
pub mod protocol;
pub mod proxy;
pub mod scan;
pub mod server;
pub mod sse;
pub mod tls;
