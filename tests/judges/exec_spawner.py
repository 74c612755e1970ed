"""An exec handler for tests/exec_children.rs that leaves processes behind: a child that
sleeps in the handler's process group, and a daemon that leaves it (fork, setsid, fork again,
the middle process exiting, so the daemon is an orphan in a session of its own). Each writes
its pid to a file in $PID_DIR; then the handler writes its own (and its supervisor's) and
answers a passing verdict, or, with "HANG" in the content, sleeps past its deadline — with
"STOP", after stopping its supervisor (SIGSTOP), so that only guardwire can end the run (with
"CHAIN" too, after starting a chain of processes that fork and exit at once); with
"SIGNAL-<NAME>", after sending its supervisor that signal (which would end it)."""

import json
import os
import signal
import sys
import time

check = json.load(sys.stdin)
pid_dir = os.environ["PID_DIR"]


def note(name):
    path = os.path.join(pid_dir, name)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)


def detach_stdio():
    # As a daemon does: the verdict pipe is the handler's alone.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)


if os.fork() == 0:
    detach_stdio()
    note("child")
    time.sleep(600)
    os._exit(0)

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        detach_stdio()
        note("daemon")
        time.sleep(600)
        os._exit(0)
    os._exit(0)

while not all(os.path.exists(os.path.join(pid_dir, n)) for n in ("child", "daemon")):
    time.sleep(0.01)
note("handler")
with open(os.path.join(pid_dir, "supervisor.tmp"), "w", encoding="utf-8") as f:
    f.write(str(os.getppid()))
os.rename(os.path.join(pid_dir, "supervisor.tmp"), os.path.join(pid_dir, "supervisor"))
for word in check["content"].split():
    if word.startswith("SIGNAL-"):
        os.kill(os.getppid(), getattr(signal, "SIG" + word[len("SIGNAL-"):]))
        time.sleep(600)
if "CHAIN" in check["content"]:
    # Chains of processes that fork and exit at once ($CHAIN_BIN: tests/judges/exec_chain.c).
    if os.fork() == 0:
        detach_stdio()
        os.execv(os.environ["CHAIN_BIN"], [os.environ["CHAIN_BIN"]])
if "STOP" in check["content"]:
    os.kill(os.getppid(), signal.SIGSTOP)
    time.sleep(600)
if "HANG" in check["content"]:
    time.sleep(600)
print(json.dumps({"score": 1.0, "detail": "checked"}))
