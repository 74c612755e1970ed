//! Outcomes counted per validator, stage and route. Each worker keeps its own [`Tally`]; they
//! are merged at the end. Counts add up and the example ids kept are those of the lowest line
//! numbers, so the result does not depend on which worker checked which line.

use super::replay::{Outcome, Stage, Verdict};
use crate::policy::{Mode, Policy};
use std::collections::BTreeMap;

/// Example ids: the `k` of the lowest line numbers seen.
#[derive(Debug, Clone, Default)]
pub struct Examples {
    pub items: Vec<(u64, String)>,
}

impl Examples {
    pub fn add(&mut self, k: usize, line: u64, id: &str) {
        if self.items.len() >= k && self.items.last().is_some_and(|(l, _)| *l < line) {
            return;
        }
        let at = self.items.partition_point(|(l, _)| *l < line);
        self.items.insert(at, (line, id.to_owned()));
        self.items.truncate(k);
    }

    fn merge(&mut self, k: usize, other: Examples) {
        for (line, id) in other.items {
            self.add(k, line, &id);
        }
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(|(_, id)| id.as_str())
    }
}

/// A validator, the same in every policy that loads the same pack file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ValidatorKey {
    pub file: String,
    pub index: usize,
    pub label: String,
    pub type_name: String,
    pub mode: &'static str,
}

impl ValidatorKey {
    fn of(policy: &Policy, validator: u32) -> ValidatorKey {
        let v = policy.validator(validator);
        ValidatorKey {
            file: v.file.clone(),
            index: v.index,
            label: v.label.clone(),
            type_name: v.type_name.clone(),
            mode: match v.mode {
                Mode::Enforce => "enforce",
                Mode::Monitor => "monitor",
                Mode::Redact => "redact",
            },
        }
    }
}

/// What one validator did over the run.
#[derive(Debug, Clone, Default)]
pub struct ValidatorCounts {
    pub blocked: u64,
    pub monitored: u64,
    pub redacted: u64,
    /// Blocks per stage.
    pub stages: BTreeMap<Stage, u64>,
    pub examples: Examples,
}

#[derive(Debug, Clone, Default)]
pub struct RouteCounts {
    pub exchanges: u64,
    pub passed: u64,
    pub blocked: u64,
    pub refused: u64,
}

#[derive(Debug, Clone, Default)]
pub struct StageCounts {
    pub blocked: u64,
    pub refused: u64,
    pub examples: Examples,
}

/// Everything a replay counted.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Example ids kept per count.
    pub k: usize,
    pub exchanges: u64,
    pub passed: u64,
    pub blocked: u64,
    pub refused: u64,
    /// Exchanges released with something masked.
    pub redacted: u64,
    /// Exchanges with a monitor-mode finding.
    pub monitored: u64,
    /// Exchanges recorded without an answer (BeforeCall only).
    pub request_only: u64,
    /// Exchanges whose policy has judged checks, which a replay does not run.
    pub judged_skipped: u64,
    /// Lines that are not replayable exchanges.
    pub invalid: u64,
    pub invalid_lines: Vec<(u64, String)>,
    /// Bytes of input read.
    pub bytes: u64,
    pub by_route: BTreeMap<String, RouteCounts>,
    pub by_stage: BTreeMap<Stage, StageCounts>,
    pub by_validator: BTreeMap<ValidatorKey, ValidatorCounts>,
    /// Refusals by reason.
    pub refusals: BTreeMap<String, (u64, Examples)>,
}

impl Tally {
    pub fn new(k: usize) -> Tally {
        Tally {
            k,
            ..Tally::default()
        }
    }

    /// Every validator of `policy` gets a row, fired or not.
    pub fn declare(&mut self, policy: &Policy) {
        for i in 0..policy.validators().len() {
            self.by_validator
                .entry(ValidatorKey::of(policy, i as u32))
                .or_default();
        }
    }

