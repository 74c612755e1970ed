//! The recogniser of known strings against the full read: a string is recognised only when
//! its bytes are a known body's and a closing quote, and [`Skim::str_known`] reads exactly
//! what [`Skim::str`] reads on any input.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::protocol::openai_chat::skim_tests::Rng;

/// A plain (escape-free) text of `len` bytes or a little more, with non-ASCII characters.
pub(crate) fn long_text(len: usize) -> String {
    let mut t = String::new();
    let words = ["garden ", "river ", "été ", "sun ", "水 ", "😀 "];
    let mut k = 0;
    while t.len() < len {
        t.push_str(words[k % words.len()]);
        k += 1;
    }
    t
}

/// A `KnownStrings` that read `text` (a JSON string literal) in full.
fn knowing(literal: &str) -> KnownStrings {
    let mut known = KnownStrings::default();
    let mut s = Skim::new(literal.as_bytes());
    s.str_known(&mut known).unwrap();
    known
}

/// `str_known` on `input` with `known`: the text, borrowed or not, and where it stopped; and
/// whether the known body was recognised (`find`).
fn read_known(known: &mut KnownStrings, input: &[u8]) -> (Option<(String, bool, usize)>, bool) {
    let recognised = input.starts_with(b"\"") && known.find(input, 1).is_some();
    let mut s = Skim::new(input);
    let r = s
        .str_known(known)
        .ok()
        .map(|t| (t.to_string(), matches!(t, Cow::Borrowed(_)), s.pos()));
    (r, recognised)
}

/// The full read of `input`.
fn read_full(input: &[u8]) -> Option<(String, bool, usize)> {
    let mut s = Skim::new(input);
    s.str()
        .ok()
        .map(|t| (t.to_string(), matches!(t, Cow::Borrowed(_)), s.pos()))
}

#[test]
fn a_long_plain_string_read_in_full_becomes_known() {
    let text = long_text(200);
    let known = knowing(&format!("\"{text}\""));
    assert_eq!(known.bodies.len(), 1);
    assert_eq!(&*known.bodies[0], text.as_bytes());
    // Short strings and strings with escapes are not kept.
    assert!(knowing("\"short\"").bodies.is_empty());
    let escaped = format!("\"{text}\\n\"");
    assert!(knowing(&escaped).bodies.is_empty());
}

#[test]
fn only_the_same_bytes_and_a_closing_quote_are_recognised() {
    let text = long_text(200);
    let cases = [
        // (input, recognised)
        (format!("\"{text}\",\"next\":1"), true),
        (format!("\"{text}\""), true),
        // The last byte differs.
        (format!("\"{}x\"", &text[..text.len() - 1]), false),
        // The same text, one character in another escape form.
        (format!("\"{}\\u0020\"", &text[..text.len() - 1]), false),
        (format!("\"\\u0067{}\"", &text[1..]), false),
        // Longer: the known body, then more (plain, escaped, or an escaped quote).
        (format!("\"{text}more\""), false),
        (format!("\"{text}\\n\""), false),
        (format!("\"{text}\\\"\""), false),
        // Shorter.
        (format!("\"{}\"", &text[..text.len() - 1]), false),
        // Cut off before the closing quote.
        (format!("\"{text}"), false),
        (format!("\"{}", &text[..10]), false),
    ];
    for (input, recognised) in cases {
        let mut known = knowing(&format!("\"{text}\""));
        let (got, found) = read_known(&mut known, input.as_bytes());
        assert_eq!(found, recognised, "{input}");
        assert_eq!(got, read_full(input.as_bytes()), "{input}");
        // A recognised string is not read in full (which would keep a second copy).
        if recognised {
            assert_eq!(known.count(), 1, "{input}");
        }
    }
    // A recognised string is the input's own bytes, borrowed, and reading goes on after it.
    let mut known = knowing(&format!("\"{text}\""));
    let input = format!(" \"{text}\" ,1");
    let mut s = Skim::new(input.as_bytes());
    let t = s.str_known(&mut known).unwrap();
    assert!(matches!(t, Cow::Borrowed(b) if b.as_ptr() == input[2..].as_ptr()));
    assert_eq!(s.pos(), text.len() + 3);
    assert_eq!(known.count(), 1);
}

#[test]
fn known_strings_are_few_and_bounded_in_bytes() {
    let mut known = KnownStrings::default();
    for k in 0..KnownStrings::MAX_STRINGS + 3 {
        known.remember(format!("{k:03} {}", long_text(200)).as_bytes());
    }
    assert_eq!(known.bodies.len(), KnownStrings::MAX_STRINGS);
    // The oldest made room: the newest is kept.
    assert!(known.bodies[KnownStrings::MAX_STRINGS - 1].starts_with(b"010 "));
    let big = long_text(KnownStrings::MAX_BYTES / 2 + 1);
    known.remember(big.as_bytes());
    known.remember(format!("x{big}").as_bytes());
    assert_eq!(known.bodies.len(), 1);
    assert!(known.bytes <= KnownStrings::MAX_BYTES);
    assert_eq!(
        known.bytes,
        known.bodies.iter().map(|b| b.len()).sum::<usize>()
    );
    // Longer than the bound: not kept at all.
    known.remember(long_text(KnownStrings::MAX_BYTES + 1).as_bytes());
    assert_eq!(known.bodies.len(), 1);
}

/// A known body kept or changed in one of the ways a repeat may differ: the new body (bytes
/// between the quotes; it may end the string early or not be UTF-8).
pub(crate) fn variant(rng: &mut Rng, body: &str) -> Vec<u8> {
    let b = body.as_bytes();
    let mut v = b.to_vec();
    let at = rng.below(b.len() as u64 + 1) as usize;
    let last = b.len().saturating_sub(1);
    match rng.below(8) {
        0 | 1 => {}
        2 if !v.is_empty() => v[at.min(last)] = rng.below(256) as u8,
        3 => v.insert(at, rng.below(256) as u8),
        4 => v.truncate(at),
        5 => v.extend_from_slice(["\\n", "\\\"", "x", "\\u00e9", "\""][at % 5].as_bytes()),
        6 if !v.is_empty() => {
            // One ASCII byte in a `\u` escape (the same text, another escape form).
            let at = at.min(last);
            if v[at].is_ascii() {
                let esc = format!("\\u{:04x}", v[at]);
                v.splice(at..=at, esc.bytes());
            }
        }
        _ => v.extend_from_slice(b"\",\"text\":\"more"),
    }
    v
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

    /// On any string after a known one — equal, a byte changed, inserted or cut, escaped,
    /// extended — the recogniser's read is the full read.
    #[test]
    fn str_known_reads_what_str_reads(seed in proptest::prelude::any::<u64>(), len in 0..400usize) {
        let mut rng = Rng(seed);
        let text = long_text(len);
        let mut known = knowing(&format!("\"{text}\""));
        let mut input = vec![b'"'];
        input.extend(variant(&mut rng, &text));
        // Closed or not, and what follows.
        input.extend_from_slice(&[b'"', b'}'][..rng.below(3) as usize]);
        let (got, _) = read_known(&mut known, &input);
        proptest::prop_assert_eq!(got, read_full(&input), "{}", String::from_utf8_lossy(&input));
    }
}
