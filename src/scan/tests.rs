#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use proptest::prelude::*;

fn lit(p: &str, owner: u32, wb: bool) -> LiteralRule {
    LiteralRule {
        pattern: p.into(),
        owner,
        word_boundary: wb,
    }
}

fn rx(p: &str, owner: u32) -> RegexRule {
    RegexRule {
        hir: compile_hir(p).unwrap(),
        owner,
        exact: false,
    }
}

fn sample_set() -> &'static ScanSet {
    static SET: std::sync::OnceLock<ScanSet> = std::sync::OnceLock::new();
    SET.get_or_init(build_sample_set)
}

fn build_sample_set() -> ScanSet {
    ScanSet::new(
        Some(
            LiteralMatcher::new(&[
                lit("badword", 0, false),
                lit("Straße", 1, false),
                lit("café", 2, true),
                lit("ass", 3, true),
                lit("привет", 4, false),
            ])
            .unwrap(),
        ),
        build_forbidden(&[
            rx(r"\d{3}-\d{2}-\d{4}", 10),
            rx(r"(?i)\brouting number\b", 11),
            rx(r"\bAKIA[0-9A-Z]{6,}", 12),
        ])
        .unwrap(),
        None,
    )
}

/// Distinct (owner, end) hits, and each hit with the largest safe position reported before it.
type ScanResult = (Vec<(u32, u64)>, Vec<(Hit, u64)>);

/// Scans `pieces` in order.
fn scan(set: &ScanSet, pieces: &[&str]) -> ScanResult {
    let mut st = set.start();
    let mut hits = Vec::new();
    let mut seen = Vec::new();
    let mut max_safe = 0;
    for p in pieces {
        let before = hits.len();
        set.feed(&mut st, p, &mut hits);
        for h in &hits[before..] {
            seen.push((*h, max_safe));
        }
        let safe = set.safe_pos(&st);
        assert!(safe <= st.pos());
        max_safe = max_safe.max(safe);
    }
    let before = hits.len();
    set.finish(&mut st, &mut hits);
    for h in &hits[before..] {
        seen.push((*h, max_safe));
    }
    let mut verdict: Vec<(u32, u64)> = hits.iter().map(|h| (h.owner, h.end)).collect();
    verdict.sort_unstable();
    verdict.dedup();
    (verdict, seen)
}

fn owners(v: &[(u32, u64)]) -> Vec<u32> {
    let mut o: Vec<u32> = v.iter().map(|x| x.0).collect();
    o.dedup();
    o
}

#[test]
fn finds_literals_case_insensitively_in_any_script() {
    let set = sample_set();
    assert_eq!(owners(&scan(set, &["a BADWORD here"]).0), vec![0]);
    assert_eq!(
        owners(&scan(set, &["die STRASSE", " die STRAßE"]).0),
        vec![1]
    );
    assert_eq!(owners(&scan(set, &["ПРИВЕТ мир"]).0), vec![4]);
}

#[test]
fn word_boundaries_hold_for_non_ascii_neighbours() {
    let set = sample_set();
    assert_eq!(owners(&scan(set, &["un CAFÉ noir"]).0), vec![2]);
    assert!(scan(set, &["cafés"]).0.is_empty(), "é after is a word char");
    assert!(scan(set, &["décafé"]).0.is_empty());
    assert!(scan(set, &["passé"]).0.is_empty());
    assert!(scan(set, &["Ägass"]).0.is_empty());
    assert_eq!(owners(&scan(set, &["«ass»"]).0), vec![3]);
    assert_eq!(
        owners(&scan(set, &["caf", "é"]).0),
        vec![2],
        "end of text is a boundary"
    );
    assert!(scan(set, &["caf", "é", "s"]).0.is_empty());
}

#[test]
fn regex_matches_across_pieces_and_ascii_word_boundaries() {
    let set = sample_set();
    assert_eq!(owners(&scan(set, &["ssn 123-4", "5-6789 ok"]).0), vec![10]);
    assert_eq!(owners(&scan(set, &["my Routing ", "Number"]).0), vec![11]);
    assert!(scan(set, &["xrouting number"]).0.is_empty());
}

