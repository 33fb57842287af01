#!/usr/bin/env bash
# bench/scaleout.sh: scale-out on one PostgreSQL database. Runs `ocbench -scenarios scale` against
#   (a) one instance on SQLite, then (b) 1, (c) 2, (d) 3 instances sharing one fresh PostgreSQL database each,
# all with the built-in scripted model (--scripted-chunks 5, no delay), each instance with its own --data dir
# and the same --directory, and prints one table: config, prompts/s, first text p50 and p95, errors.
#
# The scale scenario (cmd/ocbench/scenario_scale.go): worker w creates its session on instance w mod N, prompts
# it (prompt_async, back to back) through instance w+1 (forwarded to the owner when N > 1) and times it on the
# /event stream of instance w+2 (with N = 3 neither the creator nor the prompting one: the relay). A turn ends at
# session.idle; prompts/s = completed turns / wall time; first text = POST -> first message.part.delta.
#
# PostgreSQL is a throwaway server: initdb + pg_ctl into a temp dir (as the postgres user when run as root),
# listening on 127.0.0.1 only, on a port below 32768, fsync ON and synchronous_commit on (PostgreSQL's defaults,
# unlike internal/pgtest; the server itself skips the flush wait only on its NoSync commits of a running turn's
# progress), trust auth; it is stopped and removed at the end. All processes share this machine's CPUs.
#
# Environment (all optional):
#   BENCH_WORKDIR   scratch dir (default: mktemp); logs and ocbench outputs land in it
#   SCALE_DUR       -scale-dur (default 15s)     SCALE_WORKERS   -scale-workers (default 16)
#   LEASE_TTL       --lease-ttl of the postgres instances (default 3s)
#   LOG_LEVEL       --log-level of the instances (default warn; their logs are in the workdir)
#   OCBENCH_ARGS    extra ocbench flags for every run
#   PG_PORT         PostgreSQL port (default: a free one in 20000-31999)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${BENCH_WORKDIR:-$(mktemp -d /tmp/ocscale.XXXXXX)}
mkdir -p "$W"
W=$(cd "$W" && pwd)
SCALE_DUR=${SCALE_DUR:-15s}
SCALE_WORKERS=${SCALE_WORKERS:-16}
LEASE_TTL=${LEASE_TTL:-3s}
LOG_LEVEL=${LOG_LEVEL:-warn}
# shellcheck disable=SC2206
EXTRA=(${OCBENCH_ARGS:-})

PIDS=()
PGCTL=; PGDATA=; PGDIR=; AS=()
stop() {
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$1" 2>/dev/null || true
}
cleanup() {
  for p in "${PIDS[@]}"; do stop "$p"; done
  wait 2>/dev/null || true
  if [ -n "$PGCTL" ]; then "${AS[@]}" "$PGCTL" -D "$PGDATA" -m fast -w stop >/dev/null 2>&1 || true; fi
  if [ -n "$PGDIR" ]; then rm -rf "$PGDIR"; fi
}
trap cleanup EXIT INT TERM

