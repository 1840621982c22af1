"""Throw-away TigerBeetle clusters for the HTTP tests of the tigerbeetle
backend: the binary comes from TIGERBEETLE_BIN; each replica formats its own
data file in a fresh temporary directory, listens on a free loopback port,
and is always ended with SIGKILL (which TigerBeetle is built to survive).
A replica can be killed, stopped (SIGSTOP), resumed and started again; the
view, and so the primary (view % replicas), comes from ping_client through
the tb_ping tool (--ping PATH, which ctest passes).

A replica that dies of a fault of TigerBeetle itself (known_faults.txt) is
said on stderr, started again and recorded in Cluster.revivals, by a
watcher that runs while the cluster does (a `with Cluster()` block), and
by wait_answers; a test then excuses what clients saw meanwhile (503s) with
revival_windows(), while its checks of llmlimitd's answers stand. Any other
death is left alone, for the test to fail on. Python standard library
only."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

START_TIMEOUT_S = 60.0
# A replica that dies of a known fault this often is not started again.
REVIVALS_MAX = 3
WATCH_INTERVAL_S = 0.2
# A killed server's io_uring may hold the data file's lock for a moment.
LOCK_RETRIES = 40
# TigerBeetle 0.15.3's format now and then exits with "error: Unexpected"
# right after the replicas of an earlier cluster in the same test process
# were killed; the same format succeeds when run again a moment later.
FORMAT_ATTEMPTS = 3
FORMAT_RETRY_PAUSE_S = 1.0


def _known_faults():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "known_faults.txt")
    with open(path) as f:
        return tuple(line.strip() for line in f
                     if line.strip() and not line.startswith("#"))


KNOWN_FAULTS = _known_faults()


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

    def exited(self):
        """True when the process the test started has ended by itself."""
        return self.process is not None and self.process.poll() is not None

    def log_tail(self, size=3000):
        with open(self.log_file, errors="replace") as log:
            return log.read()[-size:]

    def known_fault(self):
        """The known fault (KNOWN_FAULTS) the end of the log shows, or None."""
        tail = self.log_tail()
        return next((fault for fault in KNOWN_FAULTS if fault in tail), None)


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
        # Each known fault ridden out: {"replica", "fault", "from_ns" (the
        # replica last seen running), "to_ns" (answering again, or None)}.
        self.revivals = []
        self._lock = threading.RLock()  # starts, kills, pauses and revivals
        self._seen_running_ns = {}
        self._watching = None

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
        with self._lock:
            selected = self._selected(replica)
            for r in selected:
                r.spawn(self.binary, self.address)
                self._seen_running_ns[r.index] = time.monotonic_ns()
            for r in selected:
                self._wait_started(r)
            return self

    def _wait_started(self, r):
        """Until r listens; an exit at once (the data file's lock, or a known
        fault while it starts: said) starts it again, LOCK_RETRIES times."""
        if r.wait_listening():
            return
        for _ in range(LOCK_RETRIES):
            fault = r.known_fault()
            if fault is not None:
                self._record_revival(r, fault, time.monotonic_ns())
            time.sleep(0.25)
            r.spawn(self.binary, self.address)
            self._seen_running_ns[r.index] = time.monotonic_ns()
            if r.wait_listening():
                return
        raise RuntimeError("tigerbeetle did not start:\n" + r.log_tail(2000))

    def kill(self, replica=None):
        """kill -9 of one replica, or of all."""
        with self._lock:
            for r in self._selected(replica):
                r.kill()

    def restart(self, replica=None):
        self.kill(replica)
        return self.start(replica)

    def pause(self, replica):
        with self._lock:
            r = self.replicas[replica]
            r.process.send_signal(signal.SIGSTOP)
            r.paused = True

    def resume(self, replica):
        with self._lock:
            r = self.replicas[replica]
            r.process.send_signal(signal.SIGCONT)
            r.paused = False

    # -- TigerBeetle's own faults ---------------------------------------------

    def _record_revival(self, r, fault, from_ns):
        print("\n  replica %d died of TigerBeetle's known fault (%s); started again"
              % (r.index, fault), file=sys.stderr, flush=True)
        revival = {"replica": r.index, "fault": fault, "from_ns": from_ns, "to_ns": None}
        self.revivals.append(revival)
        if sum(1 for v in self.revivals if v["replica"] == r.index) > REVIVALS_MAX:
            raise RuntimeError("replica %d died of %s more than %d times"
                               % (r.index, fault, REVIVALS_MAX))
        return revival

    def revive_known_faults(self):
        """Starts again every replica that died of a known fault (said on
        stderr, recorded in `revivals`, its to_ns set once it answers a
        ping). A replica that exited otherwise is left as it is."""
        started = []
        with self._lock:
            now = time.monotonic_ns()
            for r in self.replicas:
                if not r.exited():
                    if r.process is not None:
                        self._seen_running_ns[r.index] = now
                    continue
                fault = r.known_fault()
                if fault is None:
                    continue
                revival = self._record_revival(r, fault,
                                               self._seen_running_ns.get(r.index, now))
                r.process = None
                self.start(r.index)
                started.append(revival)
        for revival in started:  # without the ping tool, listening is all it says
            deadline = time.monotonic() + START_TIMEOUT_S
            while (_ping_tool is not None and revival["replica"] not in self.views()
                   and time.monotonic() < deadline):
                time.sleep(0.1)
            revival["to_ns"] = time.monotonic_ns()

    def revival_windows(self, settle_s=0.0):
        """(from_ns, to_ns + settle_s) of every revival so far: when clients
        may have met the fault (to_ns now while it is still being started)."""
        now = time.monotonic_ns()
        return [(v["from_ns"], (v["to_ns"] or now) + int(settle_s * 1e9))
                for v in self.revivals]

    def _watch(self, stop):
        while not stop.wait(WATCH_INTERVAL_S):
            try:
                self.revive_known_faults()
            except Exception as error:  # noqa: BLE001 - too many revivals: the test
                # then fails on the dead replica, as without the watcher
                print("\n  the watcher of known faults stops: %s" % error, file=sys.stderr,
                      flush=True)
                return

    def watch(self):
        """Starts the watcher thread that rides out known faults."""
        if self._watching is None:
            stop = threading.Event()
            thread = threading.Thread(target=self._watch, args=(stop,), daemon=True)
            thread.start()
            self._watching = (stop, thread)

    def unwatch(self):
        if self._watching is not None:
            stop, thread = self._watching
            stop.set()
            thread.join(START_TIMEOUT_S * 2)
            self._watching = None

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

    def wait_answers(self, replica, timeout_s=START_TIMEOUT_S):
        """Waits until a replica answers ping_client (it is in normal status).
        A replica that died of a known fault meanwhile is started again
        (revive_known_faults); one that exited otherwise fails at once."""
        deadline = time.monotonic() + timeout_s
        while replica not in self.views():
            revivals = len(self.revivals)
            self.revive_known_faults()
            if len(self.revivals) != revivals:
                deadline = time.monotonic() + timeout_s
                continue
            r = self.replicas[replica]
            if r.exited():
                raise RuntimeError("replica %d exited; its log ends:\n%s"
                                   % (replica, r.log_tail()))
            if time.monotonic() >= deadline:
                raise RuntimeError("replica %d did not answer within %.0f s; its log ends:\n%s"
                                   % (replica, timeout_s, r.log_tail()))
            time.sleep(0.1)

    def stop(self):
        self.unwatch()
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self):
        try:
            self.format()
            self.start()
            if len(self.replicas) > 1:
                self.view()
            self.watch()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
