"""Every ```sh block of the pages in PAGES runs as written, in order, against
the real llmlimitd and the fake upstream, and prints what the page says it
prints; so does every ```js block, the applications' side (the OpenAI SDK).

Run by ctest (docs_shell_blocks) as:
  test_shell_blocks.py --binary LLMLIMITD --cli LLMLIMIT --source-dir REPO

Which blocks run. A fenced block whose info string is `sh` runs. One that
is `shell`, `console`, `text`, `json`, ... is shown and never run: `shell`
is highlighted like `sh`, so a command a reader may run but this test
cannot (one that needs root, a TigerBeetle cluster, a path of the reader's
machine) is written as ```shell. `bash` or `zsh` is refused, so that a new
block is always one or the other on purpose.

A ```js block is a program of the reader's in a file of its own (an .mjs
module, as after `npm install openai`): it runs with node, in the page's
shell, so the variables an earlier block exported are its environment, and
it must exit 0 (the SDK throws on an error answer). Its packages are the
pinned ones of tests/gateway/node (`make test-deps`); without node or them
the js blocks are not run, and a page that passes otherwise is skipped (77)
with the reason. As `shell` is to `sh`, a fragment that cannot run alone (it
calls the reader's own functions) is written as ```javascript, highlighted
the same and shown only; `mjs` is refused.

Where. Each page runs in a fresh temporary directory that stands for the
repository's root: its build/ holds the build's files (llmlimit is the real
command, also on PATH as `llmlimit`, as after `make install`), and
llmlimitd starts in it, so ./data is its own. One `sh -eu`
runs the page's blocks in order, so a variable set in one block is there in
the next, as in one terminal; stdin is /dev/null, HOME a fresh directory,
and nothing of the caller's environment but PATH (no LLMLIMIT_* token, no
provider key).

The server. A command `[VAR=value ...] build/llmlimitd [flags]` (not
--help, --version) is what a reader starts in another shell and leaves
running: the test stops the one it started before (SIGINT, as Ctrl-C; it
must exit 0), starts this one in the background with the command's
environment and flags, and goes on once it logs that it listens (or fails
the block with its log). `make run [ARGS=...]` is what the Makefile does
once the build is there, `./build/llmlimitd $(ARGS)`, run the same way.
Nothing else of make runs inside the test: `make test` is what runs this
test, and other targets would build; they are listed as not run.

Network and upstream. The run has a network namespace of its own
(unshare --net), so localhost:8470 and any port a block names are free and
nothing leaves the machine; without one, the ports the blocks name must be
free, else the test is skipped. The fake upstream
(tests/gateway/fake_upstream.py) stands for the providers: the docs show
their real URLs, which is what a reader writes, so before a server starts
and after each block `https://api.openai.com`, `https://generativelanguage.googleapis.com` and
`https://api.anthropic.com` in the files the blocks wrote are replaced with
the fake's URL.

What is checked. Every command succeeds (sh -e). Every curl gets an answer
below 400 (a write-out in HOME/.curlrc reports each status on stderr),
unless the block shows that answer. A comment line that starts with `# {`
or `# [` (continued on the next comment lines until it is one JSON value;
text after the value is prose) is the expected output of the commands
since the previous one: the last JSON value they printed must match it,
member for member, except that `...` in a string stands for any text
("llk-...") and a nonzero integer named `*_unix_ms` (a time) for any
positive integer.
"""

import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR_DEFAULT = os.path.normpath(os.path.join(HERE, "..", ".."))

# The pages whose ```sh blocks run, relative to the repository's root.
PAGES = ("README.md", "docs/gateway.md", "docs/agents.md", "docs/cli.md")

SKIP = 77
RUN_INFO = "sh"
JS_INFO = "js"
REFUSED_INFO = ("bash", "zsh", "mjs")
JS_PACKAGES = os.path.join("tests", "gateway", "node", "node_modules")
JS_PACKAGE_NEEDED = "openai"  # what the pages' js blocks import
SEGMENT_TIMEOUT_S = 120.0
SERVER_START_TIMEOUT_S = 30.0
SERVER_STOP_TIMEOUT_S = 30.0
LISTENING = re.compile(r"llmlimitd listening on (\S+)")
PROVIDER_URLS = ("https://api.openai.com", "https://api.anthropic.com",
                 "https://generativelanguage.googleapis.com")
