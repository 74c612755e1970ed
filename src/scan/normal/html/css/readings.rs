//! Readings of text around several elements a style may hide (`css.rs`): a browser hides
//! some of them and shows the others, and which is which the view cannot always know.
//!
//! The browser's reading of `join.rs` hides every such element (the text before the first
//! joined to what follows each one's end). Beside it, each element opening records readings
//! where it alone of the elements near it is hidden, or where it is hidden along with those
//! hidden before it:
//!
//! - a **single**: the view's last characters where the element opens (the elements around it
//!   shown) joined to what the view writes after its end — `<p class=x>forbid<span
//!   style="display:none">zz</span>den</p>` with the `<p>` also in doubt reads `forbidden`;
//! - a **fork** of each reading being recorded when it opens (one where elements before it are
//!   hidden): one copy goes on with it shown, one waits for its end (it hidden) —
//!   `for<i hidden>x</i>bid<b maybe>den</b>` reads `forbidden` with `<i>` hidden and `<b>`
//!   shown.
//!
//! A construct the browser's reading hides (an autolink, an image) inside such an element
//! moves that reading here (waiting for the element) and goes on from the fork that shows
//! the element; a blank line that Markdown ends such an element at, with an element that
//! hides its text (an `<svg>`) open too, records the reading with the first shown and the
//! second hidden up to its end.
//!
//! Each reading records up to [`TRAIL`] bytes of the view after the element that hides its
//! text ends, then is an aside; at most [`MAX_READINGS`] are recorded at once (a single pushes
//! out the oldest reading being recorded, written as it is; a fork past the bound is not
//! made), so the work per character stays bounded. Mixes of three or more elements near each
//! other beyond these (two hidden around one shown that is in doubt too) are not read.

use super::super::super::aside::REPLAY;
use super::super::super::join::{reading_tail, still_held, Written, BROWSER};
use super::super::super::Normalizer;
use super::super::elements::hides;

/// Bytes of the view a reading records after the element that hides its text (as many as
/// its context holds before it: a phrase of up to [`REPLAY`] characters either side reads
/// whole).
const TRAIL: usize = REPLAY;

/// `waits_for` of a reading that waits for the elements a browser keeps open past a blank
/// line that hide their text (`hides`), not for one element.
const HIDING_ELEMENTS: u32 = u32::MAX;

/// Readings recorded at once.
pub(in crate::scan::normal) const MAX_READINGS: usize = 8;

/// Readings being recorded forked at each element (the newest): a bound on the work per
/// element.
const MAX_FORKS: usize = 2;

/// Characters read while an element hides what comes past which a reading's context is no
/// longer held back (as for the browser's reading, `join.rs`).
const MAX_WAIT: usize = 1024;

/// One reading: what it shows before, and what the view wrote since the element that hides
/// what comes (`waits_for`) ended.
#[derive(Debug, Clone)]
pub(in crate::scan::normal) struct StyleReading {
    context: String,
    context_raw: u64,
    /// The serial of the open element whose text this reading hides (0: none, recording).
    waits_for: u32,
    after: Written,
    /// Characters read while waiting.
    read: usize,
    /// Its context is no longer held back (`join::MAX_HOLD`).
    released: bool,
    /// A copy of the browser's reading made where the element with this serial opened, going
    /// on with it shown (0: another reading).
    forked_at: u32,
}

impl StyleReading {
    fn new(context: String, context_raw: u64, waits_for: u32, forked_at: u32) -> StyleReading {
        StyleReading {
            context,
            context_raw,
            waits_for,
            after: Written::default(),
            read: 0,
            released: false,
            forked_at,
        }
    }

    pub(in crate::scan::normal) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<StyleReading>() + self.context.capacity() + self.after.heap_bytes()
    }

    /// Its text so far (the context of a copy that goes on from it), with its raw start.
    fn so_far(&self) -> (String, u64) {
        reading_tail(&self.context, self.context_raw, &self.after, false)
    }
}

