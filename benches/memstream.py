#!/usr/bin/env python3
"""Heap bytes per open stream, by allocation site, measured with valgrind's massif.

The load bench measures RSS per open paced stream (docs/load-bench.md, "Memory"); RSS says how
much, not where. This says where:

    python3 benches/memstream.py BIN [--pack PATH] [--streams N] [--gap-ms MS] [--keep DIR]

starts `BIN serve` under `valgrind --tool=massif` in front of a mock upstream here that answers
every Chat request with the head and the first events of benches/instructions.py's stream,
then one more content delta every MS milliseconds (default 1000) and never ends. The client
sends 20 complete warm-up streams (the mock ends those), takes a detailed massif snapshot
(`vgdb ... detailed_snapshot`), opens N (default 200) concurrent streams from N connections
and reads them, waits for the heap to plateau, takes a second snapshot, and prints the
difference divided by N: heap bytes per open stream, by allocation site. A site is the
first frame in guardwire's code on the allocation's stack, with the first frame outside the
allocator and the standard library beside it (e.g. `hyper` buffers allocated on behalf of a
guardwire call). Task futures are on the heap (tokio boxes each spawned task), so they show
under `tokio::runtime::task`; thread stacks and the kernel's socket buffers are not heap and
not here. Heap bytes are what the program asked for; RSS adds the allocator's overhead and
fragmentation.

Needs valgrind (Debian: valgrind) and Python 3's standard library only.
"""
import argparse
import json
import os
import re
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from instructions import (PROTOCOLS, chat_events, free_port,  # noqa: E402
                          read_request, serve_loopback, stamps, text_deltas,
                          wait_ready, write_config)

OPEN_MARK = b"x-memstream: open"


def chunk(e):
    e = e.encode()
    return b"%x\r\n%s\r\n" % (len(e), e)


def start_mock(gap_ms):
    events = chat_events(text_deltas(), stamps())
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n")
    whole = head + b"".join(chunk(e) for e in events) + b"0\r\n\r\n"
    first = head + b"".join(chunk(e) for e in events[:4])
    deltas = [chunk(e) for e in events[4:-2]]

    def serve(conn):
        buf = b""
        try:
            while (request := read_request(conn, buf)) is not None:
                body, buf = request
                if b'"memstream-open"' not in body:
                    conn.sendall(whole)
                    continue
                conn.sendall(first)
                i = 0
                while True:
                    time.sleep(gap_ms / 1000)
                    conn.sendall(deltas[i % len(deltas)])
                    i += 1
        except OSError:
            pass

    return serve_loopback(serve, backlog=1024)


