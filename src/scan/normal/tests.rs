#![allow(clippy::unwrap_used)]
use super::*;
use proptest::prelude::*;

/// Feeds `text` in pieces cut at the byte positions `cuts` (char boundaries only).
fn view_of(text: &str, cuts: &[usize], mode: Normalize) -> (String, Normalizer) {
    let mut n = Normalizer::new(mode);
    let mut out = String::new();
    let mut at = 0;
    for &c in cuts.iter().chain(std::iter::once(&text.len())) {
        if c < at || !text.is_char_boundary(c) {
            continue;
        }
        out.push_str(&n.feed(&text[at..c]));
        at = c;
    }
    out.push_str(&n.finish());
    (out, n)
}

fn full(text: &str) -> String {
    normalize_str(text, Normalize::Full)
}

#[test]
fn obfuscations_read_as_the_plain_text() {
    for obfuscated in [
        "forbid\u{200b}den fruit",
        "ｆｏｒｂｉｄｄｅｎ ｆｒｕｉｔ",
        "forbidden\u{a0}fruit",
        "f\u{43e}rbidden fruit",
        "forbid\u{ad}den fruit",
        "for\u{2060}bid\u{feff}den\u{3000}fruit",
        "\u{1d41f}\u{1d428}\u{1d42b}\u{1d41b}\u{1d422}\u{1d41d}\u{1d41d}\u{1d41e}\u{1d427} fruit",
        "forbidden\u{202f}fru\u{456}t",
        "forbidden fru\u{200d}it\u{e0041}",
        "forbi\u{fe0f}dden\u{2009}fruit",
    ] {
        assert_eq!(full(obfuscated), "forbidden fruit", "{obfuscated:?}");
    }
}

#[test]
fn single_script_words_are_left_alone() {
    for clean in [
        "Привет, как дела? Сок и вор.",
        "Καλημέρα κόσμε, ο ουρανός",
        "東京でラーメンを食べました",
        "مرحبا بالعالم",
        "Ünïcödé café naïve résumé",
    ] {
        let v = full(clean);
        let nfkd: String = clean
            .chars()
            .flat_map(|c| {
                let mut v = Vec::new();
                decompose_compatible(c, |d| v.push(d));
                v
            })
            .collect();
        // Only the final sigma changes (full case folding).
        assert_eq!(v, nfkd.replace('ς', "σ"), "{clean:?}");
    }
    assert_eq!(full("вор"), "вор");
    // Mixed: read as Latin.
    assert_eq!(
        full("в\u{6f}р"),
        normalize_pattern("вор", Normalize::Full)[1]
    );
}

#[test]
fn a_whitespace_run_reads_as_one_space() {
    for spaced in [
        "forbidden  fruit",
        "forbidden\tfruit",
        "forbidden\nfruit",
        "forbidden\r\n\r\nfruit",
        "forbidden \u{200b} fruit",
        "forbidden\u{2028}fruit",
        "forbidden\u{85}\u{3000} \tfruit",
    ] {
        assert_eq!(full(spaced), "forbidden fruit", "{spaced:?}");
        assert_eq!(
            normalize_str(spaced, Normalize::Nfkc),
            "forbidden fruit",
            "{spaced:?}"
        );
    }
    assert_eq!(normalize_str("a\n\nb", Normalize::None), "a\n\nb");
    // Across pieces, and mapped back: the match covers the whole raw run.
    let raw = "forbidden \n\tfruit";
    let (view, n) = view_of(raw, &[9, 10, 11], Normalize::Full);
    assert_eq!(view, "forbidden fruit");
    assert_eq!((n.raw_start(0), n.raw_end(15)), (0, raw.len() as u64));
    // A single space stays borrowed; one after a space does not.
    let mut n = Normalizer::new(Normalize::Full);
    assert!(matches!(n.feed("a b "), Cow::Borrowed(_)));
    assert_eq!(n.feed(" c"), "c");
}

#[test]
fn nfkc_mode_keeps_look_alikes() {
    assert_eq!(
        normalize_str("f\u{43e}rbidden", Normalize::Nfkc),
        "f\u{43e}rbidden"
    );
    assert_eq!(
        normalize_str("forbid\u{200b}den", Normalize::Nfkc),
        "forbidden"
    );
    assert_eq!(
        normalize_str("f\u{43e}rbidden", Normalize::None),
        "f\u{43e}rbidden"
    );
}

#[test]
fn marks_are_put_in_canonical_order() {
    // dot below (220) before acute (230), whichever way they came.
    assert_eq!(full("e\u{301}\u{323}x"), full("e\u{323}\u{301}x"));
    assert_eq!(full("é"), "e\u{301}");
}

