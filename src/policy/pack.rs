//! Reading PromptKit pack files into validator definitions.
//!
//! Parse, then validate: every param is type-checked, every regex compiled, every unknown key
//! refused here, so a bad pack fails at start-up (or reload) with the file, the validator and the
//! param named — never on the first request.

mod evals;
pub(super) mod params;

use super::catalog;
use super::checks::{Kind, Named};
use super::compile::evals::EvalDef;
use super::evals::EvalCheck;
use super::judged::{CheckRefs, Judged, JudgedKind};
pub use super::types::PackError;
use super::types::Target;
use super::{CheckDef, Direction, Mode, OnError, Threshold, Validator};
use crate::scan::Normalize;
use params::{as_bool, as_string, Params};
use serde_json::{Map, Value};
use std::path::Path;

/// A pack: its validators and its evals, each in file order, with `enabled: false` ones dropped
/// (after validation, so a disabled validator with a typo still fails the load).
#[derive(Debug, Default)]
pub struct Pack {
    pub validators: Vec<(Validator, CheckDef)>,
    pub evals: Vec<EvalDef>,
}

/// Loads one pack file.
pub fn load_pack(path: &Path) -> Result<Pack, PackError> {
    parse_pack_text(path, &read_pack(path)?, &CheckRefs::default())
}

/// The text of a pack file.
pub fn read_pack(path: &Path) -> Result<String, PackError> {
    std::fs::read_to_string(path).map_err(|e| {
        // Relative pack paths are read from the working directory, not the config's.
        let cwd = std::env::current_dir().ok().filter(|_| path.is_relative());
        PackError {
            file: path.display().to_string(),
            location: String::new(),
            message: match cwd {
                Some(dir) => format!(
                    "cannot read: {e} (relative to the working directory {})",
                    dir.display()
                ),
                None => format!("cannot read: {e}"),
            },
        }
    })
}

/// The validators of a pack's YAML text, read from `path` (which names it in errors); `refs`
/// are the judges and `exec:` handlers its judged checks may name.
pub fn parse_pack_text(path: &Path, text: &str, refs: &CheckRefs) -> Result<Pack, PackError> {
    let file = path.display().to_string();
    let doc: Value = serde_norway::from_str(text).map_err(|e| PackError {
        file: file.clone(),
        location: String::new(),
        message: format!("invalid YAML: {e}"),
    })?;
    parse_pack(&file, &doc, refs)
}

/// Builds the validators and evals of a parsed pack document; `file` names it in errors.
pub fn parse_pack(file: &str, doc: &Value, refs: &CheckRefs) -> Result<Pack, PackError> {
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
            "validators" | "evals" | "name" | "description" | "version" | "id" => {}
            other => {
                return Err(err(format!(
                    "unknown key `{other}` (expected validators, evals, name, description, version, id)"
                )))
            }
        }
    }
    let list = |key: &str| match top.get(key) {
        None | Some(Value::Null) => Ok(&[][..]),
        Some(Value::Array(list)) => Ok(&list[..]),
        Some(_) => Err(err(format!("`{key}` must be a list"))),
    };
    let mut pack = Pack::default();
    for (index, entry) in list("validators")?.iter().enumerate() {
        let (validator, def, enabled) = parse_validator(file, "validators", index, entry, refs)?;
        if def.kind() == Kind::EvalOnly {
            let why = if validator.canonical == "guardrail_triggered" {
                "it reads which validators fired on the exchange"
            } else {
                "it scores the finished answer against a reference, off the request path"
            };
            return Err(PackError {
                file: file.to_owned(),
                location: format!("validators[{index}] (type: {}): ", validator.type_name),
                message: format!("applies to `evals:` ({why})"),
            });
        }
        if enabled {
            pack.validators.push((validator, def));
        }
    }
    for (index, entry) in list("evals")?.iter().enumerate() {
        if let Some(eval) = evals::parse_eval(file, index, entry, refs)? {
            pack.evals.push(eval);
        }
    }
    Ok(pack)
}

