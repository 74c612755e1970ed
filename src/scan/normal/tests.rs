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
        // A language tag says nothing (tag characters that spell ASCII read as it: below).
        "forbidden fru\u{200d}it\u{e0001}",
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
            .filter(|&c| !is_shared_mark(c))
            .collect();
        // Only the final sigma changes (full case folding), and accents read as not there
        // (a person reads the letter under them: `marks_drawn_over_every_letter_…`).
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
    // Hebrew qamats (18) before dagesh (21), whichever way they came.
    assert_eq!(full("\u{5d1}\u{5bc}\u{5b8}x"), "\u{5d1}\u{5b8}\u{5bc}x");
    assert_eq!(full("\u{5d1}\u{5b8}\u{5bc}x"), "\u{5d1}\u{5b8}\u{5bc}x");
    // An accent over a Latin letter is read as not there.
    assert_eq!(full("é"), "e");
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
        // The reader's view: carriers, blanks, marks, bidi controls, inline markup.
        "\u{e0066}",
        "\u{e0020}",
        "\u{e0001}",
        "\u{fe01}",
        "\u{e0156}",
        "\u{e0172}",
        "\u{3164}",
        "\u{2800}",
        "\u{308}",
        "\u{202e}",
        "\u{202c}",
        "\u{2067}",
        "\u{2069}",
        "\u{200f}",
        "\u{5d0}",
        "<b>",
        "</b>",
        "<",
        ">",
        "<!--",
        "-->",
        "<?",
        "?>",
        "<!x",
        "<!-->",
        "--!>",
        "<script>",
        "</script>",
        "</",
        "</>",
        "<span title=\"",
        "\"",
        "[",
        "](",
        ")",
        "\\",
        "<https:",
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
            // The raw end never goes back (an aside's start may: it maps to where it came
            // from, and what is written again after it to the end of the aside).
            if let Some(q) = prev {
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
        // (A mark glued to a word is also read as the boundary it shows where it makes no
        // emphasis: that reading follows the view.)
        let view = full(marked);
        assert_eq!(view.lines().next(), Some("forbidden fruit"), "{marked:?}");
        // Split anywhere, the same view.
        for cut in 1..marked.len() {
            assert_eq!(view_of(marked, &[cut], Normalize::Full).0, view);
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
        // (The same readings as without the `_` runs, read as often or not.)
        let view = full(marked);
        let lines = |v: &str| {
            v.lines()
                .map(str::to_owned)
                .collect::<std::collections::BTreeSet<_>>()
        };
        assert_eq!(
            lines(&view),
            lines(&full(&marked.replace('_', ""))),
            "{marked:?}"
        );
        assert_view_at_every_split(marked, &view);
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
        // Without `;`, as a browser reads text: a numeric one whole, the longest legacy name.
        ("&#102 orbidden", "f orbidden"),
        ("&#102orbidden", "forbidden"),
        ("forbid&shyden fruit", "forbidden fruit"),
        ("&#x000202e", ""),
        // Not references: unknown names, an empty number.
        ("AT&T; &bogus; &#; &#x; &", "AT&T; &bogus; &#; &#x; &"),
        ("&#12345678;", "\u{fffd}"),
        // Code points no character has read as U+FFFD, as a browser shows them.
        (
            "&#0;&#xD800;&#x110000;&#x1100000;",
            "\u{fffd}\u{fffd}\u{fffd}\u{fffd}",
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

/// `text` spelled in tag characters.
fn tags(text: &str) -> String {
    text.chars()
        .map(|c| char::from_u32(0xE0000 + c as u32).unwrap())
        .collect()
}

/// `text`'s UTF-8 bytes carried by variation selectors.
fn selectors(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            0..=15 => char::from_u32(0xFE00 + u32::from(b)).unwrap(),
            _ => char::from_u32(0xE0100 + u32::from(b) - 16).unwrap(),
        })
        .collect()
}

/// Every split of `text` gives the view of the whole text, in both settings but `none`.
fn same_view_at_every_split(text: &str) {
    for mode in [Normalize::Full, Normalize::Nfkc] {
        let whole = normalize_str(text, mode);
        for cut in (1..text.len()).filter(|&c| text.is_char_boundary(c)) {
            assert_eq!(
                view_of(text, &[cut], mode).0,
                whole,
                "{text:?} cut at {cut}"
            );
        }
    }
}

#[test]
fn tag_characters_read_as_the_ascii_they_spell() {
    let text = format!("Eat the {}. Yum", tags("forbidden fruit"));
    for mode in [Normalize::Full, Normalize::Nfkc] {
        // Joined to the text around it, and alone as an aside once the run ends (written with
        // the view's last characters again when the view has gone on, here at the end).
        assert_eq!(
            normalize_str(&text, mode),
            "Eat the forbidden fruit. Yum\nforbidden fruit\nEat the forbidden fruit. Yum"
        );
    }
    // Glued to a visible word, the carried word is still a word of its own to the model.
    let glued = format!("nice{}", tags("bluebird"));
    assert_eq!(full(&glued), "nicebluebird\nbluebird\nnicebluebird");
    same_view_at_every_split(&glued);
    same_view_at_every_split(&text);
    // Each spelled character maps to its tag character.
    let (view, n) = view_of(&text, &[], Normalize::Full);
    let start = view.find("forbidden").unwrap() as u64;
    assert_eq!((n.raw_start(start), n.raw_end(start + 1)), (8, 12));
    // The language tag and CANCEL TAG say nothing; a spelled `*` is a star, not emphasis.
    assert_eq!(full("\u{e0001}a\u{e007f}b"), "ab");
    assert_eq!(full(&tags("*x*")), "*x*\n*x*\n*x*");
    assert_eq!(normalize_str(&tags("x"), Normalize::None), tags("x"));
}

#[test]
fn a_run_of_variation_selectors_reads_as_the_bytes_it_carries() {
    let text = format!("Look \u{1f600}{} ok", selectors("forbidden fruit"));
    assert_eq!(
        full(&text),
        "Look \u{1f600}forbidden fruit ok\nforbidden fruit\nLook \u{1f600}forbidden fruit ok"
    );
    same_view_at_every_split(&text);
    // Multi-byte characters, and bytes that are no UTF-8 (which say nothing alone).
    assert_eq!(full(&format!("x{}", selectors("ｆé"))), "xfe\nfe\nxfe");
    assert_eq!(full("x\u{e01ef}\u{e01ef}y"), "x\u{fffd}\u{fffd}y");
    // One selector picks a glyph and reads as nothing.
    assert_eq!(
        full("\u{2764}\u{fe0f} forbid\u{fe0e}den"),
        "\u{2764} forbidden"
    );
    // The run waits for what follows, and no longer.
    let mut n = Normalizer::new(Normalize::Full);
    assert_eq!(n.feed("a\u{fe0f}"), "a");
    assert_eq!(n.pending_start(), Some(1));
    assert_eq!(n.feed("b"), "b");
    assert_eq!(n.pending_start(), None);
}

#[test]
fn letters_that_render_as_blanks_read_as_a_space() {
    for blank in [
        '\u{115f}', '\u{1160}', '\u{3164}', '\u{ffa0}', '\u{2800}', '\u{303f}',
    ] {
        let text = format!("forbidden{blank}fruit");
        assert_eq!(full(&text), "forbidden fruit", "{blank:?}");
        assert_eq!(normalize_str(&text, Normalize::Nfkc), "forbidden fruit");
        assert_eq!(full(&format!("forbidden {blank} fruit")), "forbidden fruit");
    }
    // The general class: every default-ignorable letter (a font draws it as a blank advance).
    for u in 0x80..=0x10FFFFu32 {
        let Some(c) = char::from_u32(u) else { continue };
        if is_ignorable(c) && c.is_alphabetic() {
            assert!(chars::is_blank(c), "U+{u:04X}");
        }
    }
}

#[test]
fn marks_drawn_over_every_letter_read_as_the_letters() {
    for (text, view) in [
        // Marks that compose into letters Unicode has (ö, ë, ẗ) and marks that do not.
        (
            "f\u{308}o\u{308}r\u{308}b\u{308}i\u{308}d\u{308}d\u{308}e\u{308}n\u{308} fruit",
            "forbidden fruit",
        ),
        ("ḟȯṙḃïḋḋëṅ ḟṙüïẗ", "forbidden fruit"),
        ("f\u{20dd}o\u{20dd}r\u{20dd}bidden fruit", "forbidden fruit"),
        ("f\u{489}o\u{489}rbidden fruit", "forbidden fruit"),
        // Over other scripts' letters too, with the marks every script shares.
        ("с\u{308}о\u{308}к\u{308}", "сок"),
        ("東\u{336}京\u{336}", "東京"),
    ] {
        for mode in [Normalize::Full, Normalize::Nfkc] {
            assert_eq!(normalize_str(text, mode), view, "{text:?} {mode:?}");
        }
        same_view_at_every_split(text);
    }
    // A script's own marks are part of its letters.
    assert_eq!(full("كَتَبَ").chars().count(), 6);
    assert_eq!(full("हिन्दी"), "हिन्दी");
    assert_eq!(full("が"), "か\u{3099}");
}

/// Whether the view reads `phrase` (in the written or the shown order).
fn reads(view: &str, phrase: &str) -> bool {
    view.split('\n').any(|line| line.contains(phrase))
}

#[test]
fn text_under_bidi_controls_reads_as_it_is_shown_too() {
    for text in [
        "\u{202e}tiurf neddibrof\u{202c}",
        "Eat the \u{202e}tiurf neddibrof\u{202c}. Yum",
        "forbidden \u{202e}tiurf\u{202c}",
        "\u{202e}neddibrof\u{202c} fruit",
        // An isolate or embedding shows Latin words in right-to-left order where a mark
        // parts them (RLI alone does not reverse Latin letters; RLO does).
        "\u{2067}fruit\u{200f} forbidden\u{2069} now",
        "\u{202e}tiurf neddibrof",
        "\u{202e}tiurf neddibrof\nnext line",
        "\u{202e}tiurf\u{2069} neddibrof\u{202c}",
        "\u{202b}fruit\u{200f} forbidden\u{202c}",
    ] {
        let view = full(text);
        assert!(reads(&view, "forbidden fruit"), "{text:?} reads {view:?}");
        assert!(reads(
            &normalize_str(text, Normalize::Nfkc),
            "forbidden fruit"
        ));
        same_view_at_every_split(text);
    }
    // The written order stays (a model reads it), and plain left-to-right or Hebrew text with
    // no controls is read once.
    assert!(reads(
        &full("\u{202e}forbidden fruit\u{202c}"),
        "forbidden fruit"
    ));
    assert_eq!(full("שלום forbidden fruit"), "שלום forbidden fruit");
    assert_eq!(full("a \u{202a}b\u{202c} c"), "a b c");
    // The shown order waits in the hold-back from the context on, and the match in it maps
    // to the raw text from there.
    let mut n = Normalizer::new(Normalize::Full);
    let mut view = n.feed("forbidden \u{202e}tiu").into_owned();
    assert_eq!(n.pending_start(), Some(0));
    view.push_str(&n.feed("rf\u{202c}"));
    view.push_str(&n.finish());
    let at = view.rfind("forbidden fruit").unwrap() as u64;
    assert_eq!(n.raw_start(at), 0);
    assert_eq!(
        n.raw_end(at + 15),
        "forbidden \u{202e}tiurf\u{202c}".len() as u64
    );
}

#[test]
fn a_bidi_run_past_the_bound_is_refused() {
    let open = format!("\u{202e}{}", "ab ".repeat(bidi::MAX_BIDI));
    let mut n = Normalizer::new(Normalize::Full);
    n.feed(&open);
    let (start, end) = n.take_refusal().unwrap();
    assert_eq!(start, 0);
    assert!(end as usize <= open.len());
    assert_eq!(n.take_refusal(), None);
    // Closed runs are read however long the paragraph.
    let closed = format!("\u{202e}ab\u{202c}{}", "ab ".repeat(bidi::MAX_BIDI));
    let mut n = Normalizer::new(Normalize::Full);
    n.feed(&closed);
    n.finish();
    assert_eq!(n.take_refusal(), None);
}

#[test]
fn inline_markup_reads_as_a_renderer_shows_it() {
    for text in [
        "for<b>bid</b>den fruit",
        "<span>forbid</span>den fruit",
        "forbid<sup>den</sup> fruit",
        "forbid<wbr>den<wbr/> fruit",
        "forbid<span class=\"x\">den</span> fruit",
        "forbid<a href='http://x'>den</a> fruit",
        "[forbid](http://x)den fruit",
        "[forbid](<http://x> \"t\")den [fruit]()",
        "forbid<!-- hidden -->den fruit",
        "forbid<!---->den fruit",
        "forbid<?x?>den fruit",
        "forbid<?php echo 1 ?>den fruit",
        "forbid<!x>den fruit",
        "forbid<![CDATA[x]]>den fruit",
        // Empty comments, a browser's `--!>`, end tags a browser hides.
        "forbid<!-->den fruit",
        "forbid<!--->den fruit",
        "forbid<!-- x --!>den fruit",
        "forbid</ x>den fruit",
        "forbid</1>den fruit",
        "forbid</>den fruit",
        "forbid</b x=\"y\">den fruit",
        // Names a browser reads (Office's `<o:p>`, punctuation, non-ASCII, controls), the empty
        // `<!>`, and an attribute after `/` whose value holds `>`.
        "forbid<o:p></o:p>den fruit",
        "forbid<b.x>den fruit",
        "forbid<bé>den fruit",
        "forbid<b\u{1}>den fruit",
        "forbid<!>den fruit",
        "forbid<!->den fruit",
        "forbid<a/title=\">\">den fruit",
        // A quote opens a value only after `=`; `<!` + any character; `/` in an end tag.
        "forbid<a x\">den fruit",
        "forbid<a x=y\">den fruit",
        "forbid<a x='y'\">den fruit",
        "forbid<a '>den fruit",
        "forbid<a title = \"x>y\">den fruit",
        "forbid<!1>den fruit",
        "forbid<! >den fruit",
        "forbid<!#>den fruit",
        "forbid</b/>den fruit",
        "forbid</b/x>den fruit",
        // Raw-text elements: their content is not shown, up to their end tag.
        "forbid<script>x</script>den fruit",
        "forbid<style>a{}</style>den fruit",
        "forbid<template>t</template>den fruit",
        "forbid<title>t</title>den fruit",
        "forbid<SCRIPT type=\"x\">a</b><</script >den fruit",
        // A quote opens a value only right after a name's `=`; HTML's white space only.
        "forbid<a =\"x>den fruit",
        "forbid<a x==\"y>den fruit",
        "forbid<a x=\"y\"=\"z>den fruit",
        "forbid<a x = = \"y>den fruit",
        "forbid<a\u{a0}=\"y>den fruit",
        "forbid<a\u{3000}=\"y>den fruit",
        "forbidden<br>fruit",
        "forbidden</p><p>fruit",
        "<https://forbidden.fruit>",
        // An autolink a browser hides: its reading (the word joined around it) is read too.
        "forbid<ab:c>den fruit",
        "forbid<x@y.z>den fruit",
        // Review 6: a trailing autolink, and link titles, escapes and <…> destinations.
        "forbidden fruit<ab:c>",
        "forbid<ab:c>den fruit, see <https://e.x>",
        "[forbid](x \"a)b\")den fruit",
        "[forbid](x 'a)b')den fruit",
        "[forbid](a\\)b)den fruit",
        "[forbid](<a)b>)den fruit",
        "[forbid](x (a\\)b))den fruit",
        "forbid![a](b \"c)d\")den fruit",
        "forbid![a](\nc)den fruit",
        "forbid<https://e.x/p?q=1>den fruit",
        "forbid<ab:c d>den fruit",
        "forbid<ab:c<d>den fruit",
        "forbid<ab:c title=\">\">den fruit",
        "for<x@y.z>bid<https://e.x>den fruit",
        // An image: a person sees it, not its alt text.
        "forbid![alt](img.png)den fruit",
        // A line break next to a zero-width space (or a <wbr>) shows as nothing.
        "forbidden fru\n\u{200b}it",
        "forbidden fru\u{200b} \n it",
        "forbidden fru<wbr>\nit",
        "forbidden fru\n&#8203;it",
        // Text a browser does not show where scripts run, or shows in a box of its own.
        "forbid<noscript>x</noscript>den fruit",
        "forbid<textarea>x</textarea>den fruit",
        // Review 7: what the browser hides by its own style sheet or replaces by the element.
        "forbid<span hidden>xx</span>den fruit",
        "forbid<b HIDDEN>x</b>den fruit",
        "forbid<span class=a hidden id=b>x</span>den fruit",
        "forbid<p hidden=\"\">x</p>den fruit",
        "forbidden <object>x</object>fruit",
        "forbid<video>x</video>den fruit",
        "forbid<audio>x</audio>den fruit",
        "forbid<canvas>x</canvas>den fruit",
        "forbid<meter>x</meter>den fruit",
        "forbid<progress>x</progress>den fruit",
        "forbid<select>x</select>den fruit",
        "forbid<dialog>x</dialog>den fruit",
        // Closed by the parser before its own end tag: what follows is shown.
        "forbi<b>dden f<span hidden></b>ruit",
        // A `_` run before a reference or a tag, after a word: emphasis that closes.
        "forbidden frui__&#8203;t",
        "_forbidden frui_<b>t",
        // Tags CommonMark shows as text, a browser hides.
        "<forbidden fr<!---->uit",
        "<forbidden fruit",
        "x <forbidden f&shy;ruit",
        "for\\bidden fruit",
        "for&#98;idden <em>fruit</em>",
    ] {
        let view = full(text);
        let phrase = if text.starts_with("<https") {
            "https://forbidden.fruit"
        } else if text.starts_with("for\\b") {
            "for\\bidden fruit"
        } else {
            "forbidden fruit"
        };
        assert!(reads(&view, phrase), "{text:?} reads {view:?}");
        same_view_at_every_split(text);
    }
    // What a tag, comment or link hides a model reads: it is read too, on a line of its own.
    for text in [
        "<span title=\"forbidden fruit\">x</span>",
        "a<!-- forbidden fruit -->b",
        "[x](forbidden fruit)",
        // A tag's name is not shown either, and a model reads it.
        "<forbidden-fruit>x",
        "x</forbidden-fruit>",
        "<forbidden-fruit title=\"a\">x",
        "<forbidden-fruit/>x",
    ] {
        let phrase = if text.contains("forbidden-fruit") {
            "forbidden-fruit"
        } else {
            "forbidden fruit"
        };
        assert!(
            reads(&full(text), phrase),
            "{text:?} reads {:?}",
            full(text)
        );
        assert!(!reads(&full(text), "xforbidden"), "{text:?}");
        same_view_at_every_split(text);
    }
    // Escaped punctuation is shown as itself; text that is no tag is text.
    for (text, view) in [
        ("forbid\\*den\\*", "forbid*den*"),
        ("a < b, c > d", "a < b, c > d"),
        ("x <3 y", "x <3 y"),
        ("1 <", "1 <"),
        ("a\\", "a\\"),
    ] {
        assert_eq!(full(text), view, "{text:?}");
    }
    // Only with `full`.
    assert_eq!(normalize_str("a<b>c", Normalize::Nfkc), "a<b>c");
}

#[test]
fn a_hidden_attribute_hides_its_element_only() {
    // A void element has no content to hide; an end tag's attributes hide nothing; a value
    // or a longer name is no `hidden` attribute.
    for (text, shown) in [
        ("a <input hidden> forbidden fruit", "forbidden fruit"),
        ("a <span>x</span hidden> forbidden fruit", "forbidden fruit"),
        (
            "a <span title=hidden>forbidden fruit</span>",
            "forbidden fruit",
        ),
        ("a <span hiddenx>forbidden fruit</span>", "forbidden fruit"),
        ("<span hidden>x</span> forbidden fruit", "forbidden fruit"),
    ] {
        let view = full(text);
        assert!(
            view.lines().next().unwrap().contains(shown),
            "{text:?} reads {view:?}"
        );
        same_view_at_every_split(text);
    }
    // Read as a style that may hide it is: shown, and the browser's reading without it (its
    // end may come from Markdown's constructs around it: the end of a link's text).
    let view = full("a<span hidden>forbidden fruit</span>b");
    assert!(
        view.lines().next().unwrap().contains("forbidden fruit"),
        "{view:?}"
    );
    assert!(view.lines().any(|l| l == "ab"), "{view:?}");
    let view = full("forbidde[n fr<span hidden>](a\\)b)uit");
    assert!(reads(&view, "forbidden fruit"), "{view:?}");
}

#[test]
fn a_match_through_markup_maps_to_the_whole_raw_span() {
    let text = "Eat forbid<!-- c -->den fruit.";
    let (view, n) = view_of(text, &[], Normalize::Full);
    let at = view.find("forbidden fruit").unwrap() as u64;
    let (start, end) = (n.raw_start(at), n.raw_end(at + 15));
    assert_eq!(
        &text[start as usize..end as usize],
        "forbid<!-- c -->den fruit"
    );
    // Written again after the aside, the phrase maps from its start to the end of what the
    // view had read by then (never less than the phrase).
    let again = view.rfind("forbidden fruit").unwrap() as u64;
    assert!(again > at, "{view:?}");
    let (start, end) = (n.raw_start(again), n.raw_end(again + 15));
    assert_eq!(start, 4);
    assert!(end as usize >= text.len() - 1, "{end}");
}

/// The text a CommonMark renderer shows for `markdown` (pulldown-cmark): text and code, with
/// inline HTML not shown and line breaks as spaces.
fn rendered(markdown: &str) -> String {
    use pulldown_cmark::{Event, Parser};
    let mut shown = String::new();
    for event in Parser::new(markdown) {
        match event {
            Event::Text(t) | Event::Code(t) => shown.push_str(&t),
            Event::SoftBreak | Event::HardBreak => shown.push(' '),
            _ => {}
        }
    }
    shown
}

fn markup_texts() -> impl Strategy<Value = String> {
    let word = prop::sample::select(vec!["pro", "ject", "blue", "bird", "x"]);
    let wrap = prop::sample::select(vec![
        "{}",
        "{}",
        "**{}**",
        "<b>{}</b>",
        "<span>{}</span>",
        "<em class=\"c\">{}</em>",
        "[{}]()",
        "[{}](http://x)",
        "{}<wbr>",
        "{}<!-- c -->",
        "{}<?c?>",
        "{}<!DOCTYPE c>",
        "{}<![CDATA[c]]>",
        "<sup>{}</sup>",
        "{}\\*",
        "{} ",
    ]);
    prop::collection::vec((word, wrap), 1..6).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(w, f)| f.replace("{}", w))
            .collect::<String>()
    })
}

