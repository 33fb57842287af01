#!/usr/bin/env bash
# bench/compare.sh: our server vs the real `opencode serve` 1.18.33 and vs the yardstick (bench/yardstick, a bare
# server doing only a prompt's unavoidable work), same machine, same stub model, loopback only.
#
# Builds ocbench, opencode-server and the yardstick, starts one stub model (ocbench -stub-only), runs ocbench
# against our server (--store sqlite), then against the yardstick (scenarios seq, rss, conc, fanout: it has no v2
# routes and no history), then against opencode serve (started with /work/shared/reference/start-opencode-serve.sh),
# one at a time, and prints side-by-side tables with ratios ours:opencode, ours:yardstick and the targets.
#
# Environment (all optional):
#   BENCH_WORKDIR   scratch dir (default: mktemp); outputs land in it (ours.txt, yardstick.txt, opencode.txt, table.md)
#   REF_SCRIPT      start script of the reference server (default /work/shared/reference/start-opencode-serve.sh)
#   OPENCODE_NODE_MODULES  an existing npm node_modules with opencode-ai@1.18.33 (symlinked to skip npm install)
#   STUB_PORT OURS_PORT REF_PORT YARD_PORT   loopback ports (18799 14301 14302 14303)
#   OURS_HISTORY REF_HISTORY       earlier messages for scenario (g) (10000 / 1000: the real server fills ~12/s)
#   OCBENCH_ARGS    extra ocbench flags for every run (e.g. "-n 20 -subs 50")
#   YARD_SCENARIOS  scenarios run against the yardstick (default seq,rss,conc,fanout; comes after OCBENCH_ARGS)
#   ONLY            comma list of the sides to run: ours, yardstick, opencode (default: all three), e.g.
#                   ONLY=ours (just ours, no table) or ONLY=ours,yardstick (skips the slow real server)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${BENCH_WORKDIR:-$(mktemp -d /tmp/ocbench.XXXXXX)}
mkdir -p "$W"
W=$(cd "$W" && pwd)
REF_SCRIPT=${REF_SCRIPT:-/work/shared/reference/start-opencode-serve.sh}
STUB_PORT=${STUB_PORT:-18799}
OURS_PORT=${OURS_PORT:-14301}
REF_PORT=${REF_PORT:-14302}
YARD_PORT=${YARD_PORT:-14303}
YARD_SCENARIOS=${YARD_SCENARIOS:-seq,rss,conc,fanout}
OURS_HISTORY=${OURS_HISTORY:-10000}
REF_HISTORY=${REF_HISTORY:-1000}
ONLY=${ONLY:-ours,yardstick,opencode}
# side NAME: whether ONLY selects it
side() { [[ ",$ONLY," == *",$1,"* ]]; }
for s in ${ONLY//,/ }; do
  case $s in ours|yardstick|opencode) ;; *) echo "ONLY: unknown side '$s' (ours, yardstick, opencode)" >&2; exit 2 ;; esac
done
COMMON=(-n 50 -conc 1,10,100 -conc-n 3 -subs 50,1000 -fanout-rounds 3 -rss-prompts 100
  -admit-sessions 10 -admit-n 20 -queue-frac 0.5 -history-n 20 -history-max 5m)
# shellcheck disable=SC2206
EXTRA=(${OCBENCH_ARGS:-})

