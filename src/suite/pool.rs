//! The replay of a file on every core: this thread reads it line by line (a line at most
//! `--max-line-bytes`, so memory stays bounded however large the file), hands batches of lines
//! to a pool of workers over a bounded channel, and merges the workers' tallies at the end.

use super::report::progress::Progress;
use super::tally::Tally;
use super::{record, replay, EvalError, EvalOptions};
use crate::proxy::Runtime;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};

/// Lines handed to a worker at once (at most this many, or [`BATCH_BYTES`]).
const BATCH_LINES: usize = 256;
const BATCH_BYTES: usize = 4 << 20;

type Batch = Vec<(u64, Vec<u8>)>;

/// Replays `file` (`-`: standard input) under `rt`'s routes and policies.
pub fn replay_file(rt: &Runtime, file: &Path, opts: &EvalOptions) -> Result<Tally, EvalError> {
    let io = |error| EvalError::Io {
        path: file.display().to_string(),
        error,
    };
    let (input, size): (Box<dyn Read + Send>, Option<u64>) = if file.as_os_str() == "-" {
        (Box::new(std::io::stdin()), None)
    } else {
        let f = std::fs::File::open(file).map_err(io)?;
        let size = f.metadata().map(|m| m.len()).ok();
        (Box::new(f), size)
    };
    let jobs = opts
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .max(1);
    let k = opts.examples;
    let progress = Arc::new(Progress::new(size));
    let (tx, rx) = sync_channel::<Batch>(jobs * 2);
    let rx = Mutex::new(rx);
    let forced = opts.route.as_deref();
    let mut tally = Tally::new(k);
    for route in &rt.routes {
        if forced.is_none_or(|f| f == route.name) {
            tally.declare(&route.policy);
        }
    }
    let read = std::thread::scope(|s| -> Result<(), EvalError> {
        let workers: Vec<_> = (0..jobs)
            .map(|_| s.spawn(|| work(rt, forced, &rx, k, &progress)))
            .collect();
        let ticker = progress.start(s);
        let mut reader = BufReader::with_capacity(1 << 20, input);
        let mut n = 0u64;
        let mut batch: Batch = Vec::new();
        let mut batch_bytes = 0;
        let mut result = Ok(());
        loop {
            let mut line = Vec::new();
            let got = match read_line(&mut reader, &mut line, opts.max_line_bytes) {
                Ok(got) => got,
                Err(e) => {
                    result = Err(io(e));
                    break;
                }
            };
            let Some((read, whole)) = got else { break };
            n += 1;
            progress.read(read as u64);
            tally.bytes += read as u64;
            if !whole {
                tally.add_invalid(
                    n,
                    format!(
                        "the line is longer than --max-line-bytes ({})",
                        opts.max_line_bytes
                    ),
                );
                continue;
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            batch_bytes += line.len();
            batch.push((n, line));
            if batch.len() >= BATCH_LINES || batch_bytes >= BATCH_BYTES {
                batch_bytes = 0;
                if tx.send(std::mem::take(&mut batch)).is_err() {
                    break;
                }
            }
        }
        if !batch.is_empty() {
            let _ = tx.send(batch);
        }
        drop(tx);
        for w in workers {
            match w.join() {
                Ok(t) => tally.merge(t),
                Err(_) => {
                    result = result.and(Err(EvalError::Setup(
                        "a replay worker failed (a bug: please report it)".into(),
                    )))
                }
            }
        }
        progress.stop(ticker);
        result
    });
    read?;
    Ok(tally)
}

/// One worker: batches until the channel closes, into a tally of its own.
fn work(
    rt: &Runtime,
    forced: Option<&str>,
    rx: &Mutex<Receiver<Batch>>,
    k: usize,
    progress: &Progress,
) -> Tally {
    let mut tally = Tally::new(k);
    loop {
        let batch = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => break,
        };
        let Ok(batch) = batch else { break };
        let mut passed = 0;
        for (n, line) in &batch {
            let outcome = record::read(line, *n).and_then(|ex| replay::check(rt, forced, &ex, *n));
            match outcome {
                Ok(o) => {
                    if o.verdict == replay::Verdict::Passed {
                        passed += 1;
                    }
                    tally.add(&o);
                }
                Err(e) => tally.add_invalid(*n, e),
            }
        }
        progress.done(batch.len() as u64, passed);
    }
    tally
}

/// Reads one line (without its `\n`) into `line`, keeping at most `max` bytes. `None` at the
/// end of the input; else the bytes consumed and whether the line was kept whole (a longer
/// one is skipped to its end, never held in memory).
fn read_line(
    r: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<(usize, bool)>> {
    let mut consumed = 0usize;
    let mut whole = true;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((consumed > 0).then_some((consumed, whole)));
        }
        let (chunk, end) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if whole && line.len() + chunk.len() <= max {
            line.extend_from_slice(chunk);
        } else {
            whole = false;
            line.clear();
        }
        let used = end.unwrap_or(buf.len());
        r.consume(used);
        consumed += used;
        if end.is_some() {
            return Ok(Some((consumed, whole)));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lines_are_read_whole_or_skipped_past_the_limit() {
        let data = b"short\nthis one is too long\n\nlast";
        let mut r = BufReader::with_capacity(4, &data[..]);
        let mut got = Vec::new();
        loop {
            let mut line = Vec::new();
            match read_line(&mut r, &mut line, 8).unwrap() {
                None => break,
                Some((_, whole)) => got.push((String::from_utf8(line).unwrap(), whole)),
            }
        }
        assert_eq!(
            got,
            [
                ("short".to_owned(), true),
                (String::new(), false),
                (String::new(), true),
                ("last".to_owned(), true)
            ]
        );
    }
}