proptest! {
    /// Differential: the view's shown text is what a CommonMark renderer shows.
    #[test]
    fn the_view_shows_what_a_renderer_shows(text in markup_texts()) {
        let view = full(&text);
        // The shown text is the last line (asides come before the text written again).
        let shown = view.rsplit('\n').next().unwrap_or("");
        let rendered = rendered(&text);
        // A `*` a renderer leaves as text (delimiter runs that open or close nothing, as in
        // `**a****b**`) the view reads as not there, like every `*`: it errs towards a match.
        prop_assume!(rendered.matches('*').count() == text.matches("\\*").count());
        let expected = normalize_str(&rendered, Normalize::Nfkc);
        prop_assert_eq!(shown.trim(), expected.trim(), "{:?} reads {:?}", text, view);
    }
}

#[test]
fn tag_names_of_forty_characters_are_tags_whether_start_or_end() {
    let name = "a".repeat(40);
    let longer = "a".repeat(41);
    for text in [
        format!("forbid<{name}>den fruit"),
        format!("forbid</{name}>den fruit"),
        // Longer: the rest of the tag is read as hidden attributes.
        format!("forbid<{longer}>den fruit"),
        format!("forbid<{longer} x>den fruit"),
    ] {
        assert!(reads(&full(&text), "forbidden fruit"), "{text}");
    }
}

