#!/usr/bin/env bash
# Measures what observers give, for docs/performance.md ("Observers"): a
# cluster of 3 voters beside one of 3 voters and 2 observers, on loopback on
# this machine, one cluster at a time, the two taking turns ROUNDS times so
# that both see the same noise. Each round runs, against every member of
# the cluster (60 sessions, each on a member picked at random):
#   get   64 workers, 256-byte values over 1,000 keys (a member's local read)
#   set   64 workers, the same keys (every write through the leader)
# One machine's cores are shared by every member, so more members only
# share them more thinly. CPU=0.25 gives each member a quarter of a core of
# its own (a cgroup v1 or v2 CPU quota; needs root), as if each ran on a
# small machine of its own, and leaves the rest to the load generator.
#   scripts/observers.sh
#   ROUNDS=3 DURATION=10s CPU=0.25 scripts/observers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-8s}
WARMUP=${WARMUP:-2s}
CPU=${CPU:-}
work=$(mktemp -d)
go build -o "$work/arbord" ./cmd/arbord
go build -o "$work/arbor" ./cmd/arbor
# shellcheck source=scripts/procs.sh
. scripts/procs.sh
cgroups=()
cleanup() {
  stop
  for g in "${cgroups[@]}"; do rmdir "$g" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# shellcheck source=scripts/cpulimit.sh
. scripts/cpulimit.sh

# start N OBSERVERS starts a fresh cluster of N members, of which the ids in
# OBSERVERS (id,... or empty) observe, and sets servers to all of them.
start() {
  local n=$1 observers=$2 peers="" i
  for i in $(seq "$n"); do peers+="${peers:+,}$i=127.0.0.1:$((22380 + i))"; done
  servers=""
  rm -rf "$work"/data*
  for i in $(seq "$n"); do
    "$work/arbord" --id "$i" --listen 127.0.0.1:$((22280 + i)) --http 127.0.0.1:$((22480 + i)) \
      --peer-listen 127.0.0.1:$((22380 + i)) --peers "$peers" --observers "$observers" \
      --data "$work/data$i" --max-conns-per-ip 0 --log-level warn >>"$work/arbord.log" 2>&1 &
    pids+=($!)
    if [ -n "$CPU" ]; then cpu_limit $! "arbor-observers-$i"; fi
    servers+="${servers:+,}127.0.0.1:$((22280 + i))"
  done
  # Ready when every member answers, the observers as learners of a leader.
  for _ in $(seq 200); do
    if [ "$(ARBOR_SERVERS=$servers "$work/arbor" member list 2>/dev/null | grep -c .)" -gt "$n" ] &&
      ARBOR_SERVERS=$servers "$work/arbor" status 2>/dev/null | grep -q "^leader = [1-9]"; then
      return
    fi
    sleep 0.1
  done
  echo "arbor: the cluster did not form" >&2
  exit 1
}

bench() {
  ARBOR_SERVERS=$servers timeout 120 "$work/arbor" bench "$1" --conns 60 --workers 64 \
    --duration "$DURATION" --warmup "$WARMUP" 2>/dev/null | grep -E "^(throughput|latency|errors)" | sed 's/ (min.*//'
}

for round in $(seq "$ROUNDS"); do
  for setup in "3 voters:3:" "3 voters + 2 observers:5:4,5"; do
    IFS=: read -r name n observers <<<"$setup"
    start "$n" "$observers"
    for w in get set; do
      echo "== round $round, $name, $w"
      bench "$w"
    done
    stop
  done
done
