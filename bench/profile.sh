#!/usr/bin/env bash
# bench/profile.sh: CPU and allocation profiles of OUR server under ocbench's heavy scenarios (and, with
# YARDSTICK=1, of the yardstick under the same scenarios, for comparison).
#
# Runs our server in-process in `ocbench -serve` (wired like cmd/opencode-server, SQLite store) with
# net/http/pprof on loopback, and for each scenario captures a CPU profile for the length of the run
# plus the allocation profile delta, then prints `go tool pprof -top` of each.
#
# Environment: BENCH_WORKDIR (default mktemp), STUB_PORT (18899), SRV_PORT (14311), PPROF_PORT (16060),
#   SCENARIOS (default "conc fanout history"; also seq, fanout50, admit), TOP (lines of pprof output, default 25),
#   BLOCK_RATE, MUTEX_FRAC   block/mutex profiling in our server (ns, fraction; default 0 = off): the delta of
#                            /debug/pprof/block and /debug/pprof/mutex over each scenario is printed too,
#   TRACE_SECS               >0: also an execution trace of the first TRACE_SECS s of each scenario, summarised
#                            with `go tool trace -pprof=syscall|sync|sched` (where goroutines waited),
#   YARDSTICK=1              then the same scenarios against bench/yardstick (CPU profile only; YARD_PORT 14313,
#                            YARD_PPROF_PORT 16061); files are named *-yardstick-*.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${BENCH_WORKDIR:-$(mktemp -d /tmp/ocprof.XXXXXX)}
mkdir -p "$W"; W=$(cd "$W" && pwd)
STUB_PORT=${STUB_PORT:-18899}; SRV_PORT=${SRV_PORT:-14311}; PPROF_PORT=${PPROF_PORT:-16060}
YARD_PORT=${YARD_PORT:-14313}; YARD_PPROF_PORT=${YARD_PPROF_PORT:-16061}
SCENARIOS=${SCENARIOS:-conc fanout history}
TOP=${TOP:-25}
BLOCK_RATE=${BLOCK_RATE:-0}; MUTEX_FRAC=${MUTEX_FRAC:-0}; TRACE_SECS=${TRACE_SECS:-0}; YARDSTICK=${YARDSTICK:-}
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

echo "workdir: $W"
(cd "$ROOT" && go build -o "$W/ocbench" ./cmd/ocbench && go build -o "$W/yardstick" ./bench/yardstick)
"$W/ocbench" -stub-only -stub-addr "127.0.0.1:$STUB_PORT" -print-config "$W/stub.json" 2>"$W/stub.log" &
PIDS+=($!)
for _ in $(seq 1 50); do [ -s "$W/stub.json" ] && break; sleep 0.1; done

