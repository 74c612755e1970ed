//! The text metrics (src/scoring/) against their reference implementations: sacreBLEU,
//! Google's rouge-score and NLTK (METEOR, the Porter stemmer, WordNet's synsets), run in one
//! Python process (tests/metrics/oracle.py) over a few hundred generated cases; every score
//! must agree to 1e-6.
//!
//! `#[ignore]`d: it needs `$GUARDWIRE_METRICS_PYTHON` (the venv tests/run builds from
//! tests/metrics/requirements.txt), `$NLTK_DATA` (the nltk_data folder tests/run assembles from
//! Debian's wordnet-base and tests/metrics/lexnames) and Debian's WordNet for guardwire
//! (`$GUARDWIRE_WORDNET_DIR`, /usr/share/wordnet by default).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use guardwire::scoring::{bleu, meteor::Meteor, porter, rouge};
use serde_json::{json, Value};

const TOLERANCE: f64 = 1e-6;

/// splitmix64: the cases are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Plain words, words with WordNet synonyms and inflections, stems, numbers, punctuation,
/// entities, unicode and odd tokens.
const WORDS: &[&str] = &[
    "the",
    "a",
    "an",
    "of",
    "to",
    "in",
    "on",
    "and",
    "is",
    "was",
    "were",
    "be",
    "it",
    "that",
    "cat",
    "cats",
    "dog",
    "dogs",
    "mat",
    "rug",
    "sat",
    "sitting",
    "sits",
    "house",
    "home",
    "big",
    "large",
    "huge",
    "small",
    "little",
    "quick",
    "fast",
    "rapid",
    "happy",
    "glad",
    "begin",
    "start",
    "started",
    "starting",
    "buy",
    "purchase",
    "purchased",
    "child",
    "kid",
    "children",
    "geese",
    "goose",
    "mice",
    "better",
    "good",
    "best",
    "ran",
    "run",
    "running",
    "runner",
    "connection",
    "connected",
    "connecting",
    "connects",
    "generalization",
    "generalize",
    "relational",
    "conditional",
    "hopefulness",
    "agreed",
    "feed",
    "ponies",
    "skies",
    "dying",
    "news",
    "innings",
    "flies",
    "tried",
    "spied",
    "cries",
    "happily",
    "easily",
    "quickly",
    "car",
    "automobile",
    "auto",
    "machine",
    "film",
    "movie",
    "picture",
    "guide",
    "action",
    "ensures",
    "military",
    "obeys",
    "commands",
    "party",
    "Party",
    "forever",
    "heed",
    "always",
    "directions",
    "army",
    "troops",
    "US",
    "us",
    "May",
    "may",
    "Bush",
    "bush",
    "John",
    "saw",
    "see",
    "seen",
    "went",
    "go",
    "gone",
    "sang",
    "abaci",
    "aardwolves",
    "wolves",
    "leaves",
    "leaf",
    "boxes",
    "churches",
    "men",
    "women",
    "studies",
    "studied",
    "hardest",
    "tallest",
    "ate",
    "eaten",
    "bigger",
    "lovely",
    "yyyy",
    "sky",
    "ies",
    "ied",
    "y",
    "by",
    "CAT",
    "Dog",
    "HOUSE",
    "Quick",
    "3",
    "42",
    "3.14",
    "1,000",
    "2-3",
    "10-year",
    "1990s",
    "e-mail",
    "state-of-the-art",
    "don't",
    "it's",
    "John's",
    "U.S.",
    "etc.",
    "end.",
    "dog,",
    "(cat)",
    "[note]",
    "{x}",
    "a/b",
    "x@y.com",
    "$5",
    "100%",
    "#tag",
    "~",
    "^",
    "_",
    "`",
    "&amp;",
    "&lt;",
    "&gt;",
    "&quot;",
    "<skipped>",
    "!",
    "?",
    ".",
    ",",
    ";",
    ":",
    "--",
    "...",
    "café",
    "naïve",
    "Straße",
    "日本語",
    "ΣΊΣΥΦΟΣ",
    "Ωμέγα",
    "😀",
    "İstanbul",
    "ﬁne",
    "Ⅻ",
    "x*ded",
    "a_b",
    "alli",
    "logi",
    "bli",
];

const SEPARATORS: &[&str] = &[" ", " ", " ", " ", "  ", "\t", "\n", "-\n", " \u{a0}"];

fn sentence(rng: &mut Rng, len: usize) -> Vec<String> {
    (0..len).map(|_| rng.pick(WORDS).to_string()).collect()
}

fn join(rng: &mut Rng, words: &[String]) -> String {
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.push_str(rng.pick(SEPARATORS));
        }
        out.push_str(w);
    }
    if rng.chance(10) {
        out.push_str(rng.pick(&[" ", "\n", " .", "."]));
    }
    out
}

