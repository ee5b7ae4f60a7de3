#!/usr/bin/env bash
# A lock service's load, all at once (issue 24, item 2; docs/performance.md,
# "A lock service's load, all at once"): starts 3 Arbor members on loopback
# and runs, side by side against them, each PART of:
#   holders   LOCKS holders over CONNS sessions (both SESSIONS unless
#             set), each holding a lock of its own bound to a lease of
#             10 s for HOLD at a time and renewing it explicitly, RENEWALS
#             renewals a second in all (--renew-rate)
#   cycles    uncontended acquire/release cycles on 256 locks over 64
#             sessions, at most CYCLES a second (--rate)
#   handoffs  16 locks with 4 holders each over 64 sessions: how long from
#             a release's send until the next holder holds
# Each part is an `arbor bench locks` of its own, printed when it ends.
#   scripts/lockload.sh
#   PARTS=holders SESSIONS=10000 RENEWALS=50000 scripts/lockload.sh
#   MUX=0 OLD_ARBORD=/tmp/old/arbord scripts/lockload.sh   # that build, then this one
# Every part's sessions travel over MUX multiplexed connections to each
# member (--mux; 0: a connection per session, as a build older than
# multiplexing needs).
# A fresh cluster for each build; clients on 127.0.0.1:27281-27283, peers on
# 27381-27383, HTTP on 27481-27483; everything in a temporary directory,
# stopped and removed at the end. ARBORD_FLAGS go to every member.
set -euo pipefail
cd "$(dirname "$0")/.."
PARTS=${PARTS:-"holders cycles handoffs"}
SESSIONS=${SESSIONS:-10000}
LOCKS=${LOCKS:-$SESSIONS}
CONNS=${CONNS:-$SESSIONS}
RENEWALS=${RENEWALS:-50000}
CYCLES=${CYCLES:-5000}
HOLD=${HOLD:-60s}
WARMUP=${WARMUP:-20s}
DURATION=${DURATION:-30s}
ARBORD_FLAGS=${ARBORD_FLAGS:-}
OLD_ARBORD=${OLD_ARBORD:-}
MUX=${MUX:-16}
# With MUX=0, every session is a connection.
ulimit -n "$(ulimit -Hn)"
work=$(mktemp -d)
# shellcheck source=scripts/procs.sh
. scripts/procs.sh
build_arbor "$work"
trap 'stop; rm -rf "$work"' EXIT INT TERM
servers=127.0.0.1:27281,127.0.0.1:27282,127.0.0.1:27283
metrics=http://127.0.0.1:27481/metrics,http://127.0.0.1:27482/metrics,http://127.0.0.1:27483/metrics

# part NAME runs that part's bench into $work/NAME.out.
part() {
  local args
  case $1 in
  holders) args=(--conns "$CONNS" --locks "$LOCKS" --contenders 1 --lease 10s --hold "$HOLD" --renew-rate "$RENEWALS" --server-metrics "$metrics") ;;
  cycles) args=(--conns 64 --locks 256 --contenders 1 --rate "$CYCLES") ;;
  handoffs) args=(--conns 64 --locks 16 --contenders 4) ;;
  *)
    echo "unknown part $1" >&2
    exit 2
    ;;
  esac
  timeout 900 "$work/bin/arbor" --servers "$servers" --timeout 30s bench locks --prefix "/load-$1" --mux "$MUX" \
    --warmup "$WARMUP" --duration "$DURATION" "${args[@]}" >"$work/$1.out" 2>&1 ||
    echo "(arbor bench exited with status $?)" >>"$work/$1.out"
}

builds=("$work/bin/arbord")
if [ -n "$OLD_ARBORD" ]; then
  builds=("$OLD_ARBORD" "$work/bin/arbord")
fi
for bin in "${builds[@]}"; do
  start_members "$bin" 27000 "$work" --max-conns-per-ip 0 --max-conns 20000 --max-handshaking 4096 \
    --log-level warn $ARBORD_FLAGS
  echo "== $bin: $PARTS ($(uptime | sed 's/.*load/load/'))"
  bench=()
  for p in $PARTS; do
    part "$p" &
    bench+=($!)
  done
  wait "${bench[@]}"
  for p in $PARTS; do
    echo "-- $p"
    cat "$work/$p.out"
  done
  stop
done
