#!/usr/bin/env python3
"""Instructions a guardwire build executes per streamed answer, counted by callgrind.

Wall-clock and CPU-time figures need a quiet machine and many alternating runs; instruction
counts do not: they repeat to within ~0.2 % on a loaded machine, so two builds can be compared
while other work runs (then confirm with the load bench when the machine is quiet). They count
work, not time: cache misses, syscalls' kernel time and lock waits are not in them.

    python3 benches/instructions.py BIN [BIN ...] [--protocol P] [--pack PATH] [--streams N] [--keep]
                                    [--relay LOAD_BENCH_BIN]

For each binary, with no pack and (with --pack) with that pack: starts `BIN serve` under
`valgrind --tool=callgrind` with instrumentation off, in front of a mock upstream here that
answers every request with the same stream of the protocol P (`chat`, the default,
`responses`, `anthropic` or `gemini`; 40 content deltas and the protocol's framing around
them, 42 to 49 events, written at once, shaped as benches/load's mock sends them; Chat's,
as OpenAI's, with `"usage":null` in every chunk and a usage chunk when the request asks for
usage, as guardwire does),
sends 20 warm-up requests one after another on one keep-alive connection, switches
instrumentation on, sends N (default 300) more, dumps, and prints the proxy's instructions
per stream (all its threads). `--pack target/load-realistic-pack.yaml` is the load bench's
realistic pack (1,000 words, 20 regexes, max_length, PII), kept there by each bench run.
`--keep` keeps the callgrind files (callgrind_annotate shows where the instructions go).
`--relay LOAD_BENCH_BIN` counts the load bench's bare hyper relay the same way (one more row;
the binary is the one `cargo bench --bench load --no-run` names, target/release/deps/load-…):
guardwire's stack with nothing of guardwire's work, the share of a stream no change to
guardwire's own code can remove.
The Anthropic deltas carry the load bench's stamp under `id` (as benches/load's mock does);
GUARDWIRE_BENCH_ANTHROPIC_STAMP_KEY=ts puts it under an unknown key, as that mock did before.

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


VOCAB = ("garden river water light plants soil summer shade seeds compost mulch roots "
         "sun morning evening").split()


def text_deltas():
    rng = random.Random(7)
    return [" ".join(rng.choice(VOCAB) for _ in range(5)) + (". " if i % 8 == 7 else " ")
            for i in range(40)]


def stamps():
    """The load bench's mock stamps each event with its send time (16 digits after "@T"); the
    same deterministic digits here, so every run sends the same bytes."""
    rng = random.Random(11)
    while True:
        yield "@T%016d" % rng.randrange(10**15, 10**16)


def compact(v):
    return json.dumps(v, separators=(",", ":"))


def data(v):
    return "data: " + compact(v) + "\n\n"


def named(kind, v):
    return "event: " + kind + "\ndata: " + compact(v) + "\n\n"


def chat_events(deltas, stamp, usage=False):
    """`usage`: the request asked for usage (guardwire asks on every streamed Chat request):
    as OpenAI does, every chunk then carries `"usage":null` and a usage-only chunk comes
    before `[DONE]`."""
    def chunk(delta, finish, choices=True, u=None):
        v = {
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion.chunk",
            "created": 1735689600, "model": "gpt-4o-mini-2024-07-18",
            "system_fingerprint": "fp_1234567890",
            "choices": ([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
                        if choices else []),
        }
        if usage:
            v["usage"] = u
        return data(v)

    tail = [chunk(None, None, choices=False,
                  u={"prompt_tokens": 36, "completion_tokens": 200, "total_tokens": 236})]
    return ([chunk({"role": "assistant", "content": "", "refusal": None}, None)]
            + [chunk({"content": t}, None) for t in deltas]
            + [chunk({}, "stop")] + (tail if usage else []) + ["data: [DONE]\n\n"])


def responses_events(deltas, stamp):
    seq = [0]

    def e(kind, v):
        v["type"] = kind
        v["sequence_number"] = seq[0]
        seq[0] += 1
        return named(kind, v)

    def resp(status):
        return {"id": "resp_67ccd2bed1ec8190", "object": "response", "created_at": 1741476542,
                "status": status, "model": "gpt-4o-mini-2024-07-18", "output": [],
                "error": None, "incomplete_details": None, "tools": [], "metadata": {}}

    full = "".join(deltas)
    item = {"id": "msg_67ccd2bf17f0", "type": "message", "status": "in_progress",
            "role": "assistant", "content": []}
    ev = [e("response.created", {"response": resp("in_progress")}),
          e("response.in_progress", {"response": resp("in_progress")}),
          e("response.output_item.added", {"output_index": 0, "item": item}),
          e("response.content_part.added", {
              "item_id": "msg_67ccd2bf17f0", "output_index": 0, "content_index": 0,
              "part": {"type": "output_text", "text": "", "annotations": []}})]
    for t in deltas:
        ev.append(e("response.output_text.delta", {
            "item_id": "msg_67ccd2bf17f0", "output_index": 0, "content_index": 0, "delta": t,
            "logprobs": [], "obfuscation": next(stamp)}))
    part = {"type": "output_text", "text": full, "annotations": []}
    ev.append(e("response.output_text.done", {
        "item_id": "msg_67ccd2bf17f0", "output_index": 0, "content_index": 0, "text": full,
        "logprobs": []}))
    ev.append(e("response.content_part.done", {
        "item_id": "msg_67ccd2bf17f0", "output_index": 0, "content_index": 0, "part": part}))
    done_item = {"id": "msg_67ccd2bf17f0", "type": "message", "status": "completed",
                 "role": "assistant", "content": [part]}
    ev.append(e("response.output_item.done", {"output_index": 0, "item": done_item}))
    r = resp("completed")
    r["output"] = [done_item]
    r["usage"] = {"input_tokens": 36, "output_tokens": 200, "total_tokens": 236}
    ev.append(e("response.completed", {"response": r}))
    return ev


# Anthropic deltas have no free-form string field: the load bench's stamp rides in an extra
# member, under a key guardwire knows as structure (`id`), as an ignored member costs in a real
# stream. (Under an unknown key it would be checked as text: see docs/load-bench.md.)
STAMP_KEY = os.environ.get("GUARDWIRE_BENCH_ANTHROPIC_STAMP_KEY", "id")


def anthropic_events(deltas, stamp):
    ev = [named("message_start", {"type": "message_start", "message": {
              "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
              "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": None,
              "stop_sequence": None, "usage": {"input_tokens": 36, "output_tokens": 1}}}),
          named("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}}),
          named("ping", {"type": "ping"})]
    for t in deltas:
        ev.append(named("content_block_delta", {
            "type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": t}, STAMP_KEY: next(stamp)}))
    ev.append(named("content_block_stop", {"type": "content_block_stop", "index": 0}))
    ev.append(named("message_delta", {
        "type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 200}}))
    ev.append(named("message_stop", {"type": "message_stop"}))
    return ev


def gemini_events(deltas, stamp):
    ev = [data({"candidates": [{"content": {"parts": [{"text": t}], "role": "model"}, "index": 0}],
                "modelVersion": "gemini-2.5-flash", "responseId": next(stamp)}) for t in deltas]
    ev.append(data({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"},
                                    "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": 36, "candidatesTokenCount": 200,
                                      "totalTokenCount": 236},
                    "modelVersion": "gemini-2.5-flash", "responseId": next(stamp)}))
    return ev


PROMPT = ("Write a short note about planning a summer garden near the river, with practical "
          "advice on water, light and which plants go well together.")

# protocol: (events, path, request body, headers, what the answer ends with)
PROTOCOLS = {
    "chat": (chat_events, "/v1/chat/completions", {
        "model": "gpt-4o-mini", "stream": True, "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": PROMPT}]},
        {"authorization": "Bearer sk-bench"}, b"data: [DONE]\n\n"),
    "responses": (responses_events, "/v1/responses", {
        "model": "gpt-4o-mini", "stream": True, "input": PROMPT},
        {"authorization": "Bearer sk-bench"}, b"}\n\n"),
    "anthropic": (anthropic_events, "/v1/messages", {
        "model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": True,
        "messages": [{"role": "user", "content": PROMPT}]},
        {"x-api-key": "sk-ant-bench", "anthropic-version": "2023-06-01"},
        b'{"type":"message_stop"}\n\n'),
    "gemini": (gemini_events,
               "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
               {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]},
               {"x-goog-api-key": "bench"}, b"}\n\n"),
}


def stream_bytes(protocol, usage=False):
    """The mock's answer: the protocol's 42-event stream, chunked, as the load bench's mock
    (benches/load/mock.rs) sends it (Chat's with usage when the request asked for it)."""
    events = (chat_events(text_deltas(), stamps(), usage=True) if usage
              else PROTOCOLS[protocol][0](text_deltas(), stamps()))
    body = b"".join(b"%x\r\n%s\r\n" % (len(e.encode()), e.encode()) for e in events)
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n")


def read_request(conn, buf):
    """One HTTP/1.1 request from `conn` (`buf`: bytes already read): its body and the bytes
    after it, or None once the peer has closed."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, buf = buf.split(b"\r\n\r\n", 1)
    m = re.search(rb"(?i)content-length:\s*(\d+)", head)
    need = int(m.group(1)) if m else 0
    while len(buf) < need:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    return buf[:need], buf[need:]


def serve_loopback(serve, backlog=64):
    """A listener on 127.0.0.1 whose every connection `serve(conn)` handles on a thread of
    its own; returns its port."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)

    def accept():
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1]