/// A hypothesis near the reference: words replaced, dropped, inserted, swapped, recased.
fn mutate(rng: &mut Rng, reference: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for w in reference {
        match rng.below(10) {
            0 => {}
            1 => out.push(rng.pick(WORDS).to_string()),
            2 => {
                out.push(w.clone());
                out.push(rng.pick(WORDS).to_string());
            }
            3 => out.push(w.to_uppercase()),
            _ => out.push(w.clone()),
        }
    }
    if out.len() > 2 && rng.chance(30) {
        let i = rng.below(out.len() - 1);
        out.swap(i, i + 1);
    }
    out
}

/// A (hypothesis, references) pair; some empty or nearly.
fn pair(rng: &mut Rng, max_refs: usize) -> (String, Vec<String>) {
    let len = rng.below(25);
    let reference = sentence(rng, len);
    let hyp = match rng.below(12) {
        0 => {
            let len = rng.below(6);
            sentence(rng, len)
        }
        1 => Vec::new(),
        2 => reference.clone(),
        _ => mutate(rng, &reference),
    };
    let mut refs = vec![join(rng, &reference)];
    for _ in 1..=rng.below(max_refs) {
        let other = mutate(rng, &reference);
        refs.push(join(rng, &other));
    }
    let mut hyp = join(rng, &hyp);
    if rng.chance(3) {
        hyp = rng.pick(&["", " ", ".", "\n", "&amp;", "-\n"]).to_string();
    }
    (hyp, refs)
}

/// The process's resident memory (Linux), 0 elsewhere.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .to_string();
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE
}

