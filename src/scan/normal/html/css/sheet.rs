//! The hiding rules of `<style>` elements (see `css.rs`): kept by their subjects, and the
//! elements seen before them, to which a later sheet applies too.

use super::{declarations, is_control, Style};

/// Past this many rules' subjects, every element is read both ways (a rule that orders text
/// past it is refused).
const MAX_RULES: usize = 256;

/// A style sheet longer than this is not read: refused.
pub(in crate::scan::normal) const MAX_SHEET: usize = 16 * 1024;

/// An element a rule applies to: its tag name, classes and id (each absent: any), and what
/// the rule does to its text.
#[derive(Debug, Clone, Default)]
struct Subject {
    tag: Option<String>,
    classes: Vec<String>,
    id: Option<String>,
    style: Style,
}

/// The hiding rules of the style sheets read so far, and the elements seen before them.
#[derive(Debug, Clone, Default)]
pub(in crate::scan::normal) struct StyleSheet {
    subjects: Vec<Subject>,
    /// Every element may be hidden (a rule for any element that hides, rules past the bound).
    all: bool,
    /// The elements started so far, as a rule would select them (tag, classes, id): a style
    /// sheet applies to the elements before it too, whose text may have been released.
    seen: Vec<(String, String, String)>,
    /// Their hashes, so an element seen again costs no allocation.
    seen_hashes: std::collections::HashSet<u64>,
    /// More than [`MAX_SEEN`] kinds of element were seen.
    seen_past_bound: bool,
    /// A rule or sheet the view does not read: a pseudo-element's `content` adds text, a style
    /// of an element's first letter or line hides part of its text, an import, nesting, an
    /// escape, a sheet past the bound (it may hide or order any text: `add_late` refuses it).
    unread: bool,
}

/// Kinds of element remembered for a later style sheet; past it, any hiding rule is read as
/// applying to one of them.
const MAX_SEEN: usize = 1024;

impl StyleSheet {
    /// Its rules alone, for a text read apart (`reread.rs`): none when it has none. (The
    /// elements seen are this text's, not that one's: not copied.)
    pub(in crate::scan::normal) fn rules(&self) -> Option<Box<StyleSheet>> {
        (!self.subjects.is_empty() || self.all || self.unread).then(|| {
            Box::new(StyleSheet {
                subjects: self.subjects.clone(),
                all: self.all,
                unread: self.unread,
                ..StyleSheet::default()
            })
        })
    }

    /// An element started: remembered for the style sheets after it.
    pub(in crate::scan::normal) fn seen(&mut self, tag: &str, class: &str, id: &str) {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (tag, class, id).hash(&mut hasher);
        let hash = hasher.finish();
        if self.seen_hashes.contains(&hash) {
            return;
        }
        if self.seen.len() >= MAX_SEEN {
            self.seen_past_bound = true;
            return;
        }
        self.seen_hashes.insert(hash);
        self.seen.push((
            tag.to_owned(),
            class.to_ascii_lowercase(),
            id.trim().to_ascii_lowercase(),
        ));
    }

    /// A `<style>` element's text: its rules apply to the elements after it. Whether a rule
    /// that may hide text applies to an element before it (then already read as shown).
    pub(in crate::scan::normal) fn add_late(&mut self, text: &str) -> bool {
        let mut new = StyleSheet::default();
        new.add(text);
        if new.unread {
            return true;
        }
        // (One that sets how a seen element is displayed moves the breaks the view read, or
        // shows what it hid by its kind; one for the root or the body lays out every block.)
        let late = (new.all || !new.subjects.is_empty())
            && (self.seen_past_bound
                || new.root_style().display
                || self.seen.iter().any(|(tag, class, id)| {
                    let style = new.style_of(tag, class, id);
                    style.hides
                        || style.bidi_override
                        || style.display
                        || style.shows
                        || (style.draws_box && is_control(tag))
                }));
        self.all |= new.all;
        for s in new.subjects {
            if self.subjects.len() >= MAX_RULES {
                // (A rule that orders text, dropped, is not read: refused.)
                if s.style.bidi_override || s.style.direction.is_some() {
                    return true;
                }
                self.all = true;
            } else {
                self.subjects.push(s);
            }
        }
        late
    }

