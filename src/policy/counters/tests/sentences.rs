//! The sentence counter: counts, splits anywhere, the hold-back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

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