#[test]
#[ignore = "needs the metrics venv and WordNet: run by tests/run"]
fn metrics_agree_with_sacrebleu_rouge_score_and_nltk() {
    let python = std::env::var("GUARDWIRE_METRICS_PYTHON").expect(
        "GUARDWIRE_METRICS_PYTHON: the Python of the venv built from tests/metrics/requirements.txt (tests/run sets it)",
    );
    std::env::var("NLTK_DATA")
        .expect("NLTK_DATA: the nltk_data folder with corpora/wordnet (tests/run assembles it)");
    let wordnet_dir = std::env::var("GUARDWIRE_WORDNET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Meteor::default_dir().to_path_buf());
    let rss_before = rss_kib();
    let started = std::time::Instant::now();
    let meteor = Meteor::load(&wordnet_dir).unwrap();
    eprintln!(
        "WordNet loaded from {} in {:?} (this build's profile), {:?}, resident memory +{} KiB",
        wordnet_dir.display(),
        started.elapsed(),
        meteor,
        rss_kib().saturating_sub(rss_before)
    );

    let mut rng = Rng(0x6775_6172_6477_6972);
    let mut bleu_cases = Vec::new();
    let mut rouge_cases = Vec::new();
    let mut meteor_cases = Vec::new();
    for i in 0..400 {
        let (hyp, refs) = pair(&mut rng, 3);
        bleu_cases.push((hyp.clone(), refs.clone()));
        rouge_cases.push((hyp.clone(), refs[0].clone(), i % 2 == 0));
        meteor_cases.push((hyp, refs));
    }
    let corpus_cases: Vec<(Vec<String>, Vec<Vec<String>>)> = (0..10)
        .map(|_| {
            // Every hypothesis of a corpus has the same number of references (sacreBLEU's streams).
            let n_refs = 1 + rng.below(3);
            let mut hyps = Vec::new();
            let mut refs = Vec::new();
            for _ in 0..1 + rng.below(12) {
                let (hyp, mut r) = pair(&mut rng, 3);
                r.resize_with(n_refs, || "filler words here".to_string());
                hyps.push(hyp);
                refs.push(r);
            }
            (hyps, refs)
        })
        .collect();
    // Stems and synonyms on their own: every word above, and a slice of WordNet's lemmas with
    // inflections the morphy rules and exception lists undo.
    let mut words: Vec<String> = WORDS.iter().map(|w| w.to_lowercase()).collect();
    let index = std::fs::read_to_string(wordnet_dir.join("index.verb")).unwrap();
    for (i, line) in index.lines().filter(|l| !l.starts_with(' ')).enumerate() {
        if i % 7 == 0 {
            let lemma = line.split(' ').next().unwrap();
            for suffix in [
                "", "s", "es", "ed", "ing", "er", "est", "ies", "ation", "ness", "ly",
            ] {
                words.push(format!("{lemma}{suffix}"));
            }
        }
    }
    let exceptions = std::fs::read_to_string(wordnet_dir.join("noun.exc")).unwrap();
    words.extend(
        exceptions
            .lines()
            .step_by(5)
            .filter_map(|l| l.split(' ').next())
            .map(String::from),
    );

    let input = json!({
        "bleu": bleu_cases.iter().map(|(h, r)| json!({"hyp": h, "refs": r})).collect::<Vec<_>>(),
        "corpus_bleu": corpus_cases.iter().map(|(h, r)| json!({"hyps": h, "refs": r})).collect::<Vec<_>>(),
        "rouge": rouge_cases.iter().map(|(h, r, s)| json!({"hyp": h, "ref": r, "stemmer": s})).collect::<Vec<_>>(),
        "meteor": meteor_cases.iter().map(|(h, r)| json!({"hyp": h, "refs": r})).collect::<Vec<_>>(),
        "stem": words,
        "synonyms": words,
    });
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/metrics/oracle.py");
    let mut child = Command::new(&python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let body = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(body.as_bytes()));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        output.status.success(),
        "oracle.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let oracle: Value = serde_json::from_slice(&output.stdout).unwrap();
    eprintln!("reference implementations: {}", oracle["versions"]);

    let mut failures = Vec::new();
    let mut nonzero = [0usize; 3];
    for (i, (hyp, refs)) in bleu_cases.iter().enumerate() {
        let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
        let ours = bleu::sentence_bleu(hyp, &refs);
        let theirs = oracle["bleu"][i].as_f64().unwrap();
        nonzero[0] += usize::from(theirs > 0.0);
        if !close(ours, theirs) {
            failures.push(format!(
                "bleu #{i} {hyp:?} {refs:?}: ours {ours}, sacrebleu {theirs}"
            ));
        }
    }
    for (i, (hyps, refs)) in corpus_cases.iter().enumerate() {
        let hyps: Vec<&str> = hyps.iter().map(String::as_str).collect();
        let refs: Vec<Vec<&str>> = refs
            .iter()
            .map(|r| r.iter().map(String::as_str).collect())
            .collect();
        let ours = bleu::corpus_bleu(&hyps, &refs);
        let theirs = oracle["corpus_bleu"][i].as_f64().unwrap();
        if !close(ours, theirs) {
            failures.push(format!("corpus_bleu #{i}: ours {ours}, sacrebleu {theirs}"));
        }
    }
    for (i, (hyp, reference, stemmer)) in rouge_cases.iter().enumerate() {
        let ours = rouge::score(hyp, reference, *stemmer);
        let theirs = &oracle["rouge"][i];
        for (name, prf) in [
            ("rouge1", ours.rouge1),
            ("rouge2", ours.rouge2),
            ("rougeL", ours.rouge_l),
        ] {
            let t: Vec<f64> = theirs[name]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            if !(close(prf.precision, t[0]) && close(prf.recall, t[1]) && close(prf.fmeasure, t[2]))
            {
                failures.push(format!("{name} #{i} {hyp:?} {reference:?} stemmer={stemmer}: ours {prf:?}, rouge-score {t:?}"));
            }
        }
        nonzero[1] += usize::from(theirs["rougeL"][2].as_f64().unwrap() > 0.0);
    }
    for (i, (hyp, refs)) in meteor_cases.iter().enumerate() {
        let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
        let ours = meteor.score(hyp, &refs);
        let theirs = oracle["meteor"][i].as_f64().unwrap();
        nonzero[2] += usize::from(theirs > 0.0);
        if !close(ours, theirs) {
            failures.push(format!(
                "meteor #{i} {hyp:?} {refs:?}: ours {ours}, nltk {theirs}"
            ));
        }
    }
    for (i, word) in words.iter().enumerate() {
        let theirs = oracle["stem"][i].as_str().unwrap();
        let ours = porter::stem(word);
        if ours != theirs {
            failures.push(format!("stem {word:?}: ours {ours:?}, nltk {theirs:?}"));
        }
        let theirs: Vec<&str> = oracle["synonyms"][i]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let ours = meteor.synonyms(word);
        if ours != theirs {
            failures.push(format!("synonyms {word:?}: ours {ours:?}, nltk {theirs:?}"));
        }
    }
    eprintln!(
        "{} BLEU, {} corpus BLEU, {} ROUGE, {} METEOR cases, {} words stemmed and looked up; non-zero scores: BLEU {}, ROUGE-L {}, METEOR {}",
        bleu_cases.len(), corpus_cases.len(), rouge_cases.len(), meteor_cases.len(), words.len(),
        nonzero[0], nonzero[1], nonzero[2]
    );
    // The cases must exercise the metrics, not just agree on zeros.
    assert!(
        nonzero.iter().all(|&n| n > 200),
        "too few non-zero scores: {nonzero:?}"
    );
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