/// Review 8: a ruby annotation is shown above its base text, so the base joins; `<bdo>`
/// shows its text in the forced direction, read in the order shown.
#[test]
fn ruby_annotations_and_bdo_read_as_shown() {
    for text in [
        "the forbid<ruby>den<rt>zz</rt></ruby> fruit",
        "the forbid<ruby>den<rp>(</rp><rt>zz</rt><rp>)</rp></ruby> fruit",
        "the forbid<ruby>den<rt>z<b>z</b></rt></ruby> fruit",
        "the forbid<ruby>den<rt>zz</ruby> fruit",
        "the forbid<ruby>de<rt>x<rt>y</ruby>n fruit",
        "the <bdo dir=\"rtl\">tiurf neddibrof</bdo>",
        "the <bdo dir=rtl>tiurf neddibrof</bdo> and more",
        "the <BDO DIR='RTL' class=x>tiurf neddibrof</BDO>",
        "the <bdo title=x dir=rtl>tiurf neddibrof",
        // What the run shows: references decoded, tags dropped, before it is ordered.
        "the <bdo dir=rtl>tiurf nedd&#105;brof</bdo>",
        "the \u{202e}tiurf ne<b>dd</b>ibrof\u{202c}",
        "the &#x202e;tiurf neddibrof&#x202c;",
        // Review 9: what closes an element as a browser's parser does, `<rt>`/`<rp>` implied
        // ends, attribute spellings, references without `;` or with leading zeros, hidden
        // elements and Markdown inside a run, a line break inside one, two runs side by side.
        "the <span><bdo dir=rtl>neddibrof</span> fruit",
        "the <b><bdo dir=rtl>neddibrof</b> fruit",
        "the forbid<span><ruby>den<rt>zz</span> fruit",
        "the forbid<ruby>den<rp>(</ruby> fruit",
        "the forbid<ruby>den<rp>(<rt>zz</rt></ruby> fruit",
        "the forbid<rt>den</rt> fruit",
        "the <ruby><bdo dir=rtl>tiurf neddibrof</bdo><rt>x</rt></ruby>",
        "the <bdo/dir=rtl>tiurf neddibrof</bdo>",
        "the <bdo dir=\"&#114;tl\">tiurf neddibrof</bdo>",
        "the <bdo dir=\"r&#116;l\">tiurf neddibrof</bdo>",
        "the &#x202e tiurf neddibrof",
        "the &#x000202e;tiurf neddibrof",
        "the <bdo dir=rtl>tiurf ned<script>x</script>dibrof</bdo>",
        "the <bdo dir=rtl>*tiurf* neddibrof</bdo>",
        "the <bdo dir=rtl>tiurf\nneddibrof</bdo>",
        "the <bdo dir=rtl>neddibrof</bdo> <bdo dir=rtl>tiurf</bdo>",
        // Review 10: a ruby's annotation after a run, a reference without `;` that a letter
        // ends, an override opened past the open elements' bound.
        "the <ruby><bdo dir=rtl>tiurf neddibrof</bdo><rt>x</rt></ruby>",
        "the &#8238tiurf neddibrof",
        "the &#x0202Etiurf neddibrof",
        &format!("the {}<bdo dir=rtl>tiurf neddibrof</bdo>", "<b>".repeat(70)),
        // Foreign content a browser does not draw.
        "the forbid<svg width=0 height=0>zz</svg>den fruit",
        "the forbid<svg><desc>zz</desc></svg>den fruit",
        "the forbid<math>zz</math>den fruit",
    ] {
        let view = full(text);
        assert!(reads(&view, "forbidden fruit"), "{text:?} reads {view:?}");
        same_view_at_every_split(text);
    }
    // The annotation is read too (an aside); text after the ruby is shown again.
    let view = full("a<ruby>b<rt>forbidden fruit</rt></ruby>");
    assert!(reads(&view, "forbidden fruit"), "{view:?}");
    let view = full("<ruby>b<rt>x</rt></ruby> forbidden fruit");
    assert!(view.starts_with("b forbidden fruit"), "{view:?}");
    // A secret shown reversed.
    let view = full("key <bdo dir=rtl>PONMLKJIHGFEDCBAAIKA</bdo>");
    assert!(
        view.to_lowercase().contains("akiaabcdefghijklmnop"),
        "{view:?}"
    );
    // What foreign content draws is read.
    for text in [
        "the <svg><text>forbidden fruit</text></svg>",
        "the <math><mi>forbidden fruit</mi></math>",
    ] {
        assert!(
            reads(&full(text), "the forbidden fruit"),
            "{text:?}: {:?}",
            full(text)
        );
    }
    // `dir` on other elements, or `ltr`, changes nothing for Latin text.
    for text in [
        "the <span dir=rtl>forbidden fruit</span>",
        "the <bdo dir=ltr>forbidden fruit</bdo>",
    ] {
        assert!(reads(&full(text), "forbidden fruit"), "{text:?}");
    }
}

/// Review 10: a blank line ends a Markdown paragraph and closes its elements, while a browser
/// reading HTML shows it as white space, its elements open: both readings are read.
#[test]
fn a_blank_line_is_read_as_markdown_and_as_html_reads_it() {
    for (text, phrase) in [
        // As HTML: one override, one paragraph.
        (
            "the <bdo dir=rtl>tiurf\n\nneddibrof</bdo> end",
            "the forbidden fruit end",
        ),
        (
            "the \u{202e}tiurf\n\nneddibrof\u{202c} end",
            "the forbidden fruit end",
        ),
        // As Markdown: the first paragraph reversed on its own.
        ("the <bdo dir=rtl>tiurf\n\nneddibrof</bdo> end", "the fruit"),
        ("the \u{202e}tiurf\n \nneddibrof", "the fruit"),
        // A ruby's annotation, foreign content: hidden to a browser up to their end.
        (
            "forbid<ruby>den<rt>\n\nzz</rt></ruby> fruit",
            "forbidden fruit",
        ),
        ("forbid<ruby>den<rt>x\n\nzz</ruby> fruit", "forbidden fruit"),
        (
            "the forbidden<svg>x\n\ny</svg> fruit",
            "the forbidden fruit",
        ),
        // And shown by Markdown after it.
        (
            "forbid<ruby>den<rt>\n\nforbidden</rt></ruby> fruit",
            "forbidden fruit",
        ),
    ] {
        let view = full(text);
        assert!(reads(&view, phrase), "{text:?} reads {view:?}");
        same_view_at_every_split(text);
    }
    // An override open through a blank line goes on past the bound without refusing (a
    // stray control, a `<bdo>` a code span shows), and still reads what it shows.
    for text in [
        format!(
            "x \u{202e}ab\n\n{}tiurf neddibrof{}",
            "y ".repeat(600),
            " z".repeat(600)
        ),
        format!(
            "x `<bdo dir=rtl>`\n\n{}tiurf neddibrof{}",
            "y ".repeat(600),
            " z".repeat(600)
        ),
    ] {
        let (view, mut n) = view_of(&text, &[], Normalize::Full);
        assert!(reads(&view, "forbidden fruit"), "{view:?}");
        assert_eq!(n.take_refusal(), None);
    }
    // Within one paragraph the bound still refuses.
    let (_, mut n) = view_of(
        &format!("x \u{202e}{}", "y ".repeat(600)),
        &[],
        Normalize::Full,
    );
    assert!(n.take_refusal().is_some());
}

/// Review 10/12: text in a table outside its cells is shown before the table by a browser
/// (foster parenting), joined to the text before it: that reading is read too.
#[test]
fn a_tables_text_outside_its_cells_is_read_where_a_browser_shows_it() {
    for text in [
        "the forbid<table><tr><td>zz</td></tr>den fruit</table> after",
        "the forbid<table>den fruit<tr><td>zz</td></tr></table>",
        "the <table>forbid<tr><td>x</td></tr>den fruit</table>",
        "the forbid<table><tbody><tr>den <td>q</td> fruit</tr></tbody></table>",
        "the forbid<table><tr><td>x</td></tr>den fruit",
        "<table><tr><td>a<table>x</table>b</td></tr></table>the forbid<table>den fruit</table>",
    ] {
        let view = full(text);
        assert!(
            reads(&view, "the forbidden fruit"),
            "{text:?} reads {view:?}"
        );
        same_view_at_every_split(text);
    }
    // (Moved text is read as written; a bidi run in it is read in its shown order in place.)
    let view = full("the <table><tr><td>zz</td></tr><bdo dir=rtl>tiurf neddibrof</bdo></table>");
    assert!(reads(&view, "forbidden fruit"), "{view:?}");
    // A table's cells keep their order; no reading is added for a clean table.
    let view = full("a <table><tr><td>x</td><td>y</td></tr></table> b");
    assert_eq!(view.lines().next(), Some("a x y b"));
    assert_eq!(
        view.lines().filter(|l| l.starts_with("a ")).count(),
        2,
        "{view:?}"
    );
    // The reading is held back from its context until it is written.
    let mut n = Normalizer::new(Normalize::Full);
    let _ = n.feed("the forbid<table><tr><td>zz</td></tr>den");
    assert_eq!(n.pending_start(), Some(0));
    // Past the bound, text outside the cells is refused (its context was released).
    let long = format!(
        "forbid<table><tr><td>{}</td></tr>den fruit</table>",
        "x ".repeat(3000)
    );
    let (_, mut n) = view_of(&long, &[], Normalize::Full);
    assert!(n.take_refusal().is_some());
    let long = format!("<table><tr><td>{}</td></tr></table>", "x ".repeat(3000));
    let (_, mut n) = view_of(&long, &[], Normalize::Full);
    assert_eq!(n.take_refusal(), None);
}

/// Review 12: Markdown shows markup in a code block as text, and what follows the block;
/// what the view read as markup there (a browser's reading) ends at the block's end for
/// Markdown's reading. And what an element hides is read (an aside) up to the end of the
/// text, its asides cut with an overlap, so a phrase through a cut is read whole.
#[test]
fn a_code_blocks_markup_ends_with_the_block() {
    for text in [
        "~~~\n<!--\n~~~\nforbid<b>den</b> fruit\n\n-->",
        "~~~~\n<svg>\n~~~~\nforbid<b>den</b> fruit",
        "```\n<svg>\n```\nforbidden fruit",
        " ~~~\n<svg>\n ~~~\nforbid<i>den</i> fruit",
        "~~~ python\n<math>\n~~~\nforbid<i>den</i> fruit",
        "~~~\r\n<script>\r\n~~~\r\nforbid<i>den</i> fruit",
        "~~~\n<a title='\n~~~\nforbid<b>den</b> fruit",
        "~~~\n<?x\n~~~\nforbid<b>den</b> fruit",
        "~~~\n<ruby>x<rt>\n~~~\nforbid<b>den</b> fruit",
        "x\n\n    <svg>\nforbid<b>den</b> fruit",
        "x\n\n\t<svg>\n\n    zz\nforbid<b>den</b> fruit",
        "    <svg>\nforbid<b>den</b> fruit",
        // Hidden text to the end of the text, and through a cut.
        "a <svg>forbidden fruit",
        "a <ruby>b<rt>forbidden fruit",
    ] {
        let view = full(text);
        assert!(reads(&view, "forbidden fruit"), "{text:?} reads {view:?}");
        same_view_at_every_split(text);
    }
    for pad in 240..260 {
        for text in [
            format!("<!--{} forbidden fruit -->", "x".repeat(pad)),
            format!("a <svg>{} forbidden fruit", "x".repeat(pad)),
        ] {
            let view = full(&text);
            assert!(reads(&view, "forbidden fruit"), "{text:?} reads {view:?}");
        }
    }
    // A template's content is hidden up to its own end tag (templates nest), across blank
    // lines too (a paragraph's end closes no template).
    for (text, phrase, hidden) in [
        (
            "forbid<template><template></template>zz</template>den fruit",
            "forbidden fruit",
            "zzden",
        ),
        (
            "forbid<template><div><template>zz</template></div>yy</template>den fruit",
            "forbidden fruit",
            "yyden",
        ),
        (
            "blue<template><template>x</template>y</template>bird",
            "bluebird",
            "ybird",
        ),
        (
            "forbid<template>\n\nzz</template>den fruit",
            "forbidden fruit",
            "zzden",
        ),
    ] {
        let view = full(text);
        let first = view.lines().next().unwrap_or("");
        assert!(
            first.contains(phrase) && !first.contains(hidden),
            "{text:?} reads {view:?}"
        );
        same_view_at_every_split(text);
    }
    // An HTML element's tag ends foreign content (the parser's breakout), outside the
    // elements whose content is HTML.
    for text in [
        "forbid<svg><b>den fruit",
        "forbid<svg><g>x</g><span>den fruit",
        "forbid<math><mrow><i>den</i> fruit",
    ] {
        let view = full(text);
        assert!(
            view.lines()
                .next()
                .unwrap_or("")
                .contains("forbidden fruit"),
            "{text:?} reads {view:?}"
        );
        same_view_at_every_split(text);
    }
    // (`</p>` ends it too, and makes a paragraph of its own: a break.)
    let view = full("forbid<svg></p>den fruit");
    assert!(
        view.lines().next().unwrap_or("").ends_with("den fruit"),
        "{view:?}"
    );
    let view = full("a<svg><foreignObject><b>x</b></foreignObject>y</svg>z");
    assert_eq!(view.lines().next(), Some("axz"), "{view:?}");
    // An image in a `<…>` Markdown shows as text (browser oracle).
    let view = full("***<forbidden![a](b) fruit");
    assert!(view.contains("<forbidden fruit"), "{view:?}");
    // Not a code block: a paragraph's indented line, a fence spelled with references.
    for text in [
        "x\n    <svg>\nforbidden fruit",
        "&#96;&#96;&#96;\n<svg>\n&#96;&#96;&#96;\nforbidden fruit",
    ] {
        let view = full(text);
        assert!(
            !view.lines().next().unwrap_or("").contains("fruit"),
            "{text:?} reads {view:?}"
        );
    }
}