def start_mock(protocol):
    answer = stream_bytes(protocol)
    with_usage = stream_bytes(protocol, usage=True) if protocol == "chat" else answer

    def serve(conn):
        buf = b""
        try:
            while (request := read_request(conn, buf)) is not None:
                buf = request[1]
                asked = b'"include_usage":true' in request[0]
                conn.sendall(with_usage if asked else answer)
        except OSError:
            pass

    return serve_loopback(serve)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def write_config(workdir, port, mock_port, pack):
    """guardwire's config for a run: every provider at the mock, `pack` (a path) or none."""
    packs = "[]" if pack is None else json.dumps([os.path.abspath(pack)])
    cfg = os.path.join(workdir, f"config-{port}.yaml")
    with open(cfg, "w") as f:
        f.write(f'listen: "127.0.0.1:{port}"\nupstreams:\n  openai: "http://127.0.0.1:{mock_port}"\n'
                f'  anthropic: "http://127.0.0.1:{mock_port}"\n'
                f'  gemini: "http://127.0.0.1:{mock_port}"\n'
                f"packs: {packs}\nlimits:\n  max_concurrent_requests: 20000\n"
                "log:\n  level: warn\nreload:\n  poll_ms: 0\n")
    return cfg


def wait_ready(proxy, port, binary):
    """Until guardwire (the process `proxy`, under valgrind) answers /readyz with 200 (the relay
    passes it to the mock, which answers 200 too); exits if it dies."""
    # Under valgrind, compiling a large pack on a loaded machine takes minutes.
    deadline = time.monotonic() + 1200
    while True:
        if time.monotonic() > deadline:
            sys.exit(f"{binary} was not ready after 20 minutes")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        if proxy.poll() is not None:
            sys.exit(f"{binary} exited ({proxy.returncode}) before it was ready")
        time.sleep(0.1)


