"""A throw-away single-replica TigerBeetle cluster for the HTTP tests of the
tigerbeetle backend: the binary comes from TIGERBEETLE_BIN; the cluster is
formatted in a fresh temporary directory, started on a free loopback port,
and always ended with SIGKILL (which TigerBeetle is built to survive).
Python standard library only."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

START_TIMEOUT_S = 60.0
# A killed server's io_uring may hold the data file's lock for a moment.
LOCK_RETRIES = 40


def binary():
    """The TigerBeetle binary, or None (then the tests skip, loudly)."""
    path = os.environ.get("TIGERBEETLE_BIN", "")
    return path or None


def skip_unless_binary(what):
    """Prints the SKIPPED line and exits 0 when there is no server binary."""
    if binary() is None:
        print("SKIPPED: TIGERBEETLE_BIN not set (%s)" % what)
        sys.stdout.flush()
        sys.exit(0)


def _die_with_parent():
    """In the child: SIGKILL when the test process dies, so no server is
    left behind by a crashed test."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self):
        self.binary = binary()
        self.directory = tempfile.mkdtemp(prefix="llmlimit-tb-")
        self.data_file = os.path.join(self.directory, "0_0.tigerbeetle")
        self.log_file = os.path.join(self.directory, "tigerbeetle.log")
        self.port = free_port()
        self.address = "127.0.0.1:%d" % self.port
        self.process = None

    def format(self):
        with open(self.log_file, "w") as log:
            subprocess.run([self.binary, "format", "--cluster=0", "--replica=0",
                            "--replica-count=1", self.data_file],
                           stdout=log, stderr=log, check=True, timeout=120)

    def _listening(self):
        with open(self.log_file, errors="replace") as log:
            return "listening on" in log.read()

    def _start_once(self):
        with open(self.log_file, "w") as log:
            self.process = subprocess.Popen(
                [self.binary, "start", "--addresses=" + self.address, "--cache-grid=256MiB",
                 self.data_file], stdout=log, stderr=log, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.process = None
                return False
            if self._listening():
                return True
            time.sleep(0.05)
        self.kill()
        raise RuntimeError("tigerbeetle did not listen within %.0f s" % START_TIMEOUT_S)

    def start(self):
        for _ in range(LOCK_RETRIES):
            if self._start_once():
                return self
            time.sleep(0.25)
        with open(self.log_file, errors="replace") as log:
            raise RuntimeError("tigerbeetle did not start:\n" + log.read()[-2000:])

    def kill(self):
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def restart(self):
        self.kill()
        return self.start()

    def stop(self):
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self):
        self.format()
        return self.start()

    def __exit__(self, *exc):
        self.stop()
