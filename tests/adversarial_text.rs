//! Adversarial text: what every reader renders as a banned phrase is matched as that phrase,
//! on every protocol, in requests and in streamed answers — invisible characters, look-alike
//! letters of another script, compatibility forms (fullwidth, mathematical, ligatures) and
//! Unicode spaces — while text in other languages passes untouched (a multilingual clean
//! corpus with banned words that are look-alike skeletons of its words).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::protocols::*;
use common::proxy::*;

const PACK: &str = r#"
validators:
  - id: no-forbidden
    type: banned_words
    message: "Blocked: forbidden word."
    params: { words: ["forbidden fruit"], direction: both }
"#;

/// The banned phrase as readers see it, spelled the ways an attacker (or a model told to)
/// would: each renders as "forbidden fruit" (Markdown renders a single line break as a space,
/// shows no emphasis marks, and renders character references as their characters).
const OBFUSCATED: [&str; 20] = [
    "forbid\u{200b}den fruit",
    "\u{ff46}\u{ff4f}\u{ff52}\u{ff42}\u{ff49}\u{ff44}\u{ff44}\u{ff45}\u{ff4e} \u{ff46}\u{ff52}\u{ff55}\u{ff49}\u{ff54}",
    "forbidden\u{a0}fruit",
    "f\u{43e}rbidden fruit",
    "forbid\u{ad}den fruit",
    "FORBIDDEN FRU\u{406}T",
    "for\u{2060}bid\u{feff}den\u{3000}fr\u{1d42e}it",
    "\u{1d41f}orbidden fruit",
    "forbidden\u{1680}fruit",
    "\u{a730}\u{1d0f}\u{280}\u{299}\u{26a}\u{1d05}\u{1d05}\u{1d07}\u{274} \u{a730}\u{280}\u{1d1c}\u{26a}\u{1d1b}",
    "forb\u{131}dden fr\u{3c5}\u{131}t",
    "forbi\u{fe0f}dden\u{2009}fr\u{200e}uit",
    "forbidden   fruit",
    "Forbidden\n\tfruit",
    "f\u{336}o\u{336}r\u{336}b\u{336}i\u{336}d\u{336}d\u{336}e\u{336}n\u{336} fr\u{337}\u{322}ui\u{35c}t",
    "for**bid**den *fruit*",
    "_forbidden_ __fruit__",
    "&#102;orbidden&nbsp;fruit",
    "forbid&shy;den &#x46;ruit",
    "&fopf;orbidden fr&#117;it",
];

/// `text` cut in two at its middle character.
fn halves(text: &str) -> (&str, &str) {
    let mut mid = text.len() / 2;
    while !text.is_char_boundary(mid) {
        mid += 1;
    }
    text.split_at(mid)
}

#[tokio::test]
async fn obfuscated_phrases_in_answers_are_blocked_before_any_of_them_is_released() {
    for p in all() {
        for (k, phrase) in OBFUSCATED.iter().enumerate() {
            let (a, b) = halves(phrase);
            let (frames, first) = (p.text_frames)(&["Eat the ", a, b, ". Yum"]);
            let body = frames.concat();
            let mut expected = frames[..first + 1].concat();
            expected.push_str(&(p.block_frame)("Blocked: forbidden word."));
            let mock = split_mock(body.clone()).await;
            let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
            // Every byte for the first spelling; a stride for the others.
            let step = if k == 0 { 1 } else { 11 };
            for split in (0..body.len()).step_by(step) {
                let got = stream(&p, proxy.addr(), "hi", &format!("{split},{}", split + 5)).await;
                assert_eq!(
                    got.text(),
                    expected,
                    "{} {phrase:?} split at {split}",
                    p.name
                );
            }
        }
    }
}

#[tokio::test]
async fn obfuscated_phrases_in_requests_never_reach_the_provider() {
    for p in all() {
        let mock = split_mock(String::new()).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        for phrase in OBFUSCATED {
            let prompt = format!("Tell me about the {phrase}.");
            for (path, body) in [
                (p.plain_path, (p.plain_body)(&prompt)),
                (p.stream_path, (p.stream_body)(&prompt)),
            ] {
                let a = send(proxy.addr(), "POST", path, body, &[]).await;
                assert_eq!(a.status, 400, "{} {phrase:?}: {}", p.name, a.text());
                assert_eq!(
                    (p.error_message)(&a.json()),
                    "Blocked: forbidden word.",
                    "{}",
                    p.name
                );
            }
        }
        assert_eq!(mock.request_count(), 0, "{}", p.name);
    }
}

