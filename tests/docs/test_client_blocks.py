"""Every example of a client's page runs as printed, in order, against the
real llmlimitd, prints what the page says it prints, and leaves nothing held.

Run by ctest (docs_client_python, docs_client_node) as:
  test_client_blocks.py --page docs/client-python.md --binary LLMLIMITD --source-dir REPO

Which blocks run. On docs/client-python.md a block fenced ```python runs,
with python3, the repository's clients/python on PYTHONPATH (as after `pip
install ./clients/python`); on docs/client-node.md a block fenced ```js
runs, with node, as an .mjs file beside node_modules/llmlimit, a link to
clients/node (as after `npm install ./clients/node`). Other blocks are shown
only; `py`, `python3`, `javascript` and `mjs` are refused, so that a new
block is one or the other on purpose.

Where. One llmlimitd --backend memory on the address the pages use,
127.0.0.1:8470, fresh for each page, in a network namespace of the test's
own (unshare --net) when the machine gives one; without one the port must be
free, else the test is skipped. Each block is a new process in a fresh
directory, with nothing of the caller's environment but PATH (no
LLMLIMIT_* token).

What is checked, for each block:
- it exits 0 and writes nothing on stderr (a warning the client logs, an
  uncaught error);
- when it ends with a comment line that ends in "prints:", the comment lines
  after it are its output, line for line; `...` in a line stands for any text;
- no reserve it made was denied with unknown_limit_key or exceeds_capacity
  (an example asks only for limits it, or one before it, created);
- it leaves no capacity held: every limit's reserved is 0 when it ends.
"""

import json
import socket
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_shell_blocks as shell  # noqa: E402 - the fences, the namespace

SKIP = 77
BLOCK_TIMEOUT_S = 120.0
SERVER_START_TIMEOUT_S = 30.0
ADDRESS = "127.0.0.1:8470"
DEFINITIVE = ("unknown_limit_key", "exceeds_capacity")

LANGUAGES = {
    "docs/client-python.md": {"info": "python", "refused": ("py", "python3"),
                              "comment": "#", "tool": "python3"},
    "docs/client-node.md": {"info": "js", "refused": ("javascript", "mjs"),
                            "comment": "//", "tool": "node"},
}


def expected_output(block, comment):
    """The lines a block says it prints (None when it says nothing): the
    comment lines after its last line ending in "prints:"."""
    lines = block.lines
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i].strip()
        if not line.startswith(comment):
            return None
        if line.lower().endswith("prints:"):
            shown = []
            for later in lines[i + 1:]:
                text = later.strip()[len(comment):]
                shown.append(text[1:] if text.startswith(" ") else text)
            return shown
    return None


def line_matches(expected, actual):
    pattern = ".*".join(re.escape(piece) for piece in expected.split("..."))
    return re.fullmatch(pattern, actual) is not None


def check_the_checker():
    block = shell.Block("x", 1, "python", ["print(1)", "# It prints:", "# 1", "# a ... b"])
    assert expected_output(block, "#") == ["1", "a ... b"]
    assert expected_output(shell.Block("x", 1, "python", ["print(1)", "# 1"]), "#") is None
    assert line_matches("a ... b", "a xyz b") and not line_matches("a ... b", "a xyz c")
    assert not line_matches("1", "10")


