//! Reading PromptKit pack files into validator definitions.
//!
//! Parse, then validate: every param is type-checked, every regex compiled, every unknown key
//! refused here, so a bad pack fails at start-up (or reload) with the file, the validator and the
//! param named — never on the first request.

use super::catalog;
use super::structured::{parse_path, Extract, PathCheck, SchemaCheck};
use super::tools::AntiPattern;
use super::{CheckDef, Direction, Mode, OnError, Scope, Threshold, ToolCheck, Validator};
use crate::scan::{compile_hir, PiiKind};
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;

/// A pack error: where (file, validator, param) and what.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {location}{message}")]
pub struct PackError {
    pub file: String,
    /// `validators[2] (type: regex): param 'pattern': ` or empty for file-level errors.
    pub location: String,
    pub message: String,
}

/// Loads one pack file. Validators come back in file order, with `enabled: false` ones dropped
/// (after validation, so a disabled validator with a typo still fails the load).
pub fn load_pack(path: &Path) -> Result<Vec<(Validator, CheckDef)>, PackError> {
    parse_pack_text(path, &read_pack(path)?)
}

/// The text of a pack file.
pub fn read_pack(path: &Path) -> Result<String, PackError> {
    std::fs::read_to_string(path).map_err(|e| PackError {
        file: path.display().to_string(),
        location: String::new(),
        message: format!("cannot read: {e}"),
    })
}

/// The validators of a pack's YAML text, read from `path` (which names it in errors).
pub fn parse_pack_text(path: &Path, text: &str) -> Result<Vec<(Validator, CheckDef)>, PackError> {
    let file = path.display().to_string();
    let doc: Value = serde_norway::from_str(text).map_err(|e| PackError {
        file: file.clone(),
        location: String::new(),
        message: format!("invalid YAML: {e}"),
    })?;
    parse_pack(&file, &doc)
}

/// Builds the validators of a parsed pack document; `file` names it in errors.
pub fn parse_pack(file: &str, doc: &Value) -> Result<Vec<(Validator, CheckDef)>, PackError> {
    let err = |message: String| PackError {
        file: file.to_owned(),
        location: String::new(),
        message,
    };
    let Value::Object(top) = doc else {
        return Err(err(
            "a pack must be a mapping with a `validators:` list".into()
        ));
    };
    for key in top.keys() {
        match key.as_str() {
            "validators" | "name" | "description" | "version" | "id" => {}
            "evals" => return Err(err(
                "`evals:` (observe-only checks) are not supported yet; move them to another file"
                    .into(),
            )),
            other => {
                return Err(err(format!(
                    "unknown key `{other}` (expected validators, name, description, version, id)"
                )))
            }
        }
    }
    let list = match top.get("validators") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(err("`validators` must be a list".into())),
    };
    let mut out = Vec::new();
    for (index, entry) in list.iter().enumerate() {
        let (validator, def, enabled) = parse_validator(file, index, entry)?;
        if enabled {
            out.push((validator, def));
        }
    }
    Ok(out)
}