    pub(in crate::scan::normal) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<StyleSheet>()
            + self.subjects.capacity() * std::mem::size_of::<Subject>()
            + self.seen_hashes.capacity() * 2 * std::mem::size_of::<u64>()
            + self
                .seen
                .iter()
                .map(|(a, b, c)| 3 * std::mem::size_of::<String>() + a.len() + b.len() + c.len())
                .sum::<usize>()
    }

    /// A `<style>` element's text.
    fn add(&mut self, text: &str) {
        // An escape, or a character reference (decoded in foreign content's `<style>`), is
        // not read: every element may be hidden.
        // (Not read, it may also order any text: refused.)
        if text.len() >= MAX_SHEET || text.contains(['\\', '&']) {
            self.unread = true;
            return;
        }
        // Comments go; a rule is `selectors { declarations }`; an at-rule's block (`@media
        // … { rules }`) is read on as rules of their own (its `}` ends no selector).
        let text = strip_comments(text);
        // A sheet it imports is not read: every element may be hidden.
        if text.to_ascii_lowercase().contains("@import") {
            self.unread = true;
            return;
        }
        // Counter styles make the text of list markers.
        if text.to_ascii_lowercase().contains("@counter-style") {
            self.unread = true;
        }
        let mut pos = 0;
        while let Some(open) = text[pos..].find('{').map(|o| pos + o) {
            let selectors = text[pos..open].rsplit(['}', ';']).next().unwrap_or("");
            if selectors.trim_start().starts_with('@') {
                pos = open + 1;
                continue;
            }
            let close = text[open + 1..]
                .find('}')
                .map_or(text.len(), |c| open + 1 + c);
            let block = &text[open + 1..close];
            // Nested rules (CSS nesting) are not read: every element may be hidden.
            if block.contains('{') {
                self.unread = true;
                return;
            }
            // Text a pseudo-element adds (`content`) is shown where the text does not say:
            // refused.
            if selectors.contains("::") && block.to_ascii_lowercase().contains("content") {
                self.unread = true;
            }
            let style = declarations(block);
            if (style.hides && selectors.to_ascii_lowercase().contains("::first-l")) || style.unread
            {
                self.unread = true;
            }
            pos = (close + 1).min(text.len());
            if style.hides
                || style.bidi_override
                || style.direction.is_some()
                || style.display
                || style.shows
                || style.draws_box
            {
                for selector in selectors.split(',') {
                    self.subject(selector, style);
                }
            }
        }
    }

    /// A rule's selector: its subject kept, with what the rule does (one that only draws boxes
    /// matters to controls alone: kept when it may select one).
    fn subject(&mut self, selector: &str, style: Style) {
        let last = selector
            .rsplit(|c: char| c.is_whitespace() || matches!(c, '>' | '+' | '~'))
            .find(|s| !s.is_empty())
            .unwrap_or("");
        // Pseudo-elements (`::before`) add text of their own, which no element shows: the
        // text of the element is not hidden by them.
        if last.contains("::") {
            return;
        }
        let mut subject = Subject {
            style,
            ..Subject::default()
        };
        // `[attr]` and `:pseudo(…)` are not read: the subject applies more widely.
        let mut compound = String::new();
        let mut depth = 0;
        for c in last.chars() {
            match c {
                '[' | '(' => depth += 1,
                ']' | ')' => depth -= 1,
                _ if depth == 0 => compound.push(c),
                _ => {}
            }
        }
        let compound = compound
            .split(':')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let parts = compound.split_inclusive(['.', '#']);
        let mut kind = ' ';
        let mut push = |kind: char, name: &str| match kind {
            '.' => subject.classes.push(name.to_owned()),
            '#' => subject.id = Some(name.to_owned()),
            _ if !name.is_empty() && name != "*" => subject.tag = Some(name.to_owned()),
            _ => {}
        };
        for part in parts {
            let (name, next) = match part.strip_suffix(['.', '#']) {
                Some(name) => (name, part.chars().last().unwrap_or(' ')),
                None => (part, ' '),
            };
            push(kind, name);
            kind = next;
        }
        let only_boxes = style.draws_box
            && !(style.hides
                || style.bidi_override
                || style.direction.is_some()
                || style.display
                || style.shows);
        if only_boxes && subject.tag.as_deref().is_some_and(|t| !is_control(t)) {
            return;
        }
        let any = subject.tag.is_none() && subject.classes.is_empty() && subject.id.is_none();
        // (A rule for any element that only sets a direction or an override is kept as it
        // is: every element then reads it.)
        // A rule for any element that hides: every element may be hidden (its order, if it
        // sets one, is kept as a subject's). Past the bound, a rule that orders text is not
        // read (refused); one that hides makes every element read both ways.
        let orders = style.bidi_override || style.direction.is_some();
        if any && style.hides {
            self.all = true;
            if !orders {
                return;
            }
        }
        if self.subjects.len() >= MAX_RULES {
            if orders {
                self.unread = true;
            } else {
                self.all = true;
            }
        } else {
            self.subjects.push(subject);
        }
    }

    /// What the rules that may apply to an element `tag` with the `class` and `id` attributes
    /// given do to its text: it may be hidden (any of them hides, or the sheet is not read),
    /// its direction overridden (any overrides), and its direction (right to left if any
    /// rule may say so: the one that reorders Latin text).
    pub(in crate::scan::normal) fn style_of(&self, tag: &str, class: &str, id: &str) -> Style {
        let mut style = Style {
            hides: self.all,
            draws_box: self.all,
            ..Style::default()
        };
        if self.subjects.is_empty() {
            return style;
        }
        let class = class.to_ascii_lowercase();
        let classes: Vec<&str> = class.split_ascii_whitespace().collect();
        let id = id.trim().to_ascii_lowercase();
        for s in self.subjects.iter().filter(|s| {
            s.tag.as_deref().is_none_or(|t| t == tag)
                && s.id.as_deref().is_none_or(|i| i == id)
                && s.classes.iter().all(|c| classes.contains(&c.as_str()))
        }) {
            style.hides |= s.style.hides;
            style.display |= s.style.display;
            style.shows |= s.style.shows;
            style.draws_box |= s.style.draws_box;
            style.bidi_override |= s.style.bidi_override;
            style.direction = match (style.direction, s.style.direction) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (a, b) => a.or(b),
            };
        }
        style
    }

    /// What the rules for the document's root and body do: the text outside every element
    /// the view reads is inside those.
    pub(in crate::scan::normal) fn root_style(&self) -> Style {
        let (html, body) = (self.style_of("html", "", ""), self.style_of("body", "", ""));
        Style {
            bidi_override: html.bidi_override || body.bidi_override,
            direction: body.direction.or(html.direction),
            display: html.display || body.display,
            ..Style::default()
        }
    }

    #[cfg(test)]
    fn applies(&self, tag: &str, class: &str, id: &str) -> bool {
        self.style_of(tag, class, id).hides
    }
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("/*") {
        out.push_str(&rest[..at]);
        rest = rest[at + 2..].split_once("*/").map_or("", |(_, r)| r);
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_style_sheets_hiding_rules_apply_to_their_subjects() {
        let mut sheet = StyleSheet::default();
        sheet.add(".x{display:none} p.y , #z { font-size: 0 } .ok { color: red } @media screen { .m { visibility: hidden } } div > span.q:hover{opacity:0}");
        assert!(sheet.applies("span", "x", ""));
        assert!(sheet.applies("span", "a x", ""));
        assert!(sheet.applies("p", "y", ""));
        assert!(!sheet.applies("div", "y", ""));
        assert!(sheet.applies("b", "", "z"));
        assert!(!sheet.applies("span", "ok", ""));
        assert!(sheet.applies("i", "m", ""));
        assert!(sheet.applies("span", "q", ""));
        assert!(!sheet.applies("span", "", ""));
        let mut all = StyleSheet::default();
        all.add("* { display: none }");
        assert!(all.applies("b", "", ""));
        let mut all = StyleSheet::default();
        all.add("[title] { display: none }");
        assert!(all.applies("b", "", ""));
    }
}