#[test]
fn spans_map_back_to_the_raw_text() {
    let raw = "ab f\u{43e}rbid\u{200b}den\u{a0}x";
    let (view, n) = view_of(raw, &[], Normalize::Full);
    assert_eq!(view, "ab forbidden x");
    let start = view.find("forbidden").unwrap() as u64;
    let end = start + "forbidden".len() as u64;
    let (rs, re) = (n.raw_start(start), n.raw_end(end));
    assert_eq!(&raw[rs as usize..re as usize], "f\u{43e}rbid\u{200b}den");
    // The no-break space maps to itself.
    assert_eq!(n.raw_start(end), re);
    assert_eq!(n.raw_end(end + 1), re + 2);
    // A position inside a decomposition maps to the whole character.
    let raw = "ﬁne";
    let (view, n) = view_of(raw, &[], Normalize::Full);
    assert_eq!(view, "fine");
    assert_eq!((n.raw_start(1), n.raw_end(1)), (0, 3));
    assert_eq!((n.raw_start(2), n.raw_end(3)), (3, 4));
}

#[test]
fn a_mixed_word_waits_only_while_it_could_still_turn_latin() {
    let mut n = Normalizer::new(Normalize::Full);
    assert_eq!(n.feed("hello "), "hello ");
    assert_eq!(n.pending_start(), None);
    // Cyrillic letters at a word's start wait ...
    assert_eq!(n.feed("\u{441}\u{43e}"), "");
    assert_eq!(n.pending_start(), Some(6));
    // ... until a Latin letter shows the word is mixed.
    assert_eq!(n.feed("k"), "cok");
    assert_eq!(n.pending_start(), None);
    assert_eq!(n.feed(" \u{441}\u{43e}\u{43a} "), " \u{441}\u{43e}\u{43a} ");
}

#[test]
fn held_runs_are_bounded() {
    let long = "ж".repeat(1000);
    let mut n = Normalizer::new(Normalize::Full);
    let out = n.feed(&long);
    assert!(n.held.len() <= MAX_HELD);
    assert_eq!(out.len() + 2 * n.held.len(), long.len());
}

/// The ignorable list is Unicode's Default_Ignorable_Code_Point, as `unicode-security` has it
/// (a skeleton drops exactly those characters).
#[test]
fn ignorable_list_matches_unicode() {
    for u in 0x80..=0x10FFFFu32 {
        let Some(c) = char::from_u32(u) else { continue };
        let dropped = unicode_security::skeleton(c.encode_utf8(&mut [0; 4]))
            .next()
            .is_none();
        assert_eq!(is_ignorable(c), dropped, "U+{u:04X}");
    }
}

#[test]
fn latin_twins_cover_the_usual_look_alikes() {
    for (c, l) in [
        ('а', 'a'),
        ('е', 'e'),
        ('о', 'o'),
        ('р', 'p'),
        ('с', 'c'),
        ('х', 'x'),
        ('і', 'i'),
        ('ο', 'o'),
        ('А', 'A'),
        ('О', 'O'),
        ('ѕ', 's'),
    ] {
        assert_eq!(latin_twin(c), Some(l), "{c}");
    }
}

fn texts() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "a",
        "b",
        "f",
        "x",
        " ",
        "  ",
        "\n",
        "\t",
        "\r\n",
        ".",
        "é",
        "e",
        "\u{301}",
        "\u{323}",
        "\u{200b}",
        "\u{ad}",
        "\u{a0}",
        "\u{3000}",
        "о",
        "с",
        "ж",
        "ｆ",
        "ﬁ",
        "𝐟",
        "\u{fe0f}",
        "\u{e0041}",
        "1",
        "_",
        "__",
        "&",
        "&#",
        "102",
        "x66",
        ";",
        "&nbsp;",
        "&amp;",
        "*",
        "한",
        "東",
        "\u{2028}",
        "ς",
        "ǅ",
        "\u{1100}\u{1161}",
    ]);
    prop::collection::vec(pieces, 0..40).prop_map(|v| v.concat())
}

