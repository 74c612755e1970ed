//! The token counter: the split rule, counts like the whole text, the hold-back; the sentence
//! counter's tests are in tests/sentences.rs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Tokens

const TOKEN_SAMPLES: &[&str] = &[
    "",
    " ",
    "Hello, world! This is a test of the streaming token counter.",
    "  leading spaces,  double  spaces   and trailing   ",
    "Line one.\nLine two\n\n\nLine three:\r\n- item\n  - nested\n/path/to\n//comment\n",
    "fn main() {\n    let x = vec![1, 2, 3];\n    println!(\"{x:?}\");\n}\n",
    "Numbers: 1234567890 3.14159 1,000,000 2024-01-01 0x1F 1e-9",
    "Emoji 🎉🎉 and flags 🇫🇷🇩🇪, ZWJ 👩‍👩‍👧 family; skin 👍🏽.",
    "中文文本没有空格。日本語のテキスト、カタカナ。한국어 텍스트입니다.",
    "Ünïcödé façade naïve café — «quotes» and ‘single’ “double”.",
    "aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQ=/+aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQ=\n",
    "don't I'LL we've they'RE it's\tTabs\t\there . . . end...\n\n",
    "https://example.com/a/b?c=d&e=f#g mail@example.org C:\\path\\file.txt",
    "\u{a0}nbsp\u{a0}\u{2003}em space\u{3000}ideographic\u{85}nel\u{2028}ls",
    "x\n/y\n\n/z .\n.\n,\r\n\r\n\tq\n \n a",
];

fn counter() -> TokenCounter {
    TokenCounter::o200k().unwrap()
}

fn whole(tc: &TokenCounter, text: &str) -> u64 {
    tc.bpe.encode_ordinary(text).len() as u64
}

/// Feeds `pieces` and returns (total, violation, highest safe_pos seen before the violation was
/// known), checking that `safe_pos` never goes past what was fed.
fn feed_tokens(tc: &TokenCounter, pieces: &[&str], max: u64) -> (u64, Option<u64>, u64) {
    let mut st = TokenState::new(max);
    let mut released = 0;
    for p in pieces {
        if tc.feed(&mut st, p).is_none() {
            let safe = st.safe_pos();
            assert!(safe <= st.pos());
            released = released.max(safe);
        }
    }
    let total = tc.finish(&mut st);
    assert_eq!(st.pos(), pieces.iter().map(|p| p.len() as u64).sum::<u64>());
    assert_eq!(st.safe_pos(), st.pos());
    (total, st.violation(), released)
}

/// Char boundaries of `s`, including 0 and its length.
fn boundaries(s: &str) -> Vec<usize> {
    (0..=s.len()).filter(|&i| s.is_char_boundary(i)).collect()
}

fn chars(s: &str) -> Vec<&str> {
    s.char_indices()
        .map(|(i, c)| &s[i..i + c.len_utf8()])
        .collect()
}

/// Cuts `s` at the given byte offsets, moved down to char boundaries.
fn cut<'a>(s: &'a str, offsets: &[usize]) -> Vec<&'a str> {
    let mut at: Vec<usize> = offsets
        .iter()
        .map(|&o| floor_char_boundary(s, o % (s.len() + 1)))
        .collect();
    at.sort_unstable();
    let mut pieces = Vec::new();
    let mut from = 0;
    for a in at {
        pieces.push(&s[from..a]);
        from = a;
    }
    pieces.push(&s[from..]);
    pieces
}

/// The pre-tokenizer's pieces, from the pattern tiktoken uses.
fn pieces(re: &fancy_regex::Regex, text: &str) -> Vec<(usize, usize)> {
    re.find_iter(text)
        .map(|m| {
            let m = m.unwrap();
            (m.start(), m.end())
        })
        .collect()
}

fn o200k_regex() -> fancy_regex::Regex {
    fancy_regex::Regex::new(tiktoken_rs::O200K_BASE_PAT_STR).unwrap()
}

/// Every split point of the rule is a piece boundary of `text`, and cutting the text there
/// leaves the pieces before it unchanged: the two halves tokenize like the whole.
fn assert_split_rule(re: &fancy_regex::Regex, text: &str) {
    let all = pieces(re, text);
    let mut prev = None;
    for (q, y) in text.char_indices() {
        if prev.is_some_and(|x| is_token_split(x, y)) {
            let before: Vec<_> = all.iter().copied().filter(|p| p.1 <= q).collect();
            assert!(
                all.iter().any(|p| p.0 == q),
                "split at {q} inside a piece: {text:?}"
            );
            assert_eq!(pieces(re, &text[..q]), before, "cut at {q}: {text:?}");
        }
        prev = Some(y);
    }
}

