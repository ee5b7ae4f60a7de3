#!/usr/bin/env bash
# Measures a member's resident memory under issue 28's load: one client
# sets a 1 MiB value on one node in a loop for DURATION (`arbor bench set`),
# optionally with WATCHERS clients that watch the tree and never read their
# events (`arbor watch -R /` processes stopped with SIGSTOP), while a probe
# client reads a node once a second to show the member still answers.
# Prints each member's VmRSS once a second, then its peak (VmHWM), its
# arbor_memory_* metrics and its warnings.
#   scripts/memload.sh                      # one member, default flags
#   MEMBERS=3 scripts/memload.sh            # each member of three
#   WATCHERS=40 MEMBERS=3 scripts/memload.sh
#   ARBORD=/tmp/old/arbord scripts/memload.sh   # another build
# Loopback only (clients 127.0.0.1:23281.., peers 23381.., http 23481..);
# bounded by DURATION; everything is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
MEMBERS=${MEMBERS:-1}
WATCHERS=${WATCHERS:-0}
DURATION=${DURATION:-20s}
SIZE=${SIZE:-1048000}
work=$(mktemp -d)
pids=()
cleanup() {
  kill -CONT "${pids[@]}" 2>/dev/null || true
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ARBORD=${ARBORD:-}
if [ -z "$ARBORD" ]; then
  ARBORD=$work/arbord
  go build -o "$ARBORD" ./cmd/arbord
fi
go build -o "$work/arbor" ./cmd/arbor
arbor=$work/arbor

peers="" servers=""
for id in $(seq 1 "$MEMBERS"); do
  peers+="${peers:+,}$id=127.0.0.1:$((23380 + id))"
  servers+="${servers:+,}127.0.0.1:$((23280 + id))"
done
[ "$MEMBERS" = 1 ] && peers=""
member_pids=()
for id in $(seq 1 "$MEMBERS"); do
  "$ARBORD" --id "$id" --listen "127.0.0.1:$((23280 + id))" --http "127.0.0.1:$((23480 + id))" \
    ${peers:+--peers "$peers" --peer-listen "127.0.0.1:$((23380 + id))"} \
    --data "$work/n$id" >"$work/n$id.log" 2>&1 &
  member_pids+=($!)
  pids+=($!)
done
export ARBOR_SERVERS=$servers
for _ in $(seq 1 50); do "$arbor" ls / >/dev/null 2>&1 && break; sleep 0.2; done
"$arbor" create /probe hello >/dev/null

for _ in $(seq 1 "$WATCHERS"); do
  "$arbor" watch -R / >/dev/null 2>&1 &
  pids+=($!)
  watcher=$!
  sleep 0.05
  kill -STOP "$watcher"
done

rss() { awk '/VmRSS/ {printf "%d", $2/1024}' "/proc/$1/status" 2>/dev/null || echo gone; }
(
  while sleep 1; do
    line="rss MiB:"
    for p in "${member_pids[@]}"; do line+=" $(rss "$p")"; done
    start=$(date +%s%N)
    if "$arbor" get /probe >/dev/null 2>&1; then
      line+="  probe read $(( ($(date +%s%N) - start) / 1000000 )) ms"
    else
      line+="  probe read FAILED"
    fi
    echo "$line"
  done
) &
sampler=$!
"$arbor" bench set --size "$SIZE" --keys 1 --conns 1 --workers 1 --warmup 0 --duration "$DURATION" |
  grep -E 'throughput|latency|errors'
kill "$sampler" 2>/dev/null || true
for id in $(seq 1 "$MEMBERS"); do
  p=${member_pids[$((id - 1))]}
  echo "member $id: peak $(awk '/VmHWM/ {printf "%d", $2/1024}' "/proc/$p/status") MiB, data $(du -sm "$work/n$id" | cut -f1) MiB"
  curl -s "http://127.0.0.1:$((23480 + id))/metrics" | grep -E '^arbor_memory' | sed 's/^/  /' || true
  # zap's console lines: time, level (lowercase), logger, message
  grep -E $'\t(warn|error)\t' "$work/n$id.log" | cut -f2- | sed -E 's/\t\{.*//' | cut -c1-160 | sort | uniq -c | sort -rn | head -5 || true
done
