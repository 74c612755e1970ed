//! guardwire: a streaming guardrail proxy for LLM APIs.
#![forbid(unsafe_code)]

pub mod delta;
pub mod scan;
pub mod sse;
pub mod policy;
pub mod error;
pub mod protocol;
