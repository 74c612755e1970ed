//! WordNet 3.0, read from the database files of a folder (Debian's `wordnet-base` installs them
//! in /usr/share/wordnet), for METEOR's synonym stage: what NLTK's `wordnet.synsets(word)`
//! returns — every part of speech, with `morphy`'s lemmatisation (the exception lists, else one
//! round of the detachment rules) — and the lemma names of those synsets.
//!
//! Loaded once into a compact map: the four `index.*` files (lemma → synsets), the four `*.exc`
//! exception lists, and from the four `data.*` files only each synset's lemma names, interned.
//! METEOR drops lemma names with an underscore (multi-word lemmas can never match a token), so
//! they are not kept. Nothing is read at scoring time.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Why WordNet could not be loaded. METEOR without its synonym stage would be a weaker, different
/// metric, so a run or pack that asks for METEOR is refused with this error instead.
#[derive(Debug, thiserror::Error)]
pub enum MeteorError {
    #[error(
        "METEOR needs WordNet 3.0: cannot read {path}: {reason} (on Debian and Ubuntu: \
         apt-get install wordnet-base; or point the WordNet folder at a copy of the WordNet 3.0 \
         database files: index.*, data.*, *.exc)"
    )]
    Unreadable { path: PathBuf, reason: String },
    #[error("METEOR needs WordNet 3.0: {path}, line {line}: {reason}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// NLTK's POS_LIST order; `synsets(word)` visits the parts of speech in this order.
const POS: [(&str, char); 4] = [("noun", 'n'), ("verb", 'v'), ("adj", 'a'), ("adv", 'r')];

/// The largest database file accepted (data.noun, the largest, is 15 MB).
const MAX_FILE: u64 = 64 << 20;

