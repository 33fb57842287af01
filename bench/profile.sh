#!/usr/bin/env bash
# bench/profile.sh: CPU and allocation profiles of OUR server under ocbench's heavy scenarios.
#
# Runs our server in-process in `ocbench -serve` (wired like cmd/opencode-server, SQLite store) with
# net/http/pprof on loopback, and for each scenario captures a CPU profile for the length of the run
# plus the allocation profile delta, then prints `go tool pprof -top` of each.
#
# Environment: BENCH_WORKDIR (default mktemp), STUB_PORT (18899), SRV_PORT (14311), PPROF_PORT (16060),
#   SCENARIOS (default "conc fanout history"), TOP (lines of pprof output, default 25).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${BENCH_WORKDIR:-$(mktemp -d /tmp/ocprof.XXXXXX)}
mkdir -p "$W"; W=$(cd "$W" && pwd)
STUB_PORT=${STUB_PORT:-18899}; SRV_PORT=${SRV_PORT:-14311}; PPROF_PORT=${PPROF_PORT:-16060}
SCENARIOS=${SCENARIOS:-conc fanout history}
TOP=${TOP:-25}
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

echo "workdir: $W"
(cd "$ROOT" && go build -o "$W/ocbench" ./cmd/ocbench)
"$W/ocbench" -stub-only -stub-addr "127.0.0.1:$STUB_PORT" -print-config "$W/stub.json" 2>"$W/stub.log" &
PIDS+=($!)
for _ in $(seq 1 50); do [ -s "$W/stub.json" ] && break; sleep 0.1; done
rm -rf "$W/data" "$W/project"; mkdir -p "$W/data" "$W/project"
(cd "$W/project" && exec "$W/ocbench" -serve "127.0.0.1:$SRV_PORT" -pprof "127.0.0.1:$PPROF_PORT" \
  -serve-store sqlite -serve-data "$W/data" -serve-config "$W/stub.json") >"$W/server.log" 2>&1 &
SRV=$!
PIDS+=($SRV)
for _ in $(seq 1 100); do grep -q "listening on" "$W/server.log" && break; sleep 0.1; done
P="http://127.0.0.1:$PPROF_PORT/debug/pprof"

for s in $SCENARIOS; do
  case $s in
    conc)    args=(-scenarios conc -conc 100 -conc-n 5); secs=20 ;;
    fanout)  args=(-scenarios fanout -subs 1000 -fanout-rounds 10 -fanout-paths /event); secs=25 ;;
    history) args=(-scenarios history -history 10000 -history-n 30); secs=120 ;;
    seq)     args=(-scenarios seq -n 200); secs=20 ;;
    admit)   args=(-scenarios admit -admit-sessions 10 -admit-n 50); secs=20 ;;
    *) echo "unknown scenario $s" >&2; exit 2 ;;
  esac
  curl -sf -o "$W/allocs-before-$s.pb.gz" "$P/allocs"
  curl -sf -o "$W/cpu-$s.pb.gz" "$P/profile?seconds=$secs" &
  C=$!
  "$W/ocbench" -url "http://127.0.0.1:$SRV_PORT" -pid "$SRV" -warmup 1 "${args[@]}" | grep -v '^SUMMARY' | tee "$W/ocbench-$s.txt"
  wait "$C"
  curl -sf -o "$W/allocs-after-$s.pb.gz" "$P/allocs"
  echo "=== CPU profile: $s ($secs s window)"
  go tool pprof -top -nodecount "$TOP" "$W/cpu-$s.pb.gz" 2>/dev/null | tee "$W/cpu-$s.top.txt"
  echo "=== CPU profile (cumulative): $s"
  go tool pprof -top -cum -nodecount "$TOP" "$W/cpu-$s.pb.gz" 2>/dev/null | tee "$W/cpu-$s.cum.txt"
  echo "=== allocations during $s (alloc_space)"
  go tool pprof -top -sample_index=alloc_space -nodecount "$TOP" -diff_base "$W/allocs-before-$s.pb.gz" "$W/allocs-after-$s.pb.gz" 2>/dev/null | tee "$W/allocs-$s.top.txt"
done
