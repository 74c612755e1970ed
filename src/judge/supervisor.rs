//! The supervisor of one `exec:` handler run: guardwire's own binary, started as
//! `guardwire exec-supervise -- COMMAND ARGS…` between guardwire and the handler, so that
//! nothing the handler starts outlives its verdict, its deadline or guardwire.
//!
//! A process group does not hold a handler's children (a child that calls `setsid` leaves
//! it), and Linux's parent-death signal is one process's, cleared on `fork`. The supervisor
//! instead makes itself a *child subreaper* (`PR_SET_CHILD_SUBREAPER`): a descendant whose
//! parent exits is handed to it rather than to init, whatever session or group it is in, so
//! every process the handler started is in the supervisor's tree until it is reaped. The
//! supervisor kills that whole tree (SIGKILL, found through `/proc`) and reaps it when either
//!
//! - the handler exits (its verdict is written): what it left running dies before guardwire
//!   reads the exit status, so a verdict never leaves a process behind; or
//! - its control pipe (standard error, the read end of a pipe whose only write end guardwire
//!   holds) reaches end of file: guardwire dropped the run (deadline, cancelled request) or
//!   guardwire itself died, however (even `SIGKILL`), since the kernel closes a dead process's
//!   descriptors.
//!
//! - it is sent a signal that would end it (`SIGTERM`, `SIGHUP`, `SIGINT`, `SIGUSR1`, the
//!   real-time signals, …: every one a process may handle, [`ENDING`]) — by an operator's
//!   `pkill`, or by the handler itself: it kills the tree first, then exits with 128 + the
//!   signal.
//!
//! Then it exits with the handler's status (128 + the signal when it was killed). Its own
//! failures use the shell's codes: 125 (cannot become a subreaper), 126 (the command cannot
//! be run), 127 (no such command), which guardwire counts as the handler's failure, not the
//! input's. Limits: a descendant that changed its user (setuid) cannot be killed by it; and
//! the supervisor itself, killed with a signal it cannot handle before it cleaned up
//! (`SIGKILL` — the OOM killer, an operator, or the handler itself, which runs as the same
//! user — or `SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE` sent to it), leaves the tree to init —
//! guardwire runs it in a process group of its own so that a terminal's Ctrl-C to guardwire's
//! group does not do that. A supervisor still running when its run ends without a verdict
//! (deadline, cancelled request; stopped by its handler with `SIGSTOP`, say) is not waited
//! for: guardwire stops it, freezes its tree (SIGSTOP, walk after walk until none runs: a
//! chain of processes that fork and exit cannot outrun that, as it outran a kill per walk),
//! kills the tree, then it ([`end_run`]); so does the supervisor on a signal that ends it.
//!
//! No `unsafe`: rustix's safe wrappers (prctl, kill, wait) and std's `process_group`.

use rustix::io::Errno;
use rustix::process::{kill_process, Pid, Signal, WaitOptions};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;

/// The subcommand the binary answers as the supervisor (hidden from `--help`).
pub const SUBCOMMAND: &str = "exec-supervise";

static BINARY: OnceLock<PathBuf> = OnceLock::new();

/// Names the guardwire binary that supervises `exec:` handlers (the `guardwire` binary sets
/// its own path at start-up; a test that runs handlers in its own process sets the built
/// binary's). Without it, handlers are not run: their checks get a `process` error.
pub fn use_binary(path: PathBuf) {
    let _ = BINARY.set(path);
}

pub(super) fn binary() -> Option<&'static PathBuf> {
    BINARY.get()
}

/// Runs `command` under supervision (see the module's text); the exit code to leave with.
pub fn supervise(command: &OsString, args: &[OsString]) -> u8 {
    if rustix::process::set_child_subreaper(Some(rustix::process::getpid())).is_err() {
        return 125;
    }
    // Standard input and output are the handler's; standard error is the control pipe.
    let handler = match std::process::Command::new(command)
        .args(args)
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return 127,
        Err(_) => return 126,
    };
    let Some(handler) = i32::try_from(handler.id()).ok().and_then(Pid::from_raw) else {
        return 125;
    };
    watch_control_pipe();
    watch_signals();
    // Reaps whatever exits until the handler does (orphans handed over meanwhile are reaped
    // too: the supervisor has no other children, so no one else's status is taken).
    let status = loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid == handler => break status,
            Ok(_) => {}
            Err(Errno::INTR) => {}
            // No child left (cannot be: the handler is one until reaped here).
            Err(_) => return 125,
        }
    };
    kill_tree();
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(125),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(137),
        (None, None) => 125,
    }
}

/// A thread that waits for end of file on standard error (the control pipe), then kills
/// every descendant; the main thread reaps them.
fn watch_control_pipe() {
    let control = std::io::stderr().as_fd().try_clone_to_owned();
    let _ = std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            if let Ok(fd) = control {
                let mut pipe = std::fs::File::from(fd);
                let mut buf = [0u8; 64];
                // Guardwire never writes: a read returns only at end of file (or on an error,
                // which ends supervision the same way).
                loop {
                    match pipe.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
            }
            kill_descendants();
        });
}

