//! Strings read before, recognised by their bytes. A Responses answer's closing events repeat
//! its whole text (`output_text.done`, `content_part.done`, `output_item.done`,
//! `response.completed`), and the reader scanned each repeat in full — `"` and `\\` search,
//! control bytes, UTF-8 — though its bytes are those of the first.
//!
//! [`KnownStrings`] keeps a copy of each long string [`Skim::str_known`] read in full that had
//! no escape. Such a body has no `"`, `\\` or control character (`string_scan` refused or
//! stopped at each). So input that has, after an opening quote, exactly one of these bodies and
//! then a quote holds that very string: a scan would stop nowhere before that quote and
//! serde_json reads the same text. The reader compares the bytes (memcmp) instead of scanning
//! them; anything else — one byte that differs, the same text in another escape form, a longer
//! or shorter string — is read in full as before. The text delivered is the same borrowed
//! slice of the input either way, so nothing downstream changes: the guard still verifies each
//! repeat against what streamed.

use super::{Skim, Skimmed, Unsure};
use std::borrow::Cow;

/// Long escape-free string bodies read earlier in one stream, newest last.
#[derive(Default)]
pub struct KnownStrings {
    bodies: Vec<Box<[u8]>>,
    /// Their bytes in all.
    bytes: usize,
}

impl KnownStrings {
    /// Shorter strings are not kept: the reader's eight-byte steps scan them about as fast as
    /// they would be compared.
    const MIN_LEN: usize = 128;
    /// Enough for an answer's texts of each kind (message, reasoning, a few calls'
    /// arguments); older ones make room.
    const MAX_STRINGS: usize = 8;
    /// Memory per stream: at most this many bytes of copies (the load bench's answer keeps
    /// one ~1.3 KiB copy from its first closing event to its end).
    const MAX_BYTES: usize = 64 * 1024;

    /// Where the body that starts at `body` in `b` ends, if it is a known body followed by a
    /// closing quote.
    fn find(&self, b: &[u8], body: usize) -> Option<usize> {
        self.bodies.iter().rev().find_map(|known| {
            let end = body.checked_add(known.len())?;
            // The closing quote first: a string of another length costs no comparison.
            (b.get(end) == Some(&b'"') && b.get(body..end) == Some(&known[..])).then_some(end)
        })
    }

    /// Keeps a copy of `body`, an escape-free string body read in full, if it is long.
    fn remember(&mut self, body: &[u8]) {
        let len = body.len();
        if !(Self::MIN_LEN..=Self::MAX_BYTES).contains(&len) {
            return;
        }
        while self.bodies.len() >= Self::MAX_STRINGS || self.bytes + len > Self::MAX_BYTES {
            let oldest = self.bodies.remove(0);
            self.bytes -= oldest.len();
        }
        self.bytes += len;
        self.bodies.push(body.into());
    }
}

impl<'a> Skim<'a> {
    /// [`Skim::str`], recognising a string of `known` by its bytes; a long string without
    /// escapes that is read in full becomes known.
    pub fn str_known(&mut self, known: &mut KnownStrings) -> Skimmed<Cow<'a, str>> {
        if self.peek() == Some(b'"') {
            let body = self.i + 1;
            if let Some(end) = known.find(self.b, body) {
                // Valid UTF-8 (equal to a `str`'s bytes), but a `str` of the input is only had
                // by checking (~0.6 instructions per ASCII byte; the memcmp ~0.15).
                let text = std::str::from_utf8(&self.b[body..end]).map_err(|_| Unsure)?;
                self.i = end + 1;
                return Ok(Cow::Borrowed(text));
            }
        }
        let text = self.str()?;
        // Borrowed: no escape, hence (`string_scan`) no `"`, `\\` or control character. Kept
        // even if the input around it turns out to be unreadable: the body is what it is.
        if let Cow::Borrowed(plain) = text {
            known.remember(plain.as_bytes());
        }
        Ok(text)
    }

    /// `null` or [`Skim::str_known`].
    pub fn opt_str_known(&mut self, known: &mut KnownStrings) -> Skimmed<Option<Cow<'a, str>>> {
        if self.null() {
            Ok(None)
        } else {
            self.str_known(known).map(Some)
        }
    }
}

#[cfg(test)]
impl KnownStrings {
    /// How many strings are known.
    pub(crate) fn count(&self) -> usize {
        self.bodies.len()
    }
}

#[cfg(test)]
#[path = "known_tests.rs"]
pub(crate) mod tests;