proptest! {
    /// Any split gives the view (and the map) of the whole text, and every view span maps to
    /// raw char boundaries in order.
    #[test]
    fn any_split_gives_the_whole_view(text in texts(), cuts in prop::collection::vec(0usize..200, 0..8), full_mode in any::<bool>()) {
        let mode = if full_mode { Normalize::Full } else { Normalize::Nfkc };
        let mut cuts = cuts;
        cuts.sort_unstable();
        let (whole, wn) = view_of(&text, &[], mode);
        let (split, sn) = view_of(&text, &cuts, mode);
        prop_assert_eq!(&whole, &split);
        let boundaries = (0..=whole.len()).filter(|&p| whole.is_char_boundary(p));
        let mut prev: Option<u64> = None;
        for p in boundaries.map(|p| p as u64) {
            prop_assert_eq!(wn.raw_start(p), sn.raw_start(p));
            prop_assert_eq!(wn.raw_end(p), sn.raw_end(p));
            prop_assert!(text.is_char_boundary(wn.raw_start(p) as usize));
            prop_assert!(text.is_char_boundary(wn.raw_end(p) as usize));
            if let Some(q) = prev {
                prop_assert!(wn.raw_start(q) <= wn.raw_start(p));
                prop_assert!(wn.raw_end(q) <= wn.raw_end(p));
            }
            prev = Some(p);
        }
    }

    /// A character at a time: the same view as the whole text.
    #[test]
    fn char_by_char_gives_the_whole_view(text in texts()) {
        let cuts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        prop_assert_eq!(view_of(&text, &cuts, Normalize::Full).0, full(&text));
    }
}

#[test]
fn latin_letters_that_render_as_ascii_read_as_it() {
    // Small capitals (a favourite of "fancy text" generators) and the dotless i.
    assert_eq!(full("ꜰᴏʀʙɪᴅᴅᴇɴ ꜰʀᴜɪᴛ"), "forbidden fruit");
    assert_eq!(full("forb\u{131}dden fru\u{131}t"), "forbidden fruit");
    // Letters of their own stay: Nordic, IPA.
    assert_eq!(full("ø æ ð þ"), "ø æ ð þ");
}

#[test]
fn full_case_folding_where_simple_folding_falls_short() {
    assert_eq!(full("Straße STRAẞE"), "Strasse STRAssE");
    assert_eq!(full("λόγος"), normalize_str("λόγοσ", Normalize::Full));
    assert_eq!(normalize_str("ß", Normalize::Nfkc), "ss");
    assert_eq!(normalize_str("ß", Normalize::None), "ß");
}

#[test]
fn regex_literals_and_small_classes_read_the_view() {
    let view_regex = |pattern: &str| {
        let hir = regex_syntax::parse(pattern).unwrap();
        regex_automata::meta::Regex::builder()
            .build_from_hir(&normalize_hir(&hir, Normalize::Full))
            .unwrap()
    };
    let text = full("alpha\n\n  beta, ｇａｍｍａ\tdelta");
    assert_eq!(text, "alpha beta, gamma delta");
    for pattern in [
        r"alpha\n\nbeta",
        r"alpha\s+beta",
        r"gamma[\t ]delta",
        "ｇａｍｍａ",
    ] {
        assert!(view_regex(pattern).is_match(&text), "{pattern}");
    }
    assert!(!view_regex(r"alpha\s{2}beta").is_match(&text));
}

#[test]
fn a_phrase_is_looked_for_with_any_of_its_words_mixed() {
    let forms = normalize_pattern("сок вор", Normalize::Full);
    // Each word of the text is read on its own: one mixed word, the other Cyrillic.
    for text in [
        "с\u{6f}к вор",
        "сок в\u{6f}р",
        "с\u{6f}к в\u{6f}р",
        "сок вор",
    ] {
        let view = full(text);
        assert!(
            forms.contains(&view),
            "{text:?} reads as {view:?}: {forms:?}"
        );
    }
    assert_eq!(forms.len(), 4);
    assert_eq!(
        normalize_pattern("forbidden fruit", Normalize::Full).len(),
        1
    );
    // A long phrase: its own form and the all-Latin one.
    assert_eq!(
        normalize_pattern("сок вор рок хор сор", Normalize::Full).len(),
        2
    );
}

#[test]
fn marks_that_decorate_a_letter_are_read_as_not_there() {
    // Strike-through, underline, "Zalgo" stacks.
    for decorated in [
        "f\u{336}o\u{336}r\u{336}b\u{336}i\u{336}d\u{336}d\u{336}e\u{336}n\u{336} fruit",
        "forbidden f\u{332}r\u{332}u\u{332}i\u{332}t\u{332}",
        "f\u{337}\u{322}o\u{334}\u{300}\u{35c}r\u{338}bidde\u{335}\u{301}\u{30f}n fru\u{35d}\u{31b}it",
    ] {
        assert_eq!(full(decorated), "forbidden fruit", "{decorated:?}");
    }
    // Letters Unicode has keep their marks, whichever way they came.
    for accented in ["café", "cafe\u{301}", "Việt", "ᾇ", "йод", "ǖ"] {
        let nfkd = normalize_str(accented, Normalize::Nfkc);
        assert_eq!(full(accented), nfkd, "{accented:?}");
    }
    // Marks on other scripts' letters are theirs (Arabic vowels, Devanagari signs).
    assert_eq!(full("كَتَبَ"), normalize_str("كَتَبَ", Normalize::Nfkc));
    assert_eq!(full("हिन्दी"), normalize_str("हिन्दी", Normalize::Nfkc));
}

