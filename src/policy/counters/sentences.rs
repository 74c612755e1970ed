//! Streamed sentence counts: [`SentenceState`] and its rules.
//!
//! # Sentences
//!
//! A sentence starts at its first non-whitespace character; the count is the number of starts,
//! so trailing text without a terminator is a sentence and whitespace-only text has none. A
//! streamed `max` is exceeded when sentence `max + 1` starts, at that character: nothing of it is
//! released. The rules:
//!
//! - **Terminators** `.` `!` `?` `…` end a sentence when the run of them (`?!`, `...` count once),
//!   optionally followed by closing quotes or brackets `"'”’)]»`, is followed by whitespace. A
//!   terminator followed by anything else is no end (`3.14`, `e.g.x`, `example.com`, `Hi!!!Yes`).
//! - **Full-width terminators** `。` `！` `？` `｡` end a sentence without whitespace: the next
//!   character that is not a terminator, closer (also `」』）】`) or whitespace starts a new one.
//! - The end is decided at the first non-whitespace character `c` after the terminator:
//!   - `!`, `?`, full-width: always an end;
//!   - an ellipsis (`…`, or two or more dots): an end unless `c` is lowercase;
//!   - a single `.`: an end unless `c` is lowercase, or the word before the dot (letters and inner
//!     dots, case-insensitive) is a single letter (initials: `J. R. R. Tolkien`), or is one of the
//!     abbreviations [`ABBREVIATIONS`], or is one of [`NUMBER_ABBREVIATIONS`] (`no`, `fig`, ...)
//!     and `c` is a digit (`No. 5`, but `I said no. Then`).
//!   - if `c` is itself a terminator or closer (`Wait . . . what`), the sentence goes on.
//! - **Lines**: a single line break is whitespace like any other. A blank line (two `\n`, or
//!   U+2029) ends the sentence: the next non-whitespace character starts one, even lowercase.
//! - **Lists**: a line whose first non-whitespace characters are a bullet (`-`, `*`, `+`, `•`) or
//!   up to 9 digits and `.` or `)`, followed by whitespace, starts a sentence (each list item is
//!   one), and that marker's `.` is no terminator. Other markdown (headings, tables) has no rule.
//!
//! Known limits, chosen to err towards fewer sentences: an abbreviation or a one-letter word at a
//! real sentence end (`... Apple Inc. The`, `Plan B. Then`) does not end it, and neither does a
//! `.` followed by a lowercase start. `"Why?" he asked` counts two.
//!
//! Hold-back: all decisions happen at the character that would start the new sentence, except
//! list markers, which are known only at the whitespace after them. So with `max` sentences
//! started, text is safe up to the end of what was fed, except a possible list marker that
//! would start sentence `max + 1`, held from its first character.

/// Words (lowercase, inner dots kept, final dot dropped) after which a `.` ends no sentence.
pub const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "mx", "messrs", "dr", "prof", "sr", "jr", "st", "mt", "rev", "capt", "sgt",
    "lt", "gov", "sen", "pres", "vs", "etc", "e.g", "i.e", "cf", "viz", "al", "inc", "ltd", "co",
    "corp", "bros", "dept", "univ", "est", "approx", "ca", "jan", "feb", "mar", "apr", "jun",
    "jul", "aug", "sep", "sept", "oct", "nov", "dec", "a.m", "p.m", "u.s", "u.s.a", "u.k", "u.n",
    "e.u", "a.k.a", "ph.d", "m.d", "b.a", "m.a", "b.sc", "m.sc", "n.b", "p.s", "ave", "blvd",
];

/// Words after which a `.` ends no sentence when a digit follows (`No. 5`, `Fig. 3`).
pub const NUMBER_ABBREVIATIONS: &[&str] = &[
    "no", "nos", "nr", "fig", "figs", "vol", "vols", "pp", "ch", "sec", "eq", "art", "ref", "tab",
];

/// Longest word kept for the abbreviation check, in bytes; longer words are no abbreviation.
const WORD_BYTES: usize = 8;

/// Most digits of a numbered list marker (CommonMark's limit).
const MARKER_DIGITS: u8 = 9;

/// The word before a terminator: letters and dots, lowercase, bounded.
#[derive(Debug, Clone, Copy, Default)]
struct Word {
    buf: [u8; WORD_BYTES],
    len: u8,
    /// Characters pushed (saturating), including the ones not kept.
    chars: u8,
    /// A character was not kept (non-ASCII, or past `WORD_BYTES`).
    lossy: bool,
}

impl Word {
    fn push(&mut self, c: char) {
        self.chars = self.chars.saturating_add(1);
        let len = usize::from(self.len);
        match self.buf.get_mut(len) {
            Some(b) if c.is_ascii() => {
                *b = c.to_ascii_lowercase() as u8;
                self.len += 1;
            }
            _ => self.lossy = true,
        }
    }

