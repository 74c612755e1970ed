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

// ---------------------------------------------------------------------------------------------
// Sentences

/// The count of `text`, checked to be the same for every split in two and char by char.
fn sentences(text: &str) -> u64 {
    let n = count_sentences(text);
    for i in boundaries(text) {
        let (a, b) = text.split_at(i);
        let mut st = SentenceState::new(u64::MAX);
        st.feed(a);
        st.feed(b);
        assert_eq!(st.finish(), n, "{text:?} split at {i}");
    }
    let mut st = SentenceState::new(u64::MAX);
    for c in chars(text) {
        st.feed(c);
    }
    assert_eq!(st.finish(), n, "{text:?} char by char");
    n
}

/// Feeds `pieces` against `max`; returns the violation and the highest safe_pos seen before it
/// was known.
fn feed_sentences(pieces: &[&str], max: u64) -> (Option<u64>, u64) {
    let mut st = SentenceState::new(max);
    let mut released = 0;
    for p in pieces {
        if st.feed(p).is_none() {
            let safe = st.safe_pos();
            assert!(safe <= st.pos());
            released = released.max(safe);
        }
    }
    st.finish();
    assert_eq!(st.safe_pos(), st.pos());
    (st.violation(), released)
}

#[test]
fn empty_and_whitespace_have_no_sentences() {
    assert_eq!(sentences(""), 0);
    assert_eq!(sentences(" \n\t\n\n  "), 0);
    assert_eq!(sentences("Hello"), 1);
    assert_eq!(sentences("  Hello  "), 1);
    assert_eq!(sentences("Hello."), 1);
    assert_eq!(sentences("..."), 1);
}

#[test]
fn terminators_and_runs() {
    assert_eq!(sentences("Hello. World."), 2);
    assert_eq!(sentences("Hello! World? Yes."), 3);
    assert_eq!(sentences("What?! Really?!! Yes..."), 3);
    assert_eq!(sentences("Wait... What now"), 2);
    assert_eq!(sentences("Wait… What now"), 2);
    assert_eq!(sentences("Trailing text without end. And more"), 2);
    assert_eq!(sentences("Hello.World"), 1);
    assert_eq!(sentences("Hi!!!Yes"), 1);
}

#[test]
fn ellipsis_and_dot_before_lowercase_continue() {
    assert_eq!(sentences("Wait... what now?"), 1);
    assert_eq!(sentences("Wait… what now?"), 1);
    assert_eq!(sentences("Wait…what"), 1);
    assert_eq!(sentences("Wait . . . what"), 1);
    assert_eq!(sentences("Wait . . . What"), 2);
    assert_eq!(sentences("The config.yaml. it is read first."), 1);
    // `!` and `?` always end.
    assert_eq!(sentences("Really? yes."), 2);
}

#[test]
fn decimals_urls_and_other_no_space_dots() {
    assert_eq!(sentences("Pi is 3.14. It is irrational."), 2);
    assert_eq!(sentences("Visit example.com today. Thanks"), 2);
    assert_eq!(sentences("Use e.g.x or v1.2.3 here."), 1);
    assert_eq!(sentences("It cost $5. Then it cost $6."), 2);
    assert_eq!(sentences("Version 2.0.1 is out. Update now."), 2);
}

#[test]
fn abbreviations() {
    assert_eq!(sentences("Dr. Smith met Mr. Jones. They talked."), 2);
    assert_eq!(sentences("DR. Who and MRS. Hudson met. Fine."), 2);
    assert_eq!(sentences("Apples, pears, etc. Are fruit."), 1);
    assert_eq!(sentences("Use a tool, e.g. A hammer. Or not."), 2);
    assert_eq!(sentences("Use a tool, i.e. A hammer."), 1);
    assert_eq!(sentences("At 5 p.m. Bob came. He sat."), 2);
    assert_eq!(sentences("The U.S. Army is large. It is."), 2);
    assert_eq!(
        sentences("Born Jan. 5 in St. Louis. Raised in Co. Cork."),
        2
    );
    assert_eq!(sentences("Acme Inc. Was founded. Then."), 2);
    assert_eq!(sentences("Smith et al. Found it. Good."), 2);
    // `(Dr.` : the bracket is not part of the word.
    assert_eq!(sentences("See (Dr. Who) today. Yes."), 2);
    // A word that merely ends like an abbreviation.
    assert_eq!(sentences("He wrote a memo. Then left."), 2);
    assert_eq!(sentences("Thanks, Mr.Smith. Bye."), 2);
}