class Server:
    def __init__(self, binary, root):
        self.data = os.path.join(root, "data")
        self.log_path = os.path.join(root, "llmlimitd.log")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [binary, "--backend", "memory", "--listen", ADDRESS, "--data-dir", self.data],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not shell.LISTENING.search(self.log()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("llmlimitd did not start:\n" + self.log())
            time.sleep(0.05)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def get(self, path):
        with urllib.request.urlopen("http://%s%s" % (ADDRESS, path), timeout=10) as answer:
            return answer.read().decode()

    def denials(self):
        return json.loads(self.get("/v1/console/denials?limit=256"))["denials"]

    def held(self):
        """{key: reserved} of every limit holding anything."""
        held = {}
        for line in self.get("/metrics").splitlines():
            match = re.match(r'llmlimit_limit_reserved\{key="([^"]*)"\} ([0-9]+)$', line)
            if match and int(match.group(2)) != 0:
                held[match.group(1)] = int(match.group(2))
        return held

    def stop(self):
        self.process.terminate()
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def block_command(language, source_dir, work, block, number):
    """Writes a block where its process runs; returns (argv, env)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work, "LANG": "C.UTF-8"}
    if language["tool"] == "python3":
        path = os.path.join(work, "example_%d.py" % number)
        env["PYTHONPATH"] = os.path.join(source_dir, "clients", "python")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        argv = [sys.executable, path]
    else:
        path = os.path.join(work, "example_%d.mjs" % number)
        argv = [shutil.which("node"), path]
    with open(path, "w") as f:
        f.write("\n".join(block.lines) + "\n")
    return argv, env


def run_block(language, source_dir, work, server, block, number):
    """What is wrong with a block's run; None when nothing is."""
    denials_before = {d["id"] for d in server.denials()}
    argv, env = block_command(language, source_dir, work, block, number)
    try:
        done = subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "did not end within %ds" % BLOCK_TIMEOUT_S
    report = "\n--- stdout:\n%s--- stderr:\n%s" % (done.stdout, done.stderr)
    if done.returncode != 0:
        return "exit %d%s" % (done.returncode, report)
    if done.stderr.strip():
        return "wrote on stderr%s" % report
    shown = expected_output(block, language["comment"])
    if shown is not None:
        printed = done.stdout.splitlines()
        if len(printed) != len(shown) or not all(map(line_matches, shown, printed)):
            return "printed not what the page shows:\n%s%s" % ("\n".join(shown), report)
    for denial in server.denials():
        if denial["id"] not in denials_before and denial["error"].startswith(DEFINITIVE):
            return "a reserve was denied with %s: the example asks for a limit no example " \
                   "made (or one too small)%s" % (denial["error"], report)
    held = server.held()
    if held:
        return "left capacity held: %s%s" % (json.dumps(held), report)
    return None


def run_page(page, source_dir, binary):
    """Runs a page's blocks; returns its failures."""
    language = LANGUAGES[page]
    with open(os.path.join(source_dir, page), encoding="utf-8") as f:
        blocks = shell.read_blocks(page, f.read())
    for block in blocks:
        if block.info in language["refused"]:
            raise shell.DocError("%s: a ```%s block: write ```%s for one this test runs "
                                 "(tests/docs/test_client_blocks.py)"
                                 % (block.where(-1), block.info, language["info"]))
    run_blocks = [b for b in blocks if b.info == language["info"]]
    if not run_blocks:
        raise shell.DocError("%s: no ```%s block to run" % (page, language["info"]))
    root = tempfile.mkdtemp(prefix="llmlimit-docs-client-")
    failures = []
    server = None
    try:
        work = os.path.join(root, "work")
        os.makedirs(os.path.join(work, "node_modules"))
        os.symlink(os.path.join(source_dir, "clients", "node"),
                   os.path.join(work, "node_modules", "llmlimit"))
        server = Server(binary, root)
        for number, block in enumerate(run_blocks, 1):
            wrong = run_block(language, source_dir, work, server, block, number)
            if wrong:
                failures.append("%s: %s\n--- llmlimitd's log:\n%s"
                                % (block.where(), wrong, server.log()[-3000:]))
                break
        code = server.stop()
        server = None
        if code != 0 and not failures:
            failures.append("llmlimitd exited %d when stopped" % code)
        print("%s: %d blocks run" % (page, len(run_blocks)))
        return failures
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


def main(argv):
    in_namespace = "--in-namespace" in argv
    options = [a for a in argv if a != "--in-namespace"]
    page = None
    if "--page" in options:
        i = options.index("--page")
        page = options[i + 1]
        del options[i : i + 2]
    if page not in LANGUAGES:
        print("usage: test_client_blocks.py --page %s --binary LLMLIMITD --source-dir REPO"
              % "|".join(LANGUAGES))
        return 2
    binary = shell.take(options, "--binary", "build/llmlimitd")
    source_dir = shell.take(options, "--source-dir", shell.SOURCE_DIR_DEFAULT)
    check_the_checker()
    tool = LANGUAGES[page]["tool"]
    if tool != "python3" and shutil.which(tool) is None:
        return shell.skip("%s is not installed (the examples of %s run on it)" % (tool, page))
    if not in_namespace:
        command = shell.namespace_command()
        if command is not None:
            os.execv(command[0], command + [sys.executable, os.path.abspath(__file__),
                                            "--in-namespace"] + argv)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", shell.DEFAULT_PORT))
            except OSError:
                return shell.skip("port %d in use here and no network namespace (unshare "
                                  "--net) to run the examples in" % shell.DEFAULT_PORT)
        print("no network namespace here: the examples run on this machine's loopback")
    else:
        shell.loopback_up()
    failures = run_page(page, source_dir, binary)
    for failure in failures:
        print("FAIL " + failure)
    print("FAILED" if failures else "ok: every example of %s runs as printed" % page)
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except shell.DocError as error:
        print("FAIL " + str(error))
        sys.exit(1)
