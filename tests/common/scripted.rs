//! For the randomized stream tests: a fixed pseudo-random sequence, and a mock upstream that
//! answers each request with the stream the request itself carries, so one guardwire serves
//! thousands of different upstream answers.

use super::mock_upstream::{MockUpstream, Reply};
use std::time::Duration;

/// xorshift64*: a fixed, dependency-free sequence, so a failure names its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The text a request carries to have `stream` answered, split at `splits`: put it in the
/// prompt.
pub fn carried(stream: &[u8], splits: &[usize]) -> String {
    let hex: String = stream.iter().map(|b| format!("{b:02x}")).collect();
    let splits: Vec<String> = splits.iter().map(usize::to_string).collect();
    format!("HEX{hex} SPLITS{}", splits.join(","))
}

/// A mock upstream answering each request with the stream its prompt carries ([`carried`]).
pub async fn echo_upstream() -> MockUpstream {
    MockUpstream::start(|req| {
        let body = req.body_str();
        let field = |name: &str, ok: fn(char) -> bool| -> String {
            body.find(name)
                .map(|at| {
                    body[at + name.len()..]
                        .chars()
                        .take_while(|&c| ok(c))
                        .collect()
                })
                .unwrap_or_default()
        };
        let hex = field("HEX", |c| c.is_ascii_hexdigit());
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let splits: Vec<usize> = field("SPLITS", |c| c.is_ascii_digit() || c == ',')
            .split(',')
            .filter_map(|n| n.parse().ok())
            .collect();
        Reply::sse_split(&bytes, &splits, Duration::ZERO)
    })
    .await
}