#[test]
fn a_waking_byte_put_back_to_rest_by_the_next_depends_on_the_byte_before() {
    // After a word character, `1a` matches; after a space or at the start it wakes the
    // automaton and the `a` puts it back to rest. Long pieces take the marked (vector) path,
    // short ones the scalar loop.
    let set = ScanSet::new(
        None,
        build_forbidden(&[rx(r"(?-u:\B)[0-9][a-z]", 7), rx(r"\b[A-Z]{2}[0-9]{2}", 8)]).unwrap(),
        None,
    );
    let filler = "plain words only, ".repeat(3);
    for (text, want) in [
        ("1a 1b Ab Cd 2024 x", vec![]),
        ("x1a", vec![7]),
        ("Ab AB12", vec![8]),
        ("AB1 x", vec![]),
        ("AB1x", vec![7]),
    ] {
        let long = format!("{filler}{text}");
        assert_eq!(owners(&scan(&set, &[text]).0), want, "{text:?}");
        assert_eq!(owners(&scan(&set, &[&long]).0), want, "{long:?}");
        let (a, b) = long.split_at(filler.len() + 1);
        assert_eq!(owners(&scan(&set, &[a, b]).0), want, "{a:?} + {b:?}");
    }
}

#[test]
fn idle_text_is_released_at_once() {
    let set = sample_set();
    let mut st = set.start();
    let mut hits = Vec::new();
    set.feed(&mut st, "hello world. ", &mut hits);
    assert_eq!(set.safe_pos(&st), st.pos());
    set.feed(&mut st, "bad", &mut hits);
    assert_eq!(set.safe_pos(&st), st.pos() - 3, "a literal prefix is held");
}

#[test]
fn empty_regex_is_refused() {
    assert!(matches!(
        build_forbidden(&[rx("x", 0), rx("a*", 1)]),
        Err((1, regex::RegexError::MatchesEmpty))
    ));
}

#[test]
fn trailing_repetitions_are_cut_for_existence() {
    let show = |p: &str| format!("{:?}", trim_for_existence(compile_hir(p).unwrap()));
    assert_eq!(show("ab{2,5}"), show("ab{2}"));
    assert_eq!(show("ab+c*"), show("ab"));
    assert_eq!(show("(?:x\\d+|y)"), show("(?:x\\d|y)"));
    assert_eq!(
        show("a+$"),
        show("a+$"),
        "nothing after an end anchor is cut"
    );
}

#[test]
fn counted_secret_patterns_stay_small_and_bounded() {
    let set = build_forbidden(&[
        rx(r"xox[baprs]-[A-Za-z0-9-]{10,48}", 0),
        rx(r"sk-(?:proj-)?[A-Za-z0-9_-]{20,}", 1),
        rx(r"AKIA[0-9A-Z]{16}", 2),
    ])
    .unwrap();
    let scan = ScanSet::new(None, set, None);
    let bytes = scan.memory_usage();
    assert!(bytes < 16 << 20, "{bytes} bytes");
    let mut st = scan.start();
    let mut hits = Vec::new();
    scan.feed(&mut st, "token xoxb-", &mut hits);
    scan.feed(&mut st, "123456789", &mut hits);
    assert!(hits.is_empty());
    scan.feed(&mut st, "0abc", &mut hits);
    assert_eq!(hits.first().map(|h| h.owner), Some(0));
}

/// Latest start of a match of `pattern` ending at `end` in `text`.
fn latest_start(pattern: &str, text: &str, end: usize) -> usize {
    thread_local! {
        static CACHE: std::cell::RefCell<std::collections::HashMap<String, ::regex::Regex>> =
            Default::default();
    }
    let anchored = CACHE.with(|c| {
        c.borrow_mut()
            .entry(pattern.to_owned())
            .or_insert_with(|| ::regex::Regex::new(&format!("^(?:{pattern})$")).unwrap())
            .clone()
    });
    (0..end)
        .rev()
        .filter(|&s| text.is_char_boundary(s))
        .find(|&s| anchored.is_match(&text[s..end]))
        .unwrap_or_else(|| panic!("no match of {pattern} ending at {end} in {text:?}"))
}

/// `text` cut at the positions of `cuts` (in any order) that fall inside it on character
/// boundaries.
fn split_at<'a>(text: &'a str, cuts: &[usize]) -> Vec<&'a str> {
    let mut cuts = cuts.to_vec();
    cuts.sort_unstable();
    let mut pieces = Vec::new();
    let mut last = 0;
    for c in cuts {
        if c > last && c < text.len() && text.is_char_boundary(c) {
            pieces.push(&text[last..c]);
            last = c;
        }
    }
    pieces.push(&text[last..]);
    pieces
}