    pub fn add(&mut self, o: &Outcome) {
        let k = self.k;
        self.exchanges += 1;
        let route = self.by_route.entry(o.route.to_owned()).or_default();
        route.exchanges += 1;
        if !o.answered {
            self.request_only += 1;
        }
        if o.judged_skipped {
            self.judged_skipped += 1;
        }
        if !o.redacted.is_empty() {
            self.redacted += 1;
        }
        if !o.monitored.is_empty() {
            self.monitored += 1;
        }
        match &o.verdict {
            Verdict::Passed => {
                self.passed += 1;
                route.passed += 1;
            }
            Verdict::Blocked {
                stage, validator, ..
            } => {
                self.blocked += 1;
                route.blocked += 1;
                let s = self.by_stage.entry(*stage).or_default();
                s.blocked += 1;
                s.examples.add(k, o.line, &o.id);
                let v = self
                    .by_validator
                    .entry(ValidatorKey::of(&o.policy, *validator))
                    .or_default();
                v.blocked += 1;
                *v.stages.entry(*stage).or_default() += 1;
                v.examples.add(k, o.line, &o.id);
            }
            Verdict::Refused { stage, reason } => {
                self.refused += 1;
                route.refused += 1;
                let s = self.by_stage.entry(*stage).or_default();
                s.refused += 1;
                s.examples.add(k, o.line, &o.id);
                let r = self.refusals.entry(reason.clone()).or_default();
                r.0 += 1;
                r.1.add(k, o.line, &o.id);
            }
        }
        // Each validator once per exchange, however many times it fired.
        let mut seen: Vec<(u32, bool)> = Vec::new();
        for &(v, _) in &o.monitored {
            if !seen.contains(&(v, false)) {
                seen.push((v, false));
                let c = self
                    .by_validator
                    .entry(ValidatorKey::of(&o.policy, v))
                    .or_default();
                c.monitored += 1;
                c.examples.add(k, o.line, &o.id);
            }
        }
        for &v in &o.redacted {
            if !seen.contains(&(v, true)) {
                seen.push((v, true));
                let c = self
                    .by_validator
                    .entry(ValidatorKey::of(&o.policy, v))
                    .or_default();
                c.redacted += 1;
                c.examples.add(k, o.line, &o.id);
            }
        }
    }

    pub fn add_invalid(&mut self, line: u64, error: String) {
        self.invalid += 1;
        let at = self.invalid_lines.partition_point(|(l, _)| *l < line);
        if at < self.k {
            self.invalid_lines.insert(at, (line, error));
            self.invalid_lines.truncate(self.k);
        }
    }

    /// Adds `other`'s counts (another worker's) to these.
    pub fn merge(&mut self, other: Tally) {
        let k = self.k;
        self.exchanges += other.exchanges;
        self.passed += other.passed;
        self.blocked += other.blocked;
        self.refused += other.refused;
        self.redacted += other.redacted;
        self.monitored += other.monitored;
        self.request_only += other.request_only;
        self.judged_skipped += other.judged_skipped;
        self.bytes += other.bytes;
        self.invalid += other.invalid - other.invalid_lines.len() as u64;
        for (line, e) in other.invalid_lines {
            self.add_invalid(line, e);
        }
        for (name, r) in other.by_route {
            let m = self.by_route.entry(name).or_default();
            m.exchanges += r.exchanges;
            m.passed += r.passed;
            m.blocked += r.blocked;
            m.refused += r.refused;
        }
        for (stage, s) in other.by_stage {
            let m = self.by_stage.entry(stage).or_default();
            m.blocked += s.blocked;
            m.refused += s.refused;
            m.examples.merge(k, s.examples);
        }
        for (key, v) in other.by_validator {
            let m = self.by_validator.entry(key).or_default();
            m.blocked += v.blocked;
            m.monitored += v.monitored;
            m.redacted += v.redacted;
            for (stage, n) in v.stages {
                *m.stages.entry(stage).or_default() += n;
            }
            m.examples.merge(k, v.examples);
        }
        for (reason, (n, ex)) in other.refusals {
            let m = self.refusals.entry(reason).or_default();
            m.0 += n;
            m.1.merge(k, ex);
        }
    }

    /// Exchanges released (unchanged or redacted) per exchange replayed; 1 for none.
    pub fn pass_rate(&self) -> f64 {
        if self.exchanges == 0 {
            1.0
        } else {
            self.passed as f64 / self.exchanges as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_keep_the_lowest_lines_in_any_order() {
        let mut a = Examples::default();
        for l in [9, 3, 7, 1, 5] {
            a.add(3, l, &l.to_string());
        }
        let mut b = Examples::default();
        for l in [1, 5, 3, 9, 7] {
            b.add(3, l, &l.to_string());
        }
        assert_eq!(a.items, b.items);
        assert_eq!(a.ids().collect::<Vec<_>>(), ["1", "3", "5"]);
    }

    #[test]
    fn invalid_lines_merge_without_double_counting() {
        let mut a = Tally::new(2);
        a.add_invalid(4, "x".into());
        let mut b = Tally::new(2);
        b.add_invalid(2, "y".into());
        b.add_invalid(8, "z".into());
        b.add_invalid(1, "w".into());
        a.merge(b);
        assert_eq!(a.invalid, 4);
        assert_eq!(
            a.invalid_lines.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
            [1, 2]
        );
    }
}
