#!/usr/bin/env bash
# Measures a local 3-member cluster holding a large tree, as
# scripts/bigtree.sh does one node: whether snapshots of the whole tree
# cost the cluster its leader. It fills PARENTS x CHILDREN znodes (every
# member snapshots every 10,000 entries, the default), prints each member's
# RSS and snapshot times, then runs `arbor bench set` for 20 s on members
# restarted with --snapshot-every SNAP_EVERY, and counts the elections
# ("became leader" in the members' logs) during the fill and the bench.
# Loopback only: clients on PORT..PORT+2, peers on PORT+100.., http on
# PORT+200..; everything is removed at the end.
#   scripts/bigtree-cluster.sh
#   ARBORD=/tmp/old/arbord scripts/bigtree-cluster.sh   # another build
set -euo pipefail
cd "$(dirname "$0")/.."
PARENTS=${PARENTS:-10}
CHILDREN=${CHILDREN:-100000}
SIZE=${SIZE:-32}
SNAP_EVERY=${SNAP_EVERY:-20000}
PORT=${PORT:-23281}
work=$(mktemp -d)
mkdir "$work/bin"
if [ -n "${ARBORD:-}" ]; then
  cp "$ARBORD" "$work/bin/arbord"
else
  go build -o "$work/bin/arbord" ./cmd/arbord
fi
go build -o "$work/bin/arbor" ./cmd/arbor
go build -o "$work/bin/bigtree" ./cmd/bigtree
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

log() { echo "== $* ($(uptime | sed 's/.*load/load/'))"; }
servers=127.0.0.1:$PORT,127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2))
peers=1=127.0.0.1:$((PORT + 100)),2=127.0.0.1:$((PORT + 101)),3=127.0.0.1:$((PORT + 102))

start() { # start FLAGS...: the three members
  pids=()
  for id in 1 2 3; do
    mkdir -p "$work/node$id"
    "$work/bin/arbord" --id "$id" --listen "127.0.0.1:$((PORT + id - 1))" --http "127.0.0.1:$((PORT + 199 + id))" \
      --peer-listen "127.0.0.1:$((PORT + 99 + id))" --peers "$peers" --data "$work/node$id" "$@" \
      >>"$work/node$id.log" 2>&1 &
    pids+=($!)
  done
  "$work/bin/bigtree" wait --servers "$servers" --path / >/dev/null
}

stop() {
  for p in "${pids[@]}"; do kill "$p"; done
  wait 2>/dev/null || true
  pids=()
}

elections() { cat "$work"/node*.log | grep -c 'became leader' || true; }

rss() { # and the CPU time and garbage collections so far
  for i in 0 1 2; do
    echo -n "member $((i + 1)): "
    awk '/^VmRSS|^VmHWM/ { printf "%s %.0f MB   ", $1, $2 / 1024 }' "/proc/${pids[$i]}/status"
    curl -s "127.0.0.1:$((PORT + 200 + i))/metrics" |
      awk '/^process_cpu_seconds_total/ { printf "cpu %.0f s   ", $2 } /^go_gc_duration_seconds_count/ { printf "GCs %d   ", $2 }'
    echo
  done
}

snapshots() { # each member's snapshots since its log was emptied
  for id in 1 2 3; do
    python3 "$work/snapshots.py" "$id" <"$work/node$id.log"
  done
}
cat >"$work/snapshots.py" <<'EOF'
import json, sys
snaps = [json.loads(l[l.index("{"):]) for l in sys.stdin if "snapshot saved" in l]
if snaps:
    s = max(snaps, key=lambda s: s["took"])
    print("  member %s: %d snapshots, the slowest %.1f MB in %.3f s" % (sys.argv[1], len(snaps), s["bytes"] / 1e6, s["took"]))
EOF

start
log "filling $PARENTS x $CHILDREN znodes of $SIZE bytes on 3 members"
"$work/bin/bigtree" fill --servers "$servers" --parents "$PARENTS" --children "$CHILDREN" --size "$SIZE"
log "filled; elections so far (the first included): $(elections)"
rss
snapshots
stop
for id in 1 2 3; do : >"$work/node$id.log"; done
start --snapshot-every "$SNAP_EVERY"
log "restarted with --snapshot-every $SNAP_EVERY; elections at the start: $(elections)"
ARBOR_SERVERS=$servers "$work/bin/arbor" bench set --duration 20s --warmup 2s -o json >"$work/set.json" || true
log "bench set"
python3 - "$work/set.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
l = r['latencyMs']
print(f"set: {r['opsPerSec']:.0f}/s p50 {l['p50']:.2f} p90 {l['p90']:.2f} p99 {l['p99']:.1f} p99.9 {l['p99.9']:.1f} max {l['max']:.0f} ms; errors {r['errors']} {r.get('errorKinds') or ''}")
EOF
echo "elections since the restart (the first included): $(elections)"
snapshots
stop
