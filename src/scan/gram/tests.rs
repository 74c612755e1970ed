//! Tests of the scalar start filter ([`super::StartFilter`]) and its lists; the vector kernels
//! are compared with it in [`super::super::simd`]'s tests.

use super::*;

fn filter(starts: &[&[u8]]) -> Option<StartFilter> {
    StartFilter::new(&[&StartKeys::new(starts.iter().copied())])
}

#[test]
fn keys_are_the_bytes_from_a_position_zero_padded_past_the_end() {
    let text: Vec<u8> = (1..=20).collect();
    for len in 0..=text.len() {
        let bytes = &text[..len];
        for i in 0..len + 2 {
            let mut want = [0u8; 8];
            for (k, w) in want.iter_mut().enumerate() {
                *w = bytes.get(i + k).copied().unwrap_or(0);
            }
            assert_eq!(
                load8(bytes, i),
                u64::from_le_bytes(want),
                "len {len}, i {i}"
            );
        }
    }
}

#[test]
fn every_start_of_a_pattern_passes_in_any_case() {
    let f = filter(&[b"secret", b"ab", "straße".as_bytes()]).unwrap();
    assert_eq!(f.judged(b"abcdef"), 2, "five-byte keys need five bytes");
    let text = "xx SECRET Ab STRAẞE straSSe".as_bytes();
    let padded = [text, b"    "].concat();
    for i in [3, 10, 13] {
        assert_eq!(f.tags_at(&padded, i), 1, "position {i}");
    }
    let mut lists = StartLists::default();
    let judged = f.mark(&padded, &mut lists);
    assert_eq!(judged, padded.len(), "every position is judged");
    let mut starts = Starts::new(lists.row(0), judged);
    assert!(!starts.at(0));
    assert_eq!(starts.next(0), 3);
    assert_eq!(starts.next(4), 10);
    assert!(starts.at(10) && !starts.at(11));
    // No key begins in the trailing spaces.
    assert_eq!(Starts::new(lists.row(0), judged).next(judged - 4), judged);
}

#[test]
fn the_last_positions_are_judged_by_the_bytes_there_are() {
    let f = filter(&[b"secret", b"ab", b"xyz"]).unwrap();
    // "SEC" may go on as "secret", "a" as "ab", "xy" as "xyz"; "EC", "C", "y" and "ax"
    // cannot.
    for (piece, want) in [
        (&b"__SEC"[..], vec![2]),
        (b"__a", vec![2]),
        (b"__axy", vec![3]),
        (b"__ab", vec![2]),
        (b"xyz", vec![0]),
        (b"xyzab", vec![0, 3]),
    ] {
        let mut lists = StartLists::default();
        assert_eq!(f.mark(piece, &mut lists), piece.len());
        let got: Vec<usize> = lists.row(0).iter().map(|&p| p as usize).collect();
        assert_eq!(got, want, "{:?}", String::from_utf8_lossy(piece));
    }
}

#[test]
fn each_matcher_gets_its_own_list() {
    let words = StartKeys::new([&b"secret"[..], b"badword"]);
    let prefixes = StartKeys::new([&b"AKIA"[..], b"sk-"]);
    let f = StartFilter::new(&[&words, &prefixes]).unwrap();
    assert_eq!(f.tags(), 2);
    let text = b"a secret: sk-123 and AKIA0000, badword ok".as_slice();
    let mut lists = StartLists::default();
    let judged = f.mark(text, &mut lists);
    let all = |k: usize| -> Vec<usize> {
        let mut s = Starts::new(lists.row(k), judged);
        let mut at = Vec::new();
        let mut i = s.next(0);
        while i < judged {
            at.push(i);
            i = s.next(i + 1);
        }
        at
    };
    // Hash collisions could add positions; the real starts are always there.
    let (w, p) = (all(0), all(1));
    assert!(w.contains(&2) && w.contains(&31), "{w:?}");
    assert!(p.contains(&10) && p.contains(&21), "{p:?}");
    assert!(!w.contains(&10) && !p.contains(&2), "{w:?} {p:?}");
}

#[test]
fn most_positions_of_unrelated_text_are_rejected() {
    let words: Vec<String> = (0..1000).map(|i| format!("zq{i:04}x")).collect();
    let f = StartFilter::new(&[&StartKeys::new(words.iter().map(|w| w.as_bytes()))]).unwrap();
    let text = "the quick brown fox jumps over the lazy dog, again and again. ".repeat(50);
    let b = text.as_bytes();
    let passed = (0..b.len() - 3).filter(|&i| f.tags_at(b, i) != 0).count();
    assert!(
        passed * 20 < b.len(),
        "{passed} of {} positions passed",
        b.len()
    );
}

#[test]
fn an_empty_start_disables_the_filter() {
    assert!(filter(&[b"ok", b""]).is_none());
    assert!(filter(&[]).is_none());
}
