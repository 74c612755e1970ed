//! Watching the top-level fields of a tool call's JSON arguments as they stream.
//!
//! `tool_args_excluded_session` must stop a call whose argument takes a forbidden value before
//! the value reaches the client. [`FieldWatcher`] is a byte-level JSON tokenizer for the top-level
//! object: it captures the values of the watched keys only, reports each one when it is complete,
//! and tells the hold-back to keep a watched value back from its first byte until it is judged.
//! O(1) work per byte; the only memory is the key being read and a watched value.

/// Longest key kept for comparison; longer keys are never watched ones.
const MAX_KEY: usize = 256;
/// Longest watched value kept; longer values are reported as undecidable.
const MAX_VALUE: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    Start,
    ExpectKey,
    InKey,
    AfterKey,
    ExpectValue,
    InValue,
    AfterValue,
    /// The end of the object, or not an object: nothing more to watch.
    Done,
}

/// A complete top-level field of a watched key.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub key: String,
    /// The value's JSON text; `None` when it was too long to keep.
    pub value: Option<String>,
    /// Byte offset of the value's first byte in the arguments text.
    pub start: u64,
    /// Offset just after the value.
    pub end: u64,
}

#[derive(Debug, Clone, Default)]
pub struct FieldWatcher {
    state: State,
    pos: u64,
    key: Vec<u8>,
    key_escaped: bool,
    watched: bool,
    value: Vec<u8>,
    value_start: u64,
    depth: u32,
    in_string: bool,
    escape: bool,
    /// The value is a string or a container (it ends at its closing byte, not at a delimiter).
    closed_by_byte: bool,
    overflow: bool,
}

impl FieldWatcher {
    /// Feeds the next piece of the arguments; complete watched fields go to `out`.
    pub fn feed(&mut self, text: &[u8], is_watched: impl Fn(&str) -> bool, out: &mut Vec<Field>) {
        for &b in text {
            self.step(b, &is_watched, out);
            self.pos += 1;
        }
    }

    /// Text before this offset holds no part of a watched value still being read.
    pub fn safe_pos(&self) -> u64 {
        if self.state == State::InValue && self.watched {
            self.value_start
        } else {
            self.pos
        }
    }

    /// The arguments ended: a scalar value waiting for its delimiter is complete now.
    pub fn finish(&mut self, out: &mut Vec<Field>) {
        if self.state == State::InValue && !self.closed_by_byte && !self.in_string {
            self.complete(out);
        }
        self.state = State::Done;
    }

