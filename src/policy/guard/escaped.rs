//! JSON held in a channel's text, as the reader that parses it reads it.
//!
//! An answer's text may be JSON an app parses (an agent's text part, a file declared
//! `application/json`, an answer asked for as JSON), and a tool call's arguments may hold a
//! string that is itself JSON the tool parses (`{"body":"{\"k\":\"sk-\\u0041…\"}"}`): its
//! escapes spell any character (`\u0020`, `\\u0041` one level down). The scanner reads the
//! text as written (arguments with their own escapes resolved, `json_text`); from the first
//! backslash on, a channel is also read through a chain of decoders, each resolving every
//! escape the one before it left (at most [`MAX_LEVELS`]), every level by a scanner of its own
//! — its state a copy of the level's before it where that level began, as both read the
//! same text up to there. Their hits block (positions mapped back through the chain) and
//! their hold-back holds the channel's text as the first scanner's does.

use crate::policy::json_text::JsonTextDecoder;
use crate::scan::{Hit, TextScan, TextScanState};
use std::borrow::Cow;

/// Levels of JSON held in JSON read decoded (as the conversation's JSON is read at
/// BeforeCall, `protocol/residual.rs`).
const MAX_LEVELS: usize = 8;

/// One level of the reading: the decoder that resolves the escapes the text before it left
/// (from `base`, a position in that text's coordinates) and the scanner over what it writes
/// — every level is read: a reader that parses the JSON once reads the first level, one that
/// parses what it got again the next (`C:\\forbidden` is `C:\forbidden` to the first, a form
/// feed and `orbidden` to the second).
#[derive(Debug)]
struct Level {
    base: u64,
    decoder: JsonTextDecoder,
    scan: TextScanState,
}

/// The second reading of a channel: its levels, the first decoding the channel's text.
#[derive(Debug)]
pub(super) struct EscapedReading {
    levels: Vec<Level>,
}

impl EscapedReading {
    /// The reading begins at the channel's scanner position `at`, with that scanner's state.
    pub(super) fn new(scan: TextScanState, at: u64) -> Self {
        EscapedReading {
            levels: vec![Level {
                base: at,
                decoder: JsonTextDecoder::anywhere(),
                scan,
            }],
        }
    }

    /// Reads the channel's next text (as its first scanner read it); hits are pushed in the
    /// first scanner's positions.
    /// (A level whose piece holds no escape passes it on borrowed: no copy.)
    pub(super) fn feed(&mut self, scan: &TextScan, text: &str, hits: &mut Vec<Hit>) {
        let mut input: Cow<str> = Cow::Borrowed(text);
        let mut k = 0;
        while k < self.levels.len() {
            let decoded = match self.levels[k].decoder.decode(&input) {
                Cow::Owned(out) => Cow::Owned(out),
                Cow::Borrowed(_) => input,
            };
            // A backslash in what the last level wrote opens one more level, its scanner a
            // copy of this one's where this piece begins (both read the same text up to
            // there).
            if k + 1 == self.levels.len() && k + 1 < MAX_LEVELS && has_escape(&decoded) {
                let level = Level {
                    base: self.levels[k].scan.pos(),
                    decoder: JsonTextDecoder::anywhere(),
                    scan: self.levels[k].scan.clone(),
                };
                self.levels.push(level);
            }
            let first = hits.len();
            scan.feed(&mut self.levels[k].scan, &decoded, hits, false);
            self.mapped(k, &mut hits[first..]);
            input = decoded;
            k += 1;
        }
    }

    /// The end of the channel: escapes left unfinished are read as they came.
    pub(super) fn finish(&mut self, scan: &TextScan, hits: &mut Vec<Hit>) {
        let mut rest = String::new();
        for k in 0..self.levels.len() {
            let level = &mut self.levels[k];
            let mut out = level.decoder.decode(&rest).into_owned();
            out.push_str(&level.decoder.finish());
            let first = hits.len();
            scan.feed(&mut level.scan, &out, hits, false);
            scan.finish(&mut level.scan, hits, false);
            self.mapped(k, &mut hits[first..]);
            rest = out;
        }
    }

    /// Hits of level `k`'s scanner, in the first scanner's positions.
    fn mapped(&self, k: usize, hits: &mut [Hit]) {
        for h in hits {
            h.start = h.start.map(|s| self.first_pos(k, s));
            h.end = self.first_pos(k, h.end);
        }
    }

    /// The first scanner's position of level `k`'s position `pos`.
    fn first_pos(&self, k: usize, mut pos: u64) -> u64 {
        for level in self.levels[..=k].iter().rev() {
            if pos >= level.base {
                pos = level.base + level.decoder.raw_pos(pos - level.base);
            }
        }
        pos
    }

    /// Where a match of this reading could still start, in the first scanner's positions (a
    /// character split between deltas waits with what began it).
    pub(super) fn safe_pos(&self, scan: &TextScan) -> u64 {
        (0..self.levels.len())
            .map(|k| self.first_pos(k, scan.safe_pos(&self.levels[k].scan)))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Positions before the hold-back's will not be mapped again (a level's decoder keeps
    /// what its own scanner and the levels after it may still map).
    pub(super) fn prune(&mut self, scan: &TextScan) {
        let mut need: Option<u64> = None;
        for level in self.levels.iter_mut().rev() {
            let own = scan.safe_pos(&level.scan);
            let pos = need.map_or(own, |n| n.min(own));
            need = Some(if pos >= level.base {
                level.decoder.prune(pos - level.base);
                level.base + level.decoder.raw_pos(pos - level.base)
            } else {
                pos
            });
        }
    }
}

/// Whether `text` holds a JSON escape (a backslash before what may follow one; at the end of
/// the text, before what is still to come).
pub(super) fn has_escape(text: &str) -> bool {
    let bytes = text.as_bytes();
    memchr::memchr_iter(b'\\', bytes).any(|i| {
        bytes.get(i + 1).is_none_or(|b| {
            matches!(
                b,
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' | b'u'
            )
        })
    })
}
