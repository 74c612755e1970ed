//! Text a model reads but a person does not see: invisible code points used as a carrier.
//!
//! - **Tag characters.** U+E0020..U+E007E spell the ASCII characters U+0020..U+007E. No
//!   renderer shows them, but a model's tokenizer reads them as bytes the model was trained to
//!   read as that ASCII ("ASCII smuggling"): the view reads them as the ASCII they spell
//!   (decoded, not dropped: a phrase spelled in tags is the phrase to the model that gets it).
//!   The language tag U+E0001 and CANCEL TAG U+E007F say nothing and are dropped.
//! - **Variation selectors as bytes.** One selector after a character picks a glyph (an emoji's
//!   text or colour form) and reads as nothing. A run of two or more carries bytes ("emoji
//!   smuggling": VS1..VS16 are 0..15, VS17..VS256 are 16..255), which a model reads once it is
//!   told how; the run reads as those bytes decoded as UTF-8 (an invalid sequence as U+FFFD).
//!   The first selector of a run waits for the next character (one character of look-ahead);
//!   the bytes of an unfinished UTF-8 sequence wait for the rest (at most three).
//!
//! What a carrier spells goes through the rest of the view like text (an invisible character
//! it spells is dropped, a space folds), but is never markup: `*` spelled in tags is a star.
//! It is read twice: joined to the visible text around it (a word split between visible and
//! carried letters is one word to the model), and, when the run ends, alone as an aside
//! (`aside.rs`): the model reads the carried text as text of its own, so `nice` followed by a
//! carried `bluebird` holds the word `bluebird`, not only `nicebluebird`.

use super::chars::{selector_byte, tag_ascii};
use super::{Normalizer, Unit};

/// A carrier run's text is written as an aside at least this often (so a long run never
/// waits whole).
const MAX_CARRIED: usize = 256;

impl Normalizer {
    /// The carrier stage for one character: true when it was taken (a tag character or a
    /// variation selector). Any other character first ends a selector run.
    pub(super) fn carrier_char(
        &mut self,
        c: char,
        raw: u64,
        raw_end: u64,
        out: &mut String,
    ) -> bool {
        if let Some(byte) = selector_byte(c) {
            self.selectors.push(Unit {
                c: char::from(byte),
                raw,
                raw_end,
                exact: false,
            });
            self.selector_run = self.selector_run.saturating_add(1);
            if self.selector_run >= 2 {
                self.decode_selectors(false, out);
            }
            return true;
        }
        self.end_selector_run(out);
        if let Some(ascii) = tag_ascii(c) {
            self.carried_char(ascii, raw, raw_end, out);
            return true;
        }
        self.end_carried(out);
        false
    }

    /// A character a carrier spelled: into the view, and kept for the run's aside.
    fn carried_char(&mut self, c: char, raw: u64, raw_end: u64, out: &mut String) {
        self.carried.push(Unit {
            c,
            raw,
            raw_end,
            exact: false,
        });
        self.spelled_char(c, raw, raw_end, out);
        if self.carried.len() >= MAX_CARRIED {
            self.end_carried(out);
        }
    }

    /// Ends a carrier run: what it spelled, read alone, is an aside (when it says something).
    pub(super) fn end_carried(&mut self, out: &mut String) {
        let (Some(first), Some(last)) = (self.carried.first(), self.carried.last()) else {
            return;
        };
        let (raw, raw_end) = (first.raw, last.raw_end);
        let text: String = self.carried.iter().map(|u| u.c).collect();
        self.carried.clear();
        if text.chars().any(char::is_alphanumeric) {
            self.aside(&text, raw, raw_end, out);
        }
    }

    /// Ends a run of variation selectors: a lone selector reads as nothing; the unfinished
    /// bytes of a longer run read as U+FFFD.
    pub(super) fn end_selector_run(&mut self, out: &mut String) {
        if self.selector_run >= 2 {
            self.decode_selectors(true, out);
        }
        self.selectors.clear();
        self.selector_run = 0;
    }

    /// Writes the characters the waiting selector bytes spell (`end`: no more bytes follow).
    fn decode_selectors(&mut self, end: bool, out: &mut String) {
        while let Some(first) = self.selectors.first().copied() {
            let lead = first.c as u32 as u8;
            let need = match lead {
                0x00..=0x7F => 1,
                0xC2..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF4 => 4,
                _ => 0,
            };
            if need == 0 {
                self.selectors.remove(0);
                self.carried_char(char::REPLACEMENT_CHARACTER, first.raw, first.raw_end, out);
                continue;
            }
            let have = self.selectors.len().min(need);
            let bytes: Vec<u8> = self.selectors[..have]
                .iter()
                .map(|u| u.c as u32 as u8)
                .collect();
            match std::str::from_utf8(&bytes) {
                Ok(s) => {
                    let last = self.selectors[have - 1];
                    self.selectors.drain(..have);
                    if let Some(d) = s.chars().next() {
                        self.carried_char(d, first.raw, last.raw_end, out);
                    }
                }
                Err(e) if e.error_len().is_none() && !end => return,
                Err(e) => {
                    // The valid prefix is too short for a character: one U+FFFD per bad start.
                    let bad = e.valid_up_to().max(1);
                    let last = self.selectors[bad - 1];
                    self.selectors.drain(..bad);
                    self.carried_char(char::REPLACEMENT_CHARACTER, first.raw, last.raw_end, out);
                }
            }
        }
    }
}