/// Review 12: text a style may hide (a `style` attribute, a `<style>` rule) is read as a
/// browser applying it shows it too: the text before the element joined to what follows it.
#[test]
fn text_a_style_may_hide_is_read_both_ways() {
    for (text, phrase) in [
        ("forbid<span style=\"display: none\">zz</span>den fruit", "forbidden fruit"),
        ("forbid<span style=display:none>zz</span>den fruit", "forbidden fruit"),
        ("forbid<span style=\"visibility:hidden;position:absolute\">zz</span>den fruit", "forbidden fruit"),
        ("forbid<span style=\"font-size:0\">zz</span>den fruit", "forbidden fruit"),
        ("forbid<span style=\"color:transparent;font-size:1px\">zz</span>den fruit", "forbidden fruit"),
        ("forbid<span style=\"position:absolute;left:-9999px\">zz</span>den fruit", "forbidden fruit"),
        ("<style>.x{display:none}</style>forbid<span class=x>zz</span>den fruit", "forbidden fruit"),
        ("<style>p, .a.b { font-size: 0 }</style>forbid<i class='b a'>zz</i>den fruit", "forbidden fruit"),
        ("blue<s style=display:none>x</s>bird", "bluebird"),
        ("forbid<div style=\"display:none\">zz</div>den fruit", "forbidden fruit"),
        // Nested: the outer shown, the inner hidden; siblings; through a blank line.
        ("forbid<span style=\"color:red\">den<span style=\"display:none\">zz</span> fruit</span>", "forbidden fruit"),
        ("for<b style=display:none>x</b>bid<b style=display:none>y</b>den fruit", "forbidden fruit"),
        ("forbid<span style=display:none>zz\n\nyy</span>den fruit", "forbidden fruit"),
        ("forbid<span style=\"dis&#112;lay:none\">zz</span>den fruit", "forbidden fruit"),
        // A direction forced by a style.
        ("<span style=\"unicode-bidi:bidi-override; direction:rtl\">tiurf neddibrof</span>", "forbidden fruit"),
    ] {
        let view = full(text);
        assert!(reads(&view, phrase), "{text:?} reads {view:?}");
        same_view_at_every_split(text);
    }
    // A style sheet applies to the elements before it too: a hiding rule for one of them is
    // refused (the sheet is held back whole until then); one for none of them is not.
    for (text, refused) in [
        (
            "forbid<b class=h>z</b>den <style>.h{visibility:hidden}</style>",
            true,
        ),
        ("forbid<b>z</b>den <style>b{font-size:0}</style>", true),
        (
            "forbid<b>z</b>den <style>.h{visibility:hidden}</style>",
            false,
        ),
        ("forbid<b>z</b>den <style>b{color:red}</style>", false),
        ("forbid<b class=h>z</b>den <style>.h{display:none}", true),
    ] {
        let (_, mut n) = view_of(text, &[], Normalize::Full);
        assert_eq!(n.take_refusal().is_some(), refused, "{text:?}");
    }
    let mut n = Normalizer::new(Normalize::Full);
    let _ = n.feed(&format!(
        "x <b>y</b> <style>.a {{ color: red; }} {} .b {{ display:",
        " ".repeat(600)
    ));
    assert!(
        n.pending_start().is_some_and(|p| p <= 11),
        "{:?}",
        n.pending_start()
    );
    // (Review 12, a false block: `&#x85;` names `…`, not a line break.)
    assert_eq!(full("forbidden&#x85;fruit"), "forbidden...fruit");
    assert!(!full("&#150;&#x9f;").contains(['\u{96}', '\u{9f}']));
    // Several elements in doubt near each other: one hidden, the others shown (a style the
    // view does not read, `foo:1`, is one a browser shows), in either order and nested; one
    // hidden and the text ending inside another.
    for text in [
        "for<i style=display:none>x</i>bid<b style=\"foo:1\">den</b> fruit",
        "forbid<b style=\"foo:1\">den</b><i style=display:none>x</i> fruit",
        "<p style=\"foo:1\">forbid<span style=display:none>zz</span>den fruit</p>",
        "forbid<i style=display:none>x</i>den fruit<b style=\"foo:1\">zzz",
        "<div style=foo:1><p style=foo:1>forbid<span style=display:none>zz</span>den <b style=foo:1>fr</b>uit</p></div>",
    ] {
        let view = full(text);
        assert!(reads(&view, "forbidden fruit"), "{text:?} reads {view:?}");
        same_view_at_every_split(text);
    }
    // Dense: as many elements in doubt as one likes, a bounded view.
    let dense = "<b style=foo:1>a</b> ".repeat(4000);
    let view = full(&dense);
    assert!(
        view.len() < 64 * dense.len(),
        "{} for {}",
        view.len(),
        dense.len()
    );
    // A style that cannot hide adds no reading.
    let view = full("a <span style=\"font-weight:bold\">b</span> c");
    assert!(
        view.lines().all(|l| !l.starts_with("a ") || l == "a b c"),
        "{view:?}"
    );
    // The reading is held back from its context while the element is open.
    let mut n = Normalizer::new(Normalize::Full);
    let _ = n.feed("the forbid<span style=display:none>zz");
    assert_eq!(n.pending_start(), Some(0));
}

/// Review 13: a script double escaped, breakouts through nested foreign content, references
/// in hidden text, markup inside hidden text, a NUL, bidi controls nested past the bound.
#[test]
fn review_13_readings() {
    for text in [
        "forbid<script><!--<script></script>zz</script>den fruit",
        "forbid<SCRIPT><!--<script >x</script>zz</script >den fruit",
        "forbid<svg><svg>zz<b>den fruit",
        "forbid<svg><g><svg><g>zz<b>den fruit",
        "forbid<svg><math>zz<span>den fruit",
        "forbid<svg>zz<font color=x>den fruit",
        "forbid\u{0}den fruit",
        "forbid<b>\u{0}</b>den fruit",
        "<img alt=\"forbid&#100;en fruit\" src=x>",
        "<textarea>forbid&#100;en fruit</textarea>",
        "<!--forbid<b>den</b> fruit-->",
        "<!--forbid&#100;en fruit-->",
        "<script>x = 'forbid<i>den</i> fruit'</script>",
        "<template>forbid<i>den</i> fruit</template>",
        "a<svg><g>forbid</g><g>den fruit</g></svg>",
        "a<template>forbid<b class=x>den</b> fruit",
    ] {
        let view = full(text);
        assert!(reads(&view, "forbidden fruit"), "{text:?} reads {view:?}");
        same_view_at_every_split(text);
    }
    // A script that is not double escaped ends at its end tag.
    let view = full("a<script><!-- x --></script>forbid<b>den</b> fruit");
    assert!(
        view.lines()
            .next()
            .unwrap_or("")
            .contains("forbidden fruit"),
        "{view:?}"
    );
    for depth in [16, 40, 70] {
        let text = format!("{}tiurf neddibrof", "<bdo dir=rtl>".repeat(depth));
        let (view, mut n) = view_of(&text, &[], Normalize::Full);
        assert!(
            n.take_refusal().is_some() || reads(&view, "forbidden fruit"),
            "{depth}: {view:?}"
        );
    }
}

/// Review 14: what a browser hides or shows that the view did not read (style sheets it
/// imports, nesting, foreign content's references, a link after the elements, implied end
/// tags, a closed `<details>`, presentation attributes, generated text).
#[test]
fn review_14_readings() {
    for text in [
        "forbid<a style=\"display:none\">XX<a>den fruit",
        "forbid<nobr style=\"display:none\">XX<nobr>den fruit",
        "forbid<details style=display:inline><summary style=display:none></summary>XX</details>den fruit",
        "<svg width=400 height=40><text x=0 y=20>forbid<tspan display=\"none\">XX</tspan>den fruit</text></svg>",
        "<svg><text>forbid<tspan visibility=\"hidden\" font-size=\"0\">XX</tspan>den fruit</text></svg>",
        "<svg><text>forbid<tspan fill-opacity=\"0\">XX</tspan>den fruit</text></svg>",
        // V14-09: an override whose direction or override comes from elsewhere.
        "<style>.r{direction:rtl;unicode-bidi:bidi-override}</style><span class=r>tiurf neddibrof</span>",
        "<style>q{direction:rtl;unicode-bidi:bidi-override;quotes:none}</style><q>tiurf neddibrof</q>",
        "<span dir=rtl style=\"unicode-bidi:bidi-override\">tiurf neddibrof</span>",
        "<style>.r{direction:rtl}.r{unicode-bidi:bidi-override}</style><span class=r>tiurf neddibrof</span>",
        "<style>.o{unicode-bidi:isolate-override}</style><div dir=rtl><span class=o>tiurf neddibrof</span></div>",
        "<div dir=rtl><bdo>tiurf neddibrof</bdo></div>",
        "<p style=\"direction:rtl\"><b style=\"unicode-bidi:bidi-override\">tiurf neddibrof</b></p>",
        "<svg width=400 height=40><text x=200 y=20 direction=\"rtl\" unicode-bidi=\"bidi-override\">tiurf neddibrof</text></svg>",
        "<svg><g direction=rtl><text unicode-bidi=bidi-override>tiurf neddibrof</text></g></svg>",
    ] {
        let view = full(text);
        assert!(reads(&view, "forbidden fruit"), "{text:?} reads {view:?}");
        same_view_at_every_split(text);
    }
    for (text, refused) in [
        (
            "forbid<span class=h>XX</span>den fruit<link rel=stylesheet href=\"x.css\">",
            true,
        ),
        // Review 15: a sheet the view does not read (linked, imported, nested, escaped) may
        // order any text as well as hide it: refused.
        (
            "<html><head><link rel=stylesheet href=x.css></head><body>forbidden fruit",
            true,
        ),
        ("<link rel=icon href=x.png>forbidden fruit", false),
        ("Add a <link> tag to the head.", false),
        ("<link rel=\"Alternate StyleSheet\" href=x>", true),
        ("<link rel=&#115;tylesheet href=x>", true),
        (
            "<style>@import \"data:text/css,.h{display:none}\";</style>forbid<span class=h>XX</span>den fruit",
            true,
        ),
        (
            "<svg><style>.h{display&#58;none}</style></svg>forbid<span class=h>XX</span>den fruit",
            true,
        ),
        (
            "<style>div { .h { display:none } }</style><div>forbid<span class=h>XX</span>den fruit</div>",
            true,
        ),
        ("<style>p{color:red}</style><p>forbidden fruit</p>", false),
        (
            "<style>.x::before{content:\"forbidden f\" \"ruit\"}</style><span class=x></span>",
            true,
        ),
        (
            "<style>.h::first-letter{font-size:0}</style>forbid<span class=h>Xden</span> fruit",
            true,
        ),
        (
            "<style>.h::first-letter{color:red}</style>forbid<span class=h>Xden</span> fruit",
            false,
        ),
        // V14-07/08: a declarative shadow root shows its template, slots reorder the text.
        (
            "<div><template shadowrootmode=\"open\"><slot name=b></slot><slot name=a></slot></template><span slot=a>fruit</span><span slot=b>forbidden </span></div>",
            true,
        ),
        (
            "<div><TEMPLATE ShadowRootMode=closed>forbid<slot></slot> fruit</template>den</div>",
            true,
        ),
        ("<div><template shadowroot=open>x</template></div>", true),
        ("<template>forbid</template>den fruit", false),
        // V14-09: a direction `auto` with an override depends on a character yet to come.
        ("<bdo dir=auto>&#x5d0; tiurf neddibrof</bdo>", true),
        ("<style>.o{unicode-bidi:bidi-override}</style><p dir=auto><i class=o>x</i></p>", true),
        ("<bdo dir=rtl>tiurf neddibrof</bdo>", false),
    ] {
        let (_, mut n) = view_of(text, &[], Normalize::Full);
        assert_eq!(n.take_refusal().is_some(), refused, "{text:?}");
    }
}

/// Review 14 (V14-13): text with a construct every few hundred bytes whose other reading is
/// recorded (elements hidden or in doubt, images, autolinks, tags CommonMark does not read,
/// blank lines inside elements, tables, bidi runs) is released as it streams: readings that
/// go on from one another hold back from where their kept text starts, and no reading holds
/// back more than `join::MAX_HOLD` raw bytes.
#[test]
fn text_dense_with_readings_is_released_as_it_streams() {
    let prose = "the quick brown fox jumps over the lazy dog and runs far away into the woods. ";
    let shapes: Vec<(&str, &str, String)> = vec![
        (
            "hidden200",
            "",
            format!(
                "{}{}",
                prose.repeat(2),
                "<span style=\"display:none\">note</span> "
            ),
        ),
        (
            "doubt200",
            "",
            format!(
                "{}{}",
                prose.repeat(2),
                "<span style=\"font-variant-caps:small-caps\">note</span> "
            ),
        ),
        (
            "mixed",
            "",
            "<i style=\"x:y\">a</i><b style=\"display:none\">b</b><u style=\"opacity:.5\">c</u>"
                .to_string(),
        ),
        ("img", "", format!("{}{}", prose.repeat(2), "![x](y) ")),
        (
            "autolink",
            "",
            format!("{}{}", prose.repeat(2), "a<ab:c>b "),
        ),
        ("foq", "", format!("{}{}", prose.repeat(2), "<fo<q> ")),
        (
            "nest",
            "",
            "<span style=x:y><span style=x:y><b>a</b> some text here ".repeat(3),
        ),
        (
            "blank",
            "",
            format!(
                "{}{}",
                prose.repeat(2),
                "<span style=\"display:none\">no\n\nte</span> "
            ),
        ),
        (
            "blankdoubt",
            "",
            format!(
                "{}{}",
                prose.repeat(2),
                "<span style=\"x:y\">no\n\nte</span> "
            ),
        ),
        (
            "svgblank",
            "",
            format!("{}{}", prose.repeat(2), "<svg>no\n\nte</svg> "),
        ),
        (
            "ruby",
            "",
            format!("{}{}", prose.repeat(2), "<ruby>a<rt>b</rt></ruby> "),
        ),
        (
            "table",
            "",
            format!(
                "{}{}",
                prose.repeat(2),
                "<table>x<tr><td>y</td></tr></table> "
            ),
        ),
        (
            "bidi",
            "",
            format!("{}{}", prose.repeat(2), "\u{202e}abc\u{202c} "),
        ),
        (
            "zwsp",
            "",
            format!("{}{}", prose.repeat(2), "a\u{200b}\nb "),
        ),
        (
            "after_rule",
            "<style>b{foo:1}</style>",
            format!("{}{}", prose.repeat(2), "<b>x</b> "),
        ),
        (
            "comment",
            "",
            format!("{}{}", prose.repeat(2), "a<!-- c -->b "),
        ),
        ("dense", "", "<i style=\"x:y\">a</i>".to_string()),
        (
            "densehide",
            "",
            "<i style=\"x:y\">a</i><b hidden>b</b>".to_string(),
        ),
    ];
    for (name, prefix, unit) in shapes {
        let text = format!("{prefix}{}", unit.repeat(200_000 / unit.len()));
        let mut n = Normalizer::new(Normalize::Full);
        let mut at = 0;
        let mut most = 0;
        while at < text.len() {
            let mut end = (at + 16_384).min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let _ = n.feed(&text[at..end]);
            at = end;
            let held = n.raw_len() - n.pending_start().unwrap_or(n.raw_len());
            most = most.max(held);
        }
        assert!(most <= 2 * join::MAX_HOLD, "{name}: {most} bytes held back");
    }
}