    fn step(&mut self, b: u8, is_watched: &impl Fn(&str) -> bool, out: &mut Vec<Field>) {
        let ws = matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        match self.state {
            State::Start => match b {
                b'{' => self.state = State::ExpectKey,
                _ if ws => {}
                _ => self.state = State::Done,
            },
            State::ExpectKey => match b {
                b'"' => {
                    self.key.clear();
                    self.key_escaped = false;
                    self.escape = false;
                    self.state = State::InKey;
                }
                b'}' => self.state = State::Done,
                b',' => {}
                _ if ws => {}
                _ => self.state = State::Done,
            },
            State::InKey => {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                    self.key_escaped = true;
                } else if b == b'"' {
                    self.watched = self.key.len() <= MAX_KEY
                        && self.key_name().is_some_and(|k| is_watched(&k));
                    self.state = State::AfterKey;
                    return;
                }
                if self.key.len() <= MAX_KEY {
                    self.key.push(b);
                }
            }
            State::AfterKey => match b {
                b':' => self.state = State::ExpectValue,
                _ if ws => {}
                _ => self.state = State::Done,
            },
            State::ExpectValue => {
                if ws {
                    return;
                }
                self.state = State::InValue;
                self.value.clear();
                self.overflow = false;
                self.value_start = self.pos;
                self.depth = 0;
                self.in_string = false;
                self.escape = false;
                self.closed_by_byte = matches!(b, b'"' | b'{' | b'[');
                self.value_byte(b, out);
            }
            State::InValue => self.value_byte(b, out),
            State::AfterValue => match b {
                b',' => self.state = State::ExpectKey,
                b'}' => self.state = State::Done,
                _ if ws => {}
                _ => self.state = State::Done,
            },
            State::Done => {}
        }
    }

    fn value_byte(&mut self, b: u8, out: &mut Vec<Field>) {
        if !self.closed_by_byte
            && !self.in_string
            && matches!(b, b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
        {
            // A scalar ends at the byte after it, which then means what it means after a value.
            self.complete(out);
            self.state = State::AfterValue;
            self.step_after_value(b);
            return;
        }
        if self.watched {
            if self.value.len() < MAX_VALUE {
                self.value.push(b);
            } else {
                self.overflow = true;
            }
        }
        if self.in_string {
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.depth == 0 {
                    self.pos_complete(out);
                }
            }
            return;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    self.pos_complete(out);
                }
            }
            _ => {}
        }
    }

    /// A value closed by this byte (a quote or bracket) is complete including it.
    fn pos_complete(&mut self, out: &mut Vec<Field>) {
        self.pos += 1;
        self.complete(out);
        self.pos -= 1;
        self.state = State::AfterValue;
    }

    fn step_after_value(&mut self, b: u8) {
        match b {
            b',' => self.state = State::ExpectKey,
            b'}' => self.state = State::Done,
            _ => {}
        }
    }

    fn complete(&mut self, out: &mut Vec<Field>) {
        if self.watched {
            if let Some(key) = self.key_name() {
                out.push(Field {
                    key,
                    value: (!self.overflow)
                        .then(|| String::from_utf8_lossy(&self.value).into_owned()),
                    start: self.value_start,
                    end: self.pos,
                });
            }
        }
        self.watched = false;
    }

    fn key_name(&self) -> Option<String> {
        if !self.key_escaped {
            return String::from_utf8(self.key.clone()).ok();
        }
        let mut quoted = Vec::with_capacity(self.key.len() + 2);
        quoted.push(b'"');
        quoted.extend_from_slice(&self.key);
        quoted.push(b'"');
        serde_json::from_slice(&quoted).ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn fields(pieces: &[&str]) -> Vec<(String, Option<String>, u64, u64)> {
        let mut w = FieldWatcher::default();
        let mut out = Vec::new();
        for p in pieces {
            w.feed(
                p.as_bytes(),
                |k| k == "to" || k == "amount" || k == "q\"k",
                &mut out,
            );
        }
        w.finish(&mut out);
        out.into_iter()
            .map(|f| (f.key, f.value, f.start, f.end))
            .collect()
    }

    #[test]
    fn reports_watched_top_level_values_with_spans() {
        let text = r#"{"a": {"to": 1}, "to": "bob", "amount" : 12.5 , "list": [1, "to"], "q\"k": [1, {"x": "]"}]}"#;
        let got = fields(&[text]);
        let to = text.find("\"bob\"").unwrap() as u64;
        let amount = text.find("12.5").unwrap() as u64;
        let qk = text.find("[1, {").unwrap() as u64;
        assert_eq!(
            got,
            vec![
                ("to".into(), Some("\"bob\"".into()), to, to + 5),
                ("amount".into(), Some("12.5".into()), amount, amount + 4),
                (
                    "q\"k".into(),
                    Some("[1, {\"x\": \"]\"}]".into()),
                    qk,
                    qk + 15
                ),
            ]
        );
    }

    #[test]
    fn any_split_gives_the_same_fields_and_never_releases_a_watched_value_early() {
        let text = r#"{"x":"a,b","to":"mallory","amount":100}"#;
        let whole = fields(&[text]);
        for cut in 0..=text.len() {
            assert_eq!(fields(&[&text[..cut], &text[cut..]]), whole, "cut {cut}");
        }
        // Byte by byte: safe_pos never passes the start of a watched value before it is done.
        let mut w = FieldWatcher::default();
        let mut out = Vec::new();
        for (i, b) in text.bytes().enumerate() {
            w.feed(&[b], |k| k == "to" || k == "amount", &mut out);
            for f in &whole {
                let done = out.iter().any(|o| o.start == f.2);
                if !done && (i as u64) >= f.2 {
                    assert!(w.safe_pos() <= f.2, "at {i}");
                }
            }
        }
    }

    #[test]
    fn scalar_at_the_end_completes_on_finish_and_non_objects_are_ignored() {
        assert_eq!(
            fields(&["{\"amount\": 7"]),
            vec![("amount".into(), Some("7".into()), 11, 12)]
        );
        assert!(fields(&["[1,2]"]).is_empty());
        assert!(fields(&[""]).is_empty());
    }
}
