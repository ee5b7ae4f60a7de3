#!/usr/bin/env bash
# Fuzzes every fuzz target of the repository, one after another, each for
# FUZZTIME (default 1m), and stops at the first failure (go test saves the
# failing input under the package's testdata/fuzz/ and prints it).
#   scripts/fuzz.sh                 # every target, 1m each
#   FUZZTIME=10m scripts/fuzz.sh    # longer
#   scripts/fuzz.sh ./server        # the targets of some packages only
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-1m}
pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
  mapfile -t pkgs < <(go list ./...)
fi
for pkg in "${pkgs[@]}"; do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
  for target in $targets; do
    echo "--- $pkg $target ($fuzztime)"
    go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime"
  done
done
