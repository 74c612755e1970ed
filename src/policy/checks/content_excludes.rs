//! `content_excludes` / `banned_words` / `content_not_includes`: words or phrases the text must
//! not hold, scanned as it streams (substrings, or whole words: `banned_words`' default).

use super::{non_empty_patterns, Check, CheckDef, CheckType, Kind, Named};
use crate::policy::compiled::ScanRules;
use crate::policy::pack::params::Params;
use crate::policy::transcript::TranscriptRule;
use crate::scan::normal::normalize_pattern;
use crate::scan::LiteralRule;

pub(in crate::policy) struct ContentExcludesType;
pub(in crate::policy) const CONTENT_EXCLUDES: ContentExcludesType = ContentExcludesType;

impl CheckType for ContentExcludesType {
    fn param_aliases(&self, _canonical: &str) -> &'static [(&'static str, &'static str)] {
        &[("words", "patterns")]
    }

    fn build(&self, ty: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let type_name = ty.type_name;
        let patterns = non_empty_patterns(p.required_string_list("patterns")?)?;
        let default_mode = if type_name == "banned_words" {
            "word_boundary"
        } else {
            "substring"
        };
        let word_boundary = match p.string("match_mode")?.as_deref().unwrap_or(default_mode) {
            "substring" => false,
            "word_boundary" => true,
            other => {
                return Err(format!(
                    "param 'match_mode': `{other}` is not one of substring, word_boundary"
                ))
            }
        };
        let transcript = TranscriptRule::excludes(patterns.clone(), word_boundary)?;
        Ok(CheckDef::new(ContentExcludes {
            patterns,
            word_boundary,
            transcript,
        }))
    }
}

#[derive(Debug)]
struct ContentExcludes {
    patterns: Vec<String>,
    word_boundary: bool,
    /// As an assertion: PromptKit's rule over every assistant message, read as written.
    transcript: TranscriptRule,
}

impl Check for ContentExcludes {
    fn kind(&self) -> Kind {
        Kind::Streamed
    }

    fn transcript(&self) -> Option<TranscriptRule> {
        Some(self.transcript.clone())
    }

    fn compile_scan(&self, rules: &mut ScanRules) -> Result<(), String> {
        let (owner, normalize) = (rules.owner, rules.normalize);
        for p in &self.patterns {
            for form in normalize_pattern(p, normalize) {
                if form.is_empty() {
                    return Err(format!(
                        "pattern {p:?} is empty once normalised (normalize: {}): it has only characters the view drops (invisible ones, and with full Markdown's `*`, `~`, `` ` ``); use normalize: none to match them as written",
                        normalize.name()
                    ));
                }
                rules.literals.push(LiteralRule {
                    pattern: form,
                    owner,
                    word_boundary: self.word_boundary,
                });
            }
        }
        Ok(())
    }
}