    fn clear(&mut self) {
        *self = Word::default();
    }

    /// How a single `.` after this word (already pushed as its last character) is judged.
    fn abbreviation(&self) -> Abbrev {
        // One letter and the dot: an initial.
        if self.chars == 2 && (self.lossy || self.buf[0].is_ascii_alphabetic()) {
            return Abbrev::Always;
        }
        if self.lossy {
            return Abbrev::No;
        }
        let word = &self.buf[..usize::from(self.len)];
        let word = word.strip_suffix(b".").unwrap_or(word);
        let is = |list: &[&str]| list.iter().any(|a| a.as_bytes() == word);
        if is(ABBREVIATIONS) {
            Abbrev::Always
        } else if is(NUMBER_ABBREVIATIONS) {
            Abbrev::BeforeDigit
        } else {
            Abbrev::No
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abbrev {
    No,
    Always,
    BeforeDigit,
}

/// A run of terminators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    /// One `.`.
    Dot,
    /// `…` or several dots.
    Ellipsis,
    /// Contains `!`, `?` or a full-width terminator.
    Strong,
}

impl Run {
    /// The run the terminator `c` starts.
    fn first(c: char) -> Run {
        match c {
            '.' => Run::Dot,
            '…' => Run::Ellipsis,
            _ => Run::Strong,
        }
    }

    /// The run after one more terminator `c`.
    fn then(self, c: char) -> Run {
        match (self, c) {
            (Run::Strong, _) => Run::Strong,
            (_, '.' | '…') => Run::Ellipsis,
            _ => Run::Strong,
        }
    }
}

/// A possible sentence end, waiting for the next non-whitespace character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Dot(Abbrev),
    Ellipsis,
    Strong,
}

impl End {
    /// Does a sentence end here, given the next non-whitespace character?
    fn ends_before(self, c: char) -> bool {
        match self {
            End::Strong => true,
            End::Ellipsis | End::Dot(Abbrev::No) => !c.is_lowercase(),
            End::Dot(Abbrev::Always) => false,
            End::Dot(Abbrev::BeforeDigit) => !(c.is_lowercase() || c.is_ascii_digit()),
        }
    }

