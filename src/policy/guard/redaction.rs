//! Redaction (`mode: redact`): the spans to mask ([`Redaction`]), how a new span merges into
//! the sorted list, and the masks a policy asks for.

use super::{ChannelId, Policy};

/// Adds `new` to `list`, which stays sorted by channel and start with no two spans of a channel
/// overlapping: an overlapping span is merged into the earlier one (whose mask stays). Masking
/// walks the list in this order, and hits arrive in no particular order (each automaton reports
/// its own).
pub(super) fn insert_redaction(list: &mut Vec<Redaction>, new: Redaction) {
    let at = list.partition_point(|r| (r.channel, r.start) <= (new.channel, new.start));
    list.insert(at, new);
    // Merge neighbours that now overlap, from just before the new span on.
    let mut i = at.saturating_sub(1);
    while i + 1 < list.len() {
        let (a, b) = (&list[i], &list[i + 1]);
        if a.channel == b.channel && b.start <= a.end {
            let end = a.end.max(b.end);
            list[i].end = end;
            list.remove(i + 1);
        } else if i > at {
            break;
        } else {
            i += 1;
        }
    }
}

/// A span of a response channel's text to replace with `mask` (`mode: redact`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    pub channel: ChannelId,
    pub start: u64,
    pub end: u64,
    pub mask: String,
}

impl Policy {
    /// True when some validator redacts (frames then keep where their text is).
    pub fn redacts(&self) -> bool {
        self.redacts
    }

    /// The mask for a redaction by `validator` of a match of `kind` (a `pii` kind).
    pub(super) fn mask(&self, validator: u32, kind: Option<&str>) -> String {
        let v = self.validator(validator);
        v.mask
            .clone()
            .unwrap_or_else(|| format!("[REDACTED:{}]", kind.unwrap_or(&v.label)))
    }
}
