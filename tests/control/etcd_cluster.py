"""Throw-away etcd clusters for the control plane's tests: three members
(or any number) of the installed etcd (ETCD_BIN, else etcd on the PATH) on
free loopback ports, each with its data in a fresh temporary directory,
ended with SIGKILL. A member can be killed and started again (it rejoins
with its data). Without etcd a test prints why and exits 77 (skipped).
Python standard library only."""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

START_TIMEOUT_S = 30.0


def binary():
    """The etcd server binary, or None."""
    path = os.environ.get("ETCD_BIN") or shutil.which("etcd")
    return path if path and os.access(path, os.X_OK) else None


def skip_unless_etcd(what, exit_code=77):
    """Prints the SKIPPED line and exits 77 when etcd is not installed."""
    if binary() is None:
        print("SKIPPED: etcd not installed (Debian etcd-server; or set ETCD_BIN) (%s)" % what)
        sys.stdout.flush()
        sys.exit(exit_code)


def _die_with_parent():
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Member:
    def __init__(self, directory, index):
        self.name = "m%d" % index
        self.data_dir = os.path.join(directory, self.name)
        self.client_port = free_port()
        self.peer_port = free_port()
        self.log_path = os.path.join(directory, self.name + ".log")
        self.process = None

    @property
    def endpoint(self):
        return "127.0.0.1:%d" % self.client_port

    def spawn(self, initial_cluster):
        client = "http://127.0.0.1:%d" % self.client_port
        peer = "http://127.0.0.1:%d" % self.peer_port
        command = [binary(), "--name", self.name, "--data-dir", self.data_dir,
                   "--listen-client-urls", client, "--advertise-client-urls", client,
                   "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                   "--initial-cluster", initial_cluster, "--initial-cluster-state", "new",
                   "--initial-cluster-token", "llmlimit-test",
                   "--heartbeat-interval", "50", "--election-timeout", "500",
                   "--logger", "zap", "--log-level", "warn"]
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=log,
                                        preexec_fn=_die_with_parent)
        log.close()

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def kill(self):
        if self.alive():
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def pause(self):
        """SIGSTOP: the member hangs with its connections open."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self):
        if self.alive():
            self.process.send_signal(signal.SIGCONT)

    def healthy(self):
        try:
            with urllib.request.urlopen("http://%s/health" % self.endpoint, timeout=1) as r:
                return json.loads(r.read()).get("health") == "true"
        except (OSError, ValueError):
            return False


class EtcdCluster:
    """with EtcdCluster(3) as cluster: cluster.url() is etcd://a,b,c."""

    def __init__(self, size=3):
        self.directory = tempfile.mkdtemp(prefix="llmlimit-etcd-")
        self.members = [Member(self.directory, i) for i in range(size)]
        self.initial = ",".join("%s=http://127.0.0.1:%d" % (m.name, m.peer_port)
                                for m in self.members)

    def url(self):
        return "etcd://" + ",".join(m.endpoint for m in self.members)

    def start(self, index=None):
        chosen = self.members if index is None else [self.members[index]]
        for m in chosen:
            m.spawn(self.initial)
        self.wait_healthy(chosen)

    def wait_healthy(self, members=None):
        members = self.members if members is None else members
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if all(m.healthy() for m in members):
                return
            for m in members:
                if not m.alive():
                    raise RuntimeError("etcd member %s exited: %s" % (m.name, self.log_tail(m)))
            time.sleep(0.1)
        raise RuntimeError("etcd not healthy in %.0f s" % START_TIMEOUT_S)

    def kill(self, index=None):
        for m in self.members if index is None else [self.members[index]]:
            m.resume()  # a stopped process takes SIGKILL too, but waits for nothing then
            m.kill()

    def log_tail(self, member, size=2000):
        try:
            with open(member.log_path, "rb") as f:
                return f.read()[-size:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    # The store as a test reads it, through any live member.
    def _call(self, path, body):
        data = json.dumps(body).encode()
        last = None
        for m in self.members:
            if not m.alive():
                continue
            try:
                request = urllib.request.Request("http://%s%s" % (m.endpoint, path), data=data,
                                                 method="POST")
                with urllib.request.urlopen(request, timeout=3) as r:
                    return json.loads(r.read())
            except OSError as error:
                last = error
        raise RuntimeError("no etcd member answered: %s" % last)

    def get(self, key):
        """The value of key (str), or None."""
        answer = self._call("/v3/kv/range", {"key": _b64(key)})
        kvs = answer.get("kvs", [])
        return base64.b64decode(kvs[0].get("value", "")).decode() if kvs else None

    def version(self, key):
        """How many times key was written since it was made (0: no such key)."""
        answer = self._call("/v3/kv/range", {"key": _b64(key)})
        kvs = answer.get("kvs", [])
        return int(kvs[0].get("version", 0)) if kvs else 0

    def put_many(self, items):
        """Puts each (key, value) of items, 128 (etcd's --max-txn-ops) a txn."""
        for start in range(0, len(items), 128):
            self._call("/v3/kv/txn", {"success": [
                {"requestPut": {"key": _b64(k), "value": _b64(v)}}
                for k, v in items[start:start + 128]]})

    def put(self, key, value):
        return int(self._call("/v3/kv/put", {"key": _b64(key), "value": _b64(value)})
                   ["header"]["revision"])


def _b64(text):
    return base64.b64encode(text.encode()).decode()


if __name__ == "__main__":
    # Starts a cluster and prints its URL until interrupted (for trying by hand).
    skip_unless_etcd("etcd_cluster.py")
    with EtcdCluster(3) as c:
        print(c.url(), flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