/// `morphy`'s detachment rules per part of speech (NLTK's MORPHOLOGICAL_SUBSTITUTIONS).
const SUBSTITUTIONS: [&[(&str, &str)]; 4] = [
    &[
        ("s", ""),
        ("ses", "s"),
        ("ves", "f"),
        ("xes", "x"),
        ("zes", "z"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("men", "man"),
        ("ies", "y"),
    ],
    &[
        ("s", ""),
        ("ies", "y"),
        ("es", "e"),
        ("es", ""),
        ("ed", "e"),
        ("ed", ""),
        ("ing", "e"),
        ("ing", ""),
    ],
    &[("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    &[],
];

/// Inflected form → base forms (a `*.exc` file).
type Exceptions = HashMap<Box<str>, Box<[Box<str>]>>;

pub(crate) struct WordNet {
    /// Per part of speech: lemma → its synsets, in index order, as a range of `index_synsets`.
    index: [HashMap<Box<str>, (u32, u32)>; 4],
    index_synsets: Vec<u32>,
    /// Per part of speech: inflected form → base forms.
    exceptions: [Exceptions; 4],
    /// Synset i's lemma names are `names[synset_names[synset_start[i]..synset_start[i + 1]]]`.
    synset_start: Vec<u32>,
    synset_names: Vec<u32>,
    names: Vec<Box<str>>,
}

fn read(dir: &Path, file: &str) -> Result<String, MeteorError> {
    let path = dir.join(file);
    let unreadable = |path: &PathBuf, reason: String| MeteorError::Unreadable {
        path: path.clone(),
        reason,
    };
    let meta = std::fs::metadata(&path).map_err(|e| unreadable(&path, e.to_string()))?;
    if meta.len() > MAX_FILE {
        return Err(unreadable(
            &path,
            format!("{} bytes, more than the {MAX_FILE} accepted", meta.len()),
        ));
    }
    let bytes = std::fs::read(&path).map_err(|e| unreadable(&path, e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| unreadable(&path, format!("not UTF-8: {e}")))
}

fn corrupt(dir: &Path, file: &str, line: usize, reason: impl Into<String>) -> MeteorError {
    MeteorError::Corrupt {
        path: dir.join(file),
        line: line + 1,
        reason: reason.into(),
    }
}

/// A lemma name without its adjective marker: `(.*?)(\([^()]*\))?$` as NLTK reads it.
fn strip_marker(name: &str) -> &str {
    if let Some(body) = name.strip_suffix(')') {
        if let Some(open) = body.rfind('(') {
            if !body[open + 1..].contains(')') {
                return &name[..open];
            }
        }
    }
    name
}

impl WordNet {
    pub(crate) fn load(dir: &Path) -> Result<WordNet, MeteorError> {
        let mut interned: HashMap<Box<str>, u32> = HashMap::new();
        let mut names: Vec<Box<str>> = Vec::new();
        let mut synset_start: Vec<u32> = vec![0];
        let mut synset_names: Vec<u32> = Vec::new();
        let mut index: [HashMap<Box<str>, (u32, u32)>; 4] = Default::default();
        let mut index_synsets: Vec<u32> = Vec::new();
        let mut exceptions: [Exceptions; 4] = Default::default();
        for (p, (suffix, pos_char)) in POS.iter().enumerate() {
            // data.<pos>: offset → synset id, and the synset's lemma names.
            let file = format!("data.{suffix}");
            let text = read(dir, &file)?;
            let mut offsets: HashMap<u32, u32> = HashMap::new();
            for (number, line) in text.lines().enumerate() {
                if line.starts_with(' ') || line.trim().is_empty() {
                    continue;
                }
                let mut fields = line.split_ascii_whitespace();
                let mut next = |what: &str| {
                    fields
                        .next()
                        .ok_or_else(|| corrupt(dir, &file, number, format!("no {what}")))
                };
                let offset: u32 = next("offset")?
                    .parse()
                    .map_err(|_| corrupt(dir, &file, number, "offset is not a number"))?;
                next("lexicographer file")?;
                let ss_type = next("synset type")?;
                let pos_ok = match pos_char {
                    'a' => ss_type == "a" || ss_type == "s",
                    c => ss_type.len() == 1 && ss_type.starts_with(*c),
                };
                if !pos_ok {
                    return Err(corrupt(
                        dir,
                        &file,
                        number,
                        format!("synset type {ss_type:?}"),
                    ));
                }
                let count = u32::from_str_radix(next("word count")?, 16)
                    .map_err(|_| corrupt(dir, &file, number, "word count is not hexadecimal"))?;
                for _ in 0..count {
                    let name = strip_marker(next("word")?);
                    next("lex_id")?;
                    if name.contains('_') {
                        continue;
                    }
                    let id = match interned.get(name) {
                        Some(&id) => id,
                        None => {
                            let id = names.len() as u32;
                            names.push(name.into());
                            interned.insert(name.into(), id);
                            id
                        }
                    };
                    synset_names.push(id);
                }
                offsets.insert(offset, synset_start.len() as u32 - 1);
                synset_start.push(synset_names.len() as u32);
            }
            if offsets.is_empty() {
                return Err(corrupt(dir, &file, 0, "no synset"));
            }
            // index.<pos>: lemma pos n_synsets n_pointers pointers… n_senses tagged offsets…
            let file = format!("index.{suffix}");
            let text = read(dir, &file)?;
            let mut fields: Vec<&str> = Vec::new();
            for (number, line) in text.lines().enumerate() {
                if line.starts_with(' ') || line.trim().is_empty() {
                    continue;
                }
                fields.clear();
                fields.extend(line.split_ascii_whitespace());
                let bad = |reason: &str| corrupt(dir, &file, number, reason);
                let number_at = |i: usize| -> Result<usize, MeteorError> {
                    fields
                        .get(i)
                        .and_then(|f| f.parse().ok())
                        .ok_or_else(|| bad("a count is missing or not a number"))
                };
                let n_synsets = number_at(2)?;
                let n_pointers = number_at(3)?;
                // The pointer symbols, then n_senses and tagsense_cnt, then the offsets.
                let first = n_pointers.saturating_add(6);
                if fields.len() < first.saturating_add(n_synsets) || n_synsets == 0 {
                    return Err(bad("fewer synset offsets than announced"));
                }
                let start = index_synsets.len() as u32;
                for field in &fields[first..first + n_synsets] {
                    let offset: u32 = field.parse().map_err(|_| bad("offset is not a number"))?;
                    let id = offsets
                        .get(&offset)
                        .ok_or_else(|| bad(&format!("offset {offset} is not in data.{suffix}")))?;
                    index_synsets.push(*id);
                }
                index[p].insert(fields[0].into(), (start, n_synsets as u32));
            }
            if index[p].is_empty() {
                return Err(corrupt(dir, &file, 0, "no lemma"));
            }
            // <pos>.exc: inflected form, then its base forms.
            let file = format!("{suffix}.exc");
            let text = read(dir, &file)?;
            for line in text.lines() {
                let mut terms = line.split_ascii_whitespace();
                if let Some(form) = terms.next() {
                    exceptions[p].insert(form.into(), terms.map(Box::from).collect());
                }
            }
        }
        index_synsets.shrink_to_fit();
        synset_names.shrink_to_fit();
        names.shrink_to_fit();
        Ok(WordNet {
            index,
            index_synsets,
            exceptions,
            synset_start,
            synset_names,
            names,
        })
    }

    /// NLTK's `_morphy(form, pos)`: the forms of `form` that are lemmas of this part of speech.
    fn morphy<'a>(&'a self, form: &'a str, p: usize) -> Vec<&'a str> {
        let mut candidates: Vec<std::borrow::Cow<'a, str>> = vec![form.into()];
        if let Some(bases) = self.exceptions[p].get(form) {
            candidates.extend(bases.iter().map(|b| std::borrow::Cow::Borrowed(&**b)));
        } else {
            for (old, new) in SUBSTITUTIONS[p] {
                if let Some(stem) = form.strip_suffix(old) {
                    candidates.push(format!("{stem}{new}").into());
                }
            }
        }
        let mut out: Vec<&'a str> = Vec::new();
        for candidate in candidates {
            if let Some((lemma, _)) = self.index[p].get_key_value(&*candidate) {
                if !out.contains(&&**lemma) {
                    out.push(lemma);
                }
            }
        }
        out
    }

    /// The lemma names (without underscore) of every synset `wordnet.synsets(word)` returns.
    pub(crate) fn synonyms(&self, word: &str) -> HashSet<&str> {
        let lower = word.to_lowercase();
        let mut out = HashSet::new();
        for p in 0..POS.len() {
            for form in self.morphy(&lower, p) {
                let Some(&(start, len)) = self.index[p].get(form) else {
                    continue;
                };
                for &synset in &self.index_synsets[start as usize..(start + len) as usize] {
                    let synset = synset as usize;
                    let range =
                        self.synset_start[synset] as usize..self.synset_start[synset + 1] as usize;
                    for &name in &self.synset_names[range] {
                        out.insert(&*self.names[name as usize]);
                    }
                }
            }
        }
        out
    }

    /// Lemmas and synsets held (for the docs' load figures and the tests).
    pub(crate) fn sizes(&self) -> (usize, usize) {
        let lemmas = self.index.iter().map(HashMap::len).sum();
        (lemmas, self.synset_start.len() - 1)
    }
}
