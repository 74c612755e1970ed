#!/usr/bin/env bash
# The long fuzz runs (docs/testing.md, "Fuzzing"): each target (all of them, or those named) for
# RUNS executions (default 10 million), optimised with AddressSanitizer, from its committed
# corpus plus a scratch directory that keeps what the run finds (FUZZ_WORK, default
# target/fuzz-work; the committed corpus is left alone). Prints one line per target: runs,
# seconds, executions per second, coverage. Stops at the first crash, panic, leak or hang
# (the input is then under fuzz/artifacts/<target>/).
#
#   fuzz/run_long.sh                       # every target, 10M runs each
#   RUNS=20000 fuzz/run_long.sh skim       # one target, a short run
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --version 0.13.2 --locked`); works on a stable
# toolchain through RUSTC_BOOTSTRAP=1, as tests/run does.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-10000000}
work=${FUZZ_WORK:-target/fuzz-work}
export RUSTC_BOOTSTRAP=1

cargo fuzz build
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list)
summary=()
for t in "${targets[@]}"; do
    mkdir -p "$work/$t"
    log=$work/$t.log
    echo "==> cargo fuzz run $t $work/$t fuzz/corpus/$t -- -runs=$runs -timeout=10 ..."
    if ! cargo fuzz run "$t" "$work/$t" "fuzz/corpus/$t" -- \
        -runs="$runs" -timeout=10 -rss_limit_mb=4096 </dev/null >"$log" 2>&1; then
        tail -n 80 "$log" >&2
        echo "error: $t failed (log: $log; input under fuzz/artifacts/$t/)" >&2
        exit 1
    fi
    # libFuzzer's own figures: "Done N runs in S second(s)" and the final coverage.
    read -r done_runs secs < <(sed -nE 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\1 \2/p' "$log")
    cov=$(sed -nE 's/^#[0-9]+[[:space:]]+DONE[[:space:]]+cov: ([0-9]+).*/\1/p' "$log")
    rate=$((done_runs / (secs > 0 ? secs : 1)))
    line="$t: $done_runs runs in ${secs}s ($rate exec/s), cov $cov, no crash"
    echo "$line"
    summary+=("$line")
done
echo
printf '%s\n' "${summary[@]}"