#[test]
fn markdown_marks_are_read_as_a_rendered_answer_shows_them() {
    for marked in [
        "for**bid**den fruit",
        "*forbidden* ~~fruit~~",
        "`forbidden` **fruit**",
        "f*o*r*b*i*d*d*e*n fruit",
    ] {
        assert_eq!(full(marked), "forbidden fruit", "{marked:?}");
        // Split anywhere, the same view.
        for cut in 1..marked.len() {
            assert_eq!(
                view_of(marked, &[cut], Normalize::Full).0,
                "forbidden fruit"
            );
        }
    }
    assert_eq!(normalize_str("a*b", Normalize::Nfkc), "a*b");
    assert_eq!(full("snake_case"), "snake_case");
}

/// Every split of `text` gives `view` (and the whole text too).
fn assert_view_at_every_split(text: &str, view: &str) {
    assert_eq!(full(text), view, "{text:?}");
    for cut in (1..text.len()).filter(|&c| text.is_char_boundary(c)) {
        assert_eq!(
            view_of(text, &[cut], Normalize::Full).0,
            view,
            "{text:?} cut at {cut}"
        );
    }
}

#[test]
fn underscore_emphasis_at_a_word_edge_is_not_shown() {
    for marked in [
        "_forbidden_ fruit",
        "__forbidden__ __fruit__",
        "**_forbidden_** fruit",
        "_\u{200b}forbidden_\u{200b} fruit",
        "(_forbidden fruit_)",
        "forbidden _fruit_",
    ] {
        assert_view_at_every_split(marked, &full(&marked.replace('_', "")));
    }
    assert_view_at_every_split("_forbidden_ fruit", "forbidden fruit");
    // Inside a word, or between non-words, `_` is text, as Markdown renders it.
    for text in ["snake_case_name", "a _ b", "x__y", "_ _", "1_000_000"] {
        assert_view_at_every_split(text, text);
    }
    // A regex's literal keeps its `_` (it sits inside a word of the text it matches).
    assert_eq!(
        super::normalize_fragment("sk_live_", Normalize::Full),
        "sk_live_"
    );
    assert_eq!(full("sk_live_abc"), "sk_live_abc");
    // Only with `full`.
    assert_eq!(normalize_str("_forbidden_", Normalize::Nfkc), "_forbidden_");
}

#[test]
fn character_references_read_as_the_character_they_render() {
    for (text, view) in [
        ("&#102;orbidden fruit", "forbidden fruit"),
        ("&#x66;orbidden&nbsp;fruit", "forbidden fruit"),
        ("&#X66;orbidden&#32;fruit", "forbidden fruit"),
        ("forbid&shy;den fruit", "forbidden fruit"),
        ("forbid&ZeroWidthSpace;den fruit", "forbidden fruit"),
        ("&fopf;orbidden fruit", "forbidden fruit"),
        ("&#0000102;orbidden", "forbidden"),
        ("_&#102;orbidden_ fruit", "forbidden fruit"),
        // Decoded once: `&amp;` is `&`, and what follows it is text.
        ("&amp;#102;orbidden", "&#102;orbidden"),
        // A spelled `*` is a literal star, not emphasis.
        ("&#42;x&#42;", "*x*"),
        // Not references: no `;`, unknown names, too many digits, an empty number.
        ("&#102 orbidden", "&#102 orbidden"),
        ("AT&T; &bogus; &#; &#x; &", "AT&T; &bogus; &#; &#x; &"),
        ("&#12345678;", "&#12345678;"),
        // Code points no character has read as U+FFFD, as a browser shows them.
        (
            "&#0;&#xD800;&#x110000;&#x1100000;",
            "\u{fffd}\u{fffd}\u{fffd}&#x1100000;",
        ),
    ] {
        assert_view_at_every_split(text, view);
    }
    // A match on a spelled character maps to the whole reference.
    let text = "&#102;orbidden";
    let (view, n) = view_of(text, &[], Normalize::Full);
    assert_eq!(view, "forbidden");
    assert_eq!((n.raw_start(0), n.raw_end(1)), (0, 6));
    assert_eq!(n.raw_end(view.len() as u64), text.len() as u64);
    // Only with `full`.
    assert_eq!(normalize_str("&#102;", Normalize::Nfkc), "&#102;");
}
