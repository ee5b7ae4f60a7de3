#!/usr/bin/env bash
# Measures the ZooKeeper port against Arbor's own protocol, for
# docs/performance.md ("The ZooKeeper port against the native protocol"):
# one fresh 3-member cluster on loopback, each member with --zk-listen, and
# set, get and create (8 sessions, 64 workers) through
#   arbor   arbor bench, Arbor's client
#   zk      arbor bench --protocol zk, the same load through the ZooKeeper ports
#   gozk    scripts/compare, go-zookeeper's client (set and get only)
# one after the other against the same cluster. CPU=0.25 gives each member
# a quarter of a core of its own (a cgroup v1 or v2 CPU quota; needs root),
# so that the members and not the load generator are the bound.
#   scripts/zkport.sh
#   DURATION=10s CPU=0.25 scripts/zkport.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-8s}
WARMUP=${WARMUP:-2s}
CPU=${CPU:-}
work=$(mktemp -d)
go build -o "$work/arbord" ./cmd/arbord
go build -o "$work/arbor" ./cmd/arbor
(cd scripts/compare && go build -o "$work/compare" .)
pids=()
cgroups=()
cleanup() {
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  for g in "${cgroups[@]}"; do rmdir "$g" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# shellcheck source=scripts/cpulimit.sh
. scripts/cpulimit.sh

peers=1=127.0.0.1:23381,2=127.0.0.1:23382,3=127.0.0.1:23383
servers=127.0.0.1:23281,127.0.0.1:23282,127.0.0.1:23283
zk=127.0.0.1:23181,127.0.0.1:23182,127.0.0.1:23183
for i in 1 2 3; do
  "$work/arbord" --id "$i" --listen 127.0.0.1:2328$i --zk-listen 127.0.0.1:2318$i --http 127.0.0.1:2348$i \
    --peer-listen 127.0.0.1:2338$i --peers "$peers" --data "$work/data$i" \
    --max-conns-per-ip 0 --log-level warn >>"$work/arbord.log" 2>&1 &
  pids+=($!)
  if [ -n "$CPU" ]; then cpu_limit $! "arbor-zkport-$i"; fi
done
sleep 3
echo "# $(git rev-parse --short HEAD), CPU=${CPU:-unlimited}, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-6s %12s %10s %10s\n' workload client ops/s p50-ms p99-ms
for w in set get create; do
  for c in arbor zk gozk; do
    case $c in
    arbor) out=$("$work/arbor" --servers "$servers" bench "$w" --duration "$DURATION" --warmup "$WARMUP" -o json) ;;
    zk) out=$("$work/arbor" --servers "$servers" bench "$w" --duration "$DURATION" --warmup "$WARMUP" -o json \
      --protocol zk --zk-servers "$zk") ;;
    gozk)
      [ "$w" = create ] && continue
      line=$("$work/compare" -system zk -servers "$zk" -workload "$w" -duration "$DURATION" -warmup "$WARMUP")
      ops=$(awk '/^throughput/ {print $2}' <<<"$line")
      p50=$(awk '/^latency/ {gsub(",", ""); print $3}' <<<"$line")
      p99=$(awk '/^latency/ {gsub(",", ""); print $7}' <<<"$line")
      printf '%-8s %-6s %12s %10s %10s\n' "$w" "$c" "$ops" "$p50" "$p99"
      continue
      ;;
    esac
    jq -r --arg w "$w" --arg c "$c" '[$w, $c, (.opsPerSec | floor), .latencyMs.p50, .latencyMs.p99] | @tsv' <<<"$out" |
      awk -F'\t' '{printf "%-8s %-6s %12s %10s %10s\n", $1, $2, $3, $4, $5}'
  done
done