    fn run(self) -> Run {
        match self {
            End::Dot(_) => Run::Dot,
            End::Ellipsis => Run::Ellipsis,
            End::Strong => Run::Strong,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Bullet,
    Digits(u8),
    /// Digits and `.` or `)`.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Text start or after a blank line: the next non-whitespace character starts a sentence.
    Start,
    /// In a sentence.
    Text,
    /// After terminators (and closers). `wide`: a full-width one, which needs no whitespace.
    Term { run: Run, wide: bool },
    /// Whitespace inside or after a sentence; `end`: it follows terminators.
    Gap { end: Option<End>, newlines: u8 },
    /// A possible list marker at a line start, from `start`. `started`: a sentence started at
    /// `start` anyway; else the marker decides whether one does.
    Marker {
        start: u64,
        started: bool,
        marker: Marker,
    },
}

/// Sentence count of one text stream against one limit: a few words, no heap.
#[derive(Debug, Clone)]
pub struct SentenceState {
    max: u64,
    pos: u64,
    count: u64,
    violation: Option<u64>,
    phase: Phase,
    word: Word,
    finished: bool,
}

impl SentenceState {
    /// A stream allowed `max` sentences (`u64::MAX`: count only).
    pub fn new(max: u64) -> Self {
        SentenceState {
            max,
            pos: 0,
            count: 0,
            violation: None,
            phase: Phase::Start,
            word: Word::default(),
            finished: false,
        }
    }

    /// Bytes fed so far.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Sentences started so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Where sentence `max + 1` starts, once it has.
    pub fn violation(&self) -> Option<u64> {
        self.violation
    }

    /// Counts the next piece of the stream. Returns the violation position once known.
    pub fn feed(&mut self, text: &str) -> Option<u64> {
        for (i, c) in text.char_indices() {
            self.step(c, self.pos + i as u64);
        }
        self.pos += text.len() as u64;
        self.violation
    }

    /// Ends the stream; returns the sentence count.
    pub fn finish(&mut self) -> u64 {
        self.finished = true;
        self.count
    }

    /// Text before this position cannot be part of sentence `max + 1`.
    pub fn safe_pos(&self) -> u64 {
        match self.phase {
            Phase::Marker {
                start,
                started: false,
                ..
            } if self.count >= self.max && self.violation.is_none() && !self.finished => start,
            _ => self.pos,
        }
    }

    fn start_sentence(&mut self, at: u64) {
        self.count += 1;
        if self.count > self.max && self.violation.is_none() {
            self.violation = Some(at);
        }
    }

    fn step(&mut self, c: char, at: u64) {
        match self.phase {
            Phase::Start => {
                if !c.is_whitespace() {
                    self.start_sentence(at);
                    self.begin(c, at, true, true);
                }
            }
            Phase::Text => self.text(c),
            Phase::Term { run, wide } => {
                if c.is_whitespace() {
                    let end = match run {
                        Run::Dot => End::Dot(self.word.abbreviation()),
                        Run::Ellipsis => End::Ellipsis,
                        Run::Strong => End::Strong,
                    };
                    self.gap(Some(end), c, 0);
                } else if let Some(w) = terminator(c) {
                    self.terminator(run.then(c), wide || w, c);
                } else if is_closer(c) {
                    // Closers extend the run.
                } else if wide {
                    self.start_sentence(at);
                    self.begin(c, at, false, true);
                } else {
                    self.text(c);
                }
            }
            Phase::Gap { end, newlines } => {
                if c.is_whitespace() {
                    self.gap(end, c, newlines);
                } else if newlines >= 2 {
                    self.start_sentence(at);
                    self.begin(c, at, true, true);
                } else if let (Some(end), true) = (end, terminator(c).is_some() || is_closer(c)) {
                    // `Wait . . . what`: more of the same run.
                    self.phase = Phase::Term {
                        run: end.run(),
                        wide: false,
                    };
                    self.step(c, at);
                } else {
                    let started = end.is_some_and(|e| e.ends_before(c));
                    if started {
                        self.start_sentence(at);
                    }
                    self.begin(c, at, newlines > 0, started);
                }
            }
            Phase::Marker {
                start,
                started,
                marker,
            } => match marker {
                _ if c.is_whitespace() => {
                    if matches!(marker, Marker::Bullet | Marker::Closed) && !started {
                        self.start_sentence(start);
                    }
                    // A marker's `.` is no terminator; a number that is no marker is text.
                    self.gap(None, c, 0);
                }
                Marker::Digits(n) if c.is_ascii_digit() && n < MARKER_DIGITS => {
                    self.phase = Phase::Marker {
                        start,
                        started,
                        marker: Marker::Digits(n + 1),
                    };
                }
                Marker::Digits(_) if c == '.' || c == ')' => {
                    self.phase = Phase::Marker {
                        start,
                        started,
                        marker: Marker::Closed,
                    };
                }
                _ => self.text(c),
            },
        }
    }

    /// The first character of a line or of a sentence: a list marker may begin here.
    fn begin(&mut self, c: char, at: u64, line_start: bool, started: bool) {
        self.word.clear();
        let marker = match c {
            '-' | '*' | '+' | '•' => Some(Marker::Bullet),
            '0'..='9' => Some(Marker::Digits(1)),
            _ => None,
        };
        match marker {
            Some(marker) if line_start => {
                self.phase = Phase::Marker {
                    start: at,
                    started,
                    marker,
                }
            }
            _ => self.text(c),
        }
    }

    /// A character inside a sentence.
    fn text(&mut self, c: char) {
        if c.is_whitespace() {
            self.gap(None, c, 0);
        } else if let Some(wide) = terminator(c) {
            self.word_char(c);
            self.terminator(Run::first(c), wide, c);
        } else {
            self.word_char(c);
            self.phase = Phase::Text;
        }
    }

    fn terminator(&mut self, run: Run, wide: bool, c: char) {
        if c == '.' {
            self.word.push(c);
        }
        self.phase = Phase::Term { run, wide };
    }

    /// Keeps the word before a possible terminator up to date.
    fn word_char(&mut self, c: char) {
        if c.is_alphabetic() {
            self.word.push(c);
        } else if c != '.' {
            self.word.clear();
        }
    }

    fn gap(&mut self, end: Option<End>, c: char, newlines: u8) {
        let newlines = match c {
            '\u{2029}' => 2,
            '\n' | '\u{2028}' | '\u{85}' => newlines.saturating_add(1).min(2),
            _ => newlines,
        };
        self.phase = Phase::Gap { end, newlines };
    }
}

/// `Some(wide)` for a sentence terminator; `wide` ones end a sentence without whitespace.
fn terminator(c: char) -> Option<bool> {
    match c {
        '.' | '!' | '?' | '…' => Some(false),
        '。' | '！' | '？' | '｡' => Some(true),
        _ => None,
    }
}

fn is_closer(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | '”' | '’' | ')' | ']' | '»' | '」' | '』' | '）' | '】'
    )
}

/// Sentences in a whole text.
pub fn count_sentences(text: &str) -> u64 {
    let mut st = SentenceState::new(u64::MAX);
    st.feed(text);
    st.finish()
}
