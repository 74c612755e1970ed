//! `exec:` handlers: a subprocess per verdict, started without a shell, the check as JSON on
//! stdin (`{type, params, content, context}`), exactly `{score, detail, data}` JSON expected
//! on stdout; killed at the deadline. Each handler runs under a supervisor of its own
//! (`super::supervisor`, guardwire's own binary) that kills everything the handler started —
//! `setsid` or not — when the handler exits, when guardwire drops the run (deadline,
//! cancelled request) and when guardwire dies.

use super::gate::{AttemptError, Gate};
use super::{ErrorKind, JudgeEnv, JudgeError, Subject, Verdict};
use crate::config::{ExecConfig, RetryConfig};
use crate::policy::judged::{ExecCheck, Judged};
use serde_json::{json, Value};
use std::process::Stdio;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most of a handler's stdout that is read.
const MAX_STDOUT_BYTES: u64 = 1 << 20;

pub struct Handler {
    pub config: ExecConfig,
    name: String,
    gate: Gate,
}

impl Handler {
    /// A handler; its gate's label is `label_prefix`, `exec:` and its name.
    pub fn new(name: &str, config: &ExecConfig, label_prefix: &str) -> Handler {
        Handler {
            name: name.to_owned(),
            // A process that failed is not run again: its failure is its answer.
            gate: Gate::with_defaults(
                format!("{label_prefix}exec:{name}"),
                RetryConfig {
                    max_retries: 0,
                    ..RetryConfig::default()
                },
                config.max_concurrency,
                config.max_queue,
            ),
            config: config.clone(),
        }
    }

    pub async fn evaluate(
        &self,
        env: &JudgeEnv,
        check: &ExecCheck,
        subject: &Subject,
        deadline: tokio::time::Instant,
    ) -> Result<Verdict, JudgeError> {
        let input = json!({
            "type": self.name,
            "params": check.params,
            "content": subject.render(&Judged::Text).unwrap_or_default(),
            "context": {
                "messages": subject.messages_json(),
                "turn_index": subject.turn_index(),
                "tool_calls": subject.tool_calls_json(),
            },
        })
        .to_string()
        .into_bytes();
        let key = env.judges.cache_key(&[self.name.as_bytes(), &input]);
        self.gate
            .call(&env.metrics, env.tenant, Some(key), deadline, || {
                let input = input.clone();
                async move { self.run(&input).await }
            })
            .await
    }

