#!/usr/bin/env bash
# Starts a 3-member Arbor cluster on this machine, in the foreground, until
# Ctrl-C. Clients on 127.0.0.1:2281-2283, peers on 2381-2383, metrics and
# health on 2481-2483; data in ./arbor-cluster/nodeN (kept between runs).
#   scripts/local-cluster.sh            # build and start
#   ARBOR_SERVERS=127.0.0.1:2281,127.0.0.1:2282,127.0.0.1:2283 go run ./cmd/arbor ls /
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/arbord
go build -o "$bin" ./cmd/arbord
peers=1=127.0.0.1:2381,2=127.0.0.1:2382,3=127.0.0.1:2383
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' INT TERM EXIT
for id in 1 2 3; do
  mkdir -p "arbor-cluster/node$id"
  "$bin" --id "$id" --listen "127.0.0.1:228$id" --http "127.0.0.1:248$id" \
    --peer-listen "127.0.0.1:238$id" --peers "$peers" \
    --data "arbor-cluster/node$id" "$@" &
  pids+=($!)
done
echo "arbor cluster: clients on 127.0.0.1:2281,127.0.0.1:2282,127.0.0.1:2283 (Ctrl-C stops it)" >&2
wait
