"""A pytest plugin that makes kazoo's test harness run Arbor members.

kazoo's tests get their servers from kazoo.testing.harness, which builds a
kazoo.testing.common.ZookeeperCluster of ManagedZooKeeper java processes.
This plugin swaps that class, in the harness module only, for ArborCluster:
the same interface (indexing, iteration, start, stop, terminate, reset,
get_logs, get_ssl_client_configuration; per member run, stop, reset,
destroy, address, secure_address, running), backed by arbord processes on
loopback ports. kazoo's own files are not changed.

scripts/kazoo-suite.sh loads it (pytest -p arbor_kazoo) with ARBORD set to
an arbord binary and ARBOR_KAZOO_WORK to a directory for the members' data
and logs. Each started arbord's pid is appended to ARBOR_KAZOO_WORK/pids,
so that the script can end them all when pytest itself is killed.

How ZooKeeper's test configuration maps to arbord's flags:

  clientPort (port)             --zk-listen 127.0.0.1:port
  election port (port+1)        --peer-listen, and in --peers
  leader port (port+2)          --listen (Arbor's own protocol)
  admin.serverPort (port+3)     --http
  secureClientPort (port+4)     --zk-secure-listen, with the harness's own
                                server certificate as --tls-cert/--tls-key
  tickTime=2000                 --min-session-timeout 4s,
                                --max-session-timeout 40s (2 and 20 ticks)
  maxClientCnxns=0              --max-conns-per-ip 0
  superDigest system property   --super-digest
  peerType=observer             --observers
  readonlymode.enabled=true     arbord's default (--read-only-mode)
  4lw.commands.whitelist        --zk-4lw-whitelist
  reconfigEnabled=true          --reconfig-enabled
  a JAAS Server section         --zk-sasl-users, the section in a file

ARBORD_EXTRA_ARGS (split on spaces) is added to every member's flags, and
ARBORD_SASL_ARGS to those of the clusters the SASL tests ask for (see
ArborCluster._feature_args), for trying a flag out without changing this
file.

ARBOR_KAZOO_SHARDS=N (2 to 16), with ARBOR naming an arbor CLI binary,
splits every cluster's top-level names into N shards once it runs
(docs/scale-out.md), at kazoo's test namespaces (/kazootests and a uuid's
hex digits), so that its tests run in different shards.
"""

import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import OpenSSL

from kazoo.testing import common as zk_common
from kazoo.testing import harness as zk_harness

log = logging.getLogger("arbor_kazoo")

ARBORD = os.environ.get("ARBORD", "")
WORK = os.environ.get("ARBOR_KAZOO_WORK") or tempfile.mkdtemp(
    prefix="arbor-kazoo-"
)
EXTRA_ARGS = shlex.split(os.environ.get("ARBORD_EXTRA_ARGS", ""))
ARBOR = os.environ.get("ARBOR", "")
SHARDS = int(os.environ.get("ARBOR_KAZOO_SHARDS", "0") or 0)
# The password of the superuser kazoo's harness configures (its digest is
# the superDigest system property's).
SUPER_AUTH = "digest:super:test"

# How long a member may take to stop after SIGTERM before it is killed, to
# open its client port, and a new cluster to elect a leader.
STOP_TIMEOUT = 20
PORT_TIMEOUT = 15
READY_TIMEOUT = 30

SUPER_DIGEST_PROPERTY = "-Dzookeeper.DigestAuthenticationProvider.superDigest="


