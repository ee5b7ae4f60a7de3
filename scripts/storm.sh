#!/usr/bin/env bash
# A reconnect storm (issue 24, item 3; docs/performance.md, "Reconnect
# storms"): starts 3 Arbor members on loopback, runs `arbor bench locks`
# with SESSIONS sessions, each holding a lock of its own for HOLD at a
# time, and kills -9 one member (VICTIM: a follower or the leader) STORM
# into the measured phase. The bench reports how the sessions that were on
# it came back on the other two, and what was lost: sessions, holds (by
# the holders' own view and by a check on the servers once all were
# back), and leases with LEASE.
#   scripts/storm.sh                                  # 1,000 then 10,000 sessions
#   SESSIONS=3000 VICTIM=leader ROUNDS=2 scripts/storm.sh
#   LEASE=10s SESSIONS=10000 scripts/storm.sh
#   ARBORD_FLAGS="--max-handshaking 1024" LOG=/tmp/storm.log scripts/storm.sh
#   MUX=0 scripts/storm.sh                            # a connection per session
# ARBORD_FLAGS go to every member; LOG, if set, is where the members' log
# (warnings and errors) is copied at the end. The sessions travel over MUX
# multiplexed connections to each member (--mux; 0: one each).
# A fresh cluster for each run; clients on 127.0.0.1:26281-26283, peers on
# 26381-26383, HTTP on 26481-26483; everything in a temporary directory,
# stopped and removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-"1000 10000"}
ROUNDS=${ROUNDS:-1}
VICTIM=${VICTIM:-follower}
HOLD=${HOLD:-10s}
LEASE=${LEASE:-0}
WARMUP=${WARMUP:-10s}
DURATION=${DURATION:-30s}
STORM=${STORM:-10s}
ARBORD_FLAGS=${ARBORD_FLAGS:-}
LOG=${LOG:-}
MUX=${MUX:-16}
case $VICTIM in
follower | leader) ;;
*)
  echo "VICTIM must be follower or leader, not $VICTIM" >&2
  exit 2
  ;;
esac
# A session is a connection: the bench holds SESSIONS of them, and the two
# members left hold them all after the kill.
ulimit -n "$(ulimit -Hn)"
work=$(mktemp -d)
# shellcheck source=scripts/procs.sh
. scripts/procs.sh
build_arbor "$work"
finish() {
  stop
  if [ -n "$LOG" ] && [ -f "$work/arbord.log" ]; then
    cp "$work/arbord.log" "$LOG"
  fi
  rm -rf "$work"
}
trap finish EXIT INT TERM
servers=127.0.0.1:26281,127.0.0.1:26282,127.0.0.1:26283
metrics=http://127.0.0.1:26481/metrics,http://127.0.0.1:26482/metrics,http://127.0.0.1:26483/metrics

# start starts a fresh cluster and waits until every member knows the same
# leader, which it sets in leader; member i's pid is pids[i-1].
start() {
  start_members "$work/bin/arbord" 26000 "$work" --max-conns-per-ip 0 --max-conns 20000 --log-level warn $ARBORD_FLAGS
}

# victim prints the id of the member to kill.
victim() {
  if [ "$VICTIM" = leader ]; then
    echo "$leader"
  else
    echo $((leader % 3 + 1))
  fi
}

for round in $(seq "$ROUNDS"); do
  for n in $SESSIONS; do
    start
    v=$(victim)
    echo "== round $round: $n sessions, kill -9 member $v ($VICTIM) $STORM into the measured phase ($(uptime | sed 's/.*load/load/'))"
    # Each session holds a lock of its own, bound to the session or to a
    # lease of LEASE, HOLD at a time. The bench's stderr goes to ours (fd
    # 3); the shell's note that a member was killed does not.
    {
      timeout 600 "$work/bin/arbor" --servers "$servers" --timeout 30s bench locks \
        --conns "$n" --locks "$n" --contenders 1 --hold "$HOLD" --lease "$LEASE" --mux "$MUX" \
        --warmup "$WARMUP" --duration "$DURATION" \
        --storm-after "$STORM" --storm-member "127.0.0.1:$((26280 + v))" --storm-pid "${pids[$((v - 1))]}" \
        --server-metrics "$metrics" 2>&3 ||
        echo "(arbor bench exited with status $?)"
    } 3>&2 2>/dev/null
    stop
  done
done