/// The browser oracle's Markdown seeds: an `<svg>` a code block shows as text to Markdown
/// stays open to a browser reading the text as HTML, whose reading waits for its end; the
/// reader of the rendered Markdown sees an image after it as an image, not its alt text.
#[test]
fn an_image_is_read_as_an_image_while_a_browser_waits_for_an_element() {
    for text in [
        "\n```\n<svg>\n```\nforbidden fr![a](b)<a title=\">\">uit",
        "<ab:c d>\n```\n<svg>\n```\nfo![a](b)<u>rbidden fruit",
        "<template>t</template>\n```\n<svg>\n```\nforbidden ![a](b \"c)d\")fruit",
        "\n\n    <svg>\n](x \"a)b\")forbidden ![a](b \"c)d\")fruit",
        "\n\n    <svg>\nforbid</a>![a](b \"c)d\")den fruit",
        "\n\n    <svg>\n`forb![a](b \"c)d\")idden fruit",
        "\n```\n<svg>\n```\nfor![a](b)<style>.h{visibility:hidden}</style>bidden fruit",
        "\n```\n<svg>\n```\nfor![a](b)bid![c](d)den fruit",
        "\n```\n<svg>\n```\nfor![a](b)bid</svg>den fruit",
    ] {
        let view = full(text);
        assert!(reads(&view, "forbidden fruit"), "{text:?} reads {view:?}");
        same_view_at_every_split(text);
    }
}

/// The browser's reading put aside for images stays bounded however many follow (the
/// elements it waited for ended meanwhile: it records what follows, up to its bound).
#[test]
fn a_reading_put_aside_for_images_stays_bounded() {
    let held = |prefix: &str| {
        let text = format!("{prefix}for![a](b)</svg>{}", "bid![a](b) ".repeat(20_000));
        let mut n = Normalizer::new(Normalize::Full);
        let mut most = 0;
        for piece in text.as_bytes().chunks(4096) {
            let _ = n.feed(std::str::from_utf8(piece).unwrap());
            n.prune(n.out_len());
            most = most.max(n.heap_bytes());
        }
        most
    };
    let (aside, plain) = (held("\n```\n<svg>\n```\n"), held(""));
    assert!(aside < plain + 4096, "{aside} bytes held, {plain} without");
}

/// Review 15 (view): the classes the hostile review found, each read (the phrase in the view
/// or an aside) or refused.
#[test]
fn review_15_readings() {
    let cases = [
        // V15-01: elements whose content a browser may show or not close as any element does.
        "<span>forbid<meter>XX</span>den fruit",
        "<b>forbid<progress>XX</b>den fruit",
        "<span>forbid<video>XX</span>den fruit",
        "<span>forbid<datalist>XX</span>den fruit",
        "forbid<a><canvas>XX<a>den fruit",
        "forbid<select style=display:none>XX<select>den fruit",
        "forbid<select style=display:none>XX<input type=hidden>den fruit",
        "<span>forbid<dialog>XX</span>den fruit",
        // V15-02: implied end tags across names.
        "<dl style=\"display:inline\">forbid<dt style=\"display:none\">XX<dd style=\"display:inline;margin:0\">den fruit</dl>",
        "<dl style=\"display:inline\">forbid<dd style=\"display:none\">XX<dt style=\"display:inline\">den fruit</dl>",
        "forbid<p style=\"display:none\">XX<div style=\"display:inline\">den fruit</div>",
        "forbid<h1 style=\"display:none\">XX<h2 style=\"display:inline;font:inherit\">den fruit</h2>",
        "forbid<option style=\"display:none\">XX<optgroup style=\"display:inline\">den fruit",
        // V15-03: the element re-opened in doubt.
        "forbid<a style=\"display:none\">XX<a style=\"font-variant-caps:small-caps\">den fruit",
        "forbid<nobr style=\"display:none\">XX<nobr style=\"font-variant-caps:small-caps\">den fruit",
        "forbid<button style=\"display:none\">XX<button style=\"all:unset\">den fruit",
        // V15-05: overrides through variables, on the root or the body.
        "<span style=\"--d:rtl;direction:var(--d);unicode-bidi:bidi-override\">tiurf neddibrof</span>",
        "<style>:root{--u:bidi-override}span{direction:rtl;unicode-bidi:var(--u)}</style><span>tiurf neddibrof</span>",
        "<style>body{direction:rtl;unicode-bidi:bidi-override}</style>tiurf neddibrof",
        "<style>html{direction:rtl}</style><span style=\"unicode-bidi:bidi-override\">tiurf neddibrof</span>",
        // V15-06: what the view hides by kind, shown by a style; fallback content.
        "forbid<object>den</object> fruit",
        "forbid<span hidden style=\"display:inline\">den</span> fruit",
        "<style>[hidden]{display:inline}</style>forbid<span hidden>den</span> fruit",
        "forbid<datalist style=\"display:inline\">den</datalist> fruit",
        "forbid<script type=x style=\"display:inline\">den</script> fruit",
        "forbid<style style=\"display:inline\">den</style> fruit",
        "forbid<title style=\"display:inline\">den</title> fruit",
        "forbid<noframes style=\"display:inline\">den</noframes> fruit",
        "<ruby>forbid<rp style=\"display:inline\">den</rp></ruby> fruit",
        "<style>dialog{display:inline;position:static;border:0;padding:0}</style>forbid<dialog>den</dialog> fruit",
        "forbid<select style=\"all:unset\"><option>den</select> fruit",
        "forbid<input style=\"all:unset;width:2.2em\" value=\"den\"> fruit",
        // V15-07: text a style generates.
        "<q style=\"quotes:'forbid' ' fruit'\">den</q>",
        "<ul style=\"padding:0;margin:0;list-style-position:inside\"><li style=\"list-style-type:'forbidden '\">fruit</li></ul>",
        "<ol style=\"list-style-type:'forbid';list-style-position:inside;padding:0\"><li>den fruit</li></ol>",
        "<style>@counter-style x{system:cyclic;symbols:\"forbid\";suffix:\"\"}</style><ol style=\"list-style:x inside;padding:0\"><li>den fruit</li></ol>",
        // V15-08: a block displayed otherwise.
        "forbid<div style=\"display:inline\">den</div> fruit",
        "forbid<br style=\"display:none\">den fruit",
        "<style>br{display:none}</style>forbid<br>den fruit",
        "<style>div{display:inline}</style>forbid<div>den</div> fruit",
        "<ul style=\"display:inline;padding:0\"><li style=\"display:inline\">forbid</li><li style=\"display:inline\">den fruit</li></ul>",
        "forbid<hr style=\"display:inline;border:0;margin:0\">den fruit",
        "forbid<div style=\"display:inline-block\">den</div> fruit",
        // An end tag that closes nothing (a browser ignores it), or may close an element the
        // view forgot (a blank line, for Markdown): no break, or one in doubt.
        "forbid</div>den fruit",
        "forbidden </li>fruit",
        "forbidde<svg>\n\nz</svg>n </div>fruit",
        "<div>\n\nforbidden</div>fruit",
        "<div><span>\n\nforbid</span></div>den fruit",
        // Two constructs whose readings chain: each hidden alone too.
        "forbidd<b style=foo:1>en f</b><ab:c>ruit",
        "forbidd&#8203;<b style=foo:1>en f</b><ab:c>ruit",
        // A layout that sets blocks side by side (H9).
        "<div style=\"display:flex\">forbid<div>den fruit</div></div>",
        "<style>.f{display:grid;grid-auto-flow:column}</style><div class=f><p>forbid</p><p>den fruit</p></div>",
        "<section style=\"display:flex\"><div>forbid</div>\n<div>den fruit</div></section>",
        // V15-04: a bidi run with an element a style or an attribute may hide in or before it.
        "\u{202E}tiurf neddibrof<i style=\"display:none\">x</i>\u{202C}",
        "<i style=\"display:none\">x</i>\u{202E}tiurf neddibrof\u{202C}",
        "<bdo dir=rtl>tiurf nedd<i style=\"display:none\">x</i>ibrof</bdo>",
        "<span style=\"direction:rtl;unicode-bidi:bidi-override\">tiurf neddibrof<i style=\"display:none\">x</i></span>",
        "\u{202E}tiurf neddibrof<i hidden>x</i>\u{202C}",
        "<style>.h{display:none}</style>&#x202e;tiurf neddibrof<i class=h>x</i>&#x202c;",
        "<i style=\"display:none\">x</i>\u{202E}tiurf nedd<b id=q>y</b>ibrof\u{202C}",
        "\u{202E}tiurf nedd<meter>x</meter>ibrof\u{202C}",
    ];
    all_read_or_refused(&cases, reads_as_words);
}