def guardwire_command(binary, pack, mock_port, workdir):
    """`binary serve` with no pack or `pack`, every provider at the mock: (command, its port)."""
    port = free_port()
    return [binary, "serve", "--config", write_config(workdir, port, mock_port, pack)], port


def relay_command(binary, mock_port):
    """The load bench's bare hyper relay (benches/load/relay.rs: guardwire's stack, no checks)
    in front of the mock, one runtime worker per core as guardwire's default: (command, port)."""
    port = free_port()
    workers = len(os.sched_getaffinity(0))
    return [binary, "--serve-relay", f"127.0.0.1:{port}", f"127.0.0.1:{mock_port}",
            str(workers)], port


def count(command, port, streams, workdir, keep, protocol):
    binary = command[0]
    out = os.path.join(workdir, f"callgrind-{port}")
    proxy = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}.%p"]
        + command,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(proxy, port, binary)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

        _, path, request, headers, end = PROTOCOLS[protocol]
        request = json.dumps(request)
        headers = dict(headers, **{"content-type": "application/json"})

        def one():
            conn.request("POST", path, request, headers)
            r = conn.getresponse()
            body = r.read()
            if r.status != 200 or not body.endswith(end):
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
    ap.add_argument("--protocol", choices=sorted(PROTOCOLS), default="chat",
                    help="the answer the mock streams (default chat)")
    ap.add_argument("--relay", metavar="LOAD_BENCH_BIN",
                    help="also count the load bench's bare hyper relay: the bench binary that "
                         "`cargo bench --bench load --no-run` names (one more row)")
    a = ap.parse_args()
    mock_port = start_mock(a.protocol)
    workdir = tempfile.mkdtemp(prefix="guardwire-instructions-") if not a.keep else os.getcwd()
    print("| binary | no packs | " + ("pack |" if a.pack else ""))
    print("|---|---|" + ("---|" if a.pack else ""))
    for b in a.binaries:
        command, port = guardwire_command(b, None, mock_port, workdir)
        row = [f"{count(command, port, a.streams, workdir, a.keep, a.protocol):,.0f}"]
        if a.pack:
            command, port = guardwire_command(b, a.pack, mock_port, workdir)
            row.append(f"{count(command, port, a.streams, workdir, a.keep, a.protocol):,.0f}")
        print(f"| {b} | " + " | ".join(row) + " |", flush=True)
    if a.relay:
        command, port = relay_command(a.relay, mock_port)
        relayed = count(command, port, a.streams, workdir, a.keep, a.protocol)
        print(f"| bare hyper relay ({a.relay}) | {relayed:,.0f} | " + ("— |" if a.pack else ""),
              flush=True)


if __name__ == "__main__":
    main()
