//! `max_length` / `length`: at most `max` characters and/or `max_tokens` o200k tokens, the
//! tokens counted as the answer streams.

use super::{Check, CheckDef, CheckType, Kind, Named};
use crate::policy::compiled::TargetChecks;
use crate::policy::counters::{TokenCounter, TokenState};
use crate::policy::limits::{Limit, LimitState};
use crate::policy::pack::params::Params;

pub(in crate::policy) struct MaxLengthType;
pub(in crate::policy) const MAX_LENGTH: MaxLengthType = MaxLengthType;

impl CheckType for MaxLengthType {
    fn param_aliases(&self, _canonical: &str) -> &'static [(&'static str, &'static str)] {
        &[("max_characters", "max"), ("max_chars", "max")]
    }

    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let max_chars = p.u64("max")?;
        let max_tokens = p.u64("max_tokens")?;
        if max_chars.is_none() && max_tokens.is_none() {
            return Err(
                "param 'max' or 'max_tokens': at least one is required (characters, o200k tokens)"
                    .into(),
            );
        }
        Ok(CheckDef::new(MaxLength {
            max_chars,
            max_tokens,
        }))
    }
}

/// Characters and/or o200k tokens.
#[derive(Debug)]
struct MaxLength {
    max_chars: Option<u64>,
    max_tokens: Option<u64>,
}

impl Check for MaxLength {
    fn kind(&self) -> Kind {
        Kind::Answer
    }

    fn compile_text(&self, owner: u32, checks: &mut TargetChecks) -> Result<(), String> {
        if let Some(max) = self.max_chars {
            checks.max_chars.push((owner, max));
        }
        if let Some(max) = self.max_tokens {
            let counter = TokenCounter::o200k()
                .map_err(|e| format!("param 'max_tokens': cannot load the o200k tokenizer: {e}"))?;
            checks
                .limits
                .push((owner, Box::new(MaxTokens { max, counter })));
        }
        Ok(())
    }
}

/// At most `max` o200k_base tokens.
#[derive(Debug)]
struct MaxTokens {
    max: u64,
    counter: TokenCounter,
}

#[derive(Debug)]
struct TokensSoFar {
    counter: TokenCounter,
    state: TokenState,
}

impl Limit for MaxTokens {
    fn start(&self) -> Box<dyn LimitState> {
        Box::new(TokensSoFar {
            counter: self.counter.clone(),
            state: TokenState::new(self.max),
        })
    }

    fn exceeded_by(&self, text: &str) -> bool {
        self.counter.count_whole(text) > self.max
    }
}

impl LimitState for TokensSoFar {
    fn feed(&mut self, text: &str) -> Option<u64> {
        self.counter.feed(&mut self.state, text)
    }

    fn safe_pos(&self) -> u64 {
        self.state.safe_pos()
    }

    fn finish(&mut self) -> bool {
        self.counter.finish(&mut self.state);
        self.state.violation().is_some()
    }
}