fn parse_validator(
    file: &str,
    index: usize,
    entry: &Value,
) -> Result<(Validator, CheckDef, bool), PackError> {
    let type_name = entry
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let at = |message: String| PackError {
        file: file.to_owned(),
        location: format!("validators[{index}] (type: {type_name}): "),
        message,
    };
    let Value::Object(fields) = entry else {
        return Err(at("a validator must be a mapping".into()));
    };
    if type_name.is_empty() {
        return Err(at("missing `type`".into()));
    }
    let mut params = Map::new();
    let mut enabled = true;
    let mut message = None;
    let mut id = None;
    let mut mode = Mode::Enforce;
    let mut on_error = OnError::FailClosed;
    let mut buffer = false;
    let mut mask = None;
    for (key, value) in fields {
        match key.as_str() {
            "type" => {}
            "params" => match value {
                Value::Object(m) => params = m.clone(),
                Value::Null => {}
                _ => return Err(at("`params` must be a mapping".into())),
            },
            "enabled" => enabled = as_bool(value).ok_or_else(|| at("`enabled` must be true or false".into()))?,
            "message" => message = Some(as_string(value).ok_or_else(|| at("`message` must be a string".into()))?),
            "id" => id = Some(as_string(value).ok_or_else(|| at("`id` must be a string".into()))?),
            "mode" => {
                mode = match value.as_str() {
                    Some("enforce") => Mode::Enforce,
                    Some("monitor") => Mode::Monitor,
                    Some("redact") => Mode::Redact,
                    _ => return Err(at("`mode` must be one of enforce, monitor, redact".into())),
                }
            }
            "on_error" => {
                on_error = match value.as_str() {
                    Some("fail_closed") => OnError::FailClosed,
                    Some("fail_open") => OnError::FailOpen,
                    _ => return Err(at("`on_error` must be one of fail_closed, fail_open".into())),
                }
            }
            "mask" => mask = Some(as_string(value).ok_or_else(|| at("`mask` must be a string".into()))?),
            "buffer" => buffer = as_bool(value).ok_or_else(|| at("`buffer` must be true or false".into()))?,
            // PromptKit ignores it (guardrails always enforce); `false` asks for the shadow mode.
            "fail_on_violation" => {
                if !as_bool(value).ok_or_else(|| at("`fail_on_violation` must be true or false".into()))? {
                    mode = Mode::Monitor;
                }
            }
            other => {
                return Err(at(format!(
                    "unknown key `{other}` (expected type, params, enabled, message, id, mode, mask, on_error, buffer, fail_on_violation)"
                )))
            }
        }
    }
    let canonical = catalog::canonical(&type_name)
        .ok_or_else(|| at(format!("unknown check type `{type_name}`")))?;
    let mut p = Params {
        map: params,
        aliases: catalog::param_aliases(canonical),
    };
    let direction = match p.take("direction") {
        None => Direction::Output,
        Some((name, v)) => match v.as_str() {
            Some("input") => Direction::Input,
            Some("output") => Direction::Output,
            Some("both") => Direction::Both,
            Some("reasoning") => Direction::Reasoning,
            Some("all") => Direction::All,
            _ => {
                return Err(at(format!(
                    "param '{name}': must be one of input, output, both, reasoning, all"
                )))
            }
        },
    };
    if let Some((name, v)) = p.take("message") {
        let m = as_string(&v).ok_or_else(|| at(format!("param '{name}': must be a string")))?;
        message.get_or_insert(m);
    }
    let threshold = Threshold {
        min_score: p.score("min_score").map_err(&at)?,
        max_score: p.score("max_score").map_err(&at)?,
    };
    if !threshold.passes(1.0) || threshold.passes(0.0) {
        return Err(at(
            "min_score/max_score must let a passing result (score 1) pass and a violation (score 0) fail"
                .into(),
        ));
    }
    let def = build_check(canonical, &type_name, &mut p).map_err(&at)?;
    if matches!(
        def,
        CheckDef::Tool(_) | CheckDef::LatencyBudget { .. } | CheckDef::CostBudget { .. }
    ) && direction != Direction::Output
    {
        return Err(at(
            "param 'direction': this check is about the exchange, not a text; it takes no direction (use `scope: session` for the whole conversation's tool calls)"
                .into(),
        ));
    }
    if matches!(
        def,
        CheckDef::Contains { .. }
            | CheckDef::MinLength { .. }
            | CheckDef::JsonValid
            | CheckDef::FieldPresence { .. }
            | CheckDef::JsonSchema(_)
            | CheckDef::JsonPath(_)
    ) && matches!(direction, Direction::Reasoning | Direction::All)
    {
        return Err(at(
            "param 'direction': whole-text checks of reasoning are not supported yet".into(),
        ));
    }
    if mode == Mode::Redact
        && !matches!(
            def,
            CheckDef::ContentExcludes { .. } | CheckDef::Pii { .. } | CheckDef::ForbidRegex { .. }
        )
    {
        return Err(at(format!(
            "mode `redact` needs the exact span of each match: it applies to content_excludes, pii and regex with expect_match: false, not to `{type_name}`"
        )));
    }
    if mode == Mode::Redact
        && matches!(
            direction,
            Direction::Input | Direction::Both | Direction::All
        )
    {
        return Err(at(
            "mode `redact` rewrites the response; redacting the request (direction input) is not supported yet"
                .into(),
        ));
    }
    if mask.is_some() && mode != Mode::Redact {
        return Err(at("`mask` only applies with `mode: redact`".into()));
    }
    if let Some(unknown) = p.map.keys().next() {
        return Err(at(format!(
            "param '{unknown}': unknown param for `{type_name}`"
        )));
    }
    let validator = Validator {
        label: id.clone().unwrap_or_else(|| type_name.clone()),
        id,
        type_name,
        canonical,
        message,
        direction,
        mode,
        threshold,
        on_error,
        buffer,
        mask,
        file: file.to_owned(),
        index,
    };
    Ok((validator, def, enabled))
}

