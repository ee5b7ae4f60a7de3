#!/usr/bin/env bash
# Runs kazoo's own test suite (release 2.11.0) against 3-member Arbor
# clusters on loopback ports (docs/zookeeper-compat.md, "kazoo's test suite").
#   scripts/kazoo-suite.sh                           # the whole suite
#   scripts/kazoo-suite.sh -k test_read_only         # pytest's arguments
#   KAZOO_SRC=/tmp/kazoo-2.11.0 scripts/kazoo-suite.sh kazoo/tests/test_lock.py
#   ARBOR_KAZOO_SHARDS=4 scripts/kazoo-suite.sh     # each cluster over 4 shards
# KAZOO_SRC is a kazoo source tree; without it, kazoo is cloned at tag 2.11.0.
# Needs Debian's python3 with python3-pytest python3-pytest-timeout
# python3-openssl python3-pyjks python3-pure-sasl python3-gevent
# python3-eventlet python3-objgraph. The harness (scripts/kazoo/arbor_kazoo.py)
# starts and stops arbord members for kazoo's tests; members' logs and the
# JUnit report stay in KAZOO_OUT (default: a new directory, printed at the end).
# KAZOO_SUITE_TIMEOUT bounds the run (seconds, default 5400); pytest bounds
# each test (kazoo's 180 s). Members listen on 127.0.0.1, ports
# ZOOKEEPER_PORT_OFFSET to +24 (default: the first free block from 20000).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
python=${PYTHON:-/usr/bin/python3}

out=${KAZOO_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/kazoo-suite.XXXXXX")}
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/kazoo-suite-work.XXXXXX")

# Ends every arbord the harness started (their pids are in $work/pids, each
# in a session of its own), then removes the members' data.
cleanup() {
  if [ -f "$work/pids" ]; then
    while read -r pid; do
      kill -9 "$pid" 2>/dev/null || true
    done <"$work/pids"
  fi
  for f in "$work"/cluster*/member*/arbord.log; do
    if [ -f "$f" ]; then
      m=$(dirname "$f")
      cp "$f" "$out/$(basename "$(dirname "$m")")-$(basename "$m").log" || true
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! "$python" -c 'import pytest, pytest_timeout, OpenSSL, jks, puresasl, gevent, eventlet, objgraph' 2>/dev/null; then
  echo "kazoo-suite: $python lacks kazoo's test dependencies; on Debian:" >&2
  echo "  apt-get install -y python3-pytest python3-pytest-timeout python3-openssl python3-pyjks python3-pure-sasl python3-gevent python3-eventlet python3-objgraph" >&2
  exit 2
fi

if [ -z "${KAZOO_SRC:-}" ]; then
  git clone -q --depth 1 --branch 2.11.0 https://github.com/python-zk/kazoo "$work/kazoo"
  KAZOO_SRC=$work/kazoo
fi
KAZOO_SRC=$(cd "$KAZOO_SRC" && pwd)
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$KAZOO_SRC/kazoo/version.py")
if [ "$version" != 2.11.0 ]; then
  echo "kazoo-suite: $KAZOO_SRC is kazoo $version, not 2.11.0 (carrying on)" >&2
fi

go build -o "$work/arbord" ./cmd/arbord
go build -o "$work/arbor" ./cmd/arbor

# The members' ports: offset to offset+24 (kazoo's layout), all free.
ports_free() {
  local p
  for p in $(seq "$1" $(($1 + 24))); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then return 1; fi
  done
}
if [ -n "${ZOOKEEPER_PORT_OFFSET:-}" ]; then
  offset=$ZOOKEEPER_PORT_OFFSET
  ports_free "$offset" || { echo "kazoo-suite: a port in $offset-$((offset + 24)) is in use" >&2; exit 2; }
else
  offset=20000
  until ports_free "$offset"; do
    offset=$((offset + 100))
    if [ "$offset" -ge 30000 ]; then echo "kazoo-suite: no free ports in 20000-29999" >&2; exit 2; fi
  done
fi

# ZOOKEEPER_VERSION is what the harness needs to pick ZooKeeper 3.5+'s
# configuration (a superuser, reconfig); CI stays unset, so that tests ask
# the server its version (envi) as they would a real one.
export ARBORD=$work/arbord ARBOR=$work/arbor ARBOR_KAZOO_WORK=$work
export ZOOKEEPER_VERSION=3.9.0 ZOOKEEPER_PORT_OFFSET=$offset
export PYTHONPATH=$repo/scripts/kazoo:$KAZOO_SRC${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
unset CI ZOOKEEPER_PATH ZOOKEEPER_CLASSPATH ZOOKEEPER_JAAS_AUTH ZOOKEEPER_LOCAL_SESSION_RO

if [ $# -eq 0 ]; then set -- kazoo/tests; fi
cd "$KAZOO_SRC"
# pytest runs in the background, so that a signal to this script is acted
# on at once: the trap ends it, then cleanup ends the members.
status=0
timeout --kill-after=60 "${KAZOO_SUITE_TIMEOUT:-5400}" \
  "$python" -m pytest -p arbor_kazoo -p no:cacheprovider -o log_cli=false --color=auto \
  --junitxml="$out/junit.xml" -ra "$@" &
runner=$!
trap 'kill -TERM "$runner" 2>/dev/null || true; wait "$runner" || true; exit 130' INT TERM
wait "$runner" || status=$?
echo "kazoo-suite: JUnit report and members' logs in $out" >&2
exit "$status"