/// True when cutting `text` at `q` keeps its pieces.
fn cut_keeps_pieces(re: &fancy_regex::Regex, text: &str, q: usize) -> bool {
    let mut halves = pieces(re, &text[..q]);
    halves.extend(
        pieces(re, &text[q..])
            .into_iter()
            .map(|(a, b)| (a + q, b + q)),
    );
    halves == pieces(re, text)
}

#[test]
fn split_rule_holds_for_the_o200k_pattern() {
    let re = o200k_regex();
    for s in TOKEN_SAMPLES {
        assert_split_rule(&re, s);
    }
    // The cases each rule exists for.
    for (x, y) in [
        ('a', ' '),
        ('.', '\t'),
        ('a', '\n'),
        ('7', '\r'),
        ('\n', 'a'),
        ('\n', '.'),
    ] {
        assert!(is_token_split(x, y), "{x:?} {y:?}");
    }
    // Cuts that change the pieces, which the rule must not allow.
    for (text, q) in [
        (".\n", 1),
        (".\n/", 2),
        ("a   b", 2),
        ("a \n", 2),
        ("\n\n", 1),
    ] {
        assert!(!cut_keeps_pieces(&re, text, q), "{text:?} at {q}");
        let (a, b) = text.split_at(q);
        let (x, y) = (a.chars().last().unwrap(), b.chars().next().unwrap());
        assert!(!is_token_split(x, y), "{text:?} at {q}");
    }
    let tc = counter();
    assert_ne!(whole(&tc, "a ") + whole(&tc, "  b"), whole(&tc, "a   b"));
}

#[test]
fn every_split_counts_like_the_whole_text() {
    let tc = counter();
    for s in TOKEN_SAMPLES {
        let expected = whole(&tc, s);
        assert_eq!(tc.count_whole(s), expected);
        for i in boundaries(s) {
            let (a, b) = s.split_at(i);
            assert_eq!(
                feed_tokens(&tc, &[a, b], u64::MAX).0,
                expected,
                "{s:?} at {i}"
            );
        }
        assert_eq!(feed_tokens(&tc, &chars(s), u64::MAX).0, expected, "{s:?}");
    }
}

#[test]
fn three_piece_splits_count_like_the_whole_text() {
    let tc = counter();
    for s in TOKEN_SAMPLES.iter().filter(|s| s.len() <= 90) {
        let expected = whole(&tc, s);
        for i in boundaries(s) {
            for j in boundaries(s).into_iter().filter(|&j| j >= i) {
                let pieces = [&s[..i], &s[i..j], &s[j..]];
                assert_eq!(
                    feed_tokens(&tc, &pieces, u64::MAX).0,
                    expected,
                    "{s:?} {i} {j}"
                );
            }
        }
    }
}

#[test]
fn pending_text_stays_small_in_prose_and_waits_for_a_split_point() {
    let tc = counter();
    let mut st = TokenState::new(u64::MAX);
    for _ in 0..1000 {
        tc.feed(&mut st, "lorem ipsum dolor ");
        assert!(st.pending.len() <= "dolor ".len(), "{:?}", st.pending);
    }
    // No split point: everything waits, nothing is encoded yet.
    let mut st = TokenState::new(u64::MAX);
    for _ in 0..100 {
        tc.feed(&mut st, "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo");
    }
    assert_eq!(st.committed(), 0);
    assert_eq!(st.pending.len(), 3500);
    let n = tc.finish(&mut st);
    assert_eq!(
        n,
        whole(&tc, &"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo".repeat(100))
    );
}

/// The start of token `max + 1` of the whole text, at a char boundary.
fn expected_violation(tc: &TokenCounter, text: &str, max: u64) -> Option<u64> {
    let tokens = tc.bpe.encode_ordinary(text);
    let max = max as usize;
    (tokens.len() > max).then(|| {
        let bytes = tc.bpe.decode_bytes(&tokens[..max]).unwrap().len();
        floor_char_boundary(text, bytes) as u64
    })
}

