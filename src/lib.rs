//! guardwire: a streaming guardrail proxy for LLM APIs.
// Two reviewed exceptions: heap.rs (a call to glibc's malloc_trim) and scan/simd/ (AVX-512 and
// AVX2 kernels: raw-pointer loads, gathers, and the calls into them after CPU feature detection).
#![deny(unsafe_code)]

pub mod audit;
pub mod budget;
pub mod capture;
pub mod config;
pub mod delta;
pub mod error;
pub mod evals;
pub mod heap;
pub mod judge;
pub mod metrics;
pub mod policy;
pub mod protocol;
pub mod proxy;
pub mod scan;
pub mod scoring;
pub mod server;
pub mod sse;
pub mod state;
pub mod suite;
pub mod telemetry;
pub mod tls;
pub mod upstream;
