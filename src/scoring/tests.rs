//! The metrics on small cases whose values come from the reference implementations (sacreBLEU
//! 2.6.0, rouge-score 0.1.2, NLTK 3.10.4); the comparison on a few hundred generated cases is
//! tests/metrics.rs. METEOR runs here on a tiny WordNet written to a temporary folder.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::meteor::{Meteor, MeteorError};
use super::{bleu, porter, rouge};

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn bleu_matches_sacrebleu_on_known_sentences() {
    let identical = bleu::sentence_bleu("The cat sat on the mat.", &["The cat sat on the mat."]);
    assert!(near(identical, 1.0), "{identical}");
    let close = bleu::sentence_bleu(
        "The cat sat on the mat.",
        &["The cat is sitting on the mat."],
    );
    assert!(near(close, 42.38365628278778 / 100.0), "{close}");
    // Two tokens: the effective order is 2, and the brevity penalty applies.
    let short = bleu::sentence_bleu("the cat", &["the cat sat"]);
    assert!(near(short, 60.653065971263366 / 100.0), "{short}");
    assert_eq!(bleu::sentence_bleu("hello there", &["general kenobi"]), 0.0);
    assert_eq!(bleu::sentence_bleu("", &["anything"]), 0.0);
    assert_eq!(bleu::sentence_bleu("anything", &[]), 0.0);
    let corpus = bleu::corpus_bleu(
        &["The cat sat on the mat.", "A dog barked."],
        &[
            vec!["The cat is sitting on the mat."],
            vec!["The dog barked loudly."],
        ],
    );
    assert!(near(corpus, 33.471269495094774 / 100.0), "{corpus}");
    assert_eq!(bleu::corpus_bleu(&[], &[]), 0.0);
}

#[test]
fn tokenizer_13a_matches_sacrebleu() {
    let cases = [
        (
            "Hello, world! It costs $3.50 (approx.) &amp; 1,000 units-wide 10-year.",
            "Hello , world ! It costs $ 3.50 ( approx . ) & 1,000 units-wide 10 - year .",
        ),
        ("a..b", "a . . b"),
        ("x-\ny<skipped>z", "xyz"),
        ("  \u{1f}tab\there\n", "tab here"),
    ];
    for (line, tokens) in cases {
        assert_eq!(bleu::tokenize_13a(line).join(" "), tokens, "{line:?}");
    }
}

#[test]
fn rouge_matches_rouge_score_on_known_sentences() {
    let s = rouge::score(
        "The quick brown dog jumps on the log.",
        "The quick brown fox jumps over the lazy dog",
        true,
    );
    assert!(near(s.rouge1.precision, 0.75) && near(s.rouge1.recall, 2.0 / 3.0));
    assert!(near(s.rouge1.fmeasure, 0.7058823529411765));
    assert!(near(s.rouge2.precision, 0.2857142857142857) && near(s.rouge2.recall, 0.25));
    assert!(near(s.rouge_l.precision, 0.625) && near(s.rouge_l.fmeasure, 0.5882352941176471));
    // The stemmer makes "running dogs" meet "the dog runs".
    let plain = rouge::score("running dogs", "the dog runs", false);
    assert_eq!(plain, rouge::RougeScores::default());
    let stemmed = rouge::score("running dogs", "the dog runs", true);
    assert!(near(stemmed.rouge1.precision, 1.0) && near(stemmed.rouge1.fmeasure, 0.8));
    assert_eq!(stemmed.rouge2.fmeasure, 0.0);
    assert!(near(stemmed.rouge_l.precision, 0.5) && near(stemmed.rouge_l.fmeasure, 0.4));
    // Non-ASCII letters separate tokens; nothing left scores 0 without dividing by zero.
    assert_eq!(rouge::tokenize("Café naïve", false), ["caf", "na", "ve"]);
    assert_eq!(rouge::score("", "", true), rouge::RougeScores::default());
}

#[test]
fn porter_matches_nltk() {
    let cases = [
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("ties", "tie"),
        ("feed", "feed"),
        ("agreed", "agre"),
        ("plastered", "plaster"),
        ("motoring", "motor"),
        ("sing", "sing"),
        ("conflated", "conflat"),
        ("hopping", "hop"),
        ("filing", "file"),
        ("happy", "happi"),
        ("relational", "relat"),
        ("generalization", "gener"),
        ("dying", "die"),
        ("skies", "sky"),
        ("flies", "fli"),
        ("x*ded", "x*ded"),
        ("by", "by"),
        ("yyyy", "yyyi"),
    ];
    for (word, stem) in cases {
        assert_eq!(porter::stem(word), stem, "{word}");
    }
}