# profile NAME URL PID PPROF_BASE: every scenario against one server; files are named *-NAME-SCENARIO.
profile() {
  local name=$1 url=$2 pid=$3 P=$4 s args secs
  for s in $SCENARIOS; do
    case $s in
      conc)     args=(-scenarios conc -conc 100 -conc-n 5); secs=20 ;;
      fanout)   args=(-scenarios fanout -subs 1000 -fanout-rounds 10 -fanout-paths /event); secs=25 ;;
      fanout50) args=(-scenarios fanout -subs 50 -fanout-rounds 100 -fanout-paths /event); secs=15 ;;
      history)  args=(-scenarios history -history 10000 -history-n 30); secs=120 ;;
      seq)      args=(-scenarios seq -n 200); secs=20 ;;
      admit)    args=(-scenarios admit -admit-sessions 10 -admit-n 50); secs=20 ;;
      *) echo "unknown scenario $s" >&2; exit 2 ;;
    esac
    local f="$W/$name-$s"
    curl -sf -o "$f.allocs-before.pb.gz" "$P/allocs"
    [ "$BLOCK_RATE" != 0 ] && curl -sf -o "$f.block-before.pb.gz" "$P/block"
    [ "$MUTEX_FRAC" != 0 ] && curl -sf -o "$f.mutex-before.pb.gz" "$P/mutex"
    curl -sf -o "$f.cpu.pb.gz" "$P/profile?seconds=$secs" &
    local C=$! T=
    if [ "$TRACE_SECS" != 0 ]; then curl -sf -o "$f.trace.out" "$P/trace?seconds=$TRACE_SECS" & T=$!; fi
    "$W/ocbench" -url "$url" -pid "$pid" -warmup 1 "${args[@]}" | grep -v '^SUMMARY' | tee "$f.ocbench.txt"
    wait "$C"
    [ -n "$T" ] && wait "$T"
    curl -sf -o "$f.allocs-after.pb.gz" "$P/allocs"
    echo "=== CPU profile: $name $s ($secs s window)"
    go tool pprof -top -nodecount "$TOP" "$f.cpu.pb.gz" 2>/dev/null | tee "$f.cpu.top.txt"
    echo "=== CPU profile (cumulative): $name $s"
    go tool pprof -top -cum -nodecount "$TOP" "$f.cpu.pb.gz" 2>/dev/null | tee "$f.cpu.cum.txt"
    echo "=== allocations during $name $s (alloc_space)"
    go tool pprof -top -sample_index=alloc_space -nodecount "$TOP" -diff_base "$f.allocs-before.pb.gz" "$f.allocs-after.pb.gz" 2>/dev/null | tee "$f.allocs.top.txt"
    local k
    for k in block mutex; do
      [ -s "$f.$k-before.pb.gz" ] || continue
      curl -sf -o "$f.$k-after.pb.gz" "$P/$k"
      echo "=== $k profile during $name $s (delay, cumulative)"
      go tool pprof -top -cum -sample_index=delay -nodecount "$TOP" -diff_base "$f.$k-before.pb.gz" "$f.$k-after.pb.gz" 2>/dev/null | tee "$f.$k.top.txt"
    done
    if [ -n "$T" ] && [ -s "$f.trace.out" ]; then
      for k in syscall sync sched; do
        go tool trace -pprof="$k" "$f.trace.out" >"$f.trace-$k.pprof" 2>/dev/null || continue
        echo "=== trace: $k blocking during the first $TRACE_SECS s of $name $s (cumulative)"
        go tool pprof -top -cum -nodecount "$TOP" "$f.trace-$k.pprof" 2>/dev/null | tee "$f.trace-$k.top.txt"
      done
    fi
  done
}

rm -rf "$W/data" "$W/project"; mkdir -p "$W/data" "$W/project"
(cd "$W/project" && exec "$W/ocbench" -serve "127.0.0.1:$SRV_PORT" -pprof "127.0.0.1:$PPROF_PORT" \
  -serve-store sqlite -serve-data "$W/data" -serve-config "$W/stub.json" -block-rate "$BLOCK_RATE" -mutex-frac "$MUTEX_FRAC") >"$W/server.log" 2>&1 &
SRV=$!
PIDS+=($SRV)
for _ in $(seq 1 100); do grep -q "listening on" "$W/server.log" && break; sleep 0.1; done
profile ours "http://127.0.0.1:$SRV_PORT" "$SRV" "http://127.0.0.1:$PPROF_PORT/debug/pprof"
kill "$SRV" 2>/dev/null || true

if [ -n "$YARDSTICK" ]; then
  mkdir -p "$W/yard-data"
  "$W/yardstick" --port "$YARD_PORT" --data "$W/yard-data" --model-url "http://127.0.0.1:$STUB_PORT/v1" \
    --pprof "127.0.0.1:$YARD_PPROF_PORT" >"$W/yardstick.log" 2>&1 &
  YARD=$!
  PIDS+=($YARD)
  for _ in $(seq 1 100); do grep -q "listening on" "$W/yardstick.log" && break; sleep 0.1; done
  BLOCK_RATE=0 MUTEX_FRAC=0 profile yardstick "http://127.0.0.1:$YARD_PORT" "$YARD" "http://127.0.0.1:$YARD_PPROF_PORT/debug/pprof"
fi
