//! The texts a decoder read by value, which the residual walk leaves out.

/// Texts a decoder read by value, as a multiset: a string the walk finds is taken for one of
/// them once. Each distinct text is kept once with how many times it was read, so any number
/// of texts — all the same, or all different — costs n log n (a list of equal texts marked
/// used one by one cost n² when one text repeats).
pub struct ReadTexts<'a> {
    counts: Vec<(&'a str, usize)>,
}

impl<'a> ReadTexts<'a> {
    pub fn new(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut all: Vec<&'a str> = texts.into_iter().collect();
        all.sort_unstable();
        let mut counts: Vec<(&'a str, usize)> = Vec::new();
        for t in all {
            match counts.last_mut() {
                Some((v, n)) if *v == t => *n += 1,
                _ => counts.push((t, 1)),
            }
        }
        ReadTexts { counts }
    }

    /// Whether `text` is one of the texts not taken yet (and takes it).
    pub fn take(&mut self, text: &str) -> bool {
        self.take_if(text, || true)
    }

    /// [`ReadTexts::take`], when `also` holds (asked only for a text that is there).
    pub fn take_if(&mut self, text: &str, also: impl FnOnce() -> bool) -> bool {
        match self.counts.binary_search_by(|(t, _)| (*t).cmp(text)) {
            Ok(i) if self.counts[i].1 > 0 && also() => {
                self.counts[i].1 -= 1;
                true
            }
            _ => false,
        }
    }
}
