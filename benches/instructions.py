#!/usr/bin/env python3
"""Instructions a guardwire build executes per streamed Chat answer, counted by callgrind.

Wall-clock and CPU-time figures need a quiet machine and many alternating runs; instruction
counts do not: they repeat to within ~0.2 % on a loaded machine, so two builds can be compared
while other work runs (then confirm with the load bench when the machine is quiet). They count
work, not time: cache misses, syscalls' kernel time and lock waits are not in them.

    python3 benches/instructions.py BIN [BIN ...] [--pack PATH] [--streams N] [--keep]

For each binary, with no pack and (with --pack) with that pack: starts `BIN serve` under
`valgrind --tool=callgrind` with instrumentation off, in front of a mock upstream here that
answers every request with the same 42-event Chat stream (40 content deltas, written at once),
sends 20 warm-up requests one after another on one keep-alive connection, switches
instrumentation on, sends N (default 300) more, dumps, and prints the proxy's instructions
per stream (all its threads). `--pack target/load-realistic-pack.yaml` is the load bench's
realistic pack (1,000 words, 20 regexes, max_length, PII), kept there by each bench run.
`--keep` keeps the callgrind files (callgrind_annotate shows where the instructions go).

Needs valgrind (Debian: valgrind) and Python 3's standard library only.
"""
import argparse
import glob
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time


def stream_bytes():
    """The mock's answer: an OpenAI Chat stream, chunked, as the load bench's mock sends it."""
    vocab = ("garden river water light plants soil summer shade seeds compost mulch roots "
             "sun morning evening").split()
    rng = random.Random(7)
    deltas = [" ".join(rng.choice(vocab) for _ in range(5)) + (". " if i % 8 == 7 else " ")
              for i in range(40)]

    def chunk(delta, finish):
        return "data: " + json.dumps({
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion.chunk",
            "created": 1735689600, "model": "gpt-4o-mini-2024-07-18",
            "system_fingerprint": "fp_1234567890",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }, separators=(",", ":")) + "\n\n"

    events = ([chunk({"role": "assistant", "content": "", "refusal": None}, None)]
              + [chunk({"content": t}, None) for t in deltas]
              + [chunk({}, "stop"), "data: [DONE]\n\n"])
    body = b"".join(b"%x\r\n%s\r\n" % (len(e.encode()), e.encode()) for e in events)
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n")


def start_mock():
    answer = stream_bytes()

    def serve(conn):
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                m = re.search(rb"(?i)content-length:\s*(\d+)", head)
                need = int(m.group(1)) if m else 0
                while len(buf) < need:
                    buf += conn.recv(65536)
                buf = buf[need:]
                conn.sendall(answer)
        except OSError:
            pass

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)

    def accept():
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1]


REQUEST = json.dumps({"model": "gpt-4o-mini", "stream": True, "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Write a short note about planning a summer garden near the "
     "river, with practical advice on water, light and which plants go well together."}]})


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def count(binary, pack, streams, mock_port, workdir, keep):
    port = free_port()
    packs = "[]" if pack is None else json.dumps([os.path.abspath(pack)])
    cfg = os.path.join(workdir, f"config-{port}.yaml")
    with open(cfg, "w") as f:
        f.write(f'listen: "127.0.0.1:{port}"\nupstreams:\n  openai: "http://127.0.0.1:{mock_port}"\n'
                f"packs: {packs}\nlimits:\n  max_concurrent_requests: 20000\n"
                "log:\n  level: warn\nreload:\n  poll_ms: 0\n")
    out = os.path.join(workdir, f"callgrind-{port}")
    proxy = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}.%p",
         binary, "serve", "--config", cfg],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(1200):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if proxy.poll() is not None:
                sys.exit(f"{binary} exited ({proxy.returncode}) before it was ready")
            time.sleep(0.1)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

        def one():
            conn.request("POST", "/v1/chat/completions", REQUEST,
                         {"content-type": "application/json", "authorization": "Bearer sk-bench"})
            r = conn.getresponse()
            body = r.read()
            if r.status != 200 or not body.endswith(b"data: [DONE]\n\n"):
                sys.exit(f"{binary}: unexpected answer {r.status}: {body[-300:]!r}")

        for _ in range(20):
            one()
        ctl = ["callgrind_control"]
        subprocess.run(ctl + ["-i", "on", str(proxy.pid)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        for _ in range(streams):
            one()
        subprocess.run(ctl + ["-d", str(proxy.pid)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
    finally:
        proxy.kill()
        proxy.wait()
    total = 0
    files = glob.glob(out + ".*")
    for name in files:
        with open(name) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    total = max(total, int(line.split()[1]))
    if keep:
        print(f"  callgrind files: {' '.join(files)}")
    else:
        for name in files:
            os.remove(name)
    return total / streams


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--pack", help="a pack file (e.g. target/load-realistic-pack.yaml)")
    ap.add_argument("--streams", type=int, default=300)
    ap.add_argument("--keep", action="store_true", help="keep the callgrind files")
    a = ap.parse_args()
    mock_port = start_mock()
    workdir = tempfile.mkdtemp(prefix="guardwire-instructions-") if not a.keep else os.getcwd()
    print("| binary | no packs | " + ("pack |" if a.pack else ""))
    print("|---|---|" + ("---|" if a.pack else ""))
    for b in a.binaries:
        row = [f"{count(b, None, a.streams, mock_port, workdir, a.keep):,.0f}"]
        if a.pack:
            row.append(f"{count(b, a.pack, a.streams, mock_port, workdir, a.keep):,.0f}")
        print(f"| {b} | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
