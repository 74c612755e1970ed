#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod binary;
pub mod h2_frames;
pub mod mock_upstream;
pub mod openai_responses;
pub mod protocols;
pub mod proxy;
pub mod redis;
pub mod scripted;
pub mod sdk;
pub mod tls;
