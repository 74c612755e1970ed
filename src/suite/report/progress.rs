//! Progress on standard error while a run goes: on a terminal, one line redrawn in place
//! (exchanges done, pass rate, rate, ETA from the bytes read of a file of known size);
//! otherwise a plain line every ten seconds.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

pub struct Progress {
    size: Option<u64>,
    started: Instant,
    read: AtomicU64,
    done: AtomicU64,
    passed: AtomicU64,
    stop: AtomicBool,
    tty: bool,
}

impl Progress {
    /// `size`: the input's length when known.
    pub fn new(size: Option<u64>) -> Progress {
        Progress {
            size,
            started: Instant::now(),
            read: AtomicU64::new(0),
            done: AtomicU64::new(0),
            passed: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            tty: std::io::stderr().is_terminal(),
        }
    }

    pub fn read(&self, bytes: u64) {
        self.read.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn done(&self, n: u64, passed: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
        self.passed.fetch_add(passed, Ordering::Relaxed);
    }

    /// The progress line as it stands.
    pub fn line(&self) -> String {
        let done = self.done.load(Ordering::Relaxed);
        let passed = self.passed.load(Ordering::Relaxed);
        let read = self.read.load(Ordering::Relaxed);
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let mut s = format!(
            "{done} exchanges, pass rate {}, {:.0}/s",
            super::percent(passed, done),
            done as f64 / secs
        );
        if let Some(size) = self.size.filter(|&s| s > 0) {
            let frac = read as f64 / size as f64;
            s.push_str(&format!(", {:.0}% read", frac * 100.0));
            if read > 0 && frac < 1.0 {
                let eta = secs * (1.0 - frac) / frac;
                s.push_str(&format!(", ETA {}", clock(eta)));
            }
        }
        s
    }

    /// Starts the thread that shows the progress.
    pub fn start<'s, 'e>(&'s self, scope: &'s Scope<'s, 'e>) -> ScopedJoinHandle<'s, ()> {
        scope.spawn(move || {
            let every = if self.tty {
                Duration::from_millis(250)
            } else {
                Duration::from_secs(10)
            };
            let mut last = Instant::now();
            while !self.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if last.elapsed() < every {
                    continue;
                }
                last = Instant::now();
                let mut err = std::io::stderr().lock();
                let _ = if self.tty {
                    write!(err, "\r\x1b[2K{}", self.line())
                } else {
                    writeln!(err, "progress: {}", self.line())
                };
                let _ = err.flush();
            }
            if self.tty {
                let _ = write!(std::io::stderr(), "\r\x1b[2K");
            }
        })
    }

    pub fn stop(&self, ticker: ScopedJoinHandle<'_, ()>) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = ticker.join();
    }
}

/// Seconds as `1h02m03s`, `2m03s` or `3s`.
fn clock(secs: f64) -> String {
    let s = secs.round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_rate_and_eta() {
        let p = Progress::new(Some(100));
        p.read(50);
        p.done(4, 3);
        let line = p.line();
        assert!(line.starts_with("4 exchanges, pass rate 75.0%"), "{line}");
        assert!(line.contains("50% read, ETA "), "{line}");
        assert_eq!(clock(3723.0), "1h02m03s");
        assert_eq!(clock(63.0), "1m03s");
    }
}