fn build_check(canonical: &str, type_name: &str, p: &mut Params) -> Result<CheckDef, String> {
    match canonical {
        "content_excludes" => {
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
            Ok(CheckDef::ContentExcludes {
                patterns,
                word_boundary,
            })
        }
        "regex" => {
            let pattern = p
                .string("pattern")?
                .ok_or_else(|| "param 'pattern': required".to_owned())?;
            let hir = compile_hir(&pattern)
                .map_err(|e| format!("param 'pattern': invalid regex: {e}"))?;
            let expect_match = p.bool("expect_match")?.unwrap_or(true);
            if !expect_match && hir.properties().minimum_len() == Some(0) {
                return Err("param 'pattern': matches the empty string, so forbidding it would block everything".into());
            }
            Ok(if expect_match {
                CheckDef::RequireRegex { pattern, hir }
            } else {
                CheckDef::ForbidRegex { pattern, hir }
            })
        }
        "max_length" => {
            let max_chars = p.u64("max")?;
            let max_tokens = p.u64("max_tokens")?;
            if max_chars.is_none() && max_tokens.is_none() {
                return Err(
                    "param 'max' or 'max_tokens': at least one is required (characters, o200k tokens)"
                        .into(),
                );
            }
            Ok(CheckDef::MaxLength {
                max_chars,
                max_tokens,
            })
        }
        "pii" => {
            let kinds = match p.string_list("types")? {
                None => Vec::new(),
                Some(names) => names
                    .iter()
                    .map(|n| {
                        PiiKind::parse(n).ok_or_else(|| {
                            let known: Vec<&str> = PiiKind::ALL.iter().map(|k| k.name()).collect();
                            format!(
                                "param 'types': unknown kind `{n}` (known: {})",
                                known.join(", ")
                            )
                        })
                    })
                    .collect::<Result<_, _>>()?,
            };
            Ok(CheckDef::Pii { kinds })
        }
        "sentence_count" => Ok(CheckDef::SentenceCount {
            max: p
                .u64("max")?
                .ok_or_else(|| "param 'max': required (sentences)".to_owned())?,
        }),
        "contains" | "contains_any" => Ok(CheckDef::Contains {
            patterns: non_empty_patterns(p.required_string_list("patterns")?)?,
            any: canonical == "contains_any",
        }),
        "min_length" => Ok(CheckDef::MinLength {
            min_chars: p
                .u64("min")?
                .ok_or_else(|| "param 'min': required (characters)".to_owned())?,
        }),
        "json_valid" => Ok(CheckDef::JsonValid),
        "tools_called" => {
            let names = p.required_string_list("tool_names")?;
            let min_calls = p.u64("min_calls")?.unwrap_or(1);
            if min_calls == 0 {
                return Err("param 'min_calls': must be at least 1".into());
            }
            Ok(CheckDef::Tool(ToolCheck::Called {
                names,
                min_calls,
                scope: p.scope()?,
            }))
        }
        "tools_not_called" => Ok(CheckDef::Tool(ToolCheck::NotCalled {
            names: p.required_string_list("tool_names")?,
            scope: p.scope()?,
        })),
        "tool_args" => Ok(CheckDef::Tool(ToolCheck::Args {
            tool: p.required_string("tool_name")?,
            expected: p.required_object("expected_args")?,
            scope: p.scope()?,
        })),
        "tool_calls_with_args" => Ok(CheckDef::Tool(ToolCheck::CallsWithArgs {
            tool: p.required_string("tool_name")?,
            expected: p.object("expected_args")?.unwrap_or_default(),
            result_includes: p.string_list("result_includes")?.unwrap_or_default(),
        })),
        "tool_call_count" => {
            let tool = p.string("tool")?;
            let (min, max) = (p.u64("min")?, p.u64("max")?);
            match (min, max) {
                (None, None) => Err("param 'min' or 'max': at least one is required".into()),
                (Some(lo), Some(hi)) if lo > hi => {
                    Err(format!("param 'min': {lo} is more than max {hi}"))
                }
                _ => Ok(CheckDef::Tool(ToolCheck::Count { tool, min, max })),
            }
        }
        "tool_call_sequence" => Ok(CheckDef::Tool(ToolCheck::Sequence {
            tools: p.required_string_list("sequence")?,
        })),
        "tool_call_chain" => Ok(CheckDef::Tool(ToolCheck::Chain {
            tools: p.required_string_list("chain")?,
        })),
        "tool_anti_pattern" => Ok(CheckDef::Tool(ToolCheck::AntiPattern {
            patterns: p.anti_patterns()?,
        })),
        "tool_no_repeat" => {
            let max_repeats = p.u64("max_repeats")?.unwrap_or(1);
            if max_repeats == 0 {
                return Err("param 'max_repeats': must be at least 1".into());
            }
            Ok(CheckDef::Tool(ToolCheck::NoRepeat {
                tools: p.string_list("tools")?.unwrap_or_default(),
                max_repeats,
            }))
        }
        "tool_efficiency" => {
            let max_calls = p.u64("max_calls")?;
            let max_errors = p.u64("max_errors")?;
            let max_error_rate = p.fraction("max_error_rate")?;
            if max_calls.is_none() && max_errors.is_none() && max_error_rate.is_none() {
                return Err(
                    "param 'max_calls', 'max_errors' or 'max_error_rate': at least one is required"
                        .into(),
                );
            }
            Ok(CheckDef::Tool(ToolCheck::Efficiency {
                max_calls,
                max_errors,
                max_error_rate,
            }))
        }
        "no_tool_errors" => Ok(CheckDef::Tool(ToolCheck::NoErrors)),
        "tool_result_includes" => Ok(CheckDef::Tool(ToolCheck::ResultIncludes {
            tool: p.string("tool_name")?,
            patterns: non_empty_patterns(p.required_string_list("patterns")?)?,
        })),
        "tool_result_matches" => {
            let tool = p.string("tool_name")?;
            let pattern = p.required_string("pattern")?;
            let hir = compile_hir(&pattern)
                .map_err(|e| format!("param 'pattern': invalid regex: {e}"))?;
            let regex = regex_automata::meta::Regex::builder()
                .build_from_hir(&hir)
                .map_err(|e| format!("param 'pattern': {e}"))?;
            Ok(CheckDef::Tool(ToolCheck::ResultMatches { tool, regex }))
        }
        "tool_args_excluded_session" => {
            let excluded = p.required_object("excluded_args")?;
            if excluded.is_empty() {
                return Err("param 'excluded_args': must not be empty".into());
            }
            Ok(CheckDef::Tool(ToolCheck::ArgsExcluded {
                tool: p.required_string("tool_name")?,
                excluded,
            }))
        }
        "latency_budget" => match p.u64("max_ms")? {
            Some(0) => Err("param 'max_ms': must be more than 0".into()),
            Some(max_ms) => match crate::config::check_duration_ms(max_ms) {
                Ok(()) => Ok(CheckDef::LatencyBudget { max_ms }),
                Err(e) => Err(format!("param 'max_ms': {e}")),
            },
            None => Err("param 'max_ms': required (milliseconds)".into()),
        },
        "cost_budget" => {
            let max_total_tokens = p.u64("max_total_tokens")?;
            let max_cost_usd = p.non_negative("max_cost_usd")?;
            if max_total_tokens.is_none() && max_cost_usd.is_none() {
                return Err(
                    "param 'max_total_tokens' or 'max_cost_usd': at least one is required".into(),
                );
            }
            Ok(CheckDef::CostBudget {
                max_total_tokens,
                max_cost_usd,
            })
        }
        "field_presence" => Ok(CheckDef::FieldPresence {
            fields: non_empty_patterns(p.required_string_list("fields")?)?,
        }),
        "json_schema" => {
            let (key, schema) = p
                .take("schema")
                .ok_or_else(|| "param 'schema': required (a JSON Schema object)".to_owned())?;
            let extract = p.extract()?;
            let check = SchemaCheck::compile(&schema, extract)
                .map_err(|e| format!("param '{key}': {e}"))?;
            Ok(CheckDef::JsonSchema(Arc::new(check)))
        }
        "json_path" => {
            let expression = p.required_string("expression")?;
            let path = parse_path(&expression).map_err(|e| format!("param 'expression': {e}"))?;
            let expected = p.take("expected").map(|(_, v)| v);
            let contains = match p.take("contains").map(|(_, v)| v) {
                None => Vec::new(),
                Some(Value::Array(items)) => items,
                Some(one) => vec![one],
            };
            let (min_results, max_results) = (p.u64("min_results")?, p.u64("max_results")?);
            if let (Some(lo), Some(hi)) = (min_results, max_results) {
                if lo > hi {
                    return Err(format!(
                        "param 'min_results': {lo} is more than max_results {hi}"
                    ));
                }
            }
            Ok(CheckDef::JsonPath(Arc::new(PathCheck {
                path,
                expected,
                contains,
                min_results,
                max_results,
                extract: p.extract()?,
            })))
        }
        other => Err(format!(
            "check type `{other}` is in the PromptKit catalog but not supported by guardwire yet"
        )),
    }
}

