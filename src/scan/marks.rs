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
}
