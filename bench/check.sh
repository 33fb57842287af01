#!/usr/bin/env bash
# bench/check.sh (make bench-check): the ratio guard of issue 35, run before every submission, not in CI (CI
# machines are noisy). Our server and the yardstick (bench/yardstick: a prompt's unavoidable work only) run one
# after the other in one run, through bench/compare.sh, on the same stub model; then `ocbench -check` fails when
# first text, idle, the fan-out to 50 /event subscribers or the server's CPU per prompt exceed 2x the yardstick's,
# the RSS at start exceeds 15 MB, or one 8 MiB prompt's peak RSS growth exceeds 8x its size.
#
# Environment: BENCH_WORKDIR (outputs: ours.txt, yardstick.txt, check.md), N (prompts per sequential series,
# default 50), ROUNDS (fan-out rounds, default 10); the ports of bench/compare.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${BENCH_WORKDIR:-$(mktemp -d /tmp/ocbench-check.XXXXXX)}
mkdir -p "$W"
W=$(cd "$W" && pwd)
export BENCH_WORKDIR=$W ONLY=ours,yardstick YARD_SCENARIOS=seq,fanout
export OCBENCH_ARGS="-scenarios seq,fanout,big -n ${N:-50} -subs 50 -fanout-rounds ${ROUNDS:-10}"
bash "$ROOT/bench/compare.sh" >"$W/compare.out" 2>&1 || { tail -30 "$W/compare.out"; exit 2; }
"$W/ocbench" -check "$W/ours.txt" "$W/yardstick.txt" | tee "$W/check.md"