fn check_split_invariants(text: &str, cuts: &[usize]) {
    let set = sample_set();
    let whole = scan(set, &[text]).0;
    let pieces = split_at(text, cuts);
    let (split, seen) = scan(set, &pieces);
    assert_eq!(split, whole, "pieces {pieces:?}");
    for (hit, safe_before) in seen {
        let start = match hit.start {
            Some(s) => s as usize,
            None => {
                let pat = match hit.owner {
                    10 => r"\d{3}-\d{2}-\d{4}",
                    12 => r"(?-u:\b)AKIA[0-9A-Z]{6}",
                    _ => r"(?i)(?-u:\b)routing number(?-u:\b)",
                };
                latest_start(pat, text, hit.end as usize)
            }
        };
        assert!(
            safe_before <= start as u64,
            "released up to {safe_before} before finding {hit:?} in {pieces:?}"
        );
    }
}

#[test]
fn every_two_way_split_matches_the_whole_text() {
    let samples = [
        "x badword y STRASSE café, ПРИВЕТ! 123-45-6789 routing number",
        "bbadwordd cafés «ass» bad-word caféass",
        "routing number123-45-6789café",
        "xAKIA123456 AKIAKIA12345Z AKIA12 AKIAAKIA1234567",
    ];
    for text in samples {
        for i in 0..=text.len() {
            for j in (i..=text.len()).step_by(3) {
                check_split_invariants(text, &[i, j]);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn any_split_gives_the_whole_texts_verdict(
        words in proptest::collection::vec(
            prop_oneof![
                Just("badword"), Just("BadWord"), Just("café"), Just("cafés"), Just("ass"),
                Just("passé"), Just("Straße"), Just("привет"), Just("123-45-6789"),
                Just("routing"), Just("number"), Just(" "), Just("é"), Just("x"), Just("-"),
                Just("1"), Just("\n"), Just("AKIA"), Just("AKIAKIA"), Just("Z9"), Just("QQQ"),
            ],
            0..24,
        ),
        cuts in proptest::collection::vec(0usize..200, 0..12),
    ) {
        let text: String = words.concat();
        let mut cuts = cuts;
        cuts.sort_unstable();
        check_split_invariants(&text, &cuts);
    }
}

#[test]
fn unbounded_patterns_hold_from_where_they_began() {
    let set = ScanSet::new(
        None,
        build_forbidden(&[rx("begin.*finish", 0)]).unwrap(),
        None,
    );
    let mut st = set.start();
    let mut hits = Vec::new();
    set.feed(&mut st, "ok ", &mut hits);
    assert_eq!(set.safe_pos(&st), 3);
    set.feed(&mut st, "begin ", &mut hits);
    assert_eq!(set.safe_pos(&st), 3);
    set.feed(&mut st, "and more", &mut hits);
    assert_eq!(set.safe_pos(&st), 3);
    set.feed(&mut st, " finish", &mut hits);
    assert_eq!(hits.len(), 0, "reported one byte late");
    set.finish(&mut st, &mut hits);
    assert_eq!(hits.len(), 1);
}

#[test]
fn regexes_that_do_not_fit_together_are_packed_into_few_dfas() {
    // Each of these is small alone; together the counted runs multiply past the budget.
    let rules: Vec<RegexRule> = [
        r"AIza[0-9A-Za-z_-]{35}",
        r"\b\d{3}-\d{2}-\d{4}\b",
        r"(?i)\bconfidential\b",
        r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}",
        r"ghp_[A-Za-z0-9]{36}",
        r"xox[baprs]-[A-Za-z0-9-]{10,48}",
    ]
    .iter()
    .enumerate()
    .map(|(i, p)| rx(p, i as u32))
    .collect();
    let set = build_forbidden(&rules).unwrap();
    assert!(
        set.prefixed.is_some(),
        "AIza, ghp_ and xox have literal prefixes"
    );
    assert!(set.dfas.len() <= 2, "{} DFAs", set.dfas.len());
    let scan = ScanSet::new(None, set, None);
    let mut hits = Vec::new();
    let mut st = scan.start();
    scan.feed(
        &mut st,
        "mail me: a.b@example.org, ssn 123-45-6789 ",
        &mut hits,
    );
    scan.finish(&mut st, &mut hits);
    scan.feed(&mut st, "AIza", &mut hits);
    let mut owners: Vec<u32> = hits.iter().map(|h| h.owner).collect();
    owners.sort_unstable();
    owners.dedup();
    assert_eq!(owners, vec![1, 3]);
}

#[test]
fn prefixed_patterns_hold_from_the_prefix_and_respect_look_behind() {
    let set = ScanSet::new(
        None,
        build_forbidden(&[rx(r"\bAKIA[0-9A-Z]{4}", 0)]).unwrap(),
        None,
    );
    let mut st = set.start();
    let mut hits = Vec::new();
    set.feed(&mut st, "key: AK", &mut hits);
    assert_eq!(set.safe_pos(&st), 5, "a prefix in progress is held");
    set.feed(&mut st, "IA12", &mut hits);
    assert_eq!(set.safe_pos(&st), 5, "a live thread is held from its start");
    set.feed(&mut st, "3", &mut hits);
    assert!(hits.is_empty());
    set.feed(&mut st, "4 and xAKIA1234 ", &mut hits);
    assert_eq!(
        hits.len(),
        1,
        "{hits:?}: the second has no word boundary before it"
    );
    assert_eq!(hits[0].start, Some(5));
    let mut st = set.start();
    let mut hits = Vec::new();
    set.feed(&mut st, "AKIA", &mut hits);
    set.feed(&mut st, "WXYZ", &mut hits);
    set.finish(&mut st, &mut hits);
    assert_eq!(
        hits.len(),
        1,
        "a match ending with the text is found at the end"
    );
}

/// Every (owner, start, end) a naive search finds for `rules` in `text`: the folded pattern
/// compared at every character boundary, ASCII case ignored, word boundaries checked by hand.
fn naive_literal_hits(rules: &[LiteralRule], text: &str) -> Vec<(u32, u64, u64)> {
    let folded = text::fold_str(text).to_ascii_lowercase();
    let mut out = Vec::new();
    for r in rules {
        let pat = text::fold_str(&r.pattern).to_ascii_lowercase();
        for (s, _) in folded.char_indices() {
            if !folded[s..].starts_with(&pat) {
                continue;
            }
            let e = s + pat.len();
            if r.word_boundary {
                let before = text[..s]
                    .chars()
                    .next_back()
                    .is_some_and(text::is_word_char);
                let after = text[e..].chars().next().is_some_and(text::is_word_char);
                if before || after {
                    continue;
                }
            }
            out.push((r.owner, s as u64, e as u64));
        }
    }
    out.sort_unstable();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// The filtered literal scan finds exactly what a naive search finds, for any split, and
    /// never releases text a match later covers. Small alphabets make matches, near misses and
    /// filter collisions frequent; the pattern count varies the filter's key lengths.
    #[test]
    fn filtered_literal_scan_equals_naive_search(
        patterns in proptest::collection::vec("[abAB é-]{1,7}", 1..40),
        text in "[abAB éÉ.-]{0,120}",
        cuts in proptest::collection::vec(0usize..130, 0..10),
    ) {
        let rules: Vec<LiteralRule> = patterns
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.is_empty())
            .map(|(i, p)| lit(p, i as u32, i % 3 == 0))
            .collect();
        prop_assume!(!rules.is_empty());
        // A regex with a literal prefix too, so that the two share one start filter.
        const PREFIXED: &str = r"(?i)ab-[ab]{2}";
        let set = ScanSet::new(
            Some(LiteralMatcher::new(&rules).unwrap()),
            build_forbidden(&[rx(PREFIXED, 1000)]).unwrap(),
            None,
        );
        let pieces = split_at(&text, &cuts);
        let (_, seen) = scan(&set, &pieces);
        let mut found: Vec<(u32, u64, u64)> = seen
            .iter()
            .filter(|(h, _)| h.owner < 1000)
            .map(|(h, _)| (h.owner, h.start.unwrap(), h.end))
            .collect();
        found.sort_unstable();
        found.dedup();
        prop_assert_eq!(&found, &naive_literal_hits(&rules, &text), "pieces {:?}", pieces);
        prop_assert_eq!(
            seen.iter().any(|(h, _)| h.owner == 1000),
            ::regex::Regex::new(PREFIXED).unwrap().is_match(&text),
            "pieces {:?}", pieces
        );
        for (hit, safe_before) in seen {
            prop_assert!(safe_before <= hit.start.unwrap(), "released past {:?}", hit);
        }
    }
}

/// Patterns for the differential regex test: written so that guardwire's dialect and the
/// `regex` crate read them alike (explicit ASCII word boundaries, no `\d`/`\w`/`\s`).
const DIFF_REGEXES: [&str; 9] = [
    r"(?i)(?-u:\b)confidential(?-u:\b)",
    r"(?-u:\b)AKIA[0-9A-Z]{4}",
    r"(?i)bearer +[a-z0-9]{3}",
    r"sk-[a-z]{2}",
    r"[0-9]{3}-[0-9]{2}",
    r"(?i)k[a-z]y=[0-9]",
    r"(?-u:\b)[0-9]{2}(?-u:\b)",
    r"(?-u:\b)[A-Z]{2}[0-9]",
    r"(?-u:\b)[a-z]+@[a-z]+\.[a-z]{2}",
];

#[test]
fn case_insensitive_keywords_get_one_prefix_and_no_dfa() {
    let rules: Vec<RegexRule> = DIFF_REGEXES[..4]
        .iter()
        .enumerate()
        .map(|(i, p)| rx(p, i as u32))
        .collect();
    let compiled = build_forbidden(&rules).unwrap();
    assert!(compiled.prefixed.is_some());
    assert!(compiled.dfas.is_empty(), "all four begin with a literal");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Which forbidden patterns occur, under any split, is what the `regex` crate says of the
    /// whole text; and nothing a match covers is released before the match is found.
    #[test]
    fn forbidden_regex_scan_agrees_with_the_regex_crate(
        words in proptest::collection::vec(
            prop_oneof![
                Just("confidential"), Just("CONFIDENTIAL"), Just("Confidentials"), Just("AKIA"),
                Just("akia"), Just("xAKIA"), Just("BEARER  "), Just("Bearer "), Just("sk-"),
                Just("SK-"), Just("ab"), Just("1"), Just("12"), Just("-"), Just(" "), Just("Z"),
                Just("key="), Just("K\u{212A}y="), Just("kay=3"), Just("é"), Just("@"),
                Just("a@b.cd"), Just("."), Just("AB"), Just("_"),
            ],
            0..40,
        ),
        cuts in proptest::collection::vec(0usize..400, 0..10),
    ) {
        let text: String = words.concat();
        let rules: Vec<RegexRule> =
            DIFF_REGEXES.iter().enumerate().map(|(i, p)| rx(p, i as u32)).collect();
        let set = ScanSet::new(None, build_forbidden(&rules).unwrap(), None);
        let pieces = split_at(&text, &cuts);
        let (verdict, seen) = scan(&set, &pieces);
        let mut found: Vec<u32> = verdict.iter().map(|v| v.0).collect();
        found.dedup();
        let expected: Vec<u32> = DIFF_REGEXES
            .iter()
            .enumerate()
            .filter(|(_, p)| ::regex::Regex::new(p).unwrap().is_match(&text))
            .map(|(i, _)| i as u32)
            .collect();
        prop_assert_eq!(found, expected, "text {:?} pieces {:?}", text, pieces);
        for (hit, safe_before) in seen {
            let start = hit.start.unwrap_or_else(|| {
                latest_start(DIFF_REGEXES[hit.owner as usize], &text, hit.end as usize) as u64
            });
            prop_assert!(safe_before <= start, "released past {:?} in {:?}", hit, pieces);
        }
    }
}

#[test]
fn addresses_are_found_from_their_at_sign_and_held_from_the_run_before_it() {
    let email = r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b";
    let compiled = build_forbidden(&[rx(email, 7)]).unwrap();
    assert_eq!(compiled.inner.len(), 1, "found from its `@`, not by a DFA");
    // An `@` that can be part of the run would look back over it at every `@`: left to a DFA.
    let runs_over_at = build_forbidden(&[rx(r"\b[a-z@]+@[a-z]+\.com", 8)]).unwrap();
    assert!(runs_over_at.inner.is_empty());
    let set = ScanSet::new(None, compiled, None);
    let mut st = set.start();
    let mut hits = Vec::new();
    set.feed(&mut st, "write to jo", &mut hits);
    assert_eq!(set.safe_pos(&st), 9, "the word could be a local part");
    set.feed(&mut st, "hn.doe", &mut hits);
    assert_eq!(set.safe_pos(&st), 9, "the run goes on across pieces");
    set.feed(&mut st, "@example.co", &mut hits);
    assert_eq!(set.safe_pos(&st), 9, "a live thread holds from the run");
    assert!(hits.is_empty());
    set.feed(&mut st, "m today!", &mut hits);
    assert_eq!(hits.iter().map(|h| h.owner).collect::<Vec<_>>(), vec![7]);
    assert_eq!(set.safe_pos(&st), st.pos(), "nothing in progress");
    // The word boundary before the run is judged from the byte kept from the earlier piece.
    let set = ScanSet::new(
        None,
        build_forbidden(&[rx(r"\b[a-z]+@[a-z]+\.[a-z]{2}", 7)]).unwrap(),
        None,
    );
    for (first, found) in [("x_jo", false), ("x jo", true), ("jo", true)] {
        let (verdict, _) = scan(&set, &[first, "hn@ex.co "]);
        assert_eq!(!verdict.is_empty(), found, "{first}");
    }
}
