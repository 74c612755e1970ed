//! What a reading recorded, character by character with each one's raw start, and how much
//! of it is held back (`join.rs`).

use super::super::aside::last_line_tail;

/// Raw bytes read past a reading's context beyond which that context is no longer held back
/// (the reading is still recorded and written: a match in it still blocks, after the part
/// before these bytes was released). Without a bound, text dense with constructs that chain
/// their readings (an element in doubt every few hundred bytes) would be held back whole.
pub(in crate::scan::normal) const MAX_HOLD: u64 = 4096;

/// Whether a reading whose context starts at raw `context_raw` is held back at raw `raw`.
pub(in crate::scan::normal) fn still_held(context_raw: u64, raw: u64) -> bool {
    raw.saturating_sub(context_raw) <= MAX_HOLD
}

/// The view's characters a reading recorded, with the raw start of each: a reading that goes
/// on from it (its last characters) is held back only from where those start, so readings
/// chained one after another hold back a bounded stretch, not everything since the first.
#[derive(Debug, Clone, Default)]
pub(in crate::scan::normal) struct Written {
    text: String,
    raws: Vec<u64>,
}

impl Written {
    pub(in crate::scan::normal) fn push(&mut self, c: char, raw: u64) {
        self.text.push(c);
        self.raws.push(raw);
    }

    pub(in crate::scan::normal) fn as_str(&self) -> &str {
        &self.text
    }

    /// Its text as the reading shows it: without its leading white space when `trim` (a
    /// break the browser does not show).
    pub(in crate::scan::normal) fn shown(&self, trim: bool) -> &str {
        if trim {
            self.text.trim_start_matches([' ', '\t'])
        } else {
            &self.text
        }
    }

    pub(in crate::scan::normal) fn len(&self) -> usize {
        self.text.len()
    }

    pub(in crate::scan::normal) fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.raws.capacity() * std::mem::size_of::<u64>()
    }
}

/// A reading so far — `context` (from raw `context_raw`) and then `after` (its leading white
/// space dropped when `trim`) — as the context of a reading that goes on from it: its last
/// line's tail, with the raw start of the tail's first character.
pub(in crate::scan::normal) fn reading_tail(
    context: &str,
    context_raw: u64,
    after: &Written,
    trim: bool,
) -> (String, u64) {
    let shown = after.shown(trim);
    let skipped = after.text[..after.text.len() - shown.len()].chars().count();
    let mut text = String::with_capacity(context.len() + shown.len());
    text.push_str(context);
    text.push_str(shown);
    let tail = last_line_tail(&text);
    let start = text.len() - tail.len();
    // A tail that starts in the context starts where the context does (a context is at most
    // a tail itself, so little more is held back); else at its first character's raw start
    // (the earliest of what follows: marks may be written out of their raw order).
    let raw = match start.checked_sub(context.len()) {
        Some(in_after) if in_after > 0 || context.is_empty() => {
            let first = skipped + shown[..in_after].chars().count();
            after.raws[first.min(after.raws.len())..]
                .iter()
                .copied()
                .min()
                .unwrap_or(context_raw)
                .max(context_raw)
        }
        _ => context_raw,
    };
    (tail.to_owned(), raw)
}