#[test]
fn number_abbreviations_only_before_digits() {
    assert_eq!(sentences("Item No. 5 is here. Done."), 2);
    assert_eq!(sentences("See Fig. 3 for details. Done."), 2);
    assert_eq!(sentences("I said no. Then I left."), 2);
    assert_eq!(sentences("I said no. 5 people left."), 1);
    assert_eq!(sentences("A nice fig. A ripe one."), 2);
}

#[test]
fn initials() {
    assert_eq!(
        sentences("J. R. R. Tolkien wrote books. He was British."),
        2
    );
    assert_eq!(sentences("Č. Novák came. He left."), 2);
    assert_eq!(sentences("Plan B. Then nothing."), 1);
}

#[test]
fn quotes_and_brackets_after_terminators() {
    assert_eq!(sentences("He said \"Stop.\" Then he left."), 2);
    assert_eq!(sentences("He said “Stop!” Then he left."), 2);
    assert_eq!(sentences("(Really!) Yes."), 2);
    assert_eq!(sentences("She said 'hi.' he replied."), 1);
    assert_eq!(sentences("[Note.] Then \"Quoted?\")] Next."), 3);
    assert_eq!(sentences("Wow.\"x"), 1);
}

#[test]
fn lines_paragraphs_and_lists() {
    assert_eq!(sentences("Line one\nline two"), 1);
    assert_eq!(sentences("Line one\nLine two"), 1);
    assert_eq!(sentences("Line one.\nLine two."), 2);
    assert_eq!(sentences("Para one\n\npara two"), 2);
    assert_eq!(sentences("Para one\r\n\r\n  para two"), 2);
    assert_eq!(sentences("# Title\n\nBody text.\n\n\n"), 2);
    assert_eq!(sentences("Dr.\n\nSmith"), 2);
    assert_eq!(sentences("Para one\u{2029}para two"), 2);
    assert_eq!(sentences("- apples\n- pears"), 2);
    assert_eq!(sentences("* a\n* b\n  * c\n+ d\n• e"), 5);
    assert_eq!(sentences("Intro:\n- Item one.\n- Item two."), 3);
    assert_eq!(sentences("1. First.\n2. Second.\n10) Tenth"), 3);
    assert_eq!(sentences("Intro:\n1. First\n2. Second"), 3);
    assert_eq!(sentences("**Bold** text\n*emphasis* more\n-5 degrees"), 1);
    assert_eq!(sentences("The total is\n42 units. Ok"), 2);
    assert_eq!(sentences("Pi is\n3.14 today"), 1);
    assert_eq!(sentences("A list - with dashes - inline. Done"), 2);
    assert_eq!(sentences("1234567890. Not a marker"), 2);
}

#[test]
fn unicode_text() {
    assert_eq!(sentences("你好。我很好。谢谢！"), 3);
    assert_eq!(sentences("「你好。」他说。"), 2);
    assert_eq!(sentences("你好。 我很好"), 2);
    assert_eq!(sentences("Привет. Как дела? Хорошо."), 3);
    assert_eq!(sentences("¿Qué? Sí. ¡Claro!"), 3);
    assert_eq!(sentences("Great job 🎉. Next! 👍"), 3);
    assert_eq!(sentences("Ça va. Élodie est là."), 2);
    assert_eq!(sentences("Straße. Ölung."), 2);
}

#[test]
fn sentence_violation_is_the_first_char_of_sentence_max_plus_one() {
    let at = |text: &str, max| feed_sentences(&[text], max).0;
    assert_eq!(at("One. Two. Three.", 2), Some(10));
    assert_eq!(at("One. Two. Three.", 3), None);
    assert_eq!(at("One. Two.   ", 1), Some(5));
    assert_eq!(at("   ", 0), None);
    assert_eq!(at("  x", 0), Some(2));
    assert_eq!(at("Intro:\n- a\n- b", 2), Some(11));
    assert_eq!(at("Intro.\n- a", 1), Some(7));
    assert_eq!(at("你好。我很好。", 1), Some(9));
}

