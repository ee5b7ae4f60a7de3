# Sourced by the measuring scripts that start processes (compare.sh,
# handoffs.sh, lockload.sh, observers.sh, singlewrite.sh, storm.sh): pids holds the
# processes started, and stop ends them (SIGTERM), waits for them and
# empties pids; build_arbor builds the binaries, start_members starts a
# 3-member cluster.
pids=()

# build_arbor DIR builds arbord and arbor into DIR/bin.
build_arbor() {
  mkdir -p "$1/bin"
  go build -o "$1/bin/arbord" ./cmd/arbord
  go build -o "$1/bin/arbor" ./cmd/arbor
}

stop() {
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  pids=()
}

# start_members BIN BASE DIR [FLAG...] starts a fresh 3-member cluster of
# BIN on loopback, each member with FLAGs: member i has clients on
# BASE+280+i, peers on BASE+380+i and HTTP on BASE+480+i, its data in
# DIR/data$i, and its output appended to DIR/arbord.log; pids gets their
# pids in member order. It waits until every member knows the same leader
# (asking with DIR/bin/arbor) and sets leader to it, or exits.
start_members() {
  local bin=$1 base=$2 dir=$3 i
  shift 3
  rm -rf "$dir"/data[123]
  for i in 1 2 3; do
    "$bin" --id $i --listen 127.0.0.1:$((base + 280 + i)) --http 127.0.0.1:$((base + 480 + i)) \
      --peer-listen 127.0.0.1:$((base + 380 + i)) \
      --peers 1=127.0.0.1:$((base + 381)),2=127.0.0.1:$((base + 382)),3=127.0.0.1:$((base + 383)) \
      --data "$dir/data$i" "$@" >>"$dir/arbord.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 100); do
    leader=$(leader_of "$dir" $((base + 281)))
    if [ -n "$leader" ] && [ "$(leader_of "$dir" $((base + 282)))" = "$leader" ] &&
      [ "$(leader_of "$dir" $((base + 283)))" = "$leader" ]; then
      return
    fi
    sleep 0.1
  done
  echo "no leader" >&2
  exit 1
}

# leader_of DIR PORT prints the leader that the member with clients on
# PORT knows of (nothing if none).
leader_of() {
  timeout 10 "$1/bin/arbor" --servers "127.0.0.1:$2" status 2>/dev/null |
    sed -n 's/^leader = \([1-3]\)$/\1/p'
}