def _four_letter(port, word, timeout=2.0):
    """Sends a four-letter word to 127.0.0.1:port; its answer, or ""."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout) as s:
            s.sendall(word)
            chunks = []
            while True:
                b = s.recv(4096)
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


def _port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), 0.5):
            return True
    except OSError:
        return False


class MemberInfo(object):
    """One member's id and ports (ZooKeeper's ServerInfo, plus ours)."""

    def __init__(self, server_id, port, peer_type):
        self.server_id = server_id
        self.client_port = port
        self.peer_port = port + 1
        self.arbor_port = port + 2
        self.http_port = port + 3
        self.secure_client_port = port + 4
        self.peer_type = peer_type


class ArborMember(object):
    """One arbord process, managed as ManagedZooKeeper manages a server."""

    host = "127.0.0.1"

    def __init__(self, cluster, info):
        self.cluster = cluster
        self.server_info = info
        self.working_path = os.path.join(
            cluster.working_path, "member%d" % info.server_id
        )
        os.makedirs(self.working_path, exist_ok=True)
        self.process = None
        self._running = False

    @property
    def address(self):
        return "%s:%s" % (self.host, self.server_info.client_port)

    @property
    def secure_address(self):
        return "%s:%s" % (self.host, self.server_info.secure_client_port)

    @property
    def client_port(self):
        return self.server_info.client_port

    @property
    def secure_client_port(self):
        return self.server_info.secure_client_port

    @property
    def running(self):
        return self._running

    @property
    def log_path(self):
        return os.path.join(self.working_path, "arbord.log")

    def args(self):
        info = self.server_info
        c = self.cluster
        args = [
            ARBORD,
            "--id", str(info.server_id),
            "--data", os.path.join(self.working_path, "data"),
            "--zk-listen", "%s:%d" % (self.host, info.client_port),
            "--zk-secure-listen",
            "%s:%d" % (self.host, info.secure_client_port),
            "--tls-cert", c.cert_path,
            "--tls-key", c.key_path,
            "--listen", "%s:%d" % (self.host, info.arbor_port),
            "--http", "%s:%d" % (self.host, info.http_port),
            "--min-session-timeout", "4s",
            "--max-session-timeout", "40s",
            "--max-conns-per-ip", "0",
        ]
        if len(c.infos) > 1:
            args += [
                "--peer-listen", "%s:%d" % (self.host, info.peer_port),
                "--peers", c.peers_flag,
            ]
            if c.observers_flag:
                args += ["--observers", c.observers_flag]
        if c.super_digest:
            args += ["--super-digest", c.super_digest]
        return args + c.feature_args + EXTRA_ARGS

    def run(self):
        """Starts the member (with the data it has) and waits for its port."""
        if self.running:
            return
        os.makedirs(os.path.join(self.working_path, "data"), exist_ok=True)
        args = self.args()
        with open(self.log_path, "ab") as out:
            out.write(("--- %s\n" % " ".join(args)).encode())
            out.flush()
            self.process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        with open(os.path.join(WORK, "pids"), "a") as pids:
            pids.write("%d\n" % self.process.pid)
        self._running = True
        log.info(
            "started arbord %s (member %d) on %s",
            self.process.pid,
            self.server_info.server_id,
            self.address,
        )
        deadline = time.monotonic() + PORT_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    "arbord member %d exited with %s; log %s:\n%s"
                    % (
                        self.server_info.server_id,
                        self.process.returncode,
                        self.log_path,
                        "".join(self.get_logs(30)),
                    )
                )
            if _port_open(self.server_info.client_port):
                return
            time.sleep(0.05)
        log.warning(
            "member %d: port %d not open after %ds",
            self.server_info.server_id,
            self.server_info.client_port,
            PORT_TIMEOUT,
        )

    def stop(self):
        """Stops the member (SIGTERM, then SIGKILL), keeping its data."""
        if not self.running:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            log.warning(
                "arbord %s did not stop in %ds; killing it",
                self.process.pid,
                STOP_TIMEOUT,
            )
            self.process.kill()
            self.process.wait()
        if self.process.returncode != 0:
            log.warning(
                "arbord %s exited with %s",
                self.process.pid,
                self.process.returncode,
            )
        self._running = False

    def reset(self):
        """Stops the member and empties its data."""
        self.stop()
        shutil.rmtree(os.path.join(self.working_path, "data"), True)

    def destroy(self):
        """Stops the member and removes its data (its log stays, for the
        record of the run)."""
        self.reset()

    def mode(self):
        for line in _four_letter(self.client_port, b"srvr").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def get_logs(self, num_lines=100):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.readlines()[-num_lines:]
        except OSError:
            return []


class ArborCluster(object):
    """Arbor members in place of kazoo's ZookeeperCluster (same arguments)."""

    # kazoo's own certificate generation and client configuration, borrowed
    # as they are: they only set and read self._ssl_configuration.
    perform_ssl_certs_generation = (
        zk_common.ZookeeperCluster.perform_ssl_certs_generation
    )
    get_ssl_client_configuration = (
        zk_common.ZookeeperCluster.get_ssl_client_configuration
    )

    made = 0

    def __init__(
        self,
        install_path=None,
        classpath=None,
        size=3,
        port_offset=20000,
        observer_start_id=-1,
        configuration_entries=(),
        java_system_properties=(),
        jaas_config=None,
    ):
        if not ARBORD:
            raise RuntimeError("ARBORD must name an arbord binary")
        # The harness makes a new cluster whenever the configuration it
        # asks for changes (read-only tests, SASL tests): cluster1, ...
        ArborCluster.made += 1
        self.working_path = os.path.join(WORK, "cluster%d" % ArborCluster.made)
        self.configuration_entries = list(configuration_entries)
        self.jaas_config = jaas_config
        self.super_digest = ""
        for prop in java_system_properties:
            if prop.startswith(SUPER_DIGEST_PROPERTY):
                self.super_digest = prop[len(SUPER_DIGEST_PROPERTY):]
        self.infos = []
        for i in range(size):
            sid = i + 1
            observer = observer_start_id != -1 and sid >= observer_start_id
            self.infos.append(
                MemberInfo(
                    sid,
                    port_offset + 10 * i,
                    "observer" if observer else "participant",
                )
            )
        self.peers_flag = ",".join(
            "%d=127.0.0.1:%d" % (i.server_id, i.peer_port) for i in self.infos
        )
        self.observers_flag = ",".join(
            str(i.server_id) for i in self.infos if i.peer_type == "observer"
        )
        self._ssl_configuration = {}
        self.perform_ssl_certs_generation()
        os.makedirs(self.working_path, exist_ok=True)
        self.cert_path = os.path.join(self.working_path, "server.pem")
        self.key_path = os.path.join(self.working_path, "server-key.pem")
        self.feature_args = self._feature_args()
        with open(self.cert_path, "wb") as f:
            f.write(
                OpenSSL.crypto.dump_certificate(
                    OpenSSL.crypto.FILETYPE_PEM,
                    self._ssl_configuration["server_cert"],
                )
            )
        with open(self.key_path, "wb") as f:
            f.write(
                OpenSSL.crypto.dump_privatekey(
                    OpenSSL.crypto.FILETYPE_PEM,
                    self._ssl_configuration["server_key"],
                )
            )
        self._servers = [ArborMember(self, info) for info in self.infos]

    def _feature_args(self):
        """Flags for what the harness asks of ZooKeeper beyond the basics:
        its configuration entries (4lw.commands.whitelist and
        reconfigEnabled), and
        a JAAS Server section (the SASL tests, users super/super_secret and
        jaasuser/jaas_password), written to jaas.conf beside the members as
        ZooKeeper gets it and given as --zk-sasl-users, with
        ARBORD_SASL_ARGS (split on spaces, {jaas} standing for that file)
        for those clusters only."""
        args = []
        for entry in self.configuration_entries:
            key, _, value = entry.partition("=")
            if key == "4lw.commands.whitelist":
                args += ["--zk-4lw-whitelist", value]
            elif key == "reconfigEnabled" and value == "true":
                args += ["--reconfig-enabled"]
        if not self.jaas_config:
            return args
        jaas = os.path.join(self.working_path, "jaas.conf")
        with open(jaas, "w") as f:
            f.write(self.jaas_config)
        return args + ["--zk-sasl-users", jaas] + [
            a.replace("{jaas}", jaas)
            for a in shlex.split(os.environ.get("ARBORD_SASL_ARGS", ""))
        ]

    def __getitem__(self, k):
        return self._servers[k]

    def __iter__(self):
        return iter(self._servers)

    def start(self):
        """Starts every member not running, then waits (at most
        READY_TIMEOUT) until each serves in a cluster with a leader."""
        for server in reversed(list(self)):
            server.run()
        want = {"leader", "follower", "observer", "standalone"}
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            modes = [s.mode() for s in self]
            if all(m in want for m in modes) and (
                "leader" in modes or modes == ["standalone"]
            ):
                self._spread()
                return
            time.sleep(0.1)
        log.warning("cluster not ready after %ds: %s", READY_TIMEOUT, modes)

    def _spread(self):
        """Splits the cluster's top-level names into SHARDS shards, at
        kazootests4, kazootests8 and kazootestsc for four (the highest
        first: each splits the meta group). A cluster that restarts with
        its data has its shards already: a split whose name starts a range
        in the map is passed over."""
        if SHARDS < 2:
            return
        if not ARBOR:
            raise RuntimeError("ARBOR_KAZOO_SHARDS needs ARBOR, an arbor binary")
        member = next(
            s for s in self if s.running and s.server_info.peer_type == "participant"
        )
        base = [ARBOR, "--servers", "%s:%d" % (member.host, member.server_info.arbor_port)]
        if self.super_digest:
            base += ["--auth", SUPER_AUTH]
        listed = subprocess.run(
            base + ["-o", "json", "shards", "list"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout
        for k in reversed(range(1, SHARDS)):
            at = "kazootests%x" % (k * 16 // SHARDS)
            if '"%s"' % at in listed:
                continue  # a range starts there: split before a restart
            # Refused (bad arguments) until every member has heard the
            # others' cards, which say they know shards: tried again.
            deadline = time.monotonic() + READY_TIMEOUT
            while True:
                done = subprocess.run(
                    base + ["shards", "split", "--at", at],
                    capture_output=True, text=True, timeout=60,
                )
                if done.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        "arbor shards split --at %s: %s" % (at, done.stderr.strip())
                    )
                time.sleep(0.2)

    def stop(self):
        for server in self:
            server.stop()
        self._servers = []

    def terminate(self):
        for server in self:
            server.destroy()

    def reset(self):
        for server in self:
            server.reset()

    def get_logs(self):
        logs = []
        for server in self:
            logs += server.get_logs()
        return logs


# The harness names the class it builds in its own module.
zk_harness.ZookeeperCluster = ArborCluster
