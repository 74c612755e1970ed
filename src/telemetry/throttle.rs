//! Log lines a client can cause once per message (a verdict, a failing audit write) rate-limited
//! per call site and per reason: a token bucket for each, so one request's 85,000 verdicts
//! cannot write 85,000 lines, and one tenant's flood does not silence another's lines (their
//! reasons differ). The next line written says how many were left out (`suppressed`). Only
//! lines are limited: metrics and the audit log count every verdict.
//!
//! Reasons are hashed into [`SLOTS`] buckets, so memory stays fixed whatever the reasons are;
//! two reasons that share a bucket share its rate.

use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::Instant;

/// Buckets per call site.
pub const SLOTS: usize = 256;
/// Lines a bucket lets through at once.
pub const BURST: f64 = 20.0;
/// Lines a bucket lets through per second after its burst.
pub const PER_SECOND: f64 = 5.0;

/// One call site's buckets (a `static` beside the line it limits).
pub struct Throttle {
    slots: [Mutex<Bucket>; SLOTS],
}

struct Bucket {
    tokens: f64,
    last: Option<Instant>,
    suppressed: u64,
}

/// The verdict line of `proxy/report.rs`, by route, key and validator.
pub static VERDICTS: Throttle = Throttle::new();
/// Answers to an MCP server's blocked requests that could not be sent, by route.
pub static SERVER_REPLIES: Throttle = Throttle::new();
/// The audit log's write failures.
pub static AUDIT_WRITE: Throttle = Throttle::new();

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new()
    }
}

impl Throttle {
    pub const fn new() -> Throttle {
        Throttle {
            slots: [const {
                Mutex::new(Bucket {
                    tokens: BURST,
                    last: None,
                    suppressed: 0,
                })
            }; SLOTS],
        }
    }

    /// Calls `log` with the number of lines left out since the last one of `reason`'s bucket,
    /// if the bucket has a token; else counts this line as left out.
    pub fn allow<R: Hash + ?Sized>(&self, reason: &R, log: impl FnOnce(u64)) {
        let allowed = {
            let mut b = self.slots[slot(reason)]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            if let Some(last) = b.last {
                let refill = now.duration_since(last).as_secs_f64() * PER_SECOND;
                b.tokens = (b.tokens + refill).min(BURST);
            }
            b.last = Some(now);
            if b.tokens >= 1.0 {
                b.tokens -= 1.0;
                Some(std::mem::take(&mut b.suppressed))
            } else {
                b.suppressed += 1;
                None
            }
        };
        // The line is written outside the lock.
        if let Some(suppressed) = allowed {
            log(suppressed);
        }
    }
}

fn slot<R: Hash + ?Sized>(reason: &R) -> usize {
    let mut h = std::hash::DefaultHasher::new();
    reason.hash(&mut h);
    (h.finish() % SLOTS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(t: &Throttle, reason: &str, n: usize) -> Vec<u64> {
        let mut out = Vec::new();
        for _ in 0..n {
            t.allow(reason, |s| out.push(s));
        }
        out
    }

    #[test]
    fn a_burst_then_the_count_of_what_was_left_out() {
        let t = Throttle::new();
        let lines = written(&t, "a", 1000);
        // The burst, plus what refills while the loop runs (well under a second).
        assert!(
            lines.len() >= BURST as usize && lines.len() < 40,
            "{}",
            lines.len()
        );
        assert!(lines.iter().all(|&s| s == 0));
        // Another reason has its own bucket.
        let other = (0..100)
            .map(|i| format!("b{i}"))
            .find(|r| slot(r.as_str()) != slot("a"))
            .unwrap_or_default();
        assert_eq!(written(&t, &other, 5), vec![0; 5]);
        // Once a token is back, the next line carries the count of those left out.
        std::thread::sleep(std::time::Duration::from_millis(250));
        let next = written(&t, "a", 1);
        assert_eq!(next.len(), 1);
        assert!(next[0] >= 1000 - 40, "{next:?}");
    }
}
