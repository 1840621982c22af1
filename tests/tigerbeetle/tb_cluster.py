"""Throw-away TigerBeetle clusters for the HTTP tests of the tigerbeetle
backend: the binary comes from TIGERBEETLE_BIN; each replica formats its own
data file in a fresh temporary directory, listens on a free loopback port,
and is always ended with SIGKILL (which TigerBeetle is built to survive).
A replica can be killed, stopped (SIGSTOP), resumed and started again; the
view, and so the primary (view % replicas), comes from ping_client through
the tb_ping tool (--ping PATH, which ctest passes). Python standard library
only."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

START_TIMEOUT_S = 60.0
# Panics of TigerBeetle 0.15.3 itself, seen here after a replica was stopped
# and resumed under load (docs/tigerbeetle.md, "Several replicas").
KNOWN_PANICS = ("panic: incorrect alignment",)
# A killed server's io_uring may hold the data file's lock for a moment.
LOCK_RETRIES = 40
# TigerBeetle 0.15.3's format now and then exits with "error: Unexpected"
# right after the replicas of an earlier cluster in the same test process
# were killed; the same format succeeds when run again a moment later.
FORMAT_ATTEMPTS = 3
FORMAT_RETRY_PAUSE_S = 1.0


def binary():
    """The TigerBeetle binary, or None (then the tests skip, loudly)."""
    path = os.environ.get("TIGERBEETLE_BIN", "")
    return path or None


def skip_unless_binary(what, exit_code=77):
    """Prints the SKIPPED line and exits with exit_code (77: ctest reports
    the test as skipped, never as passed) when there is no server binary."""
    if binary() is None:
        print("SKIPPED: TIGERBEETLE_BIN not set (%s)" % what)
        sys.stdout.flush()
        sys.exit(exit_code)


_ping_tool = None


def ping_tool_from_argv():
    """Takes --ping PATH (the tb_ping tool) out of sys.argv."""
    global _ping_tool
    for i, arg in enumerate(sys.argv):
        if arg == "--ping" and i + 1 < len(sys.argv):
            _ping_tool = os.path.abspath(sys.argv[i + 1])
            del sys.argv[i: i + 2]
            return _ping_tool
    return None


def _die_with_parent():
    """In the child: SIGKILL when the test process dies, so no server is
    left behind by a crashed test."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def metric(server, name):
    """The value of an unlabelled metric in server's GET /metrics, or None."""
    status, _, text = server.request("GET", "/metrics")
    assert status == 200, status
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    """One replica: its data file, log and port; `process` while running."""

    def __init__(self, directory, index):
        self.index = index
        self.data_file = os.path.join(directory, "0_%d.tigerbeetle" % index)
        self.log_file = os.path.join(directory, "tigerbeetle-%d.log" % index)
        self.port = free_port()
        self.address = "127.0.0.1:%d" % self.port
        self.process = None
        self.paused = False

    def format_command(self, binary_path, count):
        return [binary_path, "format", "--cluster=0", "--replica=%d" % self.index,
                "--replica-count=%d" % count, self.data_file]

    def spawn(self, binary_path, addresses):
        with open(self.log_file, "w") as log:
            self.process = subprocess.Popen(
                [binary_path, "start", "--addresses=" + addresses, "--cache-grid=256MiB",
                 self.data_file], stdout=log, stderr=log, preexec_fn=_die_with_parent)
        self.paused = False

    def _listening(self):
        with open(self.log_file, errors="replace") as log:
            return "listening on" in log.read()

    def wait_listening(self):
        """True when listening, False when it exited at once (its lock)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.process = None
                return False
            if self._listening():
                return True
            time.sleep(0.05)
        self.kill()
        raise RuntimeError("tigerbeetle replica %d did not listen within %.0f s"
                           % (self.index, START_TIMEOUT_S))

    def kill(self):
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None
        self.paused = False


class Cluster:
    """A cluster of `replicas` replicas (1 by default); `address` lists them
    in replica order, as clients must."""

    def __init__(self, replicas=1, parent=None):
        """parent: where the data files go (default: the temporary directory)."""
        self.binary = binary()
        self.directory = tempfile.mkdtemp(prefix="llmlimit-tb-", dir=parent)
        self.replicas = [Replica(self.directory, i) for i in range(replicas)]
        if len({r.port for r in self.replicas}) != replicas:
            raise RuntimeError("the kernel handed the same free port twice")
        self.address = ",".join(r.address for r in self.replicas)

    @property
    def process(self):
        """The process of replica 0 (a single-replica cluster's server)."""
        return self.replicas[0].process

    def format(self, replicas=None, attempt=1):
        """Formats every replica's data file, at once; a replica whose format
        failed with TigerBeetle's "error: Unexpected" is formatted again
        (FORMAT_ATTEMPTS in all, said on stderr); any other failure raises."""
        replicas = self.replicas if replicas is None else replicas
        formats = []
        for replica in replicas:
            log = open(replica.log_file, "w")
            formats.append((subprocess.Popen(replica.format_command(self.binary,
                                                                    len(self.replicas)),
                                             stdout=log, stderr=log), log))
        again = []
        for (process, log), replica in zip(formats, replicas):
            code = process.wait(timeout=120)
            log.close()
            if code != 0:
                with open(replica.log_file, errors="replace") as f:
                    tail = f.read()[-2000:]
                if "error: Unexpected" in tail and attempt < FORMAT_ATTEMPTS:
                    print("  tigerbeetle format of replica %d: error: Unexpected; formatting "
                          "again (attempt %d)" % (replica.index, attempt + 1), file=sys.stderr)
                    if os.path.exists(replica.data_file):
                        os.remove(replica.data_file)
                    again.append(replica)
                    continue
                raise RuntimeError("tigerbeetle format of replica %d failed (exit %d):\n%s"
                                   % (replica.index, code, tail))
        if again:
            time.sleep(FORMAT_RETRY_PAUSE_S)
            self.format(again, attempt + 1)

    def _selected(self, replica):
        return self.replicas if replica is None else [self.replicas[replica]]

    def start(self, replica=None):
        """Starts one replica (or all, at once: each allocates its memory
        before it listens) on its data file and port."""
        selected = self._selected(replica)
        for r in selected:
            r.spawn(self.binary, self.address)
        for r in selected:
            if r.wait_listening():
                continue
            for _ in range(LOCK_RETRIES):
                time.sleep(0.25)
                r.spawn(self.binary, self.address)
                if r.wait_listening():
                    break
            else:
                with open(r.log_file, errors="replace") as log:
                    raise RuntimeError("tigerbeetle did not start:\n" + log.read()[-2000:])
        return self

    def kill(self, replica=None):
        """kill -9 of one replica, or of all."""
        for r in self._selected(replica):
            r.kill()

    def restart(self, replica=None):
        self.kill(replica)
        return self.start(replica)

    def pause(self, replica):
        r = self.replicas[replica]
        r.process.send_signal(signal.SIGSTOP)
        r.paused = True

    def resume(self, replica):
        r = self.replicas[replica]
        r.process.send_signal(signal.SIGCONT)
        r.paused = False

    def views(self):
        """{replica: view} of the running replicas that answer ping_client
        (only a replica in normal status does)."""
        if _ping_tool is None:
            raise RuntimeError("the tb_ping tool was not given (--ping PATH)")
        running = [r for r in self.replicas if r.process is not None and not r.paused]
        if not running:
            return {}
        done = subprocess.run([_ping_tool, ",".join(r.address for r in running)],
                              capture_output=True, text=True, timeout=30)
        answers = {}
        for r, line in zip(running, done.stdout.splitlines()):
            fields = line.split()
            if len(fields) == 3 and fields[1] != "-":
                answers[r.index] = int(fields[1])
        return answers

    def view(self, timeout_s=START_TIMEOUT_S, after=None):
        """The highest view the running replicas answer with, waiting until
        one answers (and, with `after`, until it is later than that)."""
        deadline = time.monotonic() + timeout_s
        while True:
            answers = self.views()
            if answers and (after is None or max(answers.values()) > after):
                return max(answers.values())
            if time.monotonic() >= deadline:
                raise RuntimeError("no view%s within %.0f s: %r" % (
                    "" if after is None else " after %d" % after, timeout_s, answers))
            time.sleep(0.1)

    def primary(self, view=None):
        return (self.view() if view is None else view) % len(self.replicas)

    def wait_answers(self, replica, timeout_s=START_TIMEOUT_S, restart_known_panic=False):
        """Waits until a replica answers ping_client (it is in normal status).
        restart_known_panic: a replica that died of a panic TigerBeetle
        0.15.3 is known for after a stop and resume (docs/tigerbeetle.md,
        "Several replicas") is reported and started again, once."""
        deadline = time.monotonic() + timeout_s
        while replica not in self.views():
            r = self.replicas[replica]
            if restart_known_panic and r.process is not None and r.process.poll() is not None:
                with open(r.log_file, errors="replace") as log:
                    tail = log.read()[-3000:]
                if not any(panic in tail for panic in KNOWN_PANICS):
                    raise RuntimeError("replica %d exited; its log ends:\n%s" % (replica, tail))
                print("\n  replica %d died of TigerBeetle's known panic (%s); started again"
                      % (replica, next(p for p in KNOWN_PANICS if p in tail)), file=sys.stderr)
                r.process = None
                self.start(replica)
                restart_known_panic = False
                deadline = time.monotonic() + timeout_s
                continue
            if time.monotonic() >= deadline:
                with open(self.replicas[replica].log_file, errors="replace") as log:
                    tail = log.read()[-3000:]
                raise RuntimeError("replica %d did not answer within %.0f s; its log ends:\n%s"
                                   % (replica, timeout_s, tail))
            time.sleep(0.1)

    def stop(self):
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self):
        try:
            self.format()
            self.start()
            if len(self.replicas) > 1:
                self.view()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
