//! Text checks over the normalised view ([`TextScan`]): the scan sets of one target, one per
//! `normalize:` setting in use, each fed the view its validators ask for, with every hit mapped
//! back to positions of the text fed (what the hold-back, blocking and redaction act on).

use super::normal::{Normalize, Normalizer};
use super::{Hit, ScanSet, ScanState, SpanFinder};

/// View text kept per lane for finding where regex matches start (redaction): matches are
/// reported within a few hundred bytes of where they end.
const RECENT_VIEW: usize = 1024;

/// The text checks of one target.
#[derive(Debug, Default)]
pub struct TextScan {
    lanes: Vec<ViewSet>,
}

/// The scan set of the validators of one `normalize:` setting.
#[derive(Debug)]
pub struct ViewSet {
    pub normalize: Normalize,
    pub set: ScanSet,
    /// (validator, finder) of redacting regexes: their hits get a start.
    pub finders: Vec<(u32, SpanFinder)>,
    /// The validators of this set: text the view refuses to read is a match of each.
    pub owners: Vec<u32>,
}

/// One channel's state for a [`TextScan`].
#[derive(Debug, Clone)]
pub struct TextScanState {
    pos: u64,
    lanes: Vec<LaneState>,
}

#[derive(Debug, Clone)]
struct LaneState {
    normalizer: Option<Normalizer>,
    scan: ScanState,
    /// The latest view text and the view position of its first byte (lanes with finders).
    recent: Option<(u64, String)>,
}

impl TextScanState {
    /// Bytes of text fed so far.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Heap bytes this state holds.
    pub fn heap_bytes(&self) -> usize {
        self.lanes.capacity() * std::mem::size_of::<LaneState>()
            + self
                .lanes
                .iter()
                .map(|l| {
                    l.scan.heap_bytes()
                        + l.normalizer.as_ref().map_or(0, Normalizer::heap_bytes)
                        + l.recent.as_ref().map_or(0, |(_, t)| t.capacity())
                })
                .sum::<usize>()
    }
}

impl TextScan {
    /// From the scan set of each setting in use, with the span finders of its redacting
    /// regexes. Empty sets are left out.
    pub fn new(mut lanes: Vec<ViewSet>) -> Self {
        lanes.retain(|l| !l.set.is_empty());
        TextScan { lanes }
    }

    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    pub fn start(&self) -> TextScanState {
        TextScanState {
            pos: 0,
            lanes: self
                .lanes
                .iter()
                .map(|l| LaneState {
                    normalizer: (l.normalize != Normalize::None)
                        .then(|| Normalizer::new(l.normalize)),
                    scan: l.set.start(),
                    recent: (!l.finders.is_empty()).then(|| (0, String::new())),
                })
                .collect(),
        }
    }

    /// Scans the next piece, appending matches (in positions of the text fed) to `hits`.
    /// With `find_spans`, hits of redacting regexes get the start of their match.
    pub fn feed(&self, st: &mut TextScanState, text: &str, hits: &mut Vec<Hit>, find_spans: bool) {
        for (lane, ls) in self.lanes.iter().zip(&mut st.lanes) {
            let first = hits.len();
            match &mut ls.normalizer {
                None => {
                    lane.set.feed(&mut ls.scan, text, hits);
                    lane.find_starts(&mut ls.recent, text, &mut hits[first..], find_spans);
                }
                Some(n) => {
                    let view = n.feed(text);
                    lane.set.feed(&mut ls.scan, &view, hits);
                    lane.find_starts(&mut ls.recent, &view, &mut hits[first..], find_spans);
                    map_back(n, &mut hits[first..]);
                    lane.refuse(n, hits);
                    n.prune(lane.set.safe_pos(&ls.scan));
                }
            }
        }
        st.pos += text.len() as u64;
    }

    /// Ends the channel's text: what waited in a view or a matcher is decided now.
    pub fn finish(&self, st: &mut TextScanState, hits: &mut Vec<Hit>, find_spans: bool) {
        for (lane, ls) in self.lanes.iter().zip(&mut st.lanes) {
            let first = hits.len();
            match &mut ls.normalizer {
                None => {
                    lane.set.finish(&mut ls.scan, hits);
                    lane.find_starts(&mut ls.recent, "", &mut hits[first..], find_spans);
                }
                Some(n) => {
                    let rest = n.finish();
                    lane.set.feed(&mut ls.scan, &rest, hits);
                    lane.set.finish(&mut ls.scan, hits);
                    lane.find_starts(&mut ls.recent, &rest, &mut hits[first..], find_spans);
                    map_back(n, &mut hits[first..]);
                    lane.refuse(n, hits);
                }
            }
        }
    }

    /// The earliest position (of the text fed) at which a match could still be forming.
    pub fn safe_pos(&self, st: &TextScanState) -> u64 {
        let mut safe = st.pos;
        for (lane, ls) in self.lanes.iter().zip(&st.lanes) {
            let view_safe = lane.set.safe_pos(&ls.scan);
            safe = safe.min(match &ls.normalizer {
                None => view_safe,
                // What waits in the view may lie before text already in it (a bidi run's
                // written order goes on while its shown order waits): hold it too.
                Some(n) => n
                    .raw_start(view_safe)
                    .min(n.pending_start().unwrap_or(u64::MAX)),
            });
        }
        safe
    }

    /// Heap bytes of the compiled automata.
    pub fn memory_usage(&self) -> usize {
        self.lanes
            .iter()
            .map(|l| {
                l.set.memory_usage()
                    + l.finders
                        .iter()
                        .map(|(_, f)| f.memory_usage())
                        .sum::<usize>()
            })
            .sum()
    }
}

impl ViewSet {
    /// A span the view refused to read is a match of every validator of this set (fail
    /// closed: see `normal/bidi.rs`).
    fn refuse(&self, n: &mut Normalizer, hits: &mut Vec<Hit>) {
        let Some((start, end)) = n.take_refusal() else {
            return;
        };
        hits.extend(self.owners.iter().map(|&owner| Hit {
            owner,
            start: Some(start),
            end,
            rule: None,
        }));
    }

    /// Keeps the lane's recent view and gives start-less hits of redacting regexes the start
    /// of their match in it (left `None` when not found: the hit then blocks).
    fn find_starts(
        &self,
        recent: &mut Option<(u64, String)>,
        view: &str,
        hits: &mut [Hit],
        find_spans: bool,
    ) {
        let Some((base, text)) = recent else {
            return;
        };
        text.push_str(view);
        for h in hits.iter_mut().filter(|h| h.start.is_none() && find_spans) {
            let Some((_, finder)) = self.finders.iter().find(|(o, _)| *o == h.owner) else {
                continue;
            };
            let Some(end) = h
                .end
                .checked_sub(*base)
                .and_then(|e| usize::try_from(e).ok())
            else {
                continue;
            };
            // A start at the first kept byte may be cut short (unless nothing was dropped).
            h.start = finder
                .start(text.as_bytes(), end)
                .filter(|&s| s > 0 || *base == 0)
                .map(|s| *base + s as u64);
        }
        if text.len() > 2 * RECENT_VIEW {
            let mut cut = text.len() - RECENT_VIEW;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            text.drain(..cut);
            *base += cut as u64;
        }
    }
}

/// View positions of `hits` to positions of the text fed.
fn map_back(n: &Normalizer, hits: &mut [Hit]) {
    for h in hits {
        h.start = h.start.map(|s| n.raw_start(s));
        h.end = n.raw_end(h.end);
    }
}