#[test]
fn sentence_hold_back_waits_only_for_list_markers() {
    let mut st = SentenceState::new(1);
    st.feed("Intro:\n-");
    assert_eq!(st.safe_pos(), 7);
    st.feed("x");
    assert_eq!(st.safe_pos(), 9);
    st.feed("\n12");
    assert_eq!(st.safe_pos(), 10);
    st.feed(".");
    assert_eq!(st.safe_pos(), 10);
    assert_eq!(st.feed(" Second"), Some(10));
    // Below the limit nothing is held.
    let mut st = SentenceState::new(5);
    st.feed("Intro:\n-");
    assert_eq!(st.safe_pos(), 8);
    // Whitespace after the last allowed sentence is released.
    let mut st = SentenceState::new(1);
    st.feed("Done.  \n");
    assert_eq!(st.safe_pos(), 8);
    assert_eq!(st.feed("Next"), Some(8));
}

const SENTENCE_SAMPLES: &[&str] = &[
    "Dr. Smith met Mr. Jones. They talked... then left! Why? Nobody knows.",
    "Intro:\n- Item one.\n- item two\n1. First\n2) Second.\n\npara",
    "J. R. R. Tolkien. 3.14 is pi. e.g. this. \"Quoted.\" (Bracket!) Ok",
    "你好。我很好！「是的。」 Привет… мир. Ünïcode 🎉. Done",
    "Wait . . . what? No. 5 and no. Then\n\n\n- x\n-y\n* z",
    "   \n\n  Leading space. Trailing space.   \n\n",
];

#[test]
fn every_split_keeps_sentence_counts_violations_and_hold_back() {
    for s in SENTENCE_SAMPLES {
        let n = sentences(s);
        for max in 0..=n {
            let (expected, _) = feed_sentences(&[s], max);
            let v = expected.unwrap_or(u64::MAX);
            if let Some(v) = expected {
                // Exactly `max` sentences before it, and it is where one starts.
                assert_eq!(count_sentences(&s[..v as usize]), max, "{s:?} max {max}");
                assert!(!s[v as usize..].starts_with(char::is_whitespace));
            }
            for i in boundaries(s) {
                let (a, b) = s.split_at(i);
                let (violation, released) = feed_sentences(&[a, b], max);
                assert_eq!(violation, expected, "{s:?} max {max} at {i}");
                assert!(released <= v, "{s:?} max {max} at {i}: released {released}");
            }
            let (violation, released) = feed_sentences(&chars(s), max);
            assert_eq!(violation, expected);
            assert!(released <= v);
        }
    }
}

fn sentence_text() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        "[a-z]{1,6}",
        "[A-Z][a-z]{0,5}",
        Just(" ".to_string()),
        Just("\n".to_string()),
        Just("\n\n".to_string()),
        "[.!?…]{1,3}",
        Just(". ".to_string()),
        "[\"'”’)\\]»」]",
        Just("- ".to_string()),
        Just("* ".to_string()),
        "[0-9]{1,3}[.)]? ?",
        "(Dr|Mr|etc|e\\.g|U\\.S|No|Fig|J)\\. ",
        "[。！？]",
        "[你好我很]{1,3}",
        "[ÉéÇçßΣσ]{1,2}",
        Just("🎉".to_string()),
    ];
    prop::collection::vec(fragment, 0..30).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn prop_sentences_split_anywhere(
        text in sentence_text(),
        cuts in prop::collection::vec(any::<usize>(), 0..10),
        max in 0u64..8,
    ) {
        let pieces = cut(&text, &cuts);
        let mut st = SentenceState::new(u64::MAX);
        for p in &pieces {
            st.feed(p);
        }
        prop_assert_eq!(st.finish(), count_sentences(&text));
        let (expected, _) = feed_sentences(&[&text], max);
        let (violation, released) = feed_sentences(&pieces, max);
        prop_assert_eq!(violation, expected);
        prop_assert!(released <= violation.unwrap_or(u64::MAX));
        if let Some(v) = violation {
            prop_assert_eq!(count_sentences(&text[..v as usize]), max);
        }
    }
}
