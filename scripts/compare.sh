#!/usr/bin/env bash
# Runs the same workloads against Arbor, Apache ZooKeeper and etcd, each as
# a 3-member cluster on loopback on this machine, one system at a time, for
# docs/performance.md ("Arbor, ZooKeeper and etcd on this machine"):
#   set   8 sessions, 64 workers, 256-byte values over 1,000 keys
#   set1  1 session, 1 worker (a single client's write latency)
#   get   8 sessions, 64 workers (ZooKeeper and Arbor: a member's local read;
#         etcd: its default, linearizable)
#   lock  16 contenders, a session each: ZooKeeper with go-zookeeper's lock
#         recipe, etcd with its concurrency.Mutex, Arbor with recipes.Mutex
#   locks 64 locks, one holder each, a session each: the same locks, many
#         of them, uncontended (arbor bench locks)
#   locks16  8 locks, 16 holders each, a session each: many contended locks
#   renew    2,000 leases of 10 s, a session (etcd: a client) each, each
#            with a node (key) of its own, renewed explicitly at 10,000/s
#            in all: Arbor's holders with `arbor bench locks --renew-rate`
#            (Mutex.Renew), etcd's leases with KeepAliveOnce; not
#            ZooKeeper, which has no lease to renew
#   renew64  the same with 10,000 leases over 64 sessions, at 50,000/s
#   hold     HOLDERS sessions (10,000), each holding a lock of its own:
#            ZooKeeper a connection each, etcd a lease each over 16
#            clients, Arbor over 16 multiplexed connections to each
#            member (arbor bench locks --mux 16); how long until all
#            hold, then each member's RSS and CPU over 10 s of holding
#            (not in the default WORKLOADS: it takes minutes)
# Arbor is measured with `arbor bench`, the others with scripts/compare
# (the same method: each worker sends its next request when the last is
# answered; what completed in DURATION after WARMUP).
# Needs Debian's zookeeper and etcd-server packages (ZooKeeper 3.8, etcd
# 3.4): `apt-get install zookeeper etcd-server`. Loopback only; everything
# is stopped and removed at the end.
#   scripts/compare.sh                       # all three, every workload
#   SYSTEMS="arbor zk" ROUNDS=2 scripts/compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SYSTEMS=${SYSTEMS:-"arbor zk etcd"}
WORKLOADS=${WORKLOADS:-"set set1 get lock locks locks16 renew renew64"}
ROUNDS=${ROUNDS:-1}
DURATION=${DURATION:-8s}
WARMUP=${WARMUP:-2s}
HOLDERS=${HOLDERS:-10000}
# ZooKeeper's sessions in the hold workload are a connection each.
ulimit -n "$(ulimit -Hn)"
work=$(mktemp -d)
# shellcheck source=scripts/procs.sh
. scripts/procs.sh
build_arbor "$work"
(cd scripts/compare && go build -o "$work/bin/compare" .)
trap 'stop; rm -rf "$work"' EXIT INT TERM

# start_SYSTEM starts a fresh 3-member cluster and sets servers.
start_arbor() {
  start_members "$work/bin/arbord" 22000 "$work" --max-conns-per-ip 0 --log-level warn
  servers=127.0.0.1:22281,127.0.0.1:22282,127.0.0.1:22283
}

start_zk() {
  for i in 1 2 3; do
    mkdir -p "$work/zk$i/data"
    echo $i >"$work/zk$i/data/myid"
    cat >"$work/zk$i/zoo.cfg" <<CFG
tickTime=200
initLimit=50
syncLimit=25
dataDir=$work/zk$i/data
clientPort=$((22180 + i))
clientPortAddress=127.0.0.1
server.1=127.0.0.1:22887:23887
server.2=127.0.0.1:22888:23888
server.3=127.0.0.1:22889:23889
admin.enableServer=false
4lw.commands.whitelist=srvr
maxClientCnxns=0
CFG
    cp /etc/zookeeper/conf/log4j.properties "$work/zk$i/"
    java -Xmx1g -cp "$work/zk$i:/usr/share/java/zookeeper.jar" -Dzookeeper.root.logger=WARN,CONSOLE \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$work/zk$i/zoo.cfg" >>"$work/zk.log" 2>&1 &
    pids+=($!)
  done
  servers=127.0.0.1:22181,127.0.0.1:22182,127.0.0.1:22183
  for _ in $(seq 100); do
    for i in 1 2 3; do
      (exec 3<>/dev/tcp/127.0.0.1/$((22180 + i)) && echo srvr >&3 && timeout 1 cat <&3) 2>/dev/null | grep -q "Mode: leader" && return
    done
    sleep 0.2
  done
  echo "zookeeper: no leader" >&2
  exit 1
}

start_etcd() {
  local cluster=n1=http://127.0.0.1:22391,n2=http://127.0.0.1:22392,n3=http://127.0.0.1:22393
  for i in 1 2 3; do
    etcd --name n$i --data-dir "$work/etcd$i" --listen-client-urls http://127.0.0.1:$((22370 + i)) \
      --advertise-client-urls http://127.0.0.1:$((22370 + i)) --listen-peer-urls http://127.0.0.1:$((22390 + i)) \
      --initial-advertise-peer-urls http://127.0.0.1:$((22390 + i)) --initial-cluster $cluster \
      --initial-cluster-state new --log-level warn >>"$work/etcd.log" 2>&1 &
    pids+=($!)
  done
  servers=127.0.0.1:22371,127.0.0.1:22372,127.0.0.1:22373
  for _ in $(seq 100); do
    curl -sf http://127.0.0.1:22371/health | grep -q '"health":"true"' && return
    sleep 0.1
  done
  echo "etcd: not healthy" >&2
  exit 1
}