PIDS=()
# stop PID: SIGTERM, then SIGKILL after 5 s (opencode serve may ignore the first TERM; it is not our child).
stop() {
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 1 50); do kill -0 "$1" 2>/dev/null || return 0; [ "$(ps -o stat= -p "$1" 2>/dev/null)" = Z ] && return 0; sleep 0.1; done
  kill -9 "$1" 2>/dev/null || true
}
cleanup() {
  for p in "${PIDS[@]}"; do stop "$p"; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

echo "workdir: $W"
(cd "$ROOT" && go build -o "$W/ocbench" ./cmd/ocbench && go build -o "$W/opencode-server" ./cmd/opencode-server &&
  go build -o "$W/yardstick" ./bench/yardstick)

"$W/ocbench" -stub-only -stub-addr "127.0.0.1:$STUB_PORT" -chunks 5 -print-config "$W/stub.json" 2>"$W/stub.log" &
PIDS+=($!)
for _ in $(seq 1 50); do [ -s "$W/stub.json" ] && break; sleep 0.1; done
STUB_URL="http://127.0.0.1:$STUB_PORT/v1"

machine() { echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load: $(cut -d' ' -f1-3 /proc/loadavg)"; }

if side ours; then
  rm -rf "$W/ours-data" "$W/ours-project"; mkdir -p "$W/ours-data" "$W/ours-project"
  (cd "$W/ours-project" && exec "$W/opencode-server" --hostname 127.0.0.1 --port "$OURS_PORT" --store sqlite \
    --data "$W/ours-data" --directory "$W/ours-project" --config "$W/stub.json" --log-level warn) >"$W/ours.log" 2>&1 &
  OURS_PID=$!
  PIDS+=($OURS_PID)
  for _ in $(seq 1 100); do grep -q "listening on" "$W/ours.log" && break; sleep 0.1; done
  machine | tee "$W/ours.txt"
  "$W/ocbench" -url "http://127.0.0.1:$OURS_PORT" -pid "$OURS_PID" -label ours "${COMMON[@]}" \
    -history "$OURS_HISTORY" "${EXTRA[@]}" | tee -a "$W/ours.txt"
  machine | tee -a "$W/ours.txt"
  stop "$OURS_PID"
fi

if side yardstick; then
  rm -rf "$W/yard-data" "$W/yard-project"; mkdir -p "$W/yard-data" "$W/yard-project"
  (cd "$W/yard-project" && exec "$W/yardstick" --hostname 127.0.0.1 --port "$YARD_PORT" --data "$W/yard-data" \
    --directory "$W/yard-project" --model-url "$STUB_URL") >"$W/yardstick.log" 2>&1 &
  YARD_PID=$!
  PIDS+=($YARD_PID)
  for _ in $(seq 1 100); do grep -q "listening on" "$W/yardstick.log" && break; sleep 0.1; done
  machine | tee "$W/yardstick.txt"
  "$W/ocbench" -url "http://127.0.0.1:$YARD_PORT" -pid "$YARD_PID" -label yardstick "${COMMON[@]}" \
    "${EXTRA[@]}" -scenarios "$YARD_SCENARIOS" | tee -a "$W/yardstick.txt"
  machine | tee -a "$W/yardstick.txt"
  stop "$YARD_PID"
fi

if side opencode; then
  if [ -n "${OPENCODE_NODE_MODULES:-}" ] && [ ! -e "$W/ref/npm/node_modules" ]; then
    mkdir -p "$W/ref/npm" && ln -s "$OPENCODE_NODE_MODULES" "$W/ref/npm/node_modules"
  fi
  REF_PID=$(bash "$REF_SCRIPT" "$W/ref" "$REF_PORT" "$STUB_URL")
  PIDS+=($REF_PID)
  machine | tee "$W/opencode.txt"
  "$W/ocbench" -url "http://127.0.0.1:$REF_PORT" -pid "$REF_PID" -label opencode "${COMMON[@]}" \
    -history "$REF_HISTORY" "${EXTRA[@]}" | tee -a "$W/opencode.txt"
  machine | tee -a "$W/opencode.txt"
  stop "$REF_PID"
fi

if side ours && { side opencode || side yardstick; }; then
  echo
  REF_OUT=-; side opencode && REF_OUT="$W/opencode.txt"
  YARD_OUT=(); side yardstick && YARD_OUT=("$W/yardstick.txt")
  "$W/ocbench" -compare "$W/ours.txt" "$REF_OUT" "${YARD_OUT[@]}" | tee "$W/table.md"
fi
