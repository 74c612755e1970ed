//! A validator's params: typed accessors that take a param (or its alias) and name it in errors.

use crate::policy::structured::Extract;
use crate::policy::tools::AntiPattern;
use crate::policy::Scope;
use serde_json::{Map, Value};

/// The params of one validator, with aliases folded in; taken keys are removed so the leftovers
/// are exactly the unknown ones.
pub(in crate::policy) struct Params {
    pub(in crate::policy) map: Map<String, Value>,
    pub(in crate::policy) aliases: &'static [(&'static str, &'static str)],
}

impl Params {
    /// Removes `name` (or one of its aliases); returns the key as written and its value.
    pub(in crate::policy) fn take(&mut self, name: &str) -> Option<(String, Value)> {
        if let Some(v) = self.map.remove(name) {
            return Some((name.to_owned(), v));
        }
        for (alias, canonical) in self.aliases {
            if *canonical == name {
                if let Some(v) = self.map.remove(*alias) {
                    return Some(((*alias).to_owned(), v));
                }
            }
        }
        None
    }

    pub(in crate::policy) fn string(&mut self, name: &str) -> Result<Option<String>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => as_string(&v)
                .map(Some)
                .ok_or_else(|| format!("param '{key}': must be a string")),
        }
    }

    pub(in crate::policy) fn bool(&mut self, name: &str) -> Result<Option<bool>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => as_bool(&v)
                .map(Some)
                .ok_or_else(|| format!("param '{key}': must be true or false")),
        }
    }

    pub(in crate::policy) fn u64(&mut self, name: &str) -> Result<Option<u64>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("param '{key}': must be a whole number ≥ 0")),
        }
    }

    pub(in crate::policy) fn required_string(&mut self, name: &str) -> Result<String, String> {
        self.string(name)?
            .ok_or_else(|| format!("param '{name}': required (a string)"))
    }

    pub(in crate::policy) fn string_list(
        &mut self,
        name: &str,
    ) -> Result<Option<Vec<String>>, String> {
        if self.take_peek(name) {
            self.required_string_list(name).map(Some)
        } else {
            Ok(None)
        }
    }

    /// True when `name` (or an alias) is present, without taking it.
    fn take_peek(&self, name: &str) -> bool {
        self.map.contains_key(name)
            || self
                .aliases
                .iter()
                .any(|(alias, c)| *c == name && self.map.contains_key(*alias))
    }

    pub(in crate::policy) fn object(
        &mut self,
        name: &str,
    ) -> Result<Option<Map<String, Value>>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((_, Value::Object(m))) => Ok(Some(m)),
            Some((key, _)) => Err(format!("param '{key}': must be a mapping")),
        }
    }

    pub(in crate::policy) fn required_object(
        &mut self,
        name: &str,
    ) -> Result<Map<String, Value>, String> {
        self.object(name)?
            .ok_or_else(|| format!("param '{name}': required (a mapping)"))
    }

    pub(in crate::policy) fn non_negative(&mut self, name: &str) -> Result<Option<f64>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => match v.as_f64() {
                Some(x) if x >= 0.0 => Ok(Some(x)),
                _ => Err(format!("param '{key}': must be a number ≥ 0")),
            },
        }
    }

    pub(in crate::policy) fn fraction(&mut self, name: &str) -> Result<Option<f64>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => match v.as_f64() {
                Some(x) if (0.0..=1.0).contains(&x) => Ok(Some(x)),
                _ => Err(format!("param '{key}': must be a number from 0 to 1")),
            },
        }
    }

    pub(in crate::policy) fn scope(&mut self) -> Result<Scope, String> {
        match self.string("scope")?.as_deref() {
            None | Some("turn") => Ok(Scope::Turn),
            Some("session") => Ok(Scope::Session),
            Some(other) => Err(format!(
                "param 'scope': `{other}` is not one of turn, session"
            )),
        }
    }

    pub(in crate::policy) fn extract(&mut self) -> Result<Extract, String> {
        Ok(Extract {
            allow_wrapped: self.bool("allow_wrapped")?.unwrap_or(false),
            extract_json: self.bool("extract_json")?.unwrap_or(false),
        })
    }

    /// `patterns: [{sequence: [a, b], message: "…"}]`.
    pub(in crate::policy) fn anti_patterns(&mut self) -> Result<Vec<AntiPattern>, String> {
        let (key, v) = self.take("patterns").ok_or_else(|| {
            "param 'patterns': required (a list of {sequence, message})".to_owned()
        })?;
        let Value::Array(items) = v else {
            return Err(format!(
                "param '{key}': must be a list of {{sequence, message}}"
            ));
        };
        if items.is_empty() {
            return Err(format!("param '{key}': must not be empty"));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let Value::Object(m) = item else {
                    return Err(format!("param '{key}': entry {i} must be a mapping with `sequence`"));
                };
                if let Some(other) = m.keys().find(|k| *k != "sequence" && *k != "message") {
                    return Err(format!("param '{key}': entry {i}: unknown key `{other}` (expected sequence, message)"));
                }
                let sequence: Vec<String> = match m.get("sequence") {
                    Some(Value::Array(s)) if !s.is_empty() => s
                        .iter()
                        .map(|x| x.as_str().map(str::to_owned))
                        .collect::<Option<_>>()
                        .ok_or_else(|| format!("param '{key}': entry {i}: `sequence` must list tool names"))?,
                    _ => return Err(format!("param '{key}': entry {i}: `sequence` must be a non-empty list of tool names")),
                };
                let message = match m.get("message") {
                    None => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(_) => return Err(format!("param '{key}': entry {i}: `message` must be a string")),
                };
                Ok(AntiPattern { sequence, message })
            })
            .collect()
    }

    pub(in crate::policy) fn score(&mut self, name: &str) -> Result<Option<f64>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => match v.as_f64() {
                Some(x) if (0.0..=1.0).contains(&x) => Ok(Some(x)),
                _ => Err(format!("param '{key}': must be a number from 0 to 1")),
            },
        }
    }

    pub(in crate::policy) fn required_string_list(
        &mut self,
        name: &str,
    ) -> Result<Vec<String>, String> {
        let (key, v) = self
            .take(name)
            .ok_or_else(|| format!("param '{name}': required (a list of strings)"))?;
        let Value::Array(items) = v else {
            return Err(format!("param '{key}': must be a list of strings"));
        };
        if items.is_empty() {
            return Err(format!("param '{key}': must not be empty"));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                as_string(item).ok_or_else(|| format!("param '{key}': entry {i} must be a string"))
            })
            .collect()
    }
}

pub(in crate::policy) fn as_string(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

pub(in crate::policy) fn as_bool(v: &Value) -> Option<bool> {
    v.as_bool()
}
