//! `sentence_count` / `max_sentences`: at most `max` sentences, counted as the answer streams
//! (see [`counters`](crate::policy::counters)).

use super::{Check, CheckDef, CheckType, Kind, Named};
use crate::policy::compiled::TargetChecks;
use crate::policy::counters::{count_sentences, SentenceState};
use crate::policy::limits::{Limit, LimitState};
use crate::policy::pack::params::Params;

pub(in crate::policy) struct SentenceCount;
pub(in crate::policy) const SENTENCE_COUNT: SentenceCount = SentenceCount;

impl CheckType for SentenceCount {
    fn param_aliases(&self, _canonical: &str) -> &'static [(&'static str, &'static str)] {
        &[("max_sentences", "max")]
    }

    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
        Ok(CheckDef::new(MaxSentences {
            max: p
                .u64("max")?
                .ok_or_else(|| "param 'max': required (sentences)".to_owned())?,
        }))
    }
}

/// At most `max` sentences.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MaxSentences {
    pub(crate) max: u64,
}

impl Check for MaxSentences {
    fn kind(&self) -> Kind {
        Kind::Answer
    }

    fn compile_text(&self, owner: u32, checks: &mut TargetChecks) -> Result<(), String> {
        checks.limits.push((owner, Box::new(*self)));
        Ok(())
    }
}

impl Limit for MaxSentences {
    fn start(&self) -> Box<dyn LimitState> {
        Box::new(SentenceState::new(self.max))
    }

    fn exceeded_by(&self, text: &str) -> bool {
        count_sentences(text) > self.max
    }
}

impl LimitState for SentenceState {
    fn feed(&mut self, text: &str) -> Option<u64> {
        SentenceState::feed(self, text)
    }

    fn safe_pos(&self) -> u64 {
        SentenceState::safe_pos(self)
    }

    fn finish(&mut self) -> bool {
        SentenceState::finish(self);
        self.violation().is_some()
    }
}
