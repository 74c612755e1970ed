//! JSON held in a channel's text, as the reader that parses it reads it.
//!
//! An answer's text may be JSON an app parses (an agent's text part, a file declared
//! `application/json`, an answer asked for as JSON), and a tool call's arguments may hold a
//! string that is itself JSON the tool parses (`{"body":"{\"k\":\"sk-\\u0041…\"}"}`): its
//! escapes spell any character (`\u0020`, `\\u0041` one level down). The scanner reads the
//! text as written (arguments with their own escapes resolved, `json_text`); from the first
//! backslash on, a channel is also read by a second scanner — its state a copy of the first's
//! where that text began, as both read the same text up to there — through a chain of
//! decoders, each resolving every escape the one before it left (at most [`MAX_LEVELS`]).
//! Its hits block (positions mapped back through the chain) and its hold-back holds the
//! channel's text as the first scanner's does.

use crate::policy::json_text::JsonTextDecoder;
use crate::scan::{Hit, TextScan, TextScanState};
use std::borrow::Cow;

/// Levels of JSON held in JSON read decoded (as the conversation's JSON is read at
/// BeforeCall, `protocol/residual.rs`).
const MAX_LEVELS: usize = 8;

/// The second reading of a channel: decoders (each with the position, in the coordinates of
/// the text it reads, where it began) and the scanner over the last one's text.
#[derive(Debug)]
pub(super) struct EscapedReading {
    levels: Vec<(u64, JsonTextDecoder)>,
    scan: TextScanState,
}

impl EscapedReading {
    /// The reading begins at the channel's scanner position `at`, with that scanner's state.
    pub(super) fn new(scan: TextScanState, at: u64) -> Self {
        EscapedReading {
            levels: vec![(at, JsonTextDecoder::anywhere())],
            scan,
        }
    }

    /// Reads the channel's next text (as its first scanner read it); hits are pushed in the
    /// first scanner's positions.
    /// (A level whose piece holds no escape passes it on borrowed: no copy.)
    pub(super) fn feed(&mut self, scan: &TextScan, text: &str, hits: &mut Vec<Hit>) {
        let mut decoded: Option<String> = None;
        for (_, level) in &mut self.levels {
            if let Cow::Owned(out) = level.decode(decoded.as_deref().unwrap_or(text)) {
                decoded = Some(out);
            }
        }
        // A backslash in what the last decoder wrote opens one more level (whose text up to
        // here is the last one's: the scanner goes on over it).
        while self.levels.len() < MAX_LEVELS && has_escape(decoded.as_deref().unwrap_or(text)) {
            let mut level = JsonTextDecoder::anywhere();
            if let Cow::Owned(out) = level.decode(decoded.as_deref().unwrap_or(text)) {
                decoded = Some(out);
            }
            self.levels.push((self.scan.pos(), level));
        }
        let first = hits.len();
        scan.feed(
            &mut self.scan,
            decoded.as_deref().unwrap_or(text),
            hits,
            false,
        );
        self.mapped(&mut hits[first..]);
    }

    /// The end of the channel: escapes left unfinished are read as they came.
    pub(super) fn finish(&mut self, scan: &TextScan, hits: &mut Vec<Hit>) {
        let mut rest = String::new();
        for (_, level) in &mut self.levels {
            let mut out = level.decode(&rest).into_owned();
            out.push_str(&level.finish());
            rest = out;
        }
        let first = hits.len();
        scan.feed(&mut self.scan, &rest, hits, false);
        scan.finish(&mut self.scan, hits, false);
        self.mapped(&mut hits[first..]);
    }

    fn mapped(&self, hits: &mut [Hit]) {
        for h in hits {
            h.start = h.start.map(|s| self.first_pos(s));
            h.end = self.first_pos(h.end);
        }
    }

    /// The first scanner's position of this reading's position `pos`.
    fn first_pos(&self, mut pos: u64) -> u64 {
        for (base, level) in self.levels.iter().rev() {
            if pos >= *base {
                pos = base + level.raw_pos(pos - base);
            }
        }
        pos
    }

    /// Where a match of this reading could still start, in the first scanner's positions (a
    /// character split between deltas waits with what began it).
    pub(super) fn safe_pos(&self, scan: &TextScan) -> u64 {
        self.first_pos(scan.safe_pos(&self.scan))
    }

    /// Positions before the hold-back's will not be mapped again.
    pub(super) fn prune(&mut self, scan: &TextScan) {
        let mut pos = scan.safe_pos(&self.scan);
        for (base, level) in self.levels.iter_mut().rev() {
            if pos >= *base {
                level.prune(pos - *base);
                pos = *base + level.raw_pos(pos - *base);
            }
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