# members_use prints each member's RSS, and its CPU over the next 10 s.
members_use() {
  local tick t0=() i cpu rss=() cpus=()
  tick=$(getconf CLK_TCK)
  for i in "${!pids[@]}"; do t0[i]=$(awk '{print $14 + $15}' "/proc/${pids[i]}/stat"); done
  sleep 10
  for i in "${!pids[@]}"; do
    cpu=$(awk '{print $14 + $15}' "/proc/${pids[i]}/stat")
    cpus+=("$(((cpu - t0[i]) * 100 / (10 * tick)))%")
    rss+=("$(awk '/^VmRSS/ {print int($2 / 1024)}' "/proc/${pids[i]}/status") MB")
  done
  echo "members     RSS ${rss[*]}; CPU ${cpus[*]} of a core, over 10 s"
}

# hold SYSTEM takes HOLDERS locks, a session each (see the workloads
# above), says how long until all held, and what the members use then.
hold() {
  local client start n
  start=$(date +%s.%N)
  if [ "$1" = arbor ]; then
    ARBOR_SERVERS=$servers "$work/bin/arbor" bench locks --conns "$HOLDERS" --locks "$HOLDERS" --contenders 1 \
      --hold 1m --mux 16 --warmup 5m --duration 10s >/dev/null 2>&1 &
    client=$!
    for _ in $(seq 600); do # until every hold is applied
      n=$(curl -s http://127.0.0.1:22481/metrics | sed -n 's/^arbor_lock_acquire_seconds_count \([0-9]*\).*/\1/p')
      [ "${n:-0}" -ge "$HOLDERS" ] && break
      sleep 0.5
    done
    echo "arbor hold: $HOLDERS locks, a session each (16 multiplexed connections to each member), taken in $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s"
  else
    "$work/bin/compare" -system "$1" -servers "$servers" -workload hold -locks "$HOLDERS" -conns 16 \
      -warmup 5m -duration 10s >"$work/hold.out" 2>&1 &
    client=$!
    for _ in $(seq 600); do
      grep -q "taken in" "$work/hold.out" && break
      sleep 0.5
    done
    grep -E "taken in|compare:" "$work/hold.out" || true
  fi
  members_use
  kill "$client" 2>/dev/null || true
  wait "$client" 2>/dev/null || true
}

# bench SYSTEM WORKLOAD prints the throughput and latency lines.
bench() {
  if [ "$2" = hold ]; then
    hold "$1"
    return
  fi
  local args
  case $2 in
  set) args=(--conns 8 --workers 64) ;;
  set1) args=(--conns 1 --workers 1) ;;
  get) args=(--conns 8 --workers 64) ;;
  lock) args=(--contenders 16) ;;
  locks) args=(--locks 64 --contenders 1) ;;
  locks16) args=(--locks 8 --contenders 16) ;;
  renew) args=(--locks 2000 --conns 2000 --rate 10000) ;;
  renew64) args=(--locks 10000 --conns 64 --rate 50000) ;;
  esac
  local w=$2 warmup=$WARMUP
  case $2 in
  set1) w=set ;;
  locks16) w=locks ;;
  renew64) w=renew ;;
  esac
  if [ "$w" = renew ]; then
    warmup=10s # every holder takes its lock first
    if [ "$1" = zk ]; then
      echo "(ZooKeeper has no lease to renew)"
      return
    fi
  fi
  if [ "$1" = arbor ] && [ "$w" = renew ]; then
    ARBOR_SERVERS=$servers timeout 300 "$work/bin/arbor" bench locks "${args[@]:0:4}" --renew-rate "${args[5]}" --mux 0 \
      --contenders 1 --lease 10s --hold 1m --duration "$DURATION" --warmup "$warmup" 2>/dev/null |
      grep -E "^(errors|by op +renew|            renew)" | sed 's/ (min.*//'
  elif [ "$1" = arbor ]; then
    local own=()
    if [ "$w" = locks ]; then # a session and a connection for each holder, as the others have
      own=(--conns $((args[1] * args[3])) --mux 0)
    fi
    ARBOR_SERVERS=$servers timeout 120 "$work/bin/arbor" bench "$w" "${args[@]}" "${own[@]}" --duration "$DURATION" --warmup "$warmup" 2>/dev/null |
      grep -E "^(throughput|latency|errors)" | sed 's/ (min.*//'
  else
    local flags=()
    for a in "${args[@]}"; do flags+=("${a/--/-}"); done
    timeout 300 "$work/bin/compare" -system "$1" -servers "$servers" -workload "$w" "${flags[@]}" -duration "$DURATION" -warmup "$warmup" |
      grep -E "^(throughput|latency|errors)"
  fi
}

for round in $(seq "$ROUNDS"); do
  for s in $SYSTEMS; do
    for w in $WORKLOADS; do
      "start_$s" # a fresh cluster per workload: no run inherits another's log or garbage
      echo "== round $round: $s $w ($(uptime | sed 's/.*load/load/'))"
      bench "$s" "$w"
      stop
      rm -rf "$work"/data[123] "$work"/zk[123] "$work"/etcd[123]
    done
  done
done
