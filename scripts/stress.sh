#!/usr/bin/env bash
# Runs the tests of the packages whose tests wait on time COUNT times in a
# row (default 20) under the race detector, package after package, while a
# CPU hog keeps every core busy: a test that passes only on an idle machine
# fails here. Each package is bounded by TIMEOUT (go test's -timeout,
# default 60m). Prints PASS or FAIL for each package, with the failing
# tests and the log kept for them, and exits 1 if any failed.
#   scripts/stress.sh                        # client, server, integration, faults
#   scripts/stress.sh ./client ./server      # some packages only
#   COUNT=5 TIMEOUT=20m HOGS=1 scripts/stress.sh ./server
set -euo pipefail
cd "$(dirname "$0")/.."
count=${COUNT:-20}
timeout=${TIMEOUT:-60m}
hogs=${HOGS:-$(nproc)}
pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
  pkgs=(./client ./server ./integration ./faults)
fi
logdir=$(mktemp -d "${TMPDIR:-/tmp}/arbor-stress.XXXXXX")

# The hog: one busy loop per core, stopped (by their ids) however the
# script ends.
hog_pids=()
stop_hogs() {
  for pid in "${hog_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$hogs"); do
  (while :; do :; done) &
  hog_pids+=($!)
done
echo "stress: go test -race -count=$count, $hogs busy loops, logs in $logdir"

failed=0
for pkg in "${pkgs[@]}"; do
  log="$logdir/$(printf '%s' "$pkg" | tr -c 'a-zA-Z0-9' _).log"
  start=$SECONDS
  if go test -race -count="$count" -timeout "$timeout" "$pkg" >"$log" 2>&1; then
    echo "PASS $pkg ($((SECONDS - start))s)"
  else
    echo "FAIL $pkg ($((SECONDS - start))s): $log"
    grep -E '^(--- FAIL|panic:)|_test\.go:[0-9]+:' "$log" | head -20 | sed 's/^/    /' || true
    failed=1
  fi
done
exit "$failed"