impl Normalizer {
    /// An element whose style may hide its text opens (its tag started at raw `raw`): the
    /// readings with it hidden and shown are recorded. Returns its serial (never 0).
    pub(in crate::scan::normal) fn style_element_opens(
        &mut self,
        raw: u64,
        out: &mut String,
    ) -> u32 {
        self.element_serial = match self.element_serial.checked_add(1) {
            Some(HIDING_ELEMENTS) | None => 1,
            Some(s) => s,
        };
        let serial = self.element_serial;
        let mut made = Vec::new();
        // The browser's reading being recorded goes on with this element hidden (`join.rs`);
        // a copy goes on with it shown.
        let chain = self.joins[BROWSER].as_deref();
        if let Some((text, text_raw)) = chain.and_then(|j| j.recorded()) {
            made.push(StyleReading::new(text, text_raw, 0, serial));
        }
        // Where the browser's reading hides other elements (or goes on from them), this one
        // hidden alone is a reading of its own.
        if chain.is_some() || !self.style_readings.is_empty() {
            let (context, context_raw) = self.view_context(raw);
            self.make_room(out);
            self.style_readings
                .push(StyleReading::new(context, context_raw, serial, 0));
        }
        // Each reading being recorded (the newest few): a copy hides this element too.
        for r in self
            .style_readings
            .iter()
            .rev()
            .filter(|r| r.waits_for == 0)
            .take(MAX_FORKS)
        {
            let (text, text_raw) = r.so_far();
            made.push(StyleReading::new(text, text_raw, serial, 0));
        }
        for r in made {
            if self.style_readings.len() < MAX_READINGS {
                self.style_readings.push(r);
            }
        }
        serial
    }

    /// A construct the browser hides (an autolink, an image: `join.rs`) opens while its
    /// reading waits for elements a style may hide: that reading goes on here, waiting for
    /// the outermost of them, so the construct is read with them shown. False when it cannot
    /// (elements that surely hide the text wait too, or no room).
    pub(in crate::scan::normal) fn browser_wait_moves_aside(&mut self) -> bool {
        if hides(&self.html_open) || self.style_readings.len() >= MAX_READINGS {
            return false;
        }
        let Some(serial) = self.outermost_in_doubt() else {
            return false;
        };
        let Some(j) = self.joins[BROWSER].take_if(|j| j.is_waiting()) else {
            return false;
        };
        let (context, context_raw) = j.waiting_context();
        let fork = self.fork_showing_them();
        self.html_open.clear();
        self.style_readings
            .push(StyleReading::new(context, context_raw, serial, 0));
        // The construct goes on from the copy of that reading that shows them (what it hid
        // before them stays hidden), else from the view.
        if let Some((text, raw)) = fork {
            self.resume_browser_reading(text, raw);
        }
        true
    }

    /// The serial of the outermost open element a style may hide (one a blank line closed
    /// for Markdown, which a browser keeps open, counts too).
    fn outermost_in_doubt(&self) -> Option<u32> {
        self.open_elements
            .iter()
            .chain(&self.html_open)
            .map(|e| e.serial())
            .find(|&s| s != 0)
    }

    /// The copy of the browser's reading made where the outermost open element a style may
    /// hide opened, which shows it (what it hid before stays hidden): its text so far, with
    /// its raw start.
    fn fork_showing_them(&self) -> Option<(String, u64)> {
        let serial = self.outermost_in_doubt()?;
        // (Or the reading a blank line made that shows them and hides the elements that hide
        // their text.)
        self.style_readings
            .iter()
            .filter(|r| r.waits_for == 0)
            .find(|r| r.forked_at == serial)
            .or_else(|| {
                self.style_readings
                    .iter()
                    .find(|r| r.waits_for == 0 && r.forked_at == HIDING_ELEMENTS)
            })
            .map(StyleReading::so_far)
    }