/// A WordNet of a few synsets, in the database files' format.
pub(crate) fn tiny_wordnet() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    let header = "  1 This is a test WordNet.\n";
    // Offsets are the lines' byte positions in real files; here they only have to agree with
    // the index.
    write(
        "data.noun",
        &format!("{header}00000100 06 n 03 car 0 auto 0 motor_car 0 000 | a vehicle\n00000200 06 n 01 goose 0 000 | a bird\n"),
    );
    write("index.noun", &format!("{header}auto n 1 0 1 0 00000100  \ncar n 1 0 1 0 00000100  \ngoose n 1 0 1 0 00000200  \nmotor_car n 1 0 1 0 00000100  \n"));
    write("noun.exc", "geese goose\n");
    write(
        "data.verb",
        &format!("{header}00000100 38 v 02 begin 0 start 0 000 | get going\n"),
    );
    write(
        "index.verb",
        &format!("{header}begin v 1 0 1 0 00000100  \nstart v 1 0 1 0 00000100  \n"),
    );
    write("verb.exc", "began begin\n");
    write(
        "data.adj",
        &format!("{header}00000100 00 a 02 big(a) 0 large 0 000 | of size\n"),
    );
    write(
        "index.adj",
        &format!("{header}big a 1 0 1 0 00000100  \nlarge a 1 0 1 0 00000100  \n"),
    );
    write("adj.exc", "bigger big\n");
    write(
        "data.adv",
        &format!("{header}00000100 02 r 01 fast 0 000 | quickly\n"),
    );
    write("index.adv", &format!("{header}fast r 1 0 1 0 00000100  \n"));
    write("adv.exc", "");
    dir
}

#[test]
fn meteor_aligns_exact_stem_and_synonym_matches() {
    let dir = tiny_wordnet();
    let meteor = Meteor::load(dir.path()).unwrap();
    assert_eq!(meteor.sizes(), (9, 5));
    // Synonyms through morphy: exception lists, detachment rules, adjective markers removed,
    // multi-word lemmas left out.
    assert_eq!(meteor.synonyms("cars"), ["auto", "car"]);
    assert_eq!(meteor.synonyms("geese"), ["goose"]);
    assert_eq!(meteor.synonyms("bigger"), ["big", "large"]);
    assert_eq!(meteor.synonyms("starting"), ["begin", "start"]);
    assert!(meteor.synonyms("unknown").is_empty());

    // All three stages: "the" exact, "cars"/"car" by stem, "auto"/"car" by synonym.
    let p: f64 = 1.0;
    let all = meteor.score("the auto", &["The car"]);
    let fmean = p * p / (0.9 * p + 0.1 * p);
    assert!(
        near(all, (1.0 - 0.5 * (1.0f64 / 2.0).powi(3)) * fmean),
        "{all}"
    );
    // Two matches of three hypothesis words (big exact, auto/car synonyms), in two chunks.
    let partial = meteor.score("big red auto", &["car big"]);
    let (precision, recall) = (2.0 / 3.0, 1.0);
    let fmean = precision * recall / (0.9 * precision + 0.1 * recall);
    assert!(
        near(partial, (1.0 - 0.5 * (2.0f64 / 2.0).powi(3)) * fmean),
        "{partial}"
    );
    // NLTK's synonym stage sees the stems the stem stage left: "large" is "larg" by then, which
    // WordNet does not know, and the reference's "large" is "larg" too.
    assert_eq!(meteor.score("large", &["big"]), 0.0);
    assert!(meteor.score("big", &["large"]) == 0.0);
    // The best reference counts; nothing in common, no token or no reference score 0.
    assert!(near(meteor.score("the auto", &["zebra", "the car"]), all));
    assert_eq!(meteor.score("zebra", &["the car"]), 0.0);
    assert_eq!(meteor.score("", &["the car"]), 0.0);
    assert_eq!(meteor.score("the car", &[]), 0.0);
}

#[test]
fn meteor_refuses_a_missing_or_broken_wordnet() {
    let missing = Meteor::load(std::path::Path::new("/nonexistent/wordnet")).unwrap_err();
    assert!(matches!(missing, MeteorError::Unreadable { .. }));
    let message = missing.to_string();
    assert!(
        message.contains("/nonexistent/wordnet/data.noun"),
        "{message}"
    );
    assert!(
        message.contains("apt-get install wordnet-base"),
        "{message}"
    );

    let dir = tiny_wordnet();
    std::fs::write(dir.path().join("index.adj"), "big a 1 0 1 0 00000999\n").unwrap();
    let broken = Meteor::load(dir.path()).unwrap_err().to_string();
    assert!(
        broken.contains("index.adj, line 1") && broken.contains("offset 999"),
        "{broken}"
    );
    std::fs::remove_file(dir.path().join("verb.exc")).unwrap();
    assert!(Meteor::load(dir.path()).is_err());
}

#[test]
fn meteor_is_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Meteor>();
}