def request_bytes(port, body):
    _, path, _, headers, _ = PROTOCOLS["chat"]
    lines = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{port}",
             "content-type: application/json", f"content-length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def snapshot(pid, path):
    subprocess.run(["vgdb", f"--pid={pid}", "detailed_snapshot", path], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    for _ in range(600):
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return
        time.sleep(0.1)
    sys.exit(f"no snapshot at {path}")


def total_heap(pid, path):
    snapshot(pid, path)
    with open(path) as f:
        for line in f:
            if line.startswith("mem_heap_B="):
                return int(line.split("=")[1])
    return 0


NODE = re.compile(r"^( *)n(\d+): (\d+) (.*)$")
ALLOC = re.compile(r"^(0x[0-9A-F]+: )?(\(heap allocation functions\)|malloc|calloc|realloc|"
                   r"__rust|_?_?rdl_|__rg_|alloc::|<alloc::|core::|<core::|std::|<std::|"
                   r"hashbrown::|<hashbrown::|bytes::|<bytes::|smallvec::|<smallvec::|"
                   r"indexmap::|<indexmap::|posix_memalign|memalign|aligned_alloc|"
                   r"\?\?\?)")


LOCATION = re.compile(r" \(([^()]*:\d+)\)$")
LIBRARY = re.compile(r"^(library/|bytes_mut\.rs|bytes\.rs|src/bytes_mut\.rs|src/bytes\.rs|"
                     r"src/raw_vec|src/vec/)")


def short(name):
    """A frame's name without generic arguments."""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def frame_name(text):
    text = re.sub(r"^0x[0-9A-F]+: ", "", text)
    text = re.sub(r" \(in /[^)]*\)$", "", text)
    text = re.sub(r" \([^()]*:\d+\)$", "", text)
    text = re.sub(r"::h[0-9a-f]{16}$", "", text)
    return text


def sites(path):
    """Bytes by site in a massif snapshot file: (first non-allocator frame, first guardwire
    frame) -> bytes."""
    with open(path) as f:
        lines = [ln.rstrip("\n") for ln in f if NODE.match(ln.rstrip("\n"))]
    out = {}
    pos = 0

    def walk(outer, guard, depth):
        nonlocal pos
        m = NODE.match(lines[pos])
        pos += 1
        kids, size, text = int(m.group(2)), int(m.group(3)), m.group(4)
        name = frame_name(text)
        if depth > 0:
            loc = LOCATION.search(text)
            if (outer is None and loc and not LIBRARY.match(loc.group(1))
                    and not ALLOC.match(text) and "below massif's threshold" not in text):
                outer = short(name) + " (" + loc.group(1) + ")"
            if guard is None and "guardwire::" in name:
                guard = name
        if kids == 0 or (guard is not None and depth > 0):
            key = (outer or name, guard or "-")
            out[key] = out.get(key, 0) + size
            for _ in range(kids):
                skip()
            return
        for _ in range(kids):
            walk(outer, guard, depth + 1)

    def skip():
        nonlocal pos
        m = NODE.match(lines[pos])
        pos += 1
        for _ in range(int(m.group(2))):
            skip()

    walk(None, None, 0)
    return out


def run(binary, pack, streams, gap_ms, workdir, settle_s, tool="massif"):
    mock_port = start_mock(gap_ms)
    port = free_port()
    cfg = write_config(workdir, port, mock_port, pack)
    out = os.path.join(workdir, f"massif-{port}")
    if tool == "dhat":
        vg = ["valgrind", "--tool=dhat", f"--dhat-out-file={out}.dhat.json"]
    else:
        vg = ["valgrind", "--tool=massif", "--threshold=0", "--depth=60",
              "--detailed-freq=1000000", "--max-snapshots=1000", f"--massif-out-file={out}.out"]
    proxy = subprocess.Popen(vg + [binary, "serve", "--config", cfg],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    socks = []
    try:
        wait_ready(proxy, port, binary)
        _, _, body, _, end = PROTOCOLS["chat"]
        whole = request_bytes(port, json.dumps(body).encode())
        opened = dict(body, user="memstream-open")
        open_req = request_bytes(port, json.dumps(opened).encode())
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", port), timeout=120)
            s.sendall(whole)
            got = b""
            while not got.endswith(b"0\r\n\r\n"):
                d = s.recv(65536)
                if not d:
                    break
                got += d
            if end not in got:
                sys.exit(f"warm-up stream did not end: {got[-300:]!r}")
            s.close()
        time.sleep(2)
        before = 0 if tool == "dhat" else total_heap(proxy.pid, out + ".before")
        sel = selectors.DefaultSelector()
        got = {}
        for _ in range(streams):
            s = socket.create_connection(("127.0.0.1", port), timeout=120)
            s.sendall(open_req)
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
            socks.append(s)
            got[s] = 0
        stop = threading.Event()

        def reader():
            while not stop.is_set():
                for key, _ in sel.select(0.2):
                    try:
                        d = key.fileobj.recv(65536)
                    except OSError:
                        d = b""
                    if not d:
                        sel.unregister(key.fileobj)
                    got[key.fileobj] += len(d)

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        wait_until = time.monotonic() + 600
        while min(got.values()) < 1000 and time.monotonic() < wait_until:
            time.sleep(0.5)
        if min(got.values()) < 1000:
            sys.exit("not every stream got its first events")
        time.sleep(settle_s)
        after = 0 if tool == "dhat" else total_heap(proxy.pid, out + ".after")
        stop.set()
        t.join()
        live = len(sel.get_map())
        if live != streams:
            sys.exit(f"only {live} of {streams} streams still open at the snapshot")
    finally:
        for s in socks:
            s.close()
        if tool == "dhat":
            proxy.terminate()
            try:
                proxy.wait(timeout=300)
            except subprocess.TimeoutExpired:
                pass
        proxy.kill()
        proxy.wait()
    if tool == "dhat":
        print(f"dhat file: {out}.dhat.json (dh_view.html; t-gmax is the plateau)")
        sys.exit(0)
    a, b = sites(out + ".before"), sites(out + ".after")
    per = {k: (b.get(k, 0) - a.get(k, 0)) / streams for k in set(a) | set(b)}
    return before, after, per


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--pack", help="a pack file (e.g. target/load-realistic-pack.yaml)")
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument("--gap-ms", type=int, default=1000)
    ap.add_argument("--settle-s", type=float, default=5)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--tool", choices=["massif", "dhat"], default="massif",
                    help="dhat: write a dhat file instead (bytes read and written per block)")
    ap.add_argument("--keep", help="a directory to keep the config and massif files in")
    a = ap.parse_args()
    workdir = a.keep or tempfile.mkdtemp(prefix="guardwire-memstream-")
    os.makedirs(workdir, exist_ok=True)
    before, after, per = run(a.binary, a.pack, a.streams, a.gap_ms, workdir, a.settle_s,
                                a.tool)
    print(f"{a.binary} {'pack ' + a.pack if a.pack else 'no packs'}: heap {before:,} B before, "
          f"{after:,} B with {a.streams} open streams: "
          f"{(after - before) / a.streams:,.0f} B per open stream")
    print("| B per stream | first frame past the allocator and std | first guardwire frame |")
    print("|---:|---|---|")
    rows = sorted(per.items(), key=lambda kv: -abs(kv[1]))
    for (outer, guard), v in rows[:a.top]:
        if abs(v) < 1:
            break
        print(f"| {v:,.0f} | `{outer[:110]}` | `{guard[:110]}` |")


if __name__ == "__main__":
    main()