/// The signals that end a process unless it handles them, and that it may handle: each makes
/// the supervisor kill its tree before it ends. (`SIGKILL` and `SIGSTOP` cannot be handled;
/// signal-hook refuses the faults — `SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE` — which a handler
/// is for the process's own errors.)
const ENDING: [libc::c_int; 16] = [
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGIO,
    libc::SIGSYS,
    libc::SIGTRAP,
    libc::SIGABRT,
    libc::SIGPWR,
];

/// A thread that waits for an [`ENDING`] signal (or a real-time one: they end a process too),
/// then kills the tree, round after round until none is found, and exits with 128 + the
/// signal, as a process ended by it would.
fn watch_signals() {
    let realtime = libc::SIGRTMIN()..=libc::SIGRTMAX();
    let Ok(mut signals) = signal_hook::iterator::Signals::new(ENDING.into_iter().chain(realtime))
    else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                freeze_and_kill_under(rustix::process::getpid().as_raw_pid());
                std::process::exit(128 + signal);
            }
        });
}

/// Kills and reaps every descendant, until none is left. Each round kills all it finds, so
/// a process forked meanwhile is found in the next (its parent's death hands it over here).
fn kill_tree() {
    loop {
        // No child, no descendant (each has an ancestor among the children): the usual
        // handler, which left nothing, costs no walk through /proc.
        if let Err(Errno::CHILD) = rustix::process::wait(WaitOptions::NOHANG) {
            return;
        }
        kill_descendants();
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(_) | Err(Errno::INTR) => {}
            // ECHILD: no child left, so no descendant either (each has an ancestor among the
            // children).
            Err(_) => return,
        }
    }
}

/// Guardwire's side, for a run that ended while its supervisor (`pid`, not yet reaped) still
/// runs: the supervisor is stopped (so what is orphaned stays handed to it, and it reaps
/// nothing meanwhile), its tree frozen and killed ([`freeze_and_kill_under`]), then it.
pub fn end_run(pid: i32) {
    let Some(supervisor) = Pid::from_raw(pid) else {
        return;
    };
    let _ = kill_process(supervisor, Signal::STOP);
    freeze_and_kill_under(pid);
    let _ = kill_process(supervisor, Signal::KILL);
}

/// Walks of `/proc` at most to freeze a tree (a fork bomb outrunning every walk is killed
/// as far as it was stopped).
const MAX_FREEZE_ROUNDS: usize = 1000;

/// Stops every process under `root` (SIGSTOP: a stopped process cannot fork) walk after walk,
/// until two walks find none still running — a process that forks and exits in a loop is
/// never where one walk saw it, but once stopped it stays — then kills them all.
fn freeze_and_kill_under(root: i32) {
    let mut quiet = 0;
    for _ in 0..MAX_FREEZE_ROUNDS {
        if signal_under(root, Signal::STOP) == 0 {
            quiet += 1;
            if quiet == 2 {
                break;
            }
        } else {
            quiet = 0;
        }
    }
    signal_under(root, Signal::KILL);
}

/// SIGKILL to every process under this one, found by walking `/proc`'s parent links.
fn kill_descendants() {
    signal_under(rustix::process::getpid().as_raw_pid(), Signal::KILL);
}

/// `signal` to every live process under `root` (not a zombie; for SIGSTOP, not one already
/// stopped); how many it reached.
fn signal_under(root: i32, signal: Signal) -> usize {
    let mut reached = 0;
    let mut children: HashMap<i32, Vec<(i32, char)>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some((ppid, state)) = parent_of(pid) {
            // (A zombie is dead, waiting to be reaped: nothing to signal; its children were
            // handed on.)
            if state != 'Z' {
                children.entry(ppid).or_default().push((pid, state));
            }
        }
    }
    let stopping = signal == Signal::STOP;
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for &(child, state) in children.get(&p).map(Vec::as_slice).unwrap_or_default() {
            let stopped = matches!(state, 'T' | 't');
            if let Some(pid) = Pid::from_raw(child).filter(|_| !(stopping && stopped)) {
                // ESRCH (gone since the walk) and EPERM (changed its user) reach nothing.
                if kill_process(pid, signal).is_ok() {
                    reached += 1;
                }
            }
            stack.push(child);
        }
    }
    reached
}

/// The parent of `pid` and its state (`Z` a zombie, `T` stopped, …), from
/// `/proc/<pid>/stat` (the state follows the command's name in parentheses — a name that may
/// itself hold `) ` — and the parent follows it).
fn parent_of(pid: i32) -> Option<(i32, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    let mut fields = rest.split(' ');
    let state = fields.next()?.chars().next()?;
    Some((fields.next()?.parse().ok()?, state))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_parent_is_read_from_proc() {
        let me = std::process::id() as i32;
        let parent = super::parent_of(me).map_or(0, |(p, _)| p);
        // (The main thread's state: running or sleeping, never a zombie while the test runs.)
        let state = super::parent_of(me).map(|(_, s)| s);
        assert!(matches!(state, Some('R' | 'S' | 'D')), "{state:?}");
        assert_eq!(
            parent,
            rustix::process::getppid().map_or(0, |p| p.as_raw_pid())
        );
    }
}