/// One validator (or, for `evals:`, the check of an eval: `section` names the list).
fn parse_validator(
    file: &str,
    section: &str,
    index: usize,
    entry: &Value,
    refs: &CheckRefs,
) -> Result<(Validator, CheckDef, bool), PackError> {
    let type_name = entry
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let at = |message: String| PackError {
        file: file.to_owned(),
        location: format!("{section}[{index}] (type: {type_name}): "),
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
    // An `exec:` handler of the config is a type of its own.
    let canonical = catalog::canonical(&type_name)
        .or_else(|| refs.exec.contains(&type_name).then_some("exec"))
        .ok_or_else(|| {
            at(format!(
                "unknown check type `{type_name}` (neither in the catalog nor an `exec:` handler of the config)"
            ))
        })?;
    let check_type = catalog::check_type(canonical);
    let mut p = Params {
        map: params,
        aliases: check_type.map_or(&[], |t| t.param_aliases(canonical)),
    };
    // `guardrail_triggered`'s direction is of the validator it asks about (its own param).
    let given = if canonical == "guardrail_triggered" {
        None
    } else {
        p.take("direction")
    };
    let direction = match given {
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
    // `reasoning: check | skip`: whether a check of the answer reads its reasoning too
    // (validated below, once the check is known).
    let reasoning_param = match given_reasoning(canonical, &mut p) {
        None => None,
        Some((name, v)) => match v.as_str() {
            Some("check") => Some((name, true)),
            Some("skip") => Some((name, false)),
            _ => return Err(at(format!("param '{name}': must be one of check, skip"))),
        },
    };
    if let Some((name, v)) = p.take("message") {
        let m = as_string(&v).ok_or_else(|| at(format!("param '{name}': must be a string")))?;
        message.get_or_insert(m);
    }
    let mut threshold = Threshold {
        min_score: p.score("min_score").map_err(&at)?,
        max_score: p.score("max_score").map_err(&at)?,
    };
    // `cosine_similarity`'s threshold is the similarity the text must reach.
    if canonical == "cosine_similarity" {
        if let Some(min) = p.score("min_similarity").map_err(&at)? {
            threshold.min_score = Some(min);
        }
    }
    if !threshold.passes(1.0) || threshold.passes(0.0) {
        return Err(at(
            "min_score/max_score must let a passing result (score 1) pass and a violation (score 0) fail"
                .into(),
        ));
    }
    let def = match check_type {
        Some(t) => t.build(
            &Named {
                canonical,
                type_name: &type_name,
                refs,
            },
            &mut p,
        ),
        None => Err(match super::catalog::refusal(canonical) {
            Some(why) => format!(
                "check type `{canonical}` is in the PromptKit catalog, and guardwire refuses it: {why}"
            ),
            None => format!(
                "check type `{canonical}` is in the PromptKit catalog but not supported by guardwire yet"
            ),
        }),
    }
    .map_err(&at)?;
    if let Some(check) = def.judged() {
        // A judge's score passes at 0.5 unless the validator says otherwise.
        if threshold == Threshold::default() {
            threshold.min_score = Some(0.5);
        }
        if matches!(direction, Direction::Reasoning | Direction::All) {
            return Err(at(
                "param 'direction': judged checks of reasoning are not supported yet (input, output or both)"
                    .into(),
            ));
        }
        if matches!(&check.kind, JudgedKind::Llm(l) if matches!(l.judged, Judged::Rag { .. }))
            && direction != Direction::Output
        {
            return Err(at(
                "param 'direction': RAG checks judge the answer (direction: output)".into(),
            ));
        }
        if check.window.is_some() && direction == Direction::Input {
            return Err(at(
                "param 'window': applies to answers (direction: output or both)".into(),
            ));
        }
        if check.parallel && direction == Direction::Output {
            return Err(at(
                "param 'parallel': applies to input checks (direction: input or both)".into(),
            ));
        }
    }
    if matches!(def.check().eval(), Some(EvalCheck::Reference(_))) {
        // A score, not a violation: passes at 0.5 unless the eval says otherwise.
        if threshold == Threshold::default() {
            threshold.min_score = Some(super::checks::reference::DEFAULT_MIN_SCORE);
        }
        if direction != Direction::Output {
            return Err(at(
                "param 'direction': a reference metric scores the answer (direction: output)"
                    .into(),
            ));
        }
    }
    if let Some(refused) = direction_refused(def.kind(), direction) {
        return Err(at(format!("param 'direction': {refused}")));
    }
    let reasoning = reasoning_scope(section, direction, &def, reasoning_param).map_err(&at)?;
    if mode == Mode::Redact && !def.kind().streamed() {
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
    let normalize = match p.take("normalize") {
        None => Normalize::default(),
        Some((name, v)) => {
            if !def.kind().streamed() {
                return Err(at(format!(
                    "param '{name}': applies to the word, phrase, pattern and PII checks (content_excludes, banned_words, regex with expect_match: false, pii), not to `{type_name}`"
                )));
            }
            v.as_str().and_then(Normalize::parse).ok_or_else(|| {
                at(format!(
                    "param '{name}': must be one of {}",
                    Normalize::NAMES
                ))
            })?
        }
    };
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
        normalize,
        reasoning,
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

/// The `reasoning` param, where the type has it (`guardrail_triggered`'s params are about
/// another validator).
fn given_reasoning(canonical: &str, p: &mut Params) -> Option<(String, Value)> {
    (canonical != "guardrail_triggered")
        .then(|| p.take("reasoning"))
        .flatten()
}

/// Whether a validator checks the answer's reasoning ([`Validator::reasoning`](super::Validator)):
/// the streamed text checks (words, phrases, forbidden regexes, PII) do when their direction
/// names reasoning (every direction but `input`), unless `reasoning: skip` (`given`: the param
/// as written and whether it says `check`). Other checks never read reasoning, so the param is
/// refused on them, as it is where it contradicts the direction.
fn reasoning_scope(
    section: &str,
    direction: Direction,
    def: &CheckDef,
    given: Option<(String, bool)>,
) -> Result<bool, String> {
    let streamed_text = def.kind().streamed();
    let Some((name, check)) = given else {
        return Ok(streamed_text && direction.covers(Target::Reasoning));
    };
    if section == "evals" {
        return Err(format!(
            "param '{name}': evals score the recorded answer, which keeps no reasoning"
        ));
    }
    if !streamed_text {
        return Err(format!(
            "param '{name}': applies to the streamed text checks (content_excludes, banned_words, regex with expect_match: false, pii); this check never reads reasoning"
        ));
    }
    match (direction, check) {
        (Direction::Input, _) => Err(format!(
            "param '{name}': direction input checks the request; reasoning is part of the answer (direction output or both)"
        )),
        (Direction::Reasoning | Direction::All, false) => Err(format!(
            "param '{name}': `skip` contradicts direction {}, which checks reasoning (use direction output or both with reasoning: skip)",
            if direction == Direction::All { "all" } else { "reasoning" }
        )),
        _ => Ok(check),
    }
}

/// Why a check of this kind cannot take `direction` (judged checks: see `parse_validator`).
fn direction_refused(kind: Kind, direction: Direction) -> Option<&'static str> {
    match kind {
        Kind::Exchange if direction != Direction::Output => Some(
            "this check is about the exchange, not a text; it takes no direction (use `scope: session` for the whole conversation's tool calls)",
        ),
        Kind::Whole if matches!(direction, Direction::Reasoning | Direction::All) => {
            Some("whole-text checks of reasoning are not supported yet")
        }
        // Length limits and whole-text regexes count the answer (and refusal) only: a
        // direction of reasoning alone would check nothing.
        Kind::Answer if direction == Direction::Reasoning => Some(
            "this check reads the answer, not its reasoning (direction input, output, both or all)",
        ),
        Kind::Streamed
        | Kind::Answer
        | Kind::Whole
        | Kind::Exchange
        | Kind::Judged
        | Kind::EvalOnly => None,
    }
}
