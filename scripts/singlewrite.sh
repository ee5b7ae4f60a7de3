#!/usr/bin/env bash
# A single client's write against the durable quorum floor (issue 24,
# item 6; docs/performance.md, "A single write against the floor"): in
# each of ROUNDS rounds, cmd/quorumfloor's p50 on the data's file system,
# then for each arbord in turn (this tree's, and OLD_ARBORD's if set) a
# fresh 3-member cluster with `arbor bench set --conns 1 --workers 1`
# against its leader, DURATION after 2 s of warmup.
#   scripts/singlewrite.sh
#   ROUNDS=3 OLD_ARBORD=/tmp/old/arbord scripts/singlewrite.sh
# Loopback only: clients on 127.0.0.1:27281-27283, peers on 27381-27383,
# http on 27481-27483; the data in a temporary directory under DIR
# (/var/tmp: a disk, not memory), removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-8s}
DIR=${DIR:-/var/tmp}
OLD_ARBORD=${OLD_ARBORD:-}
work=$(mktemp -d "$DIR/singlewrite.XXXXXX")
# shellcheck source=scripts/procs.sh
. scripts/procs.sh
cleanup() {
  stop
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
go build -o "$work/arbord" ./cmd/arbord
go build -o "$work/arbor" ./cmd/arbor
go build -o "$work/quorumfloor" ./cmd/quorumfloor
builds=("$work/arbord")
if [ -n "$OLD_ARBORD" ]; then builds=("$OLD_ARBORD" "${builds[@]}"); fi
peers=1=127.0.0.1:27381,2=127.0.0.1:27382,3=127.0.0.1:27383

# leader prints the client address of the member the others follow.
leader() {
  local id
  for _ in $(seq 100); do
    for m in 1 2 3; do
      id=$(curl -sf "http://127.0.0.1:2748$m/status" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("leader", 0))' 2>/dev/null || true)
      if [ -n "$id" ] && [ "$id" != 0 ]; then
        echo "127.0.0.1:2728$id"
        return
      fi
    done
    sleep 0.1
  done
  echo "no leader within 10 s" >&2
  return 1
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round ($(uptime | sed 's/.*load/load/'))"
  floor=$("$work/quorumfloor" -dir "$work" -n 3000 2>&1 | tail -1)
  echo "quorumfloor: $floor"
  for bin in "${builds[@]}"; do
    rm -rf "$work/data"
    for id in 1 2 3; do
      mkdir -p "$work/data/$id"
      "$bin" --id "$id" --listen "127.0.0.1:2728$id" --http "127.0.0.1:2748$id" \
        --peer-listen "127.0.0.1:2738$id" --peers "$peers" --data "$work/data/$id" >>"$work/arbord.log" 2>&1 &
      pids+=($!)
    done
    addr=$(leader)
    result=$("$work/arbor" --servers "$addr" bench set --conns 1 --workers 1 --duration "$DURATION" --warmup 2s | grep latency)
    echo "$bin on the leader: $result"
    stop
  done
done
