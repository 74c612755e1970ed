//! `exec:` handlers: a subprocess per verdict, started without a shell, the check as JSON on
//! stdin (`{type, params, content, context}`), exactly `{score, detail, data}` JSON expected
//! on stdout; killed at the deadline. A handler runs in a process group of its own, and the
//! whole group is killed when its run ends (deadline, cancelled request, or done), so a shell
//! script's children do not outlive it.

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
        let mut cmd = tokio::process::Command::new(&self.config.command);
        cmd.args(&self.config.args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        #[cfg(unix)]
        cmd.process_group(0);
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
        // Declared after `child`, so dropped before it: the group is killed while the
        // handler's own process is not yet reaped.
        let _group = ProcessGroup(child.id());
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
        let status = child
            .wait()
            .await
            .map_err(|e| failed(format!("waiting for the process: {e}")))?;
        if !status.success() {
            return Err(refused(format!("exited with {status}")));
        }
        parse_output(&out).map_err(refused)
    }
}

/// A handler's process group (its id is the handler's pid), killed whole when dropped: at the
/// deadline or a cancelled request (the run's future is dropped), and after a handler that
/// answered, for what it left running.
struct ProcessGroup(Option<u32>);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pgid) = self.0.and_then(|id| libc::pid_t::try_from(id).ok()) {
            // SAFETY: killpg takes plain integers and touches no memory of this process. The id
            // names this handler's group: it stays taken while any member lives, and while the
            // handler itself is not reaped — `ProcessGroup` is dropped before the `Child`,
            // whose drop (`kill_on_drop`) reaps it on every path but a completed `wait`. After
            // that, an empty group's id could only name another one if the kernel, which hands
            // out pids in rising order, wrapped around to it in between. ESRCH (nothing left
            // in the group) is expected and ignored.
            #[allow(unsafe_code)]
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
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
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    /// A handler running `script` under `sh -c`, with `$PIDFILE` set.
    #[cfg(target_os = "linux")]
    fn shell(script: &str, pidfile: &std::path::Path) -> Handler {
        let config = ExecConfig {
            command: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![format!("PIDFILE={}", pidfile.display())],
            timeout_ms: 30_000,
            max_concurrency: 1,
            max_queue: 1,
        };
        Handler::new("t", &config, "")
    }

    /// The pid the handler wrote, once it is there.
    #[cfg(target_os = "linux")]
    async fn written_pid(pidfile: &std::path::Path) -> u32 {
        for _ in 0..1000 {
            if let Some(pid) = std::fs::read_to_string(pidfile)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                return pid;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the handler never wrote its child's pid");
    }

    /// Whether `pid` is still a running process (a zombie waiting for its reaper is not).
    #[cfg(target_os = "linux")]
    fn running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
            .is_some_and(|zombie| !zombie)
    }

    /// Waits (up to 10 s, polling) for `pid` to stop running.
    #[cfg(target_os = "linux")]
    async fn gone(pid: u32) -> bool {
        for _ in 0..1000 {
            if !running(pid) {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        false
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_handler_is_killed_with_its_children() {
        let dir = tempfile::tempdir().unwrap();
        // Cut off (its future dropped, as at the deadline) while its child sleeps on.
        let pidfile = dir.path().join("cut-off");
        let h = shell("sleep 300 & echo $! > \"$PIDFILE\"; sleep 300", &pidfile);
        let child = {
            let run = h.run(b"{}");
            tokio::pin!(run);
            tokio::select! {
                _ = &mut run => panic!("the handler answered"),
                pid = written_pid(&pidfile) => pid,
            }
        };
        assert!(gone(child).await, "the handler's child {child} outlived it");

        // Answered, and left a child running in the background.
        let pidfile = dir.path().join("answered");
        let h = shell(
            "sleep 300 >/dev/null 2>&1 & echo $! > \"$PIDFILE\"; echo '{\"score\": 1}'",
            &pidfile,
        );
        assert!(h.run(b"{}").await.is_ok());
        let child = written_pid(&pidfile).await;
        assert!(gone(child).await, "the handler's child {child} outlived it");
    }

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
