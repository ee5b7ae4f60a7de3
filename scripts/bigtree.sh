#!/usr/bin/env bash
# Measures one arbord holding a large tree, for issue 8's 1,000,000-znode
# targets (docs/performance.md, "A million znodes"):
#   1. fill: PARENTS x CHILDREN persistent znodes of SIZE bytes, one create
#      per request, 64 in flight on 8 sessions (cmd/bigtree); then the RSS
#      (VmRSS, and VmHWM, the peak), the data directory's size and the
#      server's "snapshot saved" lines (serialize and write times);
#   2. restart: kill -9, start again, time from the start to the first
#      getData served (a new session and a read of the last child);
#   3. writes during snapshots: restart with --snapshot-every SNAP_EVERY and
#      run `arbor bench mixed` (half setData, half getData) for 10 s, so
#      that snapshots of the whole tree are taken while it runs; then the
#      RSS; then the same with no snapshot, the baseline;
#   4. with OLD_ARBORD set (an arbord built from another commit), step 3
#      with snapshots is run with it first, on the same data. It must read
#      the store this one writes: an arbord from before snapshot data
#      generations (raftnode/snapstore.go) does not; measure it alone with
#      ARBORD instead.
# ARBORD, if set, is the arbord to measure instead of one built from here.
# Loopback only, on ports PORT (client) and PORT+200 (http); everything is
# removed at the end. Bounded: fill gives up after 20 minutes.
#   scripts/bigtree.sh
#   PARENTS=10 CHILDREN=1000 scripts/bigtree.sh                # a quick try
#   OLD_ARBORD=/tmp/old/arbord scripts/bigtree.sh              # before/after
set -euo pipefail
cd "$(dirname "$0")/.."
PARENTS=${PARENTS:-10}
CHILDREN=${CHILDREN:-100000}
SIZE=${SIZE:-32}
SNAP_EVERY=${SNAP_EVERY:-20000}
PORT=${PORT:-23281}
OLD_ARBORD=${OLD_ARBORD:-}
addr=127.0.0.1:$PORT
work=$(mktemp -d)
mkdir "$work/bin"
if [ -n "${ARBORD:-}" ]; then
  cp "$ARBORD" "$work/bin/arbord"
else
  go build -o "$work/bin/arbord" ./cmd/arbord
fi
go build -o "$work/bin/arbor" ./cmd/arbor
go build -o "$work/bin/bigtree" ./cmd/bigtree
pid=""
cleanup() {
  local rc=$?
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if [ "$rc" != 0 ] && [ -f "$work/arbord.log" ]; then
    echo "failed; the server's last lines:"
    tail -n 20 "$work/arbord.log"
  fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

log() { echo "== $* ($(uptime | sed 's/.*load/load/'))"; }

# start BINARY FLAGS...: starts arbord on the data directory; sets pid, t0.
start() {
  local bin=$1
  shift
  t0=$(date +%s%N)
  "$bin" --data "$work/data" --listen "$addr" --http "127.0.0.1:$((PORT + 200))" "$@" >>"$work/arbord.log" 2>&1 &
  pid=$!
}

stop() { # kill -9: no clean shutdown, as after a crash
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
}

rss() {
  awk '/^VmRSS|^VmHWM/ { printf "%s %.0f MB   ", $1, $2 / 1024 }' "/proc/$pid/status"
  echo
}

snapshots() { # sums up the "snapshot saved" lines logged since line $1
  tail -n +"$1" "$work/arbord.log" | python3 "$work/snapshots.py"
}
cat >"$work/snapshots.py" <<'EOF'
import json, sys
snaps = [json.loads(l[l.index("{"):]) for l in sys.stdin if "snapshot saved" in l]
if not snaps:
    sys.exit(print("  no snapshot"))
print(f"  {len(snaps)} snapshots; the last, and the slowest:")
for s in [snaps[-1], max(snaps, key=lambda s: s["took"])]:
    split = f" (serialize {s['serialize']:.3f} s, write {s['write']:.3f} s)" if "serialize" in s else ""
    print(f"  index {s['index']}: {s['bytes'] / 1e6:.1f} MB in {s['took']:.3f} s{split}")
EOF

last=/big/p$((PARENTS - 1))/c$(printf %010d $((CHILDREN - 1)))

restart() { # restart BINARY FLAGS...
  local bin=$1
  shift
  start "$bin" "$@"
  "$work/bin/bigtree" wait --servers "$addr" --path "$last" --since "$t0"
  log "restarted $bin $*"
  rss
}

bench() { # bench mixed: with snapshots taken all along, or none ($1)
  local from
  from=$(($(wc -l <"$work/arbord.log") + 1))
  ARBOR_SERVERS=$addr "$work/bin/arbor" bench mixed --read-ratio 0.5 --duration 10s --warmup 2s -o json >"$work/mixed.json"
  log "bench mixed, $1"
  python3 - "$work/mixed.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"ops/s {r['opsPerSec']:.0f}, errors {r['errors']}")
for op, o in sorted(r['byOp'].items()):
    l = o['latencyMs']
    print(f"  {op}: {o['opsPerSec']:.0f}/s p50 {l['p50']:.2f} p90 {l['p90']:.2f} p99 {l['p99']:.1f} p99.9 {l['p99.9']:.1f} max {l['max']:.0f} ms")
EOF
  echo "snapshots during the run:"
  snapshots "$from"
  rss
}

# measure BINARY EVERY: restart with --snapshot-every EVERY and bench.
measure() {
  restart "$1" --snapshot-every "$2"
  bench "$3"
  stop
}

start "$work/bin/arbord"
"$work/bin/bigtree" wait --servers "$addr" --path / >/dev/null
log "filling $PARENTS x $CHILDREN znodes of $SIZE bytes"
"$work/bin/bigtree" fill --servers "$addr" --parents "$PARENTS" --children "$CHILDREN" --size "$SIZE"
log "filled"
rss
sleep 5
log "5 s later"
rss
echo "data directory: $(du -sm "$work/data" | cut -f1) MB"
echo "snapshots during the fill:"
snapshots 1
stop

restart "$work/bin/arbord"
stop
# The run without snapshots comes last: its log is long, and a build from
# before 2026-11-26's log cache fix takes minutes to replay such a log.
if [ -n "$OLD_ARBORD" ]; then
  measure "$OLD_ARBORD" "$SNAP_EVERY" "$OLD_ARBORD, snapshots every $SNAP_EVERY entries"
fi
measure "$work/bin/arbord" "$SNAP_EVERY" "snapshots every $SNAP_EVERY entries"
measure "$work/bin/arbord" 1000000000 "no snapshot"