#[test]
fn token_violations_are_found_where_token_max_plus_one_starts_and_never_released() {
    let tc = counter();
    for s in TOKEN_SAMPLES {
        let total = whole(&tc, s);
        for max in (0..=total + 1).filter(|m| m % 3 == 0 || *m + 2 >= total) {
            let expected = expected_violation(&tc, s, max);
            for i in boundaries(s) {
                let (a, b) = s.split_at(i);
                let (_, violation, released) = feed_tokens(&tc, &[a, b], max);
                assert_eq!(violation, expected, "{s:?} max {max} at {i}");
                if let Some(v) = violation {
                    assert!(
                        released <= v,
                        "{s:?} max {max} at {i}: released {released} > {v}"
                    );
                }
            }
            let (_, violation, released) = feed_tokens(&tc, &chars(s), max);
            assert_eq!(violation, expected);
            assert!(released <= violation.unwrap_or(u64::MAX));
        }
    }
}

#[test]
fn token_hold_back_releases_what_fits_the_budget() {
    let tc = counter();
    let mut st = TokenState::new(5);
    // "one two three" so far: "one two" committed (2 tokens), " three" pending (6 bytes).
    assert_eq!(tc.feed(&mut st, "one two three"), None);
    assert_eq!(st.committed(), 2);
    assert_eq!(st.safe_pos(), 7 + 3);
    // " three four five" completes 5 tokens: at the limit, not over; " six" pends, with no budget.
    assert_eq!(tc.feed(&mut st, " four five six"), None);
    assert_eq!(st.committed(), 5);
    assert_eq!(st.safe_pos(), 23);
    assert_eq!(tc.finish(&mut st), 6);
    assert_eq!(st.violation(), Some(23));
    assert_eq!(st.safe_pos(), st.pos());
    // A long run without a split point is released as long as its bytes fit.
    let mut st = TokenState::new(100);
    tc.feed(&mut st, &"x".repeat(60));
    assert_eq!(st.safe_pos(), 60);
    tc.feed(&mut st, &"x".repeat(60));
    assert_eq!(st.safe_pos(), 100);
    assert_eq!(tc.finish(&mut st), whole(&tc, &"x".repeat(120)));
    // Never inside a character.
    let mut st = TokenState::new(2);
    tc.feed(&mut st, "🎉🎉");
    assert_eq!(st.safe_pos(), 0);
}

#[test]
fn o200k_loads_once() {
    let a = o200k().unwrap();
    let b = o200k().unwrap();
    assert!(Arc::ptr_eq(&a, &b));
}

/// Text mixing what tokenizers find hard: prose, code, numbers, emoji, CJK, whitespace runs and
/// long runs without spaces.
fn mixed_text() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        "[a-zA-Z]{1,12}",
        Just(" ".to_string()),
        Just("  ".to_string()),
        Just("\n".to_string()),
        Just("\n\n".to_string()),
        Just("\r\n".to_string()),
        Just("\t".to_string()),
        "[ \t\r\n]{1,5}",
        "[0-9]{1,12}",
        "[0-9]+\\.[0-9]+",
        "[.,;:!?()\\[\\]{}<>/\\\\'\"`~@#$%^&*=+_|-]{1,4}",
        "(fn|let|if|for|return) [a-z_]{1,8}\\(\\)",
        "[A-Za-z0-9+/]{20,200}",
        "[\u{4e00}-\u{4e40}]{1,30}",
        "[\u{3040}-\u{309f}]{1,10}",
        "[\u{1F600}-\u{1F64F}\u{1F389}\u{1F44D}\u{1F3FD}\u{200D}]{1,4}",
        "[àéîõüßçñøæ]{1,5}",
        "'(s|t|re|ve|m|ll|d|S|LL)",
        "[\u{a0}\u{2003}\u{3000}\u{85}\u{2028}\u{0301}]",
    ];
    prop::collection::vec(fragment, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn prop_split_rule_holds(text in mixed_text()) {
        assert_split_rule(&o200k_regex(), &text);
    }

    #[test]
    fn prop_tokens_count_like_the_whole_text(
        text in mixed_text(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
        max in 0u64..120,
    ) {
        let tc = counter();
        let pieces = cut(&text, &cuts);
        let (total, violation, released) = feed_tokens(&tc, &pieces, max);
        prop_assert_eq!(total, whole(&tc, &text));
        prop_assert_eq!(violation, expected_violation(&tc, &text, max));
        prop_assert!(released <= violation.unwrap_or(u64::MAX));
    }
}

mod sentences;
