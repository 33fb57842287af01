#!/usr/bin/env bash
# bench/ab.sh REV: first text of our server at REV ("base") against the working tree ("head"), same machine,
# same stub model, alternating ROUNDS times (default 5) so that load on the machine hits both alike. Scenario
# (a) of ocbench only (sequential prompts, new session each and one session), -n 100 per run. Prints each run's
# medians and the mean of the medians per side. Needs nothing but Go and git; builds in a temporary worktree.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REV=${1:?usage: bench/ab.sh REV}
ROUNDS=${ROUNDS:-5}
W=$(mktemp -d /tmp/ocbench-ab.XXXXXX)
cleanup() { kill "${STUB:-}" 2>/dev/null || true; git -C "$ROOT" worktree remove --force "$W/base" 2>/dev/null || true; }
trap cleanup EXIT
git -C "$ROOT" worktree add -q --detach "$W/base" "$REV"
(cd "$W/base" && go build -o "$W/server-base" ./cmd/opencode-server)
(cd "$ROOT" && go build -o "$W/server-head" ./cmd/opencode-server && go build -o "$W/ocbench" ./cmd/ocbench)
"$W/ocbench" -stub-only -stub-addr 127.0.0.1:18899 -chunks 5 -print-config "$W/stub.json" 2>"$W/stub.log" &
STUB=$!
for _ in $(seq 1 50); do [ -s "$W/stub.json" ] && break; sleep 0.1; done
for round in $(seq 1 "$ROUNDS"); do
  for v in base head; do
    rm -rf "$W/data-$v" "$W/proj-$v"; mkdir -p "$W/data-$v" "$W/proj-$v"
    (cd "$W/proj-$v" && exec "$W/server-$v" --hostname 127.0.0.1 --port 14401 --store sqlite --data "$W/data-$v" \
      --directory "$W/proj-$v" --config "$W/stub.json" --log-level warn) >"$W/$v.log" 2>&1 &
    P=$!
    for _ in $(seq 1 100); do grep -q "listening on" "$W/$v.log" && break; sleep 0.1; done
    "$W/ocbench" -url http://127.0.0.1:14401 -pid "$P" -label "$v" -scenarios seq -n 100 2>&1 |
      grep -E '^\(a\) sequential, ' | sed -E "s/^\(a\) sequential, (new session each|same session): prompt_async -> first text: median ([0-9.]+) ms.*/$v \1 \2/"
    kill "$P"; wait "$P" 2>/dev/null || true
  done
done | tee "$W/runs.txt"
awk '{side=$1; $1=""; m=$NF; $NF=""; k=side" |"$0; s[k]+=m; n[k]++} END {for (k in s) printf "%s| mean of medians %.2f ms (%d runs)\n", k, s[k]/n[k], n[k]}' "$W/runs.txt" | sort
