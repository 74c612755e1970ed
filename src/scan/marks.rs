//! Per-piece bitmaps of the bytes that wake each regex automaton.
//!
//! Before the automata run over a piece, one vector pass ([`super::simd`]) can judge every
//! byte for all of them at once and leave one bit per position and automaton. An automaton then
//! jumps from one set bit to the next with a word scan instead of calling a search per gap,
//! and the kernel's setup (table loads) is paid once per piece, not once per gap. (The start
//! filter's candidates are sparser and are listed instead: [`super::gram::StartLists`].)

/// Number of 64-bit words a bitmap of `len` positions takes.
pub(super) fn words(len: usize) -> usize {
    len.div_ceil(64)
}

/// The first set position at or after `i` in `marks` (bit `p % 64` of word `p / 64` stands for
/// position `p`), or `max(i, len)` when there is none. Bits at or past `len` must be clear.
#[inline]
pub(super) fn next(marks: &[u64], i: usize, len: usize) -> usize {
    let mut w = i / 64;
    let Some(&first) = marks.get(w) else {
        return i.max(len);
    };
    let mut bits = first & (!0u64 << (i % 64));
    loop {
        if bits != 0 {
            return w * 64 + bits.trailing_zeros() as usize;
        }
        w += 1;
        match marks.get(w) {
            Some(&b) => bits = b,
            None => return i.max(len),
        }
    }
}

/// Clears the marks of bitmap `wake` (of `words` words in `marks`) at the positions set in
/// bitmap `first` whose next position is set in bitmap `second`: the waking bytes that the
/// byte after them puts back to rest (see `RegexMatcher::resting_pairs`). The last position
/// has no next one and keeps its mark.
pub(super) fn drop_resting(
    marks: &mut [u64],
    words: usize,
    wake: usize,
    first: usize,
    second: usize,
) {
    for w in 0..words {
        let next = marks[second * words..(second + 1) * words]
            .get(w + 1)
            .map_or(0, |&n| n << 63);
        let followed = (marks[second * words + w] >> 1) | next;
        marks[wake * words + w] &= !(marks[first * words + w] & followed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_next_set_position_across_words() {
        let mut marks = vec![0u64; words(200)];
        for p in [3, 64, 130, 199] {
            marks[p / 64] |= 1 << (p % 64);
        }
        assert_eq!(next(&marks, 0, 200), 3);
        assert_eq!(next(&marks, 3, 200), 3);
        assert_eq!(next(&marks, 4, 200), 64);
        assert_eq!(next(&marks, 65, 200), 130);
        assert_eq!(next(&marks, 131, 200), 199);
        assert_eq!(next(&marks, 200, 200), 200);
        assert_eq!(next(&marks, 250, 200), 250);
        assert_eq!(next(&[], 0, 0), 0);
    }

    #[test]
    fn resting_pairs_lose_their_mark_across_words() {
        let words = words(130);
        let set = |positions: &[usize]| {
            let mut bits = vec![0u64; words];
            for &p in positions {
                bits[p / 64] |= 1 << (p % 64);
            }
            bits
        };
        // Wakes at 5, 63, 100, 129; first bytes at 5, 63, 129; second bytes at 6, 64, 101.
        let mut marks = [
            set(&[5, 63, 100, 129]),
            set(&[5, 63, 129]),
            set(&[6, 64, 101]),
        ]
        .concat();
        drop_resting(&mut marks, words, 0, 1, 2);
        // 5 and 63 (followed across the word boundary) rest; 100 is not a first byte; 129 is
        // the last position.
        assert_eq!(marks[..words], set(&[100, 129])[..]);
    }
}