# pgbin NAME: a PostgreSQL binary from PATH or /usr/lib/postgresql/*/bin.
pgbin() {
  local p
  if p=$(command -v "$1"); then echo "$p"; return; fi
  p=$(ls -d /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -1)
  [ -n "$p" ] || { echo "$1 not found (install Debian's postgresql package)" >&2; exit 1; }
  echo "$p"
}
HZ=$(getconf CLK_TCK)
# ticks PID...: user+system CPU ticks of these processes (children reaped by them too, with -c).
ticks() {
  local c=0 f p
  if [ "$1" = -c ]; then c=1; shift; fi
  for p in "$@"; do
    # shellcheck disable=SC2207
    f=($(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null)) || continue
    [ ${#f[@]} -gt 14 ] || continue
    echo $((f[11] + f[12] + c * (f[13] + f[14])))
  done | awk '{s += $1} END {print s + 0}'
}
# pgticks: the PostgreSQL server's CPU ticks (postmaster, its live children, the children it reaped).
pgticks() {
  local pm; pm=$(head -1 "$PGDATA/postmaster.pid")
  echo $(($(ticks -c "$pm") + $(ticks $(pgrep -P "$pm"))))
}
# busyticks: CPU ticks the whole machine spent not idle (all CPUs).
busyticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
machine() { echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load: $(cut -d' ' -f1-3 /proc/loadavg)"; }

echo "workdir: $W"
(cd "$ROOT" && go build -o "$W/ocbench" ./cmd/ocbench && go build -o "$W/opencode-server" ./cmd/opencode-server)

# ---- PostgreSQL -----------------------------------------------------------------------------------------------
INITDB=$(pgbin initdb); PGCTL=$(pgbin pg_ctl)
PSQL=$(dirname "$PGCTL")/psql; [ -x "$PSQL" ] || PSQL=$(pgbin psql)
PGDIR=$(mktemp -d /tmp/ocscale-pg.XXXXXX); PGDATA=$PGDIR/data
if [ "$(id -u)" = 0 ]; then
  chmod 755 "$PGDIR"; chown postgres: "$PGDIR"
  AS=(runuser -u postgres --)
fi
"${AS[@]}" "$INITDB" -D "$PGDATA" -A trust -U postgres >"$W/initdb.log" 2>&1
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
started=
for _ in 1 2 3; do
  PORT=${PG_PORT:-$((20000 + RANDOM % 12000))}
  if ! port_free "$PORT" && [ -z "${PG_PORT:-}" ]; then continue; fi
  if "${AS[@]}" "$PGCTL" -D "$PGDATA" -l "$PGDIR/log" -w -t 60 \
    -o "-p $PORT -k $PGDIR -h 127.0.0.1 -c max_connections=300" start >/dev/null; then
    started=1; break
  fi
done
[ -n "$started" ] || { echo "PostgreSQL did not start:" >&2; cat "$PGDIR/log" >&2; exit 1; }
psql_() { "$PSQL" -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -Atc "$1"; }
echo "PostgreSQL $(psql_ 'SHOW server_version') on 127.0.0.1:$PORT, fsync=$(psql_ 'SHOW fsync'), synchronous_commit=$(psql_ 'SHOW synchronous_commit')"

# ---- runs -----------------------------------------------------------------------------------------------------
mkdir -p "$W/project"
ROWS=()
LOGNOTES=()
CPUNOTES=()
PGNOTES=()
# run LABEL N STORE [DB]: start N instances, run ocbench scale against them, stop them.
run() {
  local label=$1 n=$2 store=$3 db=${4:-} urls=() ipids=() i args log
  for i in $(seq 1 "$n"); do
    args=(--hostname 127.0.0.1 --port 0 --data "$W/$label/i$i" --directory "$W/project" --scripted-chunks 5
      --scripted-delay 0 --log-level "$LOG_LEVEL" --store "$store")
    if [ "$store" = postgres ]; then
      args+=(--postgres-url "postgres://postgres@127.0.0.1:$PORT/$db?sslmode=disable" --lease-ttl "$LEASE_TTL")
    fi
    mkdir -p "$W/$label/i$i"
    log=$W/$label/i$i.log
    (cd "$W/project" && exec "$W/opencode-server" "${args[@]}") >"$log" 2>&1 &
    ipids+=($!); PIDS+=($!)
    for _ in $(seq 1 100); do grep -q "listening on" "$log" && break; sleep 0.1; done
    urls+=("$(sed -n 's/^opencode server listening on //p' "$log" | head -1)")
    [ -n "${urls[-1]}" ] || { echo "instance $i of $label did not start:" >&2; cat "$log" >&2; exit 1; }
  done
  local csv; csv=$(IFS=,; echo "${urls[*]}")
  echo; echo "== $label: $csv ($(machine))"
  local i0 p0=0 b0 t0 i1 p1=0 b1 t1
  i0=$(ticks "${ipids[@]}"); [ "$store" = postgres ] && p0=$(pgticks); b0=$(busyticks); t0=$(date +%s.%N)
  if "$W/ocbench" -urls "$csv" -scenarios scale -scale-workers "$SCALE_WORKERS" -scale-dur "$SCALE_DUR" \
    -label "$label" "${EXTRA[@]}" | tee "$W/$label.txt"; then
    ROWS+=("$(sed -n 's/^SCALEROW //p' "$W/$label.txt")")
  else
    ROWS+=("| $label | failed (see $W/$label.txt) | | | |")
  fi
  i1=$(ticks "${ipids[@]}"); [ "$store" = postgres ] && p1=$(pgticks); b1=$(busyticks); t1=$(date +%s.%N)
  local turns; turns=$(sed -n 's/^SUMMARY .*"scale_turns":\([0-9]*\).*/\1/p' "$W/$label.txt")
  CPUNOTES+=("$(awk -v i=$((i1 - i0)) -v p=$((p1 - p0)) -v b=$((b1 - b0)) -v hz="$HZ" -v t0="$t0" -v t1="$t1" \
    -v l="$label" -v n="$(nproc)" -v k="${turns:-0}" 'BEGIN {w = t1 - t0; if (k < 1) k = 1
    printf "%s: %.1f s wall, CPU s (ms per turn): instances %.1f (%.2f), postgres %.1f (%.2f), rest: ocbench and anything else %.1f (%.2f); machine busy %.0f%% of %d CPUs",
      l, w, i/hz, 1000*i/hz/k, p/hz, 1000*p/hz/k, (b-i-p)/hz, 1000*(b-i-p)/hz/k, 100*b/hz/(w*n), n}')")
  for p in "${ipids[@]}"; do stop "$p"; done
  if [ "$store" = postgres ]; then # the database is fresh: its totals are this run's (start-up included)
    sleep 1 # the backends of the stopped instances report their counts as they exit
    PGNOTES+=("$(psql_ "SELECT '$label: ' || xact_commit + xact_rollback || ' transactions (' ||
      round((xact_commit + xact_rollback)::numeric / greatest(${turns:-0}, 1), 1) || ' per turn), ' ||
      tup_inserted || ' rows inserted, ' || tup_updated || ' updated, ' || tup_deleted || ' deleted' FROM pg_stat_database WHERE datname = '$db'")")
  fi
  local warn err
  warn=$(cat "$W/$label"/i*.log | grep -c 'level=WARN' || true)
  err=$(cat "$W/$label"/i*.log | grep -c 'level=ERROR' || true)
  LOGNOTES+=("$label: $warn WARN, $err ERROR lines in the server logs ($W/$label/i*.log)")
}

run sqlite 1 sqlite
for n in 1 2 3; do
  psql_ "CREATE DATABASE scale$n TEMPLATE template0"
  run "postgres-x$n" "$n" postgres "scale$n"
done

echo
echo "## Scale-out: ocbench -scenarios scale -scale-workers $SCALE_WORKERS -scale-dur $SCALE_DUR ($(machine))"
echo
echo "| config | prompts/s | first text p50 (ms) | first text p95 (ms) | errors |"
echo "|---|---:|---:|---:|---:|"
printf '%s\n' "${ROWS[@]}"
echo
printf '%s\n' "${CPUNOTES[@]}"
printf '%s\n' "${PGNOTES[@]}"
echo
printf '%s\n' "${LOGNOTES[@]}"
cp "$PGDIR/log" "$W/postgres.log" 2>/dev/null || true
echo "PostgreSQL log: $W/postgres.log ($(grep -cE 'ERROR|FATAL|PANIC|WARNING' "$W/postgres.log" || true) ERROR/FATAL/PANIC/WARNING lines)"
