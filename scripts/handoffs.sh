#!/usr/bin/env bash
# Handoffs of one lock between CONTENDERS contenders (`arbor bench lock`)
# on a fresh 3-member cluster, this tree's build and OLD's in turn, ROUNDS
# rounds (issue 24, item 2; docs/performance.md, "The turn in the
# notification"). OLD is a directory with bin/arbord and bin/arbor (what
# build_arbor in scripts/procs.sh makes): both sides of a handoff, the
# server that tells the turn and the recipe that takes it, are that
# build's.
#   scripts/handoffs.sh
#   git worktree add /tmp/old 3b69d94 && (cd /tmp/old && . scripts/procs.sh && build_arbor /tmp/old)
#   ROUNDS=3 OLD=/tmp/old scripts/handoffs.sh
# Loopback only: clients on 127.0.0.1:26281-26283, peers on 26381-26383,
# HTTP on 26481-26483; everything in a temporary directory, stopped and
# removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
CONTENDERS=${CONTENDERS:-16}
WARMUP=${WARMUP:-2s}
DURATION=${DURATION:-8s}
OLD=${OLD:-}
work=$(mktemp -d)
# shellcheck source=scripts/procs.sh
. scripts/procs.sh
build_arbor "$work"
trap 'stop; rm -rf "$work"' EXIT INT TERM
builds=()
if [ -n "$OLD" ]; then
  builds+=("$OLD")
fi
builds+=("$work")
for round in $(seq "$ROUNDS"); do
  for b in "${builds[@]}"; do
    start_members "$b/bin/arbord" 26000 "$work" --log-level warn
    name=$b
    [ "$b" = "$work" ] && name="this tree"
    echo "== round $round: $name (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    "$b/bin/arbor" --servers "127.0.0.1:$((26280 + leader))" bench lock --contenders "$CONTENDERS" \
      --warmup "$WARMUP" --duration "$DURATION" | grep -E '^(throughput|by op| +release)'
    stop
  done
done
