#!/usr/bin/env bash
# What idle shards cost (issue 26, item 2; docs/performance.md, "Idle
# shards on arbord"): for each count, a fresh 3-member cluster on
# loopback, the meta group split that many times less one (at descending
# names, so that each split is the meta group's own), a settling pause,
# and then, over MEASURE seconds of no client traffic, the CPU each
# member used (% of one core, from /proc), its resident memory and its
# goroutines.
#   scripts/idle-shards.sh
#   COUNTS="1 100" MEASURE=20 scripts/idle-shards.sh
# Clients on 127.0.0.1:30281-30283, peers on 30381-30383, HTTP on
# 30481-30483; everything in a temporary directory, stopped and removed at
# the end. ARBORD_FLAGS go to every member.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTS=${COUNTS:-"1 100 1000"}
MEASURE=${MEASURE:-30}
SETTLE=${SETTLE:-15}
ARBORD_FLAGS=${ARBORD_FLAGS:-}
work=$(mktemp -d)
# shellcheck source=scripts/procs.sh
. scripts/procs.sh
build_arbor "$work"
trap 'stop; rm -rf "$work"' EXIT INT TERM
servers=127.0.0.1:30281,127.0.0.1:30282,127.0.0.1:30283
arbor() { timeout 60 "$work/bin/arbor" --servers "$servers" --timeout 30s "$@"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

for n in $COUNTS; do
  start_members "$work/bin/arbord" 30000 "$work" --log-level warn $ARBORD_FLAGS
  sleep 1 # the members' cards: a map changes once every member said it knows maps
  start=$(date +%s)
  for ((k = n - 1; k >= 1; k--)); do
    arbor shards split --at "$(printf 'k%05d' "$k")" >/dev/null
  done
  made=$(($(date +%s) - start))
  sleep "$SETTLE" # leaderships move to the spread, and idle groups go quiet
  before=()
  for p in "${pids[@]}"; do before+=("$(ticks "$p")"); done
  sleep "$MEASURE"
  line="== $n shards (splits took ${made}s):"
  total=0
  for i in 0 1 2; do
    used=$(($(ticks "${pids[$i]}") - before[i]))
    total=$((total + used))
    rss=$(awk '/VmRSS/ {print $2}' "/proc/${pids[$i]}/status")
    gor=$(curl -s "http://127.0.0.1:$((30481 + i))/metrics" | awk '/^go_goroutines / {print $2}')
    line+=$(printf ' member %d %.1f%% of a core, %d MB, %s goroutines;' $((i + 1)) \
      "$(echo "100 * $used / $hz / $MEASURE" | bc -l)" $((rss / 1024)) "$gor")
  done
  echo "$line all three $(printf '%.1f' "$(echo "100 * $total / $hz / $MEASURE" | bc -l)")% of a core"
  stop
done