REWRITE_BYTES_MAX = 1 << 20
SERVER_ONE_SHOT_FLAGS = ("--help", "-h", "--version")
CURL_MARK = "@@docs-test-curl "
DEFAULT_PORT = 8470
PORT_IN_TEXT = re.compile(r"(?:localhost|127\.0\.0\.1|\[::1\]):([0-9]{2,5})")


class DocError(Exception):
    """A page that this test cannot read as it must be written."""


# -- reading a page -----------------------------------------------------------


class Block:
    def __init__(self, page, line, info, lines):
        self.page = page
        self.line = line  # of the opening fence, 1-based
        self.info = info
        self.lines = lines

    def where(self, offset=0):
        return "%s:%d" % (self.page, self.line + 1 + offset)


class Segment:
    """Commands of a block up to one expected output (or the block's end)."""

    def __init__(self, block, first, code, expected, expected_line):
        self.block = block
        self.first = first  # index of its first line in the block
        self.code = code
        self.expected = expected  # a JSON value, or None
        self.expected_line = expected_line


FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)")


def read_blocks(page, text):
    """Every fenced block of a page, in order."""
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, info = len(match.group(1)), match.group(2), match.group(3).lower()
        if fence[0] == "`" and "`" in lines[i][len(match.group(0)) - len(match.group(3)):]:
            i += 1  # a backtick after a backtick fence: inline code, not a fence
            continue
        body = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].lstrip(" ")
            if stripped.startswith(fence) and stripped.strip(fence[0]).strip() == "":
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        if j == len(lines):
            raise DocError("%s:%d: a fenced block that is never closed" % (page, i + 1))
        blocks.append(Block(page, i + 1, info, body))
        i = j + 1
    return blocks


HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def expected_output(block, index):
    """Reads the expected output starting at block.lines[index] (a line
    `# {...` or `# [...`); returns (value, index of the line after it)."""
    decoder = json.JSONDecoder()
    text = ""
    j = index
    while j < len(block.lines) and block.lines[j].startswith("#"):
        text += block.lines[j][1:] + "\n"
        j += 1
        try:
            value, _ = decoder.raw_decode(text.strip())
            return value, j
        except ValueError:
            continue
    raise DocError("%s: a comment that starts like an expected output (`# {` or `# [`) "
                   "but is not one JSON value" % block.where(index))


def is_expected_start(line):
    return line.startswith("# {") or line.startswith("# [")


def segments(block):
    """Splits a block at its expected outputs. Lines inside a here-document
    are data, never comments."""
    result = []
    code = []
    first = 0
    heredoc_end = None
    i = 0
    while i < len(block.lines):
        line = block.lines[i]
        if heredoc_end is not None:
            code.append(line)
            if line.strip() == heredoc_end:
                heredoc_end = None
            i += 1
            continue
        if is_expected_start(line):
            value, after = expected_output(block, i)
            result.append(Segment(block, first, "\n".join(code), value, i))
            code = []
            first = after
            i = after
            continue
        match = HEREDOC.search(line)
        if match:
            heredoc_end = match.group(2)
        code.append(line)
        i += 1
    if heredoc_end is not None:
        raise DocError("%s: a here-document without its end line %s"
                       % (block.where(), heredoc_end))
    if "\n".join(code).strip():
        result.append(Segment(block, first, "\n".join(code), None, None))
    return result


def runnable(blocks):
    """The blocks that run; refuses an info string that hides the choice."""
    chosen = []
    for block in blocks:
        if block.info in REFUSED_INFO:
            raise DocError("%s: a ```%s block: write ```sh (```js) for one this test runs, "
                           "or ```shell (```javascript) for one that is shown only "
                           "(tests/docs/test_shell_blocks.py)" % (block.where(-1), block.info))
        if block.info in (RUN_INFO, JS_INFO):
            chosen.append(block)
    return chosen