/// Banned words that are the look-alike skeletons of words in the corpus (`сок` reads as
/// `cok`, `хор` as `xop`, `рок` as `pok`, `сор` as `cop`, Greek `ορος` as `opoc`): none may
/// match. (Accents are read as not there — a person reads the letters under marks drawn over
/// every letter, whichever compose — so `creme` does match `Crème`: docs/packs.md.)
const CLEAN_PACK: &str = r#"
validators:
  - id: skeletons
    type: banned_words
    params: { words: ["cok", "xop", "pok", "cop", "opoc"], direction: both }
"#;

const CLEAN_CORPUS: [&str; 8] = [
    "Сок, хор и рок — это не сор. Привет, как дела?",
    "ΣΟΚ ΧΟΡ: ο όρος και η θάλασσα, ορος.",
    "東京で寿司を食べました。ラーメンも美味しかった！",
    "مرحبا بالعالم، كيف حالك اليوم؟",
    "Crème brûlée, naïve café, Ångström, São Paulo, Ærøskøbing.",
    "Ｅｘｃｅｌｌｅｎｔ ｗｏｒｋ: fine ﬁnal ① ½ ㎏",
    "Հայերեն տեքստ, Ελληνικά γράμματα, Кириллица.",
    "한국어 문장입니다. ﻿Zero-width joiners: क्‍ष and 👩‍💻.",
];

#[tokio::test]
async fn a_multilingual_clean_corpus_passes_untouched() {
    for p in all() {
        let (frames, _) = (p.text_frames)(&CLEAN_CORPUS);
        let body = frames.concat();
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), CLEAN_PACK, "").await;
        for split in (0..body.len()).step_by(13) {
            let a = stream(&p, proxy.addr(), "hi", &split.to_string()).await;
            assert_eq!(a.status, 200, "{}", p.name);
            assert_eq!(a.text(), body, "{} split at {split}", p.name);
        }
        for text in CLEAN_CORPUS {
            let a = stream(&p, proxy.addr(), text, "").await;
            assert_eq!(
                (a.status.as_u16(), a.text()),
                (200, body.clone()),
                "{} {text}",
                p.name
            );
        }
    }
}

const REDACT_PACK: &str = r#"
validators:
  - id: no-fruit
    type: content_excludes
    mode: redact
    params: { patterns: ["forbidden fruit"] }
"#;

#[tokio::test]
async fn a_redaction_masks_the_obfuscating_characters_too() {
    for p in all() {
        for (head, tail) in [
            ("forbid\u{200b}den fr\u{ad}u", "\u{456}t now"),
            ("\u{ff46}orbidden\u{a0}fr", "uit now"),
            ("forbidden\r\n", "\t fruit now"),
        ] {
            let (frames, _) = (p.text_frames)(&["Eat the ", head, tail]);
            let body = frames.concat();
            let (redacted, _) = (p.text_frames)(&["Eat the ", "[REDACTED:no-fruit]", " now"]);
            let expected = redacted.concat();
            let mock = split_mock(body.clone()).await;
            let proxy = start_proxy_all(&mock.base_url(), REDACT_PACK, "").await;
            for split in (0..body.len()).step_by(7) {
                let a = stream(&p, proxy.addr(), "hi", &split.to_string()).await;
                assert_eq!(a.text(), expected, "{} {head:?} split at {split}", p.name);
            }
        }
    }
}

#[tokio::test]
async fn normalize_none_matches_the_text_as_it_came() {
    let pack = r#"
validators:
  - id: literal
    type: banned_words
    params: { words: ["forbidden fruit"], normalize: none }
"#;
    let p = chat();
    let (frames, _) = (p.text_frames)(&["Eat the forbid\u{200b}den fruit"]);
    let body = frames.concat();
    let mock = split_mock(body.clone()).await;
    let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
    let a = stream(&p, proxy.addr(), "hi", "").await;
    assert_eq!(a.text(), body);
}