/// As a word check matches: the phrase on a line with no letter or digit glued to it.
fn reads_as_words(view: &str, phrase: &str) -> bool {
    view.split('\n').any(|line| {
        line.match_indices(phrase).any(|(i, _)| {
            let before = line[..i].chars().next_back();
            let after = line[i + phrase.len()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        })
    })
}

/// Each text's view reads "forbidden fruit" as `read` matches (or it is refused), the same
/// at every split; every one that does not is listed.
fn all_read_or_refused(cases: &[&str], read: impl Fn(&str, &str) -> bool) {
    let mut missed = Vec::new();
    for text in cases {
        let (view, mut n) = view_of(text, &[], Normalize::Full);
        if n.take_refusal().is_none() && !read(&view, "forbidden fruit") {
            missed.push(format!("{text:?} reads {view:?}"));
        }
        same_view_at_every_split(text);
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

/// Review 15 (V15-05): text a browser shows apart from the text around it — an input's value
/// or placeholder, an image's `alt`, a `<textarea>`'s text — in the order its own bidi
/// controls, its element's direction and its element's override give it.
#[test]
fn text_shown_apart_reads_in_its_own_order() {
    for text in [
        "<input style=\"width:300px\" value=\"&#x202e;tiurf neddibrof\">",
        "<input style=\"width:300px\" placeholder=\"&#x202e;tiurf neddibrof\">",
        "<input type=button dir=rtl style=\"unicode-bidi:bidi-override\" value=\"tiurf neddibrof\">",
        "<input value=\"\u{202e}tiurf neddibrof\u{202c}\" title=\"x\">",
        "<img src=x alt=\"&#x202E;tiurf neddibrof&#x202C;\">",
        "<style>input{direction:rtl;unicode-bidi:bidi-override}</style><input value=\"tiurf neddibrof\">",
        "<div dir=rtl><input style=\"unicode-bidi:bidi-override\" value=\"tiurf neddibrof\"></div>",
        "<textarea>&#x202e;tiurf neddibrof</textarea>",
        "<textarea dir=rtl style=\"unicode-bidi:bidi-override\">tiurf neddibrof</textarea>",
        "<input value=\"&#x202e;tiurf neddibrof\" placeholder=\"&#x202e;yllis\">",
    ] {
        let (view, mut n) = view_of(text, &[], Normalize::Full);
        assert!(n.take_refusal().is_none(), "{text:?}");
        assert!(reads(&view, "forbidden fruit"), "{text:?} reads {view:?}");
        same_view_at_every_split(text);
    }
    // One value's control orders that value alone.
    let view = full("<input value=\"&#x202e;tiurf neddibrof\" placeholder=\"abc def\">");
    assert!(reads(&view, "forbidden fruit"), "{view:?}");
    assert!(!view.contains("fed cba"), "{view:?}");
    // Values with no control, no override: no other reading.
    for text in [
        "<input value=\"tiurf neddibrof\" dir=rtl>",
        "<input value=\"tiurf neddibrof\">",
    ] {
        assert_eq!(full(text).lines().count(), 2, "{text:?}");
    }
    // Values too long to keep under an override: refused.
    let long = format!(
        "<input dir=rtl style=\"unicode-bidi:bidi-override\" value=\"{}\">",
        "a".repeat(2000)
    );
    let (_, mut n) = view_of(&long, &[], Normalize::Full);
    assert!(n.take_refusal().is_some());
}

/// Review 16: what a browser shows that the view read otherwise — start tags a parser ignores
/// outside a table, blocks a ruby or a root's layout sets in line, line breaks an input drops,
/// an override in a direction its value decides, documents embedded in a frame.
#[test]
fn review_16_readings() {
    let cases = [
        "forbid<td>den fruit",
        "forbid<th>den fruit",
        "forbid<tr>den fruit",
        "forbid<tbody>den fruit",
        "forbid<caption>den fruit",
        "<p>forbid<TD style=x>den fruit</p>",
        "<ul><li>forbid<td/>den fruit</ul>",
        "<ruby>forbid<div>den fruit",
        "<ruby>forbid<p>den fruit</p></ruby>",
        "<ruby>forbid<form>den fruit",
        "<ruby>forbid<ul style=\"margin:0;padding:0;list-style:none\"><li>den fruit</ul></ruby>",
        "<style>body{display:flex}</style>forbid<div>den fruit</div>",
        "<style>html,body{display:flex}</style><p>forbid</p><p>den fruit</p>",
        "<style>body{display:flex}</style><h2 style=\"font:inherit\">forbid</h2><p>den fruit</p>",
        "<input style=\"width:300px\" value=\"&#x202e;tiurf &#10;neddibrof\">",
        "<input style=\"width:300px\" placeholder=\"&#x202e;tiurf &#10;neddibrof\">",
        "<img alt=\"&#x202e;tiurf &#10;neddibrof\">",
        "<input style=\"width:300px\" value=\"&#x202e;tiurf \r\nneddibrof\">",
        "<input style=\"width:300px\" value=\"&#x202e;tiurf\n\n neddibrof\">",
        "<input dir=rtl style=\"unicode-bidi:bidi-override\" value=\"tiurf &#10;neddibrof\">",
    ];
    all_read_or_refused(&cases, reads);
    // Inside a table the parts are the table's.
    let view = full("<table><tr><td>forbid</td><td>den fruit</td></tr></table>");
    assert!(
        !view.lines().next().unwrap().contains("forbidden"),
        "{view:?}"
    );
    for (text, refused) in [
        (
            "<input style=\"unicode-bidi:bidi-override\" dir=auto value=\"&#x5d0;tiurf neddibrof\">",
            true,
        ),
        (
            "<iframe srcdoc=\"forbid&lt;span style=display:none&gt;x&lt;/span&gt;den fruit\"></iframe>",
            true,
        ),
        ("<iframe src=\"data:text/html,forbidden%20fruit\"></iframe>", true),
        ("<iframe src=\" DATA:text/html;base64,Zm9yYmlkZGVuIGZydWl0\"></iframe>", true),
        ("<object data=\"data:text/html,forbidden%20fruit\"></object>", true),
        ("<embed src=\"data:text/html,forbid%3Cb%3Eden%3C/b%3E fruit\">", true),
        ("<iframe src=\"https://example.com/\"></iframe>", false),
        ("<img src=\"data:image/png;base64,AAAA\">", false),
    ] {
        let (_, mut n) = view_of(text, &[], Normalize::Full);
        assert_eq!(n.take_refusal().is_some(), refused, "{text:?}");
    }
}

/// Review 16's other classes: a formatting element a browser re-opens after another's end tag
/// closed it, end tags a scope boundary makes the parser ignore, table cells and floats set
/// touching, controls styled as text, ruby annotations a style shows in line, an option drawn
/// as its label, SVG glyphs placed one by one.
#[test]
fn review_16_parser_and_layout_readings() {
    let cases = [
        // Re-opened formatting elements (refused when they carry what the view reads).
        "forbid<span><b style=\"display:none\"></span>XX</b>den fruit",
        "forbid<span><i hidden></span>XX</i>den fruit",
        "<style>.h{display:none}</style>forbid<span><b class=h></span>XX</b>den fruit",
        "<a href=u>forbid<b hidden></a>XX</b>den fruit",
        "forbid<span><nobr hidden></span>XX</nobr>den fruit",
        "forbid<span><a hidden href=x></span>XX</a>den fruit",
        "forbid<span><b hidden>XX</span>YY</b>den fruit",
        "forbid<p style=\"display:inline\"><b style=\"display:none\"></p>XX</b>den fruit",
        "forbid<span><b hidden></span>X\n\nY</b>den fruit",
        "forbid<div style=display:inline><u><em hidden></div>XX</em></u>den fruit",
        "forbid<b>XX<i style=\"font-size:0\">YY</b>ZZ</i>den fruit",
        // End tags a scope boundary stops.
        "<div>forbid<applet></div>den</applet> fruit",
        "<h1 style=\"font:inherit;margin:0\">forbid<applet></h1>den fruit</applet>",
        "<li>forbid<applet></li>den fruit",
        "<div>forbid<math><mi></div>den</mi></math> fruit",
        "<div>forbid<math><mtext></div>den</mtext></math> fruit",
        "<div>forbid<math><mtext></div>den fruit",
        "<div>forbid<math><mn></div>den</mn></math> fruit",
        "<section>forbid<math><mi></section>den</mi></math> fruit",
        "<blockquote>forbid<marquee></blockquote>den fruit",
        "<article>forbid<svg><foreignObject></article>den fruit",
        // Cells and floats side by side.
        "<table cellpadding=0 cellspacing=0><tr><td>forbid</td><td>den fruit</td></tr></table>",
        "<table cellspacing=0 cellpadding=0><tr><td>forbid<td>den fruit</table>",
        "<table style=\"border-spacing:0\"><tr><th style=\"padding:0\">forbid</th><th>den fruit</th></tr></table>",
        "<table align=left cellpadding=0 cellspacing=0><tr><td>forbid</td></tr></table>den fruit",
        "<div style=\"float:left\">forbid</div><div>den fruit</div>",
        "<div style=\"float:left\">forbid</div>den fruit",
        "<ul style=\"padding:0;margin:0;list-style:none\"><li style=\"float:left\">forbid</li><li>den fruit</li></ul>",
        "<style>p{float:right}</style><p>forbid</p>den fruit",
        // Controls, annotations, options, glyphs.
        "forbid<input style=\"border:0;padding:0;width:2.1em;font:inherit;background:none\" value=\"den\"> fruit",
        "forbid<input type=button style=\"border:0;font:inherit;background:none\" value=\"den\"> fruit",
        "forbid<textarea style=\"border:0;padding:0;resize:none\">den</textarea> fruit",
        "<style>input{border:0;padding:0;background:none}</style>forbid<input value=\"den\"> fruit",
        "<style>.c{border:0}</style>forbid<button class=c>den</button> fruit",
        "<ruby>forbid<rt style=\"display:inline\">den</rt></ruby> fruit",
        "<style>rt{display:inline}</style><ruby>forbid<rt>den</rt></ruby> fruit",
        "<ruby>forbid<rt style=\"all:unset\">den</rt></ruby> fruit",
        "<ruby>forbid<rtc style=\"display:inline\">den</rtc></ruby> fruit",
        "<select><option>forbid<br>den fruit</select>",
        "<select><option>forbid<div>den fruit</div></select>",
        "<select multiple><option>forbid<h1>den</h1> fruit</select>",
        "<option>forbid<br>den fruit",
        "<select><option>forbid<style>den</style> fruit</select>",
        "<select><option>forbid<textarea>den</textarea> fruit</select>",
        "<select><option>forbid<meter>den</meter> fruit</select>",
        "<select><option>forbid<svg>den</svg> fruit</select>",
        "<select><option>forbid<ruby>x<rp>den</rp></ruby> fruit</select>",
        "<svg><text x=\"0 22 132 44 154 99 110 11 121 33 143 55 66 77 88\">fruit forbidden</text></svg>",
        "<svg><text><tspan dx=\"0,9,-40\">fruit forbidden</tspan></text></svg>",
        "<svg><text rotate=\"0 180\">fruit forbidden</text></svg>",
    ];
    all_read_or_refused(&cases, reads);
    // What reads as before: a formatting element closed by its own end tag, one without a
    // style closed by another's, an unstyled control, a single glyph position, plain options.
    for text in [
        "<p><b hidden>x</b> y</p>",
        "<span><b></span>x</b>",
        "a <input value=\"b\"> c",
        "<svg><text x=\"10\" y=\"20\" rotate=\"5\">t</text></svg>",
        "<select><option>one<option>two <b>bold</b> <span>three</span></select>",
        "<table><tr><td>a</td><td>b</td></tr></table>",
        "<div>a<applet>b</applet></div>c",
    ] {
        let (_, mut n) = view_of(text, &[], Normalize::Full);
        assert!(n.take_refusal().is_none(), "{text:?}");
    }
    // A scope boundary stops the end tag: no break, so the words join; an end tag of an
    // element not special stops at a special one inside it.
    assert!(reads(
        &full("<div>forbid<applet></div>den fruit</applet>"),
        "forbidden fruit"
    ));
    assert!(reads(
        &full("<span hidden>x<div>y</span>forbidden fruit</div>"),
        "forbidden fruit"
    ));
}

/// Review 16 (V16-12, V16-16): a comment or bogus comment a blank line cuts (or the text ends
/// in) is text to CommonMark, and what follows its opener is read as markup again.
#[test]
fn comments_commonmark_does_not_read_are_read_again() {
    let cases = [
        "a <!--forbid<b hidden>x</b>den fruit",
        "a <!--forbid<span style=\"display:none\">x</span>den fruit",
        "a <!--forbid<style>x</style>den fruit",
        "a <!--forbid<script>x</script>den fruit",
        "a <!--forbid<textarea>x</textarea>den fruit",
        "a <!--forbid<template>x</template>den fruit",
        "a <!--<bdo dir=rtl>tiurf neddibrof</bdo>",
        "a <!--forbid<i hidden>x</i>den fruit\n\nmore -->",
        "a <![CDATA[\n\nforbidden<b> fruit",
        "</h1><![CDATA[\n\nforbidden<b> fruit",
        "<div><!x\n\nforbidden<b> fruit",
        "<div>\n<![CDATA[\n\nforbidden<b> fruit",
        "x <?pi\n\nforbid<q>den fruit",
        "x <!--\n\nforbid<b>den</b> fruit",
    ];
    all_read_or_refused(&cases, reads);
    // A comment that ends in its paragraph is not read again.
    let view = full("a <!--forbid<b hidden>x</b>den fruit--> b");
    assert!(!reads(&view, "forbidden fruit"), "{view:?}");
}

/// Review 17: blocks the adoption agency moves out of a hidden element, scope boundaries only
/// where a browser has them, late rules that change display, a datalist in an option, an open
/// details in a ruby, a form a browser does not open, a tspan placed on its own, controls
/// whose border any property takes away, constructs CommonMark does not end as a browser does.
#[test]
fn review_17_readings() {
    let cases = [
        "forbid<b><rp><div style=\"display:inline\">den</b> fruit",
        "<div>forbid<b><dialog><div style=\"display:inline\">den</b> fruit</div>",
        "forbid<a href=u><datalist><div style=\"display:inline\">den</a> fruit",
        "<b>forbid<rp><section style=\"display:inline\">den</b> fruit",
        "<div style=\"display:flex\">forbid<i><video><div>den</i> fruit</div>",
        "forbid<datalist>XX<mi></datalist>den fruit",
        "forbid<datalist>XX<annotation-xml></datalist>den fruit",
        "forbid<datalist>XX<search></datalist>den fruit",
        "forbid<datalist>XX<body></datalist>den fruit",
        "forbid<datalist>XX<frameset></datalist>den fruit",
        "forbid<rp>XX<mi></rp>den fruit",
        "forbid<template>XX<applet></template>den fruit",
        "forbid<template>XX<table></template>den fruit",
        "forbid<template>XX<math><mi></template>den fruit",
        "forbid<div>den fruit</div><style>div{display:inline}</style>",
        "<div class=a>forbid</div><div class=a>den fruit</div><style>.a{display:inline}</style>",
        "<div>forbid</div>den fruit<style>div{float:left}</style>",
        "<p>forbid</p><p>den fruit</p><style>body{display:flex}</style>",
        "forbid<rp>den</rp> fruit<style>rp{display:inline}</style>",
        "forbid<title>den</title> fruit<style>title{display:inline}</style>",
        "<select><option>forbid<datalist>den</datalist> fruit</select>",
        "<select><option>forbid<span><datalist>den</datalist></span> fruit</select>",
        "<ruby>forbid<details open>den fruit",
        "<form>forbid<form>den fruit",
        "<form><b>forbid<form>den fruit</b>",
        "<form><div>forbid<form>den fruit</div>",
        "<table>forbid<form>den fruit",
        "<svg><text y=\"20\"><tspan x=\"65\">den fruit</tspan><tspan x=\"0\">forbid</tspan></text></svg>",
        "<svg><text y=\"20\">den fruit<tspan dx=\"-162\">forbid</tspan></text></svg>",
        "forbid<input style=\"-webkit-border-start:0;-webkit-border-end:0;-webkit-border-before:0;-webkit-border-after:0;padding:0\" value=\"den\"> fruit",
        "forbid<input style=\"clip-path:inset(2px)\" value=\"den\"> fruit",
        "forbid<input style=\"outline:3px solid white;outline-offset:-3px\" value=\"den\"> fruit",
        "forbid<input style=\"border-color:#fff\" value=\"den\"> fruit",
        "<style>input{-webkit-border-start:0}</style>forbid<input value=\"den\"> fruit",
        "a <![CDATA[forbidden<x> fruit",
        "a <?pi forbid<x>den fruit",
        "a <!-x forbid<x>den fruit",
        "a <!--x--!>forbid<b hidden>y</b>den fruit",
        "a <![CDATA[forbidden<x>\nfruit",
        "a <?forbidden<x>\nfruit",
        "a <!-forbidden<x> fruit",
        "a <![CDATA[x[forbidden<x> fruit",
    ];
    all_read_or_refused(&cases, reads);
    // Ordinary HTML an answer holds reads as before.
    for text in [
        "<button style=\"background:#07f;color:white;border:0;padding:6px 12px\">Click</button>",
        "<style>input,button,select,textarea{font:inherit;border-radius:4px}</style><input value=x>",
        "<input type=text style=\"border:1px solid #999;border-radius:4px;padding:4px 8px\" placeholder=\"Search\">",
        "<form><input style=\"border:1px solid #ccc;padding:4px\" name=q><textarea style=\"width:100%\">x</textarea></form>",
        "<svg width=\"200\" height=\"50\"><text x=\"10\" y=\"20\">a<tspan font-weight=\"bold\">b</tspan></text></svg>",
        "<p>a <![CDATA[x]]> b <?pi x?> c <!DOCTYPE html> d</p>",
        "<div>a<b>b<div>c</b>d</div></div>",
    ] {
        let (_, mut n) = view_of(text, &[], Normalize::Full);
        assert!(n.take_refusal().is_none(), "{text:?}");
    }
}

/// A Markdown mark the view drops glued to a word is a boundary a person sees where it makes
/// no emphasis or link: the reading with it as a space is kept too.
#[test]
fn a_dropped_mark_after_a_word_is_a_boundary_too() {
    let word_bounded = |view: &str, phrase: &str| {
        view.split('\n').any(|line| {
            line.match_indices(phrase).any(|(at, _)| {
                let before = line[..at].chars().next_back();
                let after = line[at + phrase.len()..].chars().next();
                !before.is_some_and(char::is_alphanumeric)
                    && !after.is_some_and(char::is_alphanumeric)
            })
        })
    };
    for text in [
        "x[forbidden fruit",
        "a]forbidden fruit",
        "x*forbidden fruit",
        "x`forbidden fruit",
        "x~forbidden fruit",
        "the forbidden fruit]x",
        "see x**forbidden fruit**",
        "x~y~forbidden fruit",
        "a~b and then c~forbidden fruit",
        "[x]forbidden fruit",
        "see [note]forbidden fruit",
        "x_*forbidden fruit",
    ] {
        let view = full(text);
        assert!(
            word_bounded(&view, "forbidden fruit"),
            "{text:?} reads {view:?}"
        );
        same_view_at_every_split(text);
    }
}

/// Review 18 (V18-04): a block after an element that hides its text closes the `<p>` Markdown
/// wrapped the paragraph in, and the element with it: the text shown runs on into the next
/// paragraph. With the oracle's seeds: a `<math>` inside a token element hides its text again;
/// an autolink or an image while a browser's reading waits past a code block.
#[test]
fn review_18_block_closes_markdown_paragraph() {
    let cases = [
        "<rp><div>forbidden\n\nfruit",
        "<datalist><p>forbidden\n\nfruit",
        "<rp><p>forbidden</p>\n\nfruit",
        "a<rp><p>forbidden\n\nfruit",
        "<span style=\"display:none\"><div>forbidden\n\nfruit",
        "- <rp><ul>forbidden\n\nfruit",
        "<rp><div>forbidden</rp> fruit",
        "forbidden<datalist><div> fruit",
        "forbidden <rp><p>fruit",
        "<ruby>a<rt>x<h1>forbidden\n\nfruit",
        "forbidden<math><mi><math>z</math> fruit",
        "f[](a)orbidden f![a](b)ruit",
        "\n```\n<svg>\n```\n<div>for<x:y@z>bidden fruit",
        "forbid&shy;__den<x y='>'>__ fruit",
    ];
    all_read_or_refused(&cases, reads);
    // A scope boundary open: no `<p>` in scope, nothing closes (the text stays hidden).
    for text in [
        "<table><td><rp><div>forbidden fruit",
        "<svg><desc><rp><div>forbidden fruit",
    ] {
        let view = full(text);
        assert!(!view.starts_with("forbidden"), "{text:?}: {view:?}");
    }
}

/// Markdown's block marks at a line's start are not text to a reader of the rendered answer:
/// the words of lines one after the other join across them (as across a soft break).
#[test]
fn block_marks_at_a_line_start_read_as_white_space() {
    let cases = [
        "> forbidden\n> fruit",
        ">forbidden\n>fruit",
        "> > forbidden\n> > fruit",
        "> <b>forbidden</b>\n>\n> fruit",
        "forbidden\n> fruit",
        "# forbidden\n# fruit",
        "forbidden\n###### fruit",
        "- forbidden\n- fruit",
        "+ forbidden\n+ fruit",
        "  - forbidden\n  - fruit",
        "1. forbidden\n2. fruit",
        "1) forbidden\n123456789) fruit",
        "forbidden\n===\nfruit",
        "forbidden\n---  \nfruit",
        "forbidden\n\n- fruit",
        "- > forbidden\n  > fruit",
        "> - forbidden\n> - fruit",
        "forbidden\n-\nfruit",
    ];
    all_read_or_refused(&cases, reads);
    // Text that is no mark stays: a number, a hashtag, a negative number, an escaped or spelled
    // mark.
    for (text, view) in [
        ("-5 degrees", "-5 degrees"),
        ("#tag here", "#tag here"),
        ("1.5 litres", "1.5 litres"),
        ("1234567890. x", "1234567890. x"),
        ("\\> a", "> a"),
        ("&gt; a", "> a"),
        ("a > b\n-- c", "a > b -- c"),
        ("======= x", "======= x"),
        ("####### x", "####### x"),
    ] {
        assert_eq!(full(text), view, "{text:?}");
    }
}

/// Review 19 (V19-07, V19-16, V19-17): an element a browser may draw apart from the words
/// around it — a quote, a control, a replaced element, a block the view reads in line, one a
/// style makes a block or sets apart — is a boundary between them too.
#[test]
fn elements_drawn_apart_are_a_boundary() {
    let cases = [
        "x<q>forbidden fruit</q>",
        "<q>forbidden fruit</q>x",
        "x<input type=checkbox>forbidden fruit",
        "forbidden fruit<input type=radio>x",
        "x<progress></progress>forbidden fruit",
        "x<img alt=y>forbidden fruit",
        "x<center>forbidden fruit</center>",
        "forbidden fruit<optgroup>x",
        "forbidden fruit<span style='display:block'>q</span>",
        "q<span style='display:block'>forbidden fruit</span>q",
        "forbidden fruit<b style='float:left'>q</b>",
        "<style>span{display:block}</style>forbidden fruit<span>q</span>",
        "<style>.a{float:left}</style>forbidden fruit<span class=a>q</span>",
    ];
    all_read_or_refused(&cases, reads_as_words);
    // In line with nothing of its own: one word.
    let view = full("forbid<b>den</b> fruit");
    assert!(!view.contains("forbid den"), "{view:?}");
}

/// Review 19 (V19-01): a glued mark after a `_` run (text, not emphasis) and after a letter
/// with a combining mark of its own is a boundary too.
#[test]
fn a_glued_mark_after_an_underscore_or_a_combining_mark_is_a_boundary() {
    let cases = [
        "x_*forbidden fruit",
        "x_[forbidden fruit",
        "x__*forbidden fruit",
        "x_**forbidden fruit",
        "1_*forbidden fruit",
        "\u{628}\u{64e}*forbidden fruit",
        "\u{5d1}\u{5b0}*forbidden fruit",
        "\u{995}\u{9cd}*forbidden fruit",
        "\u{915}\u{94d}[forbidden fruit",
        // V19-02: inside an element in doubt, past a blank line in a hidden one.
        "<object>x*forbidden fruit</object>",
        "<object>forbidden fruit*x</object>",
        "<details open>x~forbidden fruit",
        "a<rp>(\n\nx*forbidden fruit",
        // V19-01 b: an image's bracket with no destination.
        "![x]forbidden fruit",
    ];
    let bounded = |view: &str, phrase: &str| {
        view.split('\n').any(|line| {
            line.match_indices(phrase).any(|(i, _)| {
                let before = line[..i].chars().next_back();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || !c.is_ascii())
            })
        })
    };
    all_read_or_refused(&cases, bounded);
}

/// Review 19 (V19-10 … V19-13): foreign content and literal text as a browser draws them — a
/// CDATA section in `<svg>` or `<math>` is shown text; only an SVG `<text>`'s text-content
/// children are drawn; `<xmp>` and `<plaintext>` show tags as written; `<semantics>` and
/// `<maction>` draw their first child only.
#[test]
fn review_19_foreign_content_and_literal_text() {
    let cases = [
        "<svg><text y=20><![CDATA[forbid]]>den fruit</text></svg>",
        "<svg><text y=20>forbid<![CDATA[den]]> fruit</text></svg>",
        "<math><mi>forbid<![CDATA[den fr]]>uit</mi></math>",
        "<math><mtext><![CDATA[forbid]]><![CDATA[den]]> fruit</mtext></math>",
        "<math><mi><![CDATA[forbidden]]></mi><mi><![CDATA[ fruit]]></mi></math>",
        "<math><mi>x<![CDATA[*]]>forbidden fruit</mi></math>",
        "<svg><text y=20>forbid<q>zz</q>den fruit</text></svg>",
        "<svg><text y=20>forbid<x>zz</x>den fruit</text></svg>",
        "<svg><text y=20>forbid<mark>zz</mark>den fruit</text></svg>",
        "<svg><text y=20>forbid<desc>zz</desc>den fruit</text></svg>",
        "<svg><text y=20>forbid<g>zz</g>den fruit</text></svg>",
        "<svg><text y=20>forbid<xmp>zz</xmp>den fruit</text></svg>",
        "<svg><text y=20>forbid<svg><text>zz</text></svg>den fruit</text></svg>",
        "<svg><text y=20>forbid<tspan>den</tspan> fruit</text></svg>",
        "<svg><text y=20>forbid<q/>den fruit</text></svg>",
        "<svg><text y=20>forbid<q a=\"b\"/>den fruit</text></svg>",
        "<xmp>x<b>forbidden fruit</xmp>",
        "<plaintext>x<i>forbidden fruit",
        "<math><mtext>forbid</mtext><maction actiontype=toggle><mtext>den fruit</mtext><mtext>zz</mtext></maction></math>",
        "<math><mtext>forbid</mtext><semantics><mtext>den</mtext><mtext>zz</mtext></semantics><mtext>&nbsp;fruit</mtext></math>",
    ];
    all_read_or_refused(&cases, reads);
    // Outside foreign content `<![CDATA[` is a bogus comment, hidden up to its `>`.
    let view = full("forbid<![CDATA[x]]>den fruit");
    assert!(reads(&view, "forbidden fruit"), "{view:?}");
    // A literal's markup is characters; `</xmp` ends it.
    let view = full("<svg><text>forbid<![CDATA[den]]]> fruit</text></svg>");
    assert!(view.starts_with("forbidden] fruit"), "{view:?}");
    let view = full("<xmp>forbidden<b> fruit</xmp>");
    assert!(view.starts_with("forbidden<b> fruit"), "{view:?}");
    let view = full("<xmp>a</XMP >forbid<b>den</b> fruit");
    assert!(reads(&view, "forbidden fruit"), "{view:?}");
    // What is not drawn stays hidden: an unknown child of a `<text>`, a second child.
    for text in [
        "<svg><text>a<q>forbidden fruit</q></text></svg>",
        "<math><semantics><mi>a</mi><mi>forbidden fruit</mi></semantics></math>",
    ] {
        let view = full(text);
        assert!(
            !view.lines().next().unwrap_or("").contains("forbidden"),
            "{text:?} reads {view:?}"
        );
    }
}

/// Review 19 (V19-04): a comment or bogus comment is cut for CommonMark by any paragraph end —
/// a line that starts a block (heading, quote, list item, rule, fence, HTML block) as well as
/// a blank line — and is read again from its opener.
#[test]
fn review_19_paragraph_ended_by_a_block_start() {
    let cases = [
        "a <!--x\n# forbidden<!--q--> fruit",
        "a <!--x\n> forbidden<!--q--> fruit",
        "a <!--x\n- forbidden<!--q--> fruit",
        "a <!--x\n1. forbidden<!--q--> fruit",
        "a <!--x\n***\nforbidden<!--q--> fruit",
        "a <!--x\n<div>\nforbidden<!--q--> fruit",
        "a <!--x\n# b\nforbidden<!--q--> fruit",
        "a <!--x\n# forbid<!---->den fruit",
        "a <?x\n# forbidden<?q?> fruit",
        "a <?x\n- forbid<?q?>den fruit",
        "a <![CDATA[x\n# forbidden<![CDATA[q]]> fruit",
        "* a <!--x\n* forbidden<!--q--> fruit",
        "a <!x\n# forbid<b hidden>q</b>den fruit",
        "a <!x\n- forbidden<b hidden>q</b> fruit",
        "a <!DOCTYPE\n# forbidden<b hidden>q</b> fruit",
        "a <!x\n***\nforbidden<b hidden>q</b> fruit",
        "a <!--x\n```\nforbidden<!--q--> fruit",
        "a <!--x\n===\nforbidden<!--q--> fruit",
    ];
    all_read_or_refused(&cases, reads);
}

/// Review 19 (V19-03, V19-14, V19-15): a text read again is read as the text's own view would
/// read it there — a construct cut inside it is read again in turn, the style sheets' rules
/// apply, the bidi controls open around the construct order it.
#[test]
fn review_19_text_read_again_reads_as_the_view_there() {
    let cases = [
        "a <!--x\n\nb <!--y\n\nforbidden<b hidden>q</b> fruit",
        "a <!--x\n\nb <!--y\n\nforbid<b hidden>q</b>den fruit",
        "a <?x\n\nb <?y\n\nforbid<b hidden>q</b>den fruit",
        "a <?x\n\nb <![CDATA[y\n\nforbid<b hidden>q</b>den fruit",
        "a <!--x\n\nb <!--y\n\nforbidden<script>q</script> fruit",
        "a <!--x\n\nb <!--y\n\nforbid<rp>q</rp>den fruit",
        "a <!--x\n\nb <!--y\n\nforbid<span style='display:none'>q</span>den fruit",
        "a<style>b{display:none}</style> <!--x\n\nforbid<b>q</b>den fruit",
        "a<style>b{display:none}</style> <?x\n\nforbid<b>q</b>den fruit",
        "a<style>b{display:none}</style> <?x\n\nforbidden<b>q</b> fruit",
        "a<style>.c{display:none}</style> <!--x\n\nforbid<b class=c>q</b>den fruit",
        "<style>q{display:none}</style>a <![CDATA[x\n\nforbidden<q>z</q> fruit",
        "<bdo dir=rtl>a <?tiurf neddibrof<x></bdo>",
        "\u{202e}a <?tiurf neddibrof<x>\u{202c}",
        "<bdo dir=rtl>a <![CDATA[tiurf neddibrof<x></bdo>",
        "<span style='unicode-bidi:bidi-override;direction:rtl'>a <?tiurf neddibrof<x></span>",
        "<bdo dir=rtl>a <!-tiurf neddibrof<x></bdo>",
    ];
    all_read_or_refused(&cases, reads);
    // Deeper than a few views, a cut construct is refused.
    let deep = "a <!--x\n\n".repeat(6) + "forbid<b hidden>q</b>den fruit";
    let (_, mut n) = view_of(&deep, &[], Normalize::Full);
    assert!(n.take_refusal().is_some());
}

/// Review 19 (V19-06): an SVG image in a `data:` URL draws its text for a person; the view
/// does not read SVG documents: refused, wherever a tag's value or a link's destination names
/// one, however a browser would spell it.
#[test]
fn review_19_svg_data_images_are_refused() {
    let refused = [
        "![x](data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciPjwvc3ZnPg==)",
        "![x](data:image/svg+xml,%3Csvg%3E%3Ctext%3Eforbidden%20fruit%3C/text%3E%3C/svg%3E)",
        "![x](<data:image/svg\\+xml,x>)",
        "[x](data:image/svg+xml,x)",
        "<img src='data:image/svg+xml;base64,PHN2Zz4='>",
        "<img srcset=\"a.png 1x, data:image/svg+xml,%3Csvg%3E 2x\">",
        "<img src=\"data:image/svg&#43;xml,x\">",
        "<img src=\"data:image/svg&#x00000000000000000000002B;xml,x\">",
        "<img src=\"data:image/svg&plus;xml,x\">",
        "<img src=\"  DATA:Image/SVG+XML;utf8,x\">",
        "<img src=\"data:image/svg+\nxml,x\">",
        "<div style=\"background:url(data:image/svg+xml,x)\">a</div>",
        "<svg><image href=\"data:image/svg+xml,x\"/></svg>",
        "![a][r]\n\n[r]: data:image/svg+xml,%3Csvg%3E",
        "[r]:\t<data:image/svg&#43;xml,x>",
        "[r]: x <img src=\"data:image/svg+xml,x\">",
    ];
    for text in refused {
        for cut in 0..=text.len() {
            if !text.is_char_boundary(cut) {
                continue;
            }
            let (_, mut n) = view_of(text, &[cut], Normalize::Full);
            assert!(n.take_refusal().is_some(), "{text:?} cut at {cut}");
        }
    }
    for text in [
        "<img src=\"data:image/png;base64,iVBORw0KGgo=\">",
        "![x](https://example.com/a.svg)",
        "a data:image/svg+xml b",
        "<a title=\"data:image/svg xml\">x</a>",
    ] {
        let (_, mut n) = view_of(text, &[], Normalize::Full);
        assert!(n.take_refusal().is_none(), "{text:?}");
    }
}

/// A review of review 19's fixes: a literal ends with Markdown's code block and decodes
/// references as CommonMark does; more block starts (numbers with zeros, a lone CR, white space
/// after an HTML block's name, indented in a container); a cut construct inside foreign content
/// or a table is refused; SVG images named in style sheets, CSS escapes and frames' URLs with
/// tabs; a `<defs>`'s text is read; `<script>` in foreign content is an element.
#[test]
fn review_19_fixes_reviewed() {
    let tspans = "<tspan>".repeat(64);
    let nested = format!("<svg><text y=20>{tspans}forbid<![CDATA[den]]> fruit");
    let cases = [
        "~~~\n<xmp>\n~~~\nforbid<b hidden>x</b>den fruit",
        "a <xmp>forbidden&#32;fruit</xmp>",
        "a <!--\n01. forbid<b hidden>x</b>den fruit -->",
        "a <!--\r# forbid<b hidden>x</b>den fruit -->",
        "a <!--\n<div\u{a0}>forbid<b hidden>x</b>den fruit -->",
        "1.  a <!--\n    # forbid<b hidden>x</b>den fruit -->",
        "<svg><text y=20><![CDATA[forbid<desc>x</desc>den fruit</text></svg>",
        "z <table>a <!--forbid<tr><td>x</td></tr>den fruit",
        &nested,
        "forbid<svg width=120 height=20><defs><text id=t y=15>den fruit</text></defs><use href=\"#t\"/></svg>",
        "forbid<svg width=0 height=0><script><b>den fruit</b></script></svg>",
        "forbid<math><semantics><input><mtext>den fruit</mtext></semantics></math>",
    ];
    all_read_or_refused(&cases, reads);
    // A void name in foreign content is an element: what it holds is its text.
    let view = full("<svg><text>a<input>forbidden fruit</text></svg>");
    assert!(
        !view.lines().next().unwrap_or("").contains("forbidden"),
        "{view:?}"
    );
    for text in [
        "<style>body{background-image:url(data:image/svg+xml,x)}</style>",
        "<div style=\"background:url(data:image/svg\\2b xml,x)\">a</div>",
        "<div style=\"background:url(data:image/sv\\67+xml,x)\">a</div>",
        "<iframe src=\"da&#9;ta:text/html;base64,Zm9y\"></iframe>",
        "<iframe src=\"\u{1}data:text/html,x\"></iframe>",
        "<style>mtext{display:inline}</style>forbid<math><semantics><mi></mi><mtext>den fruit</mtext></semantics></math>",
        "forbid<math><maction><mi></mi><mtext style=\"display:inline\">den fruit</mtext></maction></math>",
    ] {
        let (_, mut n) = view_of(text, &[], Normalize::Full);
        assert!(n.take_refusal().is_some(), "{text:?}");
    }
}

/// Review 20 (H6): an element's namespace is the tree builder's — inside foreign content every
/// element takes its parent's (`<math><svg>` is MathML's, `<svg><math>` SVG's) unless the parent
/// lets HTML through; a breakout tag pops every foreign element up to an HTML one or such a
/// parent; an `<annotation-xml>` holds HTML only with an HTML `encoding`; drawing follows the
/// namespace, not the name.
#[test]
fn review_20_namespaces_as_the_tree_builder_decides() {
    let cases = [
        "forbid<math><svg><desc><b>den fruit",
        "forbid<math><svg><title><b>den fruit",
        "forbid<math><svg><foreignObject><b>den fruit",
        "forbid<math><annotation-xml><b>den fruit",
        "forbid<math><annotation-xml encoding=text/plain><i>den fruit",
        "forbid<math><mrow><annotation-xml><math><desc><b>den fruit",
        "<math><mi>forbid</mi><svg><mi>den fruit</mi></svg></math>",
        "<math><mi>forbid</mi><template><mi>den fruit</mi></template></math>",
        "<math><mi>forbid</mi><datalist><mi>den fruit</mi></datalist></math>",
        "<math><mi>forbid</mi><mi><math><mi>den fruit</mi></math></mi></math>",
        "<math><mi>forbid</mi><mtext><svg><text>den fruit</text></svg></mtext></math>",
        "<svg><text>forbid<a>den fruit</a></text></svg>",
        "<math><annotation-xml><mi>forbid</mi><mi>den fruit</mi></annotation-xml></math>",
        "<math><annotation><mi>forbidden fruit</mi></annotation></math>",
    ];
    all_read_or_refused(&cases, reads);
    // Not drawn: an SVG element's unknown or shape children, a MathML annotation, a phantom.
    for text in [
        "<svg><foo><text>forbidden fruit</text></foo></svg>",
        "<svg><circle><text>forbidden fruit</text></circle></svg>",
        "<svg><math><mi>forbidden fruit</mi></math></svg>",
        "<math><annotation-xml encoding=\"TEXT/HTML\"><b>forbidden fruit</b></annotation-xml></math>",
        "<math><annotation>forbidden fruit</annotation></math>",
        "<math><annotation-xml encoding=text/html><mi>forbidden fruit</mi></annotation-xml></math>",
        "<math><annotation-xml><svg><text>forbidden fruit</text></svg></annotation-xml></math>",
        "<math><mphantom><mi>forbidden fruit</mi></mphantom></math>",
        "<math><mi><mglyph>forbidden fruit</mglyph></mi></math>",
    ] {
        let view = full(text);
        assert!(
            !view.lines().next().unwrap_or("").contains("forbidden"),
            "{text:?} reads {view:?}"
        );
    }
    // An end tag inside foreign content closes the innermost foreign element of its name
    // whatever foreign element is open inside it; an HTML one inside stops it.
    let view = full("<svg><g><desc>x</g><text>forbidden fruit</text></svg>");
    assert!(reads(&view, "forbidden fruit"), "{view:?}");
}

/// Review 20 (browser oracle): a raw-text element's end tag closes it (an SVG `<style>` in a
/// `<text>` hid the rest of the text); a `_` run after a construct's `>` or `;` opens or closes
/// emphasis, as CommonMark reads the punctuation before it; MathML's formula and tokens and an
/// `<svg>` are boxes (the words either side read apart too); a Markdown construct that a
/// renderer writes as a tag ending foreign content is refused inside it (a browser reading the
/// text as HTML keeps the foreign elements open).
#[test]
fn review_20_raw_text_ends_emphasis_after_constructs_markdown_in_foreign_content() {
    let cases = [
        "<svg><text>forbid<style>p{}</style>den fruit</text></svg>",
        "<svg><text>forbid<style>p{}</style >den fruit</text></svg>",
        "<span>forbid<script>x</script></span>den fruit",
        "forbid<b>__den__ fruit",
        "forbid<!DOCTYPE x>__den__ fruit",
        "forbid<?pi?>__den__ fruit",
        "forbid&shy;__den<x y='>'>__ fruit",
        "forbidden<math><svg><desc>- <math><mi>fruit",
        "forbidden<math><mi>fruit</mi></math>",
        // (A literal delimiter run glued before the phrase, emphasis inside it: each mark is a
        // reading of its own — review 20, round 2.)
        "x**forb*idd*en fruit",
        "a**forb`idd`en fruit",
        "a**forb~~idd~~en fruit",
        "x**f*o*rbidden fruit",
        "a*a*a**forb*idd*en fruit",
        "[x**forb*idd*en fruit](u)",
        // (Only CommonMark's line endings end a line: U+2029, U+0085 close nothing.)
        "<svg><text>forbidden \u{2029}<q>zz</q> fruit</text></svg>",
        "<svg><text>forbidden \u{85}<q>zz</q> fruit</text></svg>",
        "<math><mi>forbidden</mi>\u{2029}<mrow>zz</mrow><mi>fruit</mi></math>",
        "forbid<span hidden>x\r\rzz</span>den fruit",
        "forbid<span hidden>x\r\n\r\nzz</span>den fruit",
    ];
    all_read_or_refused(&cases, reads);
    for text in [
        "<svg><text>*x*fo<x>rbidden fruit",
        "<svg><text>a **b** c</text></svg>",
        "<svg><text>`a`</text></svg>",
        "<svg><text>![a](b)</text></svg>",
        "<svg><text>_x_</text></svg>",
        "forbid<math><mrow>*x*den fruit",
        "forbidden<math><annotation-xml>![a](b) fruit",
        // Text dense with marks past the bound (each a reading of its own).
        &"*a".repeat(2048),
        &"![a*".repeat(1024),
    ] {
        let (_, mut n) = view_of(text, &[], Normalize::Full);
        assert!(n.take_refusal().is_some(), "{text:?}");
    }
    // Where no tag ends foreign content: read.
    for text in [
        "<svg><text>a * b snake_case</text></svg>",
        "<math><mi>*x*</mi></math>",
        "*forbidden* fruit",
    ] {
        let (_, mut n) = view_of(text, &[], Normalize::Full);
        assert!(n.take_refusal().is_none(), "{text:?}");
    }
}