# -- comparing an output with what the page shows -----------------------------


def match(expected, actual, path="$", name=""):
    """Returns None when actual matches expected, else what differs."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return "%s: expected an object, got %s" % (path, json.dumps(actual))
        if set(expected) != set(actual):
            return "%s: members %s, expected %s" % (path, sorted(actual), sorted(expected))
        for key in expected:
            differs = match(expected[key], actual[key], "%s.%s" % (path, key), key)
            if differs:
                return differs
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return "%s: expected %s, got %s" % (path, json.dumps(expected), json.dumps(actual))
        for k, (e, a) in enumerate(zip(expected, actual)):
            differs = match(e, a, "%s[%d]" % (path, k), name)
            if differs:
                return differs
        return None
    if isinstance(expected, str) and "..." in expected:
        pattern = ".*".join(re.escape(piece) for piece in expected.split("..."))
        if isinstance(actual, str) and re.fullmatch(pattern, actual, re.DOTALL):
            return None
    elif is_time(expected, name):
        if type(actual) is int and actual > 0:
            return None
    elif type(expected) is type(actual) and expected == actual:
        return None
    return "%s: expected %s, got %s" % (path, json.dumps(expected), json.dumps(actual))


def is_time(expected, name):
    return type(expected) is int and expected != 0 and name.endswith("_unix_ms")


def json_values(text):
    """The JSON values printed one after another (with or without white
    space between them); None when the text is not only that."""
    decoder = json.JSONDecoder()
    values = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return values
        try:
            value, i = decoder.raw_decode(text, i)
        except ValueError:
            return None
        values.append(value)


def check_the_checker():
    """The comparison must be able to fail, or every check below is empty."""
    assert match({"a": 1}, {"a": 1}) is None
    assert match({"a": 1}, {"a": 2}) is not None
    assert match({"a": 1}, {"a": 1, "b": 2}) is not None
    assert match({"a": "1"}, {"a": 1}) is not None
    assert match({"s": "llk-..."}, {"s": "llk-abc"}) is None
    assert match({"s": "llk-..."}, {"s": "sk-abc"}) is not None
    assert match({"t_unix_ms": 17}, {"t_unix_ms": 18}) is None
    assert match({"t_unix_ms": 0}, {"t_unix_ms": 18}) is not None
    assert match({"t": 17}, {"t": 18}) is not None
    assert match([1, 2], [1]) is not None
    assert json_values('{"a":1}{"b":2}\n[3]') == [{"a": 1}, {"b": 2}, [3]]
    assert json_values("not json") is None


# -- the server a reader starts in another shell --------------------------------


class Servers:
    """The llmlimitd the blocks start, one at a time, asked for by the
    build/llmlimitd stand-in over a Unix socket; and the files rewritten so
    that the providers' URLs point at the fake upstream."""

    def __init__(self, binary, upstream_url, state_dir):
        self.binary = binary
        self.upstream_url = upstream_url
        self.state_dir = state_dir
        self.process = None
        self.log_path = None
        self.started = 0
        self.problems = []
        self.rewritten = set()
        self.control = os.path.join(state_dir, "control.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.control)
        self._listener.listen(4)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as stream:
                try:
                    request = json.loads(stream.readline())
                    reply = self.start(request["argv"], request["env"], request["cwd"])
                except Exception as error:  # noqa: BLE001 - the stand-in reports it
                    reply = {"ok": False, "log": "docs test: %r" % error}
                stream.write((json.dumps(reply) + "\n").encode())
                stream.flush()

    def rewrite_provider_urls(self, root):
        """The fake upstream in place of the providers in the files under
        root (build/ is the build's own)."""
        for folder, dirs, files in os.walk(root):
            if folder == root and "build" in dirs:
                dirs.remove("build")
            for name in files:
                path = os.path.join(folder, name)
                if os.path.islink(path) or os.path.getsize(path) > REWRITE_BYTES_MAX:
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                changed = data
                for url in PROVIDER_URLS:
                    changed = changed.replace(url.encode(), self.upstream_url.encode())
                if changed != data:
                    with open(path, "wb") as f:
                        f.write(changed)
                    self.rewritten.add(os.path.relpath(path, root))

    def start(self, argv, env, cwd):
        self.stop(signal.SIGINT)
        self.rewrite_provider_urls(cwd)
        self.started += 1
        self.log_path = os.path.join(self.state_dir, "llmlimitd-%d.log" % self.started)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen([self.binary] + argv, cwd=cwd, env=env,
                                            stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if LISTENING.search(self.log()):
                return {"ok": True, "pid": self.process.pid}
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        code = self.stop(signal.SIGKILL, checked=False)
        return {"ok": False, "log": "llmlimitd %s did not start (exit %s):\n%s"
                % (" ".join(argv), code, self.log())}

    def log(self):
        if self.log_path is None:
            return ""
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self, sig=signal.SIGTERM, checked=True):
        """Stops the running server, if any; a graceful stop must exit 0."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(SERVER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
            self.problems.append("llmlimitd did not stop within %ds of signal %d:\n%s"
                                 % (SERVER_STOP_TIMEOUT_S, sig, self.log()))
        self.process = None
        if checked and code != 0:
            self.problems.append("llmlimitd exited %d when stopped:\n%s" % (code, self.log()))
        return code

    def close(self):
        self.stop()
        self._listener.close()


def stand_in_server(args):
    """build/llmlimitd in the page's directory: a run of the server goes to
    the test (Servers.start), which keeps it running as another shell would;
    --help and --version are the real binary's."""
    real = os.environ["DOCS_TEST_LLMLIMITD"]
    if any(arg in SERVER_ONE_SHOT_FLAGS for arg in args):
        os.execv(real, [real] + args)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCS_TEST_")}
    request = {"argv": args, "env": env, "cwd": os.getcwd()}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(os.environ["DOCS_TEST_CONTROL"])
        with conn.makefile("rwb") as stream:
            stream.write((json.dumps(request) + "\n").encode())
            stream.flush()
            reply = json.loads(stream.readline())
    if not reply["ok"]:
        sys.stderr.write(reply["log"] + "\n")
        return 1
    sys.stderr.write("docs test: llmlimitd %s runs in the background (pid %d), as in another "
                     "shell\n" % (" ".join(args), reply["pid"]))
    return 0


def stand_in_make(args):
    """make in the page's directory: `make run [ARGS=...]` is the Makefile's
    recipe once the build is there; other targets are noted, not run."""
    assignments = dict(a.split("=", 1) for a in args if "=" in a and not a.startswith("-"))
    targets = [a for a in args if "=" not in a]
    if targets == ["run"] and set(assignments) <= {"ARGS"}:
        command = "./build/llmlimitd " + assignments.get("ARGS", "")
        os.execv("/bin/sh", ["sh", "-c", command])
    if "run" in targets or any(a.startswith("-") for a in targets):
        sys.stderr.write("docs test: make %s: only `make run [ARGS=...]` is carried out here\n"
                         % " ".join(args))
        return 2
    with open(os.environ["DOCS_TEST_NOT_RUN"], "a") as f:
        f.write("make %s\n" % " ".join(args))
    sys.stderr.write("docs test: make %s is not run inside the test\n" % " ".join(args))
    return 0


# -- running a page -------------------------------------------------------------


class Shell:
    """One `sh -eu` for a page; runs its segments one after another."""

    def __init__(self, cwd, env, state_dir):
        self.state_dir = state_dir
        self.count = 0
        self.process = subprocess.Popen(["sh", "-eu"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True)
        self.out = bytearray()
        self.err = bytearray()
        self.out_at = 0
        self.err_at = 0
        self.changed = threading.Condition()
        self.pumps = [threading.Thread(target=self._pump, args=(self.process.stdout, self.out),
                                       daemon=True),
                      threading.Thread(target=self._pump, args=(self.process.stderr, self.err),
                                       daemon=True)]
        for pump in self.pumps:
            pump.start()

    def _pump(self, stream, into):
        while True:
            data = stream.read1(65536)
            with self.changed:
                if data:
                    into.extend(data)
                self.changed.notify_all()
            if not data:
                return

    def run(self, code):
        """Runs code; returns (finished, stdout, stderr) of it alone."""
        self.count += 1
        path = os.path.join(self.state_dir, "segment-%d.sh" % self.count)
        with open(path, "w") as f:
            f.write(code + "\n")
        mark = "@@docs-test-end-%d@@" % self.count
        line = ". %s </dev/null\nprintf '\\n%s\\n'\nprintf '%s\\n' >&2\n" % (
            shlex.quote(path), mark, mark)
        try:
            self.process.stdin.write(line.encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            pass
        out_mark, err_mark = ("\n" + mark + "\n").encode(), (mark + "\n").encode()
        deadline = time.monotonic() + SEGMENT_TIMEOUT_S
        with self.changed:
            while not (out_mark in self.out[self.out_at:] and err_mark in self.err[self.err_at:]):
                if self.process.poll() is not None and all(not p.is_alive() for p in self.pumps):
                    break
                if time.monotonic() > deadline:
                    break
                self.changed.wait(0.1)
            out_end = self.out.find(out_mark, self.out_at)
            err_end = self.err.find(err_mark, self.err_at)
            finished = out_end >= 0 and err_end >= 0
            out = bytes(self.out[self.out_at:out_end if finished else len(self.out)])
            err = bytes(self.err[self.err_at:err_end if finished else len(self.err)])
            if finished:
                self.out_at = out_end + len(out_mark)
                self.err_at = err_end + len(err_mark)
        return finished, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def status(self):
        code = self.process.poll()
        return "still running after %ds" % SEGMENT_TIMEOUT_S if code is None else "exit %d" % code

    def close(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for pump in self.pumps:
            pump.join(5)


def curl_statuses(err):
    """(status, method, URL) of each curl call, from the write-out on stderr;
    and stderr without those lines."""
    calls, rest = [], []
    for line in err.splitlines():
        if line.startswith(CURL_MARK):
            status, method, url = (line[len(CURL_MARK):].split(" ", 2) + ["", ""])[:3]
            calls.append((status, method, url))
        else:
            rest.append(line)
    return calls, "\n".join(rest)


def judge(segment, finished, status, out, err):
    """What is wrong with a segment's run; None when nothing is."""
    calls, err_text = curl_statuses(err)
    report = "\n--- stdout:\n%s\n--- stderr:\n%s" % (out.rstrip(), err_text.rstrip())
    if calls:
        report += "\n--- curl:\n" + "\n".join(" ".join(call) for call in calls)
    if not finished:
        return "the commands did not finish (sh %s)%s" % (status, report)
    shown = segment.expected is not None
    for k, (code, method, url) in enumerate(calls):
        last = k == len(calls) - 1
        if code == "000":
            return "curl %s %s got no answer%s" % (method, url, report)
        if int(code) >= 400 and not (shown and last):
            return "curl %s %s answered %s%s" % (method, url, code, report)
    if not shown:
        return None
    values = json_values(out)
    if not values:
        return "the page shows an output, the commands printed no JSON (only that)%s" % report
    differs = match(segment.expected, values[-1])
    if differs:
        return "the output is not the one the page shows (line %s): %s%s" % (
            segment.block.where(segment.expected_line), differs, report)
    return None


def js_unavailable(source_dir):
    """Why the js blocks cannot run here; None when they can."""
    if shutil.which("node") is None:
        return "node is not installed"
    packages = os.path.join(source_dir, JS_PACKAGES)
    if not os.path.isdir(os.path.join(packages, JS_PACKAGE_NEEDED)):
        return "%s has no %s (make test-deps)" % (JS_PACKAGES, JS_PACKAGE_NEEDED)
    return None


def js_segment(block, state, source_dir):
    """A js block as a segment of the page's shell: node runs it as a module
    beside the pinned packages."""
    folder = os.path.join(state, "js")
    if not os.path.isdir(folder):
        os.makedirs(folder)
        os.symlink(os.path.join(source_dir, JS_PACKAGES), os.path.join(folder, "node_modules"))
    path = os.path.join(folder, "block-%d.mjs" % block.line)
    with open(path, "w") as f:
        f.write("\n".join(block.lines) + "\n")
    return Segment(block, 0, "node %s" % shlex.quote(path), None, None)


def make_directories(root, binary, cli):
    """The page's directory (build/ of the build's files, the stand-ins)
    and the test's own (shims, logs)."""
    work = os.path.join(root, "work")
    state = os.path.join(root, "state")
    build = os.path.join(work, "build")
    bin_dir = os.path.join(state, "bin")
    home = os.path.join(state, "home")
    for folder in (build, bin_dir, home):
        os.makedirs(folder)
    build_dir = os.path.dirname(binary)
    for name in os.listdir(build_dir):
        if name not in ("llmlimitd", "llmlimit"):
            os.symlink(os.path.join(build_dir, name), os.path.join(build, name))
    os.symlink(cli, os.path.join(build, "llmlimit"))
    os.symlink(cli, os.path.join(bin_dir, "llmlimit"))  # the installed command
    this = os.path.abspath(__file__)
    for path, mode in ((os.path.join(build, "llmlimitd"), "--stand-in-server"),
                       (os.path.join(bin_dir, "make"), "--stand-in-make")):
        with open(path, "w") as f:
            f.write("#!/bin/sh\n# the docs test's stand-in: see %s\nexec %s %s %s \"$@\"\n"
                    % (os.path.basename(this), shlex.quote(sys.executable), shlex.quote(this),
                       mode))
        os.chmod(path, 0o755)
    # Each curl reports its status on stderr; the page's own flags come after.
    with open(os.path.join(home, ".curlrc"), "w") as f:
        f.write('write-out = "%%{stderr}%s%%{http_code} %%{method} %%{url_effective}\\n"\n'
                % CURL_MARK)
    return work, state, bin_dir, home


def page_note(page, blocks, servers, not_run_path, js_skipped):
    """What ran of a page, what did not, and what was rewritten."""
    shown = ["```%s at line %d" % (b.info, b.line) for b in blocks
             if b.info in ("shell", "console", "javascript")]
    note = "%s: %d blocks run, %d server starts; shown only: %s" % (
        page, len(runnable(blocks)) - len(js_skipped), servers.started,
        ", ".join(shown) or "none")
    if js_skipped:
        note += "; not run: " + ", ".join("```js at line %d" % b.line for b in js_skipped)
    if os.path.exists(not_run_path):
        with open(not_run_path) as f:
            note += "; not run: " + ", ".join(f.read().splitlines())
    if servers.rewritten:
        note += "; the fake upstream in place of the provider in " + ", ".join(
            sorted(servers.rewritten))
    return note


def run_page(page, source_dir, binary, cli, upstream_url, js_reason):
    """Runs a page's blocks (its js blocks only when js_reason is None);
    returns (failures, notes, the js blocks not run)."""
    with open(os.path.join(source_dir, page), encoding="utf-8") as f:
        blocks = read_blocks(page, f.read())
    run_blocks = runnable(blocks)
    root = tempfile.mkdtemp(prefix="llmlimit-docs-")
    failures, notes, js_skipped = [], [], []
    servers = shell = None
    try:
        work, state, bin_dir, home = make_directories(root, binary, cli)
        servers = Servers(binary, upstream_url, state)
        not_run = os.path.join(state, "not-run.txt")
        env = {"PATH": bin_dir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
               "HOME": home, "CURL_HOME": home, "LANG": "C.UTF-8", "TMPDIR": state,
               "DOCS_TEST_LLMLIMITD": binary, "DOCS_TEST_CONTROL": servers.control,
               "DOCS_TEST_NOT_RUN": not_run}
        shell = Shell(work, env, state)
        for block in run_blocks:
            if block.info == JS_INFO and js_reason is not None:
                js_skipped.append(block)
                continue
            parts = [js_segment(block, state, source_dir)] if block.info == JS_INFO else \
                segments(block)
            for segment in parts:
                finished, out, err = shell.run(segment.code)
                servers.rewrite_provider_urls(work)
                wrong = judge(segment, finished, shell.status(), out, err)
                if wrong:
                    failures.append("%s: %s\n--- llmlimitd's log:\n%s" % (
                        segment.block.where(segment.first), wrong, servers.log()[-3000:]))
                    return failures, notes, js_skipped
        servers.stop()
        failures.extend(servers.problems)
        notes.append(page_note(page, blocks, servers, not_run, js_skipped))
        return failures, notes, js_skipped
    finally:
        if shell is not None:
            shell.close()
        if servers is not None:
            servers.close()
        shutil.rmtree(root, ignore_errors=True)


# -- where it runs --------------------------------------------------------------


def loopback_up():
    """Brings lo up in a fresh network namespace (it starts down)."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, siocgifflags, request))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


def namespace_command():
    """The command that runs this test in a network namespace of its own,
    or None when this machine gives none."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    command = [unshare, "--net", "--map-root-user"]
    probe = subprocess.run(command + ["true"], capture_output=True)
    return command if probe.returncode == 0 else None


def busy_ports(source_dir):
    """The ports the pages' blocks name (and llmlimitd's default) that
    something here already listens on."""
    ports = {DEFAULT_PORT}
    for page in PAGES:
        with open(os.path.join(source_dir, page), encoding="utf-8") as f:
            for block in runnable(read_blocks(page, f.read())):
                ports.update(int(p) for p in PORT_IN_TEXT.findall("\n".join(block.lines)))
    busy = []
    for port in sorted(ports):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                busy.append(port)
    return busy


def take(argv, name, default):
    if name in argv:
        i = argv.index(name)
        value = argv[i + 1]
        del argv[i : i + 2]
        return os.path.abspath(value)
    return os.path.abspath(default)


def skip(reason):
    print("SKIPPED: " + reason)
    return SKIP


def main(argv):
    if argv[:1] == ["--stand-in-server"]:
        return stand_in_server(argv[1:])
    if argv[:1] == ["--stand-in-make"]:
        return stand_in_make(argv[1:])
    in_namespace = "--in-namespace" in argv
    options = [a for a in argv if a != "--in-namespace"]
    binary = take(options, "--binary", "build/llmlimitd")
    cli = take(options, "--cli", os.path.join(os.path.dirname(binary), "llmlimit"))
    source_dir = take(options, "--source-dir", SOURCE_DIR_DEFAULT)
    check_the_checker()
    for tool in ("sh", "curl"):
        if shutil.which(tool) is None:
            return skip("%s is not installed (the docs' blocks use it)" % tool)
    if not in_namespace:
        command = namespace_command()
        if command is not None:
            os.execv(command[0], command + [sys.executable, os.path.abspath(__file__),
                                            "--in-namespace"] + argv)
        busy = busy_ports(source_dir)
        if busy:
            return skip("port %s in use here and no network namespace (unshare --net) to run "
                        "the docs' blocks in" % ", ".join(map(str, busy)))
        print("no network namespace here: the blocks run on this machine's loopback")
    else:
        loopback_up()
    sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
    import fake_upstream  # noqa: E402 - after the namespace is there

    upstream = fake_upstream.start()
    failed = False
    js_reason = js_unavailable(source_dir)
    js_skipped = 0
    try:
        for page in PAGES:
            failures, notes, skipped = run_page(page, source_dir, binary, cli, upstream.url,
                                                js_reason)
            js_skipped += len(skipped)
            for note in notes:
                print(note)
            for failure in failures:
                failed = True
                print("FAIL " + failure)
        calls = [r for r in upstream.requests() if r["path"].startswith("/v1/")]
        print("the fake upstream answered %d calls" % len(calls))
    finally:
        upstream.stop()
    if failed:
        print("FAILED")
        return 1
    if js_skipped:
        return skip("every ```sh block ran as written, but %d ```js blocks could not run: %s"
                    % (js_skipped, js_reason))
    print("ok: every ```sh and ```js block of %s runs as written" % ", ".join(PAGES))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except DocError as error:
        print("FAIL " + str(error))
        sys.exit(1)
