#!/usr/bin/env bash
# bench/openai.sh: what the OpenAI door costs (issue 34). Each round starts our server (SQLite) on ocbench's
# chat-completions stub (zero delay, CHUNKS chunks) and runs `ocbench -scenarios openai`: N streamed POST
# /v1/responses chained by previous_response_id on one session (first text = the first response.output_text.delta
# on its own stream, completion = response.completed) and N prompt_async on another session (first
# message.part.delta and session.idle on /event), taking turns prompt by prompt so load on the machine hits both
# alike. Prints each round's ratios of the medians and their median over the rounds.
# Environment: ROUNDS (3), N (100), PORT (14491), CHUNKS (5), BENCH_WORKDIR (default mktemp).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${BENCH_WORKDIR:-$(mktemp -d /tmp/ocbench-openai.XXXXXX)}
mkdir -p "$W"; W=$(cd "$W" && pwd)
ROUNDS=${ROUNDS:-3}; N=${N:-100}; PORT=${PORT:-14491}; CHUNKS=${CHUNKS:-5}
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
echo "workdir: $W"
(cd "$ROOT" && go build -o "$W/ocbench" ./cmd/ocbench && go build -o "$W/opencode-server" ./cmd/opencode-server)
export XDG_CONFIG_HOME="$W/xdg"; mkdir -p "$XDG_CONFIG_HOME"
"$W/ocbench" -stub-only -stub-addr "127.0.0.1:$((PORT + 1))" -chunks "$CHUNKS" -print-config "$W/stub.json" 2>"$W/stub.log" &
PIDS+=($!)
for _ in $(seq 1 50); do [ -s "$W/stub.json" ] && break; sleep 0.1; done
echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
  rm -rf "$W/proj" "$W/data"; mkdir -p "$W/proj" "$W/data"
  (cd "$W/proj" && exec "$W/opencode-server" --hostname 127.0.0.1 --port "$PORT" --store sqlite --data "$W/data" \
    --directory "$W/proj" --config "$W/stub.json" --log-level warn) >"$W/server-$r.log" 2>&1 &
  SRV=$!
  for _ in $(seq 1 100); do grep -q "listening on" "$W/server-$r.log" && break; sleep 0.1; done
  "$W/ocbench" -url "http://127.0.0.1:$PORT" -pid "$SRV" -scenarios openai -n "$N" -label openai >"$W/openai-$r.txt"
  kill "$SRV"; wait "$SRV" 2>/dev/null || true
  python3 - "$r" "$W/openai-$r.txt" <<'PY'
import json, sys
s = json.loads([l for l in open(sys.argv[2]) if l.startswith("SUMMARY ")][-1][8:])
o, p = s["openai_first_ms"], s["openai_prompt_first_ms"]
oi, pi = s["openai_idle_ms"], s["openai_prompt_idle_ms"]
print(f"round {sys.argv[1]}: first text median /v1/responses {o['median']:.2f} ms, prompt_async {p['median']:.2f} ms, "
      f"ratio {s['openai_first_ratio']:.2f}; completion {oi['median']:.2f} ms, idle {pi['median']:.2f} ms, "
      f"ratio {s['openai_done_ratio']:.2f}")
PY
done | tee "$W/rounds.txt"
python3 - "$W/rounds.txt" <<'PY'
import re, statistics, sys
rows = [l for l in open(sys.argv[1]) if l.startswith("round ")]
for name, pat in [("first text ratio", r"ratio ([0-9.]+); completion"), ("completion ratio", r"ratio ([0-9.]+)$")]:
    v = [float(re.search(pat, l.strip()).group(1)) for l in rows]
    print(f"median over {len(v)} rounds: {name} {statistics.median(v):.2f} (min {min(v):.2f}, max {max(v):.2f})")
PY
