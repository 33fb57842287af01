#!/usr/bin/env bash
# bench/external.sh: what the external-agent bridge adds (issue 33). The agent is our own `opencode-server acp`
# with its built-in scripted model (no model server, no delay), so the agent's cost is small and the same on both
# sides. Each round is one `ocbench -scenarios ext -acp-bare AGENT`, prompts taking turns (so load on this shared
# machine hits both alike):
#   bridged  our server (SQLite store) with that agent as `ext` in opencode.json: a warm-up prompt, then N
#            prompt_async with agent ext on one session: time to the first message.part.delta on /event;
#   bare     a bare ACP client (acpclient, the codec the bridge uses) starts the same agent command itself:
#            initialize, session/new, a warm-up prompt, then N session/prompt on that session: time to the first
#            agent_message_chunk;
# then EXT_SESSIONS sessions (the measured one included) each ran one prompt on ext and went idle: the server's
# VmRSS (the server alone, not its agents) and its live agent children.
# Prints each round's figures and the medians over the rounds.
# Environment: ROUNDS (3), N (100), EXT_SESSIONS (20), PORT (14391), CHUNKS (5), BENCH_WORKDIR (default mktemp),
#   SERVER_STORE (sqlite; memory shows what the store costs), AGENT_KIND (ours; opencode: the real `opencode acp`
#   at OPENCODE_BIN on ocbench's chat-completions stub model, zero delay, CHUNKS chunks, each side in a home of
#   its own).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${BENCH_WORKDIR:-$(mktemp -d /tmp/ocbench-ext.XXXXXX)}
mkdir -p "$W"; W=$(cd "$W" && pwd)
ROUNDS=${ROUNDS:-3}; N=${N:-100}; EXT_SESSIONS=${EXT_SESSIONS:-20}; PORT=${PORT:-14391}; CHUNKS=${CHUNKS:-5}
SERVER_STORE=${SERVER_STORE:-sqlite}
SRV=
cleanup() { [ -n "$SRV" ] && kill "$SRV" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

echo "workdir: $W"
(cd "$ROOT" && go build -o "$W/ocbench" ./cmd/ocbench && go build -o "$W/opencode-server" ./cmd/opencode-server)
AGENT=("$W/opencode-server" acp --store memory --scripted-chunks "$CHUNKS" --log-level warn)
# No global opencode.json of this machine's user: both sides read only the project's.
export XDG_CONFIG_HOME="$W/xdg"
mkdir -p "$XDG_CONFIG_HOME"
args_json=$(printf '"%s",' "${AGENT[@]:1}"); args_json="[${args_json%,}]"
env_json='{}'
BARE_ENV=()
if [ "${AGENT_KIND:-ours}" = opencode ]; then
  : "${OPENCODE_BIN:?AGENT_KIND=opencode needs OPENCODE_BIN}"
  STUB_PORT=$((PORT + 1))
  "$W/ocbench" -stub-only -stub-addr "127.0.0.1:$STUB_PORT" -chunks "$CHUNKS" >"$W/stub.log" 2>&1 &
  STUB=$!
  trap 'kill $STUB 2>/dev/null; cleanup' EXIT INT TERM
  cfg='{"model":"stub/stub-model","small_model":"stub/stub-model","provider":{"stub":{"npm":"@ai-sdk/openai-compatible","name":"Stub","options":{"baseURL":"http://127.0.0.1:'$STUB_PORT'/v1","apiKey":"k"},"models":{"stub-model":{"name":"Stub Model","tool_call":true,"limit":{"context":128000,"output":4096}}}}}}'
  # homeEnv HOME: the agent's environment in a home of its own.
  homeEnv() { echo HOME="$1" XDG_CONFIG_HOME="$1/.config" XDG_DATA_HOME="$1/.local/share" XDG_STATE_HOME="$1/.local/state" \
    XDG_CACHE_HOME="$1/.cache" OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_SHARE=1 \
    OPENCODE_DISABLE_LSP_DOWNLOAD=1; }
  AGENT=("$OPENCODE_BIN" acp)
  args_json='["acp"]'
  env_json=$(python3 -c 'import json,sys; d=dict(a.split("=",1) for a in sys.argv[2:]); d["OPENCODE_CONFIG_CONTENT"]=sys.argv[1]; print(json.dumps(d))' \
    "$cfg" $(homeEnv "$W/home-bridged"))
  read -r -a BARE_ENV <<<"$(homeEnv "$W/home-bare")"
  BARE_ENV+=("OPENCODE_CONFIG_CONTENT=$cfg")
fi
echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
  rm -rf "$W/proj" "$W/data"; mkdir -p "$W/proj" "$W/data"
  printf '{"agent":{"ext":{"description":"the measured ACP agent","acp":{"command":"%s","args":%s,"env":%s}}}}\n' \
    "${AGENT[0]}" "$args_json" "$env_json" >"$W/proj/opencode.json"
  (cd "$W/proj" && exec "$W/opencode-server" --hostname 127.0.0.1 --port "$PORT" --store "$SERVER_STORE" \
    --data "$W/data" --directory "$W/proj" --log-level warn) >"$W/server-$r.log" 2>&1 &
  SRV=$!
  for _ in $(seq 1 100); do grep -q "listening on" "$W/server-$r.log" && break; sleep 0.1; done
  (cd "$W/proj" && env "${BARE_ENV[@]}" "$W/ocbench" -url "http://127.0.0.1:$PORT" -pid "$SRV" -agent ext -scenarios ext -warmup 0 \
    -n "$N" -ext-sessions "$EXT_SESSIONS" -acp-bare "${AGENT[*]}" -label ext) >"$W/ext-$r.txt"
  kill "$SRV"; wait "$SRV" 2>/dev/null || true; SRV=
  python3 - "$r" "$W/ext-$r.txt" <<'PY'
import json, sys
s = json.loads([l for l in open(sys.argv[2]) if l.startswith("SUMMARY ")][-1][8:])
bf, sf = s["ext_bare_first_ms"], s["ext_first_ms"]
print(f"round {sys.argv[1]}: first text median bare {bf['median']:.2f} ms (p90 {bf['p90']:.2f}), "
      f"bridged {sf['median']:.2f} ms (p90 {sf['p90']:.2f}), added {sf['median']-bf['median']:.2f} ms; "
      f"server CPU {s.get('ext_cpu_ms_per_prompt', 0):.2f} ms/prompt; RSS with {s['ext_sessions']} idle external "
      f"sessions {s['rss_ext_idle_kb']/1024:.1f} MB ({s['ext_agents_live']} agents live; at start {s['rss_start_kb']/1024:.1f} MB)")
PY
done | tee "$W/rounds.txt"
python3 - "$W/rounds.txt" <<'PY'
import re, statistics, sys
rows = [l for l in open(sys.argv[1]) if l.startswith("round ")]
def col(pat):
    return [float(re.search(pat, l).group(1)) for l in rows]
for name, pat in [("bare first text ms", r"bare ([0-9.]+) ms"), ("bridged first text ms", r"bridged ([0-9.]+) ms"),
                  ("added ms", r"added (-?[0-9.]+) ms"), ("RSS MB", r"sessions ([0-9.]+) MB")]:
    v = col(pat)
    print(f"median over {len(v)} rounds: {name} {statistics.median(v):.2f} (min {min(v):.2f}, max {max(v):.2f})")
PY
