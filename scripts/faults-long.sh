#!/usr/bin/env bash
# Runs the fault suite's randomized rounds (package faults, TestFaults) for
# DURATION in all, half with 3 members and half with 5, one size after the
# other, each round a fresh cluster of real arbord processes under a
# schedule of faults drawn from its seed (kill -9, SIGSTOP, partitions,
# one-way cuts, message loss and delay, crashes of every member, full
# disks) while the clients' histories are recorded; porcupine checks every
# round's register history, and the other checkers (locks, sessions,
# watches, durability, replicas) run too. Then it prints a summary: rounds,
# operations, faults injected by kind, violations and the seeds of the
# failing rounds, whose data and logs are kept. It exits 1 if any round
# failed. DURATION is Go's syntax (90m, 1h, 1h30m); more arguments go to
# go test (-faults.seed=N to start from a seed, -faults.round=30s,
# -faults.race to build arbord with the race detector).
#   scripts/faults-long.sh 1h
#   scripts/faults-long.sh 10m -faults.seed=42
# The log of the run and what failing rounds keep go to OUT (default: a new
# directory under $TMPDIR); see docs/reliability.md, "Long runs".
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: $0 DURATION [go test flags...]   (DURATION as 1h, 90m, 1h30m)" >&2
  exit 2
fi
duration=$1
shift
if ! [[ $duration =~ ^(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?$ ]] || [ -z "$duration" ]; then
  echo "$0: DURATION must be like 1h, 90m, 1h30m or 600s, not $duration" >&2
  exit 2
fi
seconds=$(( ${BASH_REMATCH[2]:-0} * 3600 + ${BASH_REMATCH[4]:-0} * 60 + ${BASH_REMATCH[6]:-0} ))
if [ "$seconds" -lt 60 ]; then
  echo "$0: DURATION must be at least a minute (a round lasts one)" >&2
  exit 2
fi
per_size=$(( seconds / 2 ))s
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/arbor-faults-long.XXXXXX")}
mkdir -p "$out"
log="$out/go-test.log"
cmd=(go test -race -count=1 -timeout 0 ./faults -run '^TestFaults$' -v
  -faults.duration="$per_size" -faults.out="$out" "$@")
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "faults-long: $duration ($per_size per cluster size) at $commit, from $started"
echo "faults-long: ${cmd[*]}"
echo "faults-long: log in $log"
status=0
"${cmd[@]}" >"$log" 2>&1 || status=$?
ended=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# The summary: TestFaults logs, for each cluster size, one line of
# name=value fields; add them up.
grep -o 'summary: members=.*' "$log" | sed 's/^summary: //' | awk -v started="$started" -v ended="$ended" '
{
  size = ""
  for (i = 1; i <= NF; i++) {
    split($i, kv, "=")
    if (kv[1] == "members") { size = kv[2]; sizes[++nsizes] = size; continue }
    if (kv[1] == "failed") { if (kv[2] != "") failed = failed (failed == "" ? "" : ",") kv[2]; continue }
    if (!(kv[1] in seen)) { seen[kv[1]] = 1; keys[++nkeys] = kv[1] }
    v[size, kv[1]] = kv[2]
    total[kv[1]] += kv[2]
  }
}
END {
  printf "faults-long: %s to %s\n", started, ended
  for (s = 1; s <= nsizes; s++) {
    size = sizes[s]
    printf "  %s members: %d rounds, %d operations (%d of unknown outcome), %d faults, %d violations\n",
      size, v[size, "rounds"], v[size, "operations"], v[size, "unknown"], v[size, "faults"], v[size, "violations"]
  }
  printf "  in all: %d rounds, %d operations (%d of unknown outcome), %d faults, %d violations\n",
    total["rounds"], total["operations"], total["unknown"], total["faults"], total["violations"]
  kinds = ""
  for (k = 1; k <= nkeys; k++) {
    key = keys[k]
    if (key ~ /^(rounds|operations|unknown|faults|violations|disk-stops)$/) continue
    kinds = kinds sprintf(" %s=%d", key, total[key])
  }
  printf "  faults by kind:%s\n", kinds
  printf "  members stopped on a full disk: %d\n", total["disk-stops"]
  if (failed != "") printf "  failing seeds: %s\n", failed
}'
sizes_done=$(grep -c 'summary: members=' "$log" || true)
if [ "$sizes_done" -lt 2 ]; then
  echo "faults-long: only $sizes_done of 2 cluster sizes finished: see $log"
  status=1
fi
if [ "$status" -ne 0 ]; then
  echo "faults-long: FAIL (go test exit status $status); failures:"
  grep -E '^\s*(--- FAIL|panic:)|seed [0-9]+: ' "$log" | grep -vE 'seed [0-9]+: (time 0|[0-9]+ members,)|done:$' | head -40 | sed 's/^/    /' || true
  echo "faults-long: the data and logs of failing rounds are under $out"
  exit 1
fi
echo "faults-long: PASS"
