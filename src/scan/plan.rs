//! The planner: which matcher each forbidden regex of a scan target goes to.
//!
//! Patterns that begin with selective literals go to the prefix automaton
//! ([`super::prefixed`]); patterns that prose keeps busy but that hold a literal after an ASCII
//! run go to the inner matcher ([`super::inner`]); the others are packed into as few unanchored
//! DFAs ([`super::regex`]) as fit a size budget. The planner sits above the three matchers,
//! which do not refer back to it.

use super::inner::InnerMatcher;
use super::prefixed::{literal_prefixes, PrefixedMatcher};
use super::regex::{trim_for_existence, RegexError, RegexMatcher, RegexRule, SINGLE_DFA_LIMIT};

/// Largest DFA for all patterns of a target together; past it each pattern gets its own DFA
/// (more automaton steps per byte, but sizes add up instead of multiplying).
const UNION_DFA_BUDGET: usize = 16 << 20;

/// Every forbidden pattern of a scan target, compiled.
#[derive(Debug, Default)]
pub struct ForbiddenRegexes {
    /// Patterns that begin with selective literals: prefix automaton + anchored threads.
    pub prefixed: Option<PrefixedMatcher>,
    /// Patterns that prose keeps busy but that hold a literal after an ASCII run (e-mail
    /// addresses): found from that literal.
    pub inner: Vec<InnerMatcher>,
    /// The others, in as few unanchored DFAs as fit the budget.
    pub dfas: Vec<RegexMatcher>,
}

/// Compiles forbidden patterns (see [`ForbiddenRegexes`]). Returns the index of the offending
/// rule with an error.
pub fn build_forbidden(rules: &[RegexRule]) -> Result<ForbiddenRegexes, (usize, RegexError)> {
    if let Some(i) = rules
        .iter()
        .position(|r| r.hir.properties().minimum_len() == Some(0))
    {
        return Err((i, RegexError::MatchesEmpty));
    }
    let mut prefixed = Vec::new();
    let mut prefixed_index = Vec::new();
    let mut others = Vec::new();
    let mut other_index = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        if r.exact {
            others.push(r.clone());
            other_index.push(i);
            continue;
        }
        let rule = RegexRule {
            hir: trim_for_existence(r.hir.clone()),
            owner: r.owner,
            exact: false,
        };
        match literal_prefixes(&rule.hir) {
            Some(prefixes) => {
                prefixed.push((rule, prefixes));
                prefixed_index.push(i);
            }
            None => {
                others.push(rule);
                other_index.push(i);
            }
        }
    }
    let prefixed = if prefixed.is_empty() {
        None
    } else {
        // One anchored DFA for all: a failure cannot be pinned on one pattern; name the first.
        Some(PrefixedMatcher::new(&prefixed).map_err(|e| (prefixed_index[0], e))?)
    };
    let (dfas, inner) = pack_dfas(&others).map_err(|(i, e)| (other_index[i], e))?;
    Ok(ForbiddenRegexes {
        prefixed,
        inner,
        dfas,
    })
}

/// Builds patterns in as few DFAs as fit [`UNION_DFA_BUDGET`] each: every DFA stepped is one
/// table lookup per scanned byte, so fewer is faster, but a union's size can be the product of
/// its parts. Patterns that ordinary prose leaves idle (digit runs, uppercase codes) are kept
/// apart from those it does not (an e-mail address may begin at any letter): together, the
/// first would be stepped over every byte as well instead of skipped. Of the second kind, those
/// with a literal after an ASCII run are found from that literal instead
/// ([`InnerMatcher`]); redacting patterns are not (their hits need every end).
type Packed = (Vec<RegexMatcher>, Vec<InnerMatcher>);

fn pack_dfas(trimmed: &[RegexRule]) -> Result<Packed, (usize, RegexError)> {
    let mut singles: Vec<Option<RegexMatcher>> = Vec::with_capacity(trimmed.len());
    for (i, r) in trimmed.iter().enumerate() {
        let m = RegexMatcher::with_limit(std::slice::from_ref(r), SINGLE_DFA_LIMIT)
            .map_err(|e| (i, e))?;
        singles.push(Some(m));
    }
    let (skipping, busy): (Vec<usize>, Vec<usize>) = (0..trimmed.len())
        .partition(|&i| singles[i].as_ref().is_some_and(RegexMatcher::skips_prose));
    let mut inner = Vec::new();
    let mut stepped = Vec::new();
    for i in busy {
        let found = match trimmed[i].exact {
            true => None,
            false => InnerMatcher::new(&trimmed[i]),
        };
        match found {
            Some(m) => inner.push(m.map_err(|e| (i, e))?),
            None => stepped.push(i),
        }
    }
    let mut groups = Vec::new();
    for part in [skipping, stepped] {
        groups.extend(pack_part(trimmed, part, &mut singles));
    }
    Ok((groups, inner))
}

/// Packs the patterns `part` of `trimmed` (see [`pack_dfas`]); `singles` holds each one's own
/// DFA, taken from it when used alone.
fn pack_part(
    trimmed: &[RegexRule],
    part: Vec<usize>,
    singles: &mut [Option<RegexMatcher>],
) -> Vec<RegexMatcher> {
    if part.len() > 1 {
        let members: Vec<RegexRule> = part.iter().map(|&i| trimmed[i].clone()).collect();
        if let Ok(all) = RegexMatcher::with_limit(&members, UNION_DFA_BUDGET) {
            return vec![all];
        }
    }
    // Greedy packing from the smallest up: a pattern joins the current group while the
    // group's DFA stays in budget.
    let mut order = part;
    order.sort_by_key(|&i| singles[i].as_ref().map_or(0, RegexMatcher::memory_usage));
    let mut groups = Vec::new();
    let mut members: Vec<RegexRule> = Vec::new();
    let mut current: Option<RegexMatcher> = None;
    for i in order {
        let single = singles[i].take();
        if current.is_some() {
            members.push(trimmed[i].clone());
            if let Ok(joined) = RegexMatcher::with_limit(&members, UNION_DFA_BUDGET) {
                current = Some(joined);
                continue;
            }
            members.pop();
            groups.extend(current.take());
        }
        members = vec![trimmed[i].clone()];
        current = single;
    }
    groups.extend(current);
    groups
}
