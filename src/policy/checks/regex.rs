//! `regex` / `content_matches`: with `expect_match: false`, a pattern the text must not match,
//! scanned as it streams; with `expect_match: true` (the default), one the whole text must match.

use super::{Check, CheckDef, CheckType, Kind, Named};
use crate::policy::compiled::{ScanRules, TargetChecks};
use crate::policy::pack::params::Params;
use crate::policy::whole::WholeText;
use crate::scan::normal::normalize_hir;
use crate::scan::{compile_hir, RegexRule, SpanFinder};
use regex_syntax::hir::Hir;

pub(in crate::policy) struct RegexType;
pub(in crate::policy) const REGEX: RegexType = RegexType;

impl CheckType for RegexType {
    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let pattern = p
            .string("pattern")?
            .ok_or_else(|| "param 'pattern': required".to_owned())?;
        let hir =
            compile_hir(&pattern).map_err(|e| format!("param 'pattern': invalid regex: {e}"))?;
        let expect_match = p.bool("expect_match")?.unwrap_or(true);
        if !expect_match && hir.properties().minimum_len() == Some(0) {
            return Err("param 'pattern': matches the empty string, so forbidding it would block everything".into());
        }
        Ok(if expect_match {
            CheckDef::new(RequireRegex { hir })
        } else {
            CheckDef::new(ForbidRegex { hir })
        })
    }
}

/// `expect_match: false`: streamed, incremental.
#[derive(Debug)]
struct ForbidRegex {
    hir: Hir,
}

impl Check for ForbidRegex {
    fn kind(&self) -> Kind {
        Kind::Streamed
    }

    fn compile_scan(&self, rules: &mut ScanRules) -> Result<(), String> {
        let (owner, normalize) = (rules.owner, rules.normalize);
        let raw = &self.hir;
        let hir = normalize_hir(raw, normalize);
        // Only characters the view drops (Markdown's `*`, invisible ones): it would match
        // everywhere.
        if hir.properties().minimum_len() == Some(0) && raw.properties().minimum_len() != Some(0) {
            return Err(format!(
                "pattern can match nothing but characters the normalised view drops (normalize: {}: invisible characters, and with full Markdown's `*`, `~`, `` ` ``); use normalize: none to match them as written",
                normalize.name()
            ));
        }
        let exact = rules.redact;
        if exact && !rules.finders.iter().any(|(o, _)| *o == owner) {
            let finder = SpanFinder::new(&hir).map_err(|e| format!("param 'pattern': {e}"))?;
            rules.finders.push((owner, finder));
        }
        rules.regexes.push(RegexRule { hir, owner, exact });
        Ok(())
    }
}

/// `expect_match: true`: the whole text must match.
#[derive(Debug)]
struct RequireRegex {
    hir: Hir,
}

impl Check for RequireRegex {
    fn kind(&self) -> Kind {
        Kind::Answer
    }

    fn compile_text(&self, owner: u32, checks: &mut TargetChecks) -> Result<(), String> {
        let re = regex_automata::meta::Regex::builder()
            .build_from_hir(&self.hir)
            .map_err(|e| format!("param 'pattern': {e}"))?;
        checks.whole.push((owner, Box::new(Matches(re))));
        Ok(())
    }
}

/// Compiled: the whole text matches.
#[derive(Debug)]
struct Matches(regex_automata::meta::Regex);

impl WholeText for Matches {
    fn passes(&self, text: &str, _: &mut Option<String>) -> bool {
        self.0.is_match(text)
    }
}