    /// A blank line closed elements for Markdown, among them some a style may hide and some
    /// that hide their text from a browser (`elements.rs`): the browser's reading with the
    /// first shown waits for the others' end (the browser's reading of `join.rs` hides both).
    pub(in crate::scan::normal) fn style_reading_past_blank_line(&mut self, raw: u64) {
        if self.style_readings.len() >= MAX_READINGS {
            return;
        }
        let recorded = self.joins[BROWSER].as_deref().and_then(|j| j.recorded());
        let (context, context_raw) = match recorded.or_else(|| self.fork_showing_them()) {
            Some(recorded) => recorded,
            None => self.view_context(raw),
        };
        self.style_readings.push(StyleReading::new(
            context,
            context_raw,
            HIDING_ELEMENTS,
            HIDING_ELEMENTS,
        ));
    }

    /// Room for one more reading: the oldest being recorded is written as it is (else the
    /// outermost waiting is dropped).
    fn make_room(&mut self, out: &mut String) {
        if self.style_readings.len() < MAX_READINGS {
            return;
        }
        match self.style_readings.iter().position(|r| r.waits_for == 0) {
            Some(i) => {
                let r = self.style_readings.remove(i);
                self.write_style_reading(r, out);
            }
            None => {
                self.style_readings.remove(0);
            }
        }
    }

    /// Elements closed: the readings waiting for one no longer open record what follows.
    pub(in crate::scan::normal) fn style_elements_closed(&mut self) {
        if self.style_readings.iter().all(|r| r.waits_for == 0) {
            return;
        }
        let open = &self.open_elements;
        let hiding = hides(&self.html_open);
        for r in &mut self.style_readings {
            let open = match r.waits_for {
                0 => continue,
                HIDING_ELEMENTS => hiding,
                serial => open.iter().any(|e| e.serial() == serial),
            };
            if !open {
                r.waits_for = 0;
            }
        }
    }

    /// A character the view writes: recorded by the readings not waiting.
    pub(in crate::scan::normal) fn style_readings_written(&mut self, c: char, raw: u64) {
        for r in &mut self.style_readings {
            if r.waits_for == 0 {
                r.after.push(c, raw);
            }
        }
    }

    /// A raw character (at raw `raw`): the readings waiting count it; those that recorded
    /// enough are written.
    pub(in crate::scan::normal) fn style_readings_char(&mut self, raw: u64, out: &mut String) {
        let mut i = 0;
        while i < self.style_readings.len() {
            let r = &mut self.style_readings[i];
            if r.waits_for != 0 {
                r.read = r.read.saturating_add(1);
            }
            r.released |= r.read > MAX_WAIT || !still_held(r.context_raw, raw);
            if r.waits_for == 0 && r.after.len() >= TRAIL {
                let r = self.style_readings.remove(i);
                self.write_style_reading(r, out);
            } else {
                i += 1;
            }
        }
    }

    /// Where the earliest reading held back starts.
    pub(in crate::scan::normal) fn style_readings_from(&self) -> Option<u64> {
        self.style_readings
            .iter()
            .filter(|r| !r.released)
            .map(|r| r.context_raw)
            .min()
    }

    /// The end of the text: every reading is written (one still waiting: an element the text
    /// ended in hides the rest, so its context alone).
    pub(in crate::scan::normal) fn end_style_readings(&mut self, out: &mut String) {
        for r in std::mem::take(&mut self.style_readings) {
            self.write_style_reading(r, out);
        }
    }

    fn write_style_reading(&mut self, r: StyleReading, out: &mut String) {
        let mut text = r.context;
        if r.waits_for == 0 {
            text.push_str(r.after.as_str());
        }
        if text.trim().is_empty() {
            return;
        }
        let raw_end = self.raw_end(self.out_len);
        self.aside(&text, r.context_raw, raw_end, out);
    }
}