fn non_empty_patterns(patterns: Vec<String>) -> Result<Vec<String>, String> {
    match patterns.iter().position(String::is_empty) {
        Some(i) => Err(format!("param 'patterns': entry {i} is empty")),
        None => Ok(patterns),
    }
}

/// The params of one validator, with aliases folded in; taken keys are removed so the leftovers
/// are exactly the unknown ones.
struct Params {
    map: Map<String, Value>,
    aliases: &'static [(&'static str, &'static str)],
}

impl Params {
    /// Removes `name` (or one of its aliases); returns the key as written and its value.
    fn take(&mut self, name: &str) -> Option<(String, Value)> {
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

    fn string(&mut self, name: &str) -> Result<Option<String>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => as_string(&v)
                .map(Some)
                .ok_or_else(|| format!("param '{key}': must be a string")),
        }
    }

    fn bool(&mut self, name: &str) -> Result<Option<bool>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => as_bool(&v)
                .map(Some)
                .ok_or_else(|| format!("param '{key}': must be true or false")),
        }
    }

    fn u64(&mut self, name: &str) -> Result<Option<u64>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("param '{key}': must be a whole number ≥ 0")),
        }
    }

    fn required_string(&mut self, name: &str) -> Result<String, String> {
        self.string(name)?
            .ok_or_else(|| format!("param '{name}': required (a string)"))
    }

    fn string_list(&mut self, name: &str) -> Result<Option<Vec<String>>, String> {
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

    fn object(&mut self, name: &str) -> Result<Option<Map<String, Value>>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((_, Value::Object(m))) => Ok(Some(m)),
            Some((key, _)) => Err(format!("param '{key}': must be a mapping")),
        }
    }

    fn required_object(&mut self, name: &str) -> Result<Map<String, Value>, String> {
        self.object(name)?
            .ok_or_else(|| format!("param '{name}': required (a mapping)"))
    }

    fn non_negative(&mut self, name: &str) -> Result<Option<f64>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => match v.as_f64() {
                Some(x) if x >= 0.0 => Ok(Some(x)),
                _ => Err(format!("param '{key}': must be a number ≥ 0")),
            },
        }
    }

    fn fraction(&mut self, name: &str) -> Result<Option<f64>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => match v.as_f64() {
                Some(x) if (0.0..=1.0).contains(&x) => Ok(Some(x)),
                _ => Err(format!("param '{key}': must be a number from 0 to 1")),
            },
        }
    }

    fn scope(&mut self) -> Result<Scope, String> {
        match self.string("scope")?.as_deref() {
            None | Some("turn") => Ok(Scope::Turn),
            Some("session") => Ok(Scope::Session),
            Some(other) => Err(format!(
                "param 'scope': `{other}` is not one of turn, session"
            )),
        }
    }

    fn extract(&mut self) -> Result<Extract, String> {
        Ok(Extract {
            allow_wrapped: self.bool("allow_wrapped")?.unwrap_or(false),
            extract_json: self.bool("extract_json")?.unwrap_or(false),
        })
    }

    /// `patterns: [{sequence: [a, b], message: "…"}]`.
    fn anti_patterns(&mut self) -> Result<Vec<AntiPattern>, String> {
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

    fn score(&mut self, name: &str) -> Result<Option<f64>, String> {
        match self.take(name) {
            None => Ok(None),
            Some((key, v)) => match v.as_f64() {
                Some(x) if (0.0..=1.0).contains(&x) => Ok(Some(x)),
                _ => Err(format!("param '{key}': must be a number from 0 to 1")),
            },
        }
    }

    fn required_string_list(&mut self, name: &str) -> Result<Vec<String>, String> {
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

fn as_string(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

fn as_bool(v: &Value) -> Option<bool> {
    v.as_bool()
}