    async fn run(&self, input: &[u8]) -> Result<Verdict, AttemptError> {
        // Cannot run: the handler's own failure. Ran and gave no verdict: about this input.
        let failed = |detail: String| AttemptError::judge(ErrorKind::Process, detail, false);
        let refused = |detail: String| AttemptError::input(ErrorKind::Process, detail);
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (input, refused);
            return Err(failed(
                "exec handlers run only on Linux (their supervisor needs a child subreaper)".into(),
            ));
        }
        #[cfg(target_os = "linux")]
        {
            let supervisor = super::supervisor::binary().ok_or_else(|| {
                failed("no supervisor binary is set (judge::supervisor::use_binary)".into())
            })?;
            // The supervisor's standard error is the read end of this pipe; guardwire holds the
            // only write end (std makes both close-on-exec, so no other child inherits it):
            // dropped with this run, or closed by the kernel when guardwire dies, it tells the
            // supervisor to kill the handler's whole tree.
            let (control, _control_held) = std::io::pipe()
                .map_err(|e| failed(format!("cannot make the control pipe: {e}")))?;
            let mut cmd = tokio::process::Command::new(supervisor);
            cmd.arg(super::supervisor::SUBCOMMAND)
                .arg("--")
                .arg(&self.config.command)
                .args(&self.config.args)
                .env_clear()
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(control))
                // Not killed when the run is dropped: the supervisor must live to kill the
                // tree (tokio reaps it once it exits).
                .kill_on_drop(false)
                // Out of guardwire's group, so a signal to that group (a terminal's Ctrl-C)
                // does not kill the supervisor before it cleaned up.
                .process_group(0);
            if let Some(path) = std::env::var_os("PATH") {
                cmd.env("PATH", path);
            }
            for var in &self.config.env {
                match var.split_once('=') {
                    Some((name, value)) => {
                        cmd.env(name, value);
                    }
                    None => {
                        if let Some(value) = std::env::var_os(var) {
                            cmd.env(var, value);
                        }
                    }
                }
            }
            let mut child = cmd
                .spawn()
                .map_err(|e| failed(format!("cannot start `{}`: {e}", self.config.command)))?;
            // Declared after `child`, so dropped before it: the supervisor is not reaped yet,
            // its pid still its own.
            let mut running = RunningSupervisor(child.id().and_then(|p| i32::try_from(p).ok()));
            let mut stdin = child
                .stdin
                .take()
                .ok_or_else(|| failed("no stdin".into()))?;
            let stdout = child
                .stdout
                .take()
                .ok_or_else(|| failed("no stdout".into()))?;
            // Written while stdout is read, so a handler that answers before reading all its
            // input cannot deadlock against a full pipe.
            let write = async move {
                // A handler that exits without reading its input closes the pipe: not an error.
                let _ = stdin.write_all(input).await;
                drop(stdin);
            };
            let read = async move {
                let mut out = Vec::new();
                let mut limited = stdout.take(MAX_STDOUT_BYTES);
                limited.read_to_end(&mut out).await.map(|_| out)
            };
            let ((), out) = tokio::join!(write, read);
            let out = out.map_err(|e| failed(format!("reading stdout: {e}")))?;
            // The supervisor exits once the handler has, and everything it left is dead.
            let status = child
                .wait()
                .await
                .map_err(|e| failed(format!("waiting for the process: {e}")))?;
            running.0 = None;
            match status.code() {
                Some(0) => parse_output(&out).map_err(refused),
                Some(125) => Err(failed("its supervisor could not run".into())),
                Some(126) => Err(failed(format!("cannot run `{}`", self.config.command))),
                Some(127) => Err(failed(format!("no command `{}`", self.config.command))),
                _ => Err(refused(format!("exited with {status}"))),
            }
        }
    }
}

/// A supervisor not yet waited for: when the run ends without its exit (the deadline, a
/// cancelled request), guardwire kills its tree and it rather than trust it to (its handler
/// may have stopped it).
#[cfg(target_os = "linux")]
struct RunningSupervisor(Option<i32>);

#[cfg(target_os = "linux")]
impl Drop for RunningSupervisor {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // A walk through /proc: off the async workers when there are some.
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn_blocking(move || super::supervisor::end_run(pid))),
                Err(_) => super::supervisor::end_run(pid),
            }
        }
    }
}

/// Exactly one JSON object `{score, detail, data}` (PromptKit reads no prose around it).
fn parse_output(out: &[u8]) -> Result<Verdict, String> {
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(out) else {
        return Err("stdout is not one JSON object".into());
    };
    let score = obj
        .get("score")
        .and_then(Value::as_f64)
        .ok_or_else(|| "stdout has no numeric `score`".to_owned())?;
    let score = super::verdict::normalise(score, crate::policy::judged::Scale::Unit)?;
    Ok(Verdict {
        score,
        reason: obj.get("detail").and_then(Value::as_str).map(str::to_owned),
        label: None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn handler_output() {
        let v = parse_output(br#"{"score": 0.25, "detail": "d", "data": {"x": 1}}"#).unwrap();
        assert_eq!((v.score, v.reason.as_deref()), (0.25, Some("d")));
        for bad in [
            &b"score: 1"[..],
            b"{\"detail\": \"x\"}",
            b"note {\"score\": 1}",
            b"{\"score\": 2}",
        ] {
            assert!(parse_output(bad).is_err());
        }
    }
}
