//! What every matcher reports and reads: a match ([`Hit`]), and the channel text around a
//! position ([`Haystack`]). The lowest layer of the scanner: it uses no other scan module.

/// A match found by the scanner, in byte positions of its channel's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// The owner given with the rule at build time (guardwire uses the validator index).
    pub owner: u32,
    /// Start of the match, where known (literals, prefixed regexes, PII); forward DFAs only know
    /// where matches end.
    pub start: Option<u64>,
    /// End (exclusive) of the match.
    pub end: u64,
    /// What was found, for PII hits (the [`PiiKind::name`](super::PiiKind::name), e.g.
    /// `"email"`); `None` otherwise.
    pub rule: Option<&'static str>,
}

/// The channel text around a position: the history a matcher kept from earlier pieces and the
/// piece being fed.
#[derive(Clone, Copy)]
pub(super) struct Haystack<'a> {
    pub(super) history: &'a [u8],
    /// Channel position of `piece[0]`.
    pub(super) base: u64,
    pub(super) piece: &'a [u8],
}

impl Haystack<'_> {
    /// The byte at channel position `pos`, if the piece or the history reaches it.
    pub(super) fn at(&self, pos: u64) -> Option<u8> {
        if pos >= self.base {
            self.piece.get((pos - self.base) as usize).copied()
        } else {
            let back = (self.base - pos) as usize;
            self.history
                .len()
                .checked_sub(back)
                .map(|i| self.history[i])
        }
    }

    /// The byte before channel position `pos` (`None` at the start of the text).
    pub(super) fn before(&self, pos: u64) -> Option<u8> {
        self.at(pos.checked_sub(1)?)
    }
}
