#!/usr/bin/env python3
"""Where a stream's instructions go: a callgrind file from `benches/instructions.py --keep`,
its functions' own (self) instructions grouped by what the code does, per stream.

    python3 benches/callgrind_table.py FILE [--streams 300] [OTHER_FILE]

With a second file (another build, or the same build with a pack), prints both columns. The
groups are matched on the function's full name (inlined code is named after the function it
was inlined into); what no rule names is listed under "other" with its largest items. The
kernel's share (syscalls, wake-ups) is not in these counts: the load bench's `sys` share says
how large it is. Needs `callgrind_annotate` (Debian: valgrind).
"""
import argparse
import collections
import re
import subprocess

# First match wins: more specific rules first.
RULES = [
    ("decode: chunk JSON (skim reader, chat decoder, templates)",
     r"guardwire::protocol::(skim|openai_chat)|__memcmp"),
    ("decode: fallback walk of unread strings, usage rewrite",
     r"guardwire::protocol::(residual|stream_usage)|serde_json"),
    ("SSE framing", r"guardwire::sse"),
    ("checks: scanning and the policy layer", r"guardwire::(scan|policy)|aho_corasick|regex_automata"),
    ("hold-back, release and batching (GuardedStream, frame checker)",
     r"guardwire::proxy::(body|check|redact)"),
    ("metrics, traces, log", r"prometheus|guardwire::(metrics|telemetry)|guardwire::proxy::report|tracing|sip::Hasher|hash::"),
    ("per request: routing, auth, headers, request body, upstream setup",
     r"guardwire::(proxy|upstream|config|server|protocol)|http::|httparse|url::"),
    ("HTTP/1 both sides (hyper: parse, chunked coding, writes), bytes", r"hyper|bytes::|want::|h2::"),
    ("tokio: scheduling, timers, I/O readiness", r"tokio|mio::|parking_lot|futures_"),
    ("memchr (SSE framing, usage rewrite, fallback)", r"memchr"),
    ("malloc/free", r"malloc|_int_free|\bfree\b|cfree|realloc|alloc::"),
    ("memcpy/memmove", r"memcpy|memmove|memset"),
    ("UTF-8 checks", r"from_utf8|str::validations"),
]


def load(path):
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--show-percs=no", "--auto=no", path],
        capture_output=True, text=True, check=True).stdout
    groups, other, total = collections.Counter(), collections.Counter(), 0
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(.*)", line)
        if not m:
            continue
        n, rest = int(m.group(1).replace(",", "")), m.group(2)
        if "PROGRAM TOTALS" in rest:
            total = n
            continue
        name = rest.split(":", 1)[1] if ":" in rest else rest
        for group, pattern in RULES:
            if re.search(pattern, name):
                groups[group] += n
                break
        else:
            groups["other"] += n
            other[re.sub(r" \[.*\]$", "", name)[:70]] += n
    return groups, other, total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--streams", type=float, default=300.0)
    a = ap.parse_args()
    runs = [load(f) for f in a.files[:2]]
    n = a.streams
    names = sorted({g for r in runs for g in r[0]},
                   key=lambda g: (g == "other", -runs[0][0][g]))
    cols = " | ".join(f"file {i + 1}: per stream | share" for i in range(len(runs)))
    print(f"| what | {cols} |")
    print("|---|" + "---|---|" * len(runs))
    for g in names:
        cells = " | ".join(f"{r[0][g] / n:,.0f} | {100 * r[0][g] / r[2]:.1f} %" for r in runs)
        print(f"| {g} | {cells} |")
    cells = " | ".join(f"**{r[2] / n:,.0f}** | 100 %" for r in runs)
    print(f"| total | {cells} |")
    for i, r in enumerate(runs):
        top = ", ".join(f"{k} {v / n:,.0f}" for k, v in r[1].most_common(4))
        print(f"\nfile {i + 1}, largest of other: {top}")


if __name__ == "__main__":
    main()
