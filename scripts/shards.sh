#!/usr/bin/env bash
# The same lock workload over 1, 2, 4 and 8 shards on 3 members (issue 26,
# item 5; docs/performance.md, "Shards on this machine"): for each count, a
# fresh 3-member cluster on loopback, the locks' parent partitioned and its
# hashes split into SHARDS equal ranges, then each PART of:
#   cycles    uncontended acquire/release cycles: 1,000 locks, one holder
#             each, over 64 sessions, as fast as they go
#   handoffs  64 locks with 4 holders each over 64 sessions
# as an `arbor bench locks` of its own, one after another.
#   scripts/shards.sh
#   SHARDS="1 8" PARTS=cycles DURATION=20s scripts/shards.sh
# Clients on 127.0.0.1:29281-29283, peers on 29381-29383, HTTP on
# 29481-29483; everything in a temporary directory, stopped and removed at
# the end. ARBORD_FLAGS go to every member.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARDS=${SHARDS:-"1 2 4 8"}
PARTS=${PARTS:-"cycles handoffs"}
WARMUP=${WARMUP:-3s}
DURATION=${DURATION:-10s}
ARBORD_FLAGS=${ARBORD_FLAGS:-}
work=$(mktemp -d)
# shellcheck source=scripts/procs.sh
. scripts/procs.sh
build_arbor "$work"
trap 'stop; rm -rf "$work"' EXIT INT TERM
servers=127.0.0.1:29281,127.0.0.1:29282,127.0.0.1:29283
arbor() { timeout 60 "$work/bin/arbor" --servers "$servers" --timeout 30s "$@"; }

# The bench's run node on a fresh cluster is /bench/locks-0000000000, and
# its locks are the children of its locks node: that parent is the one
# partitioned, and its hashes split at k/SHARDS of 2^64 (the meta group
# keeps the first range).
parent=/bench/locks-0000000000/locks
for n in $SHARDS; do
  for p in $PARTS; do
    case $p in
    cycles) args=(--conns 64 --locks 1000 --contenders 1) ;;
    handoffs) args=(--conns 64 --locks 64 --contenders 4) ;;
    *)
      echo "unknown part $p" >&2
      exit 2
      ;;
    esac
    # A fresh cluster for each part: the run node's name is known only
    # on a fresh one.
    start_members "$work/bin/arbord" 29000 "$work" --log-level warn $ARBORD_FLAGS
    sleep 1 # the members' cards: a map changes once every member said it knows maps
    arbor create /bench >/dev/null
    arbor shards partition "$parent" >/dev/null
    step=$(((1 << 62) / n * 4)) # 2^64 / n, which bash's integers wrap, as printf's hex shows
    for ((k = n - 1; k >= 1; k--)); do
      arbor shards split --parent "$parent" --at "$(printf '%016x' $((k * step)))" >/dev/null
    done
    sleep 2 # every shard's leadership settles on the member the spread names
    echo "== $n shards, $p ($(uptime | sed 's/.*load/load/'))"
    timeout 600 "$work/bin/arbor" --servers "$servers" --timeout 30s bench locks --prefix /bench --mux 16 \
      --warmup "$WARMUP" --duration "$DURATION" "${args[@]}" || echo "(arbor bench exited with status $?)"
    stop
  done
done
