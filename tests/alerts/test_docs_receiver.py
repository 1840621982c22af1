"""docs/alerts.md's receiver, run as printed: the page's Python receiver, the
llmlimitd flags and the curl commands of its shell block, and the line the page says
the receiver prints. A body whose signature does not match is refused (401) and not
printed, so the page's signature check is one."""

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
from harness import Server, binary_from_argv, main, wait_until  # noqa: E402

BINARY = binary_from_argv()
PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "alerts.md")


def blocks(text, info):
    return re.findall(r"^```" + info + r"\n(.*?)^```$", text, re.S | re.M)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DocsReceiverTest(unittest.TestCase):
    def test_the_pages_receiver_prints_what_the_page_says(self):
        with open(PAGE) as f:
            text = f.read()
        receiver_code = blocks(text, "python")[-1]
        shell = blocks(text, "shell")[-1]
        expected = blocks(text, "text")[-1]
        work = tempfile.mkdtemp(prefix="llmlimit-alerts-docs-")
        # The shell block's first line writes the secret; run it as printed.
        first = shell.splitlines()[0]
        self.assertTrue(first.startswith("printf "), first)
        subprocess.run(["sh", "-ec", first], cwd=work, check=True)
        with open(os.path.join(work, "receiver.py"), "w") as f:
            f.write(receiver_code)
        port = free_port()
        receiver = subprocess.Popen([sys.executable, "receiver.py"], cwd=work,
                                    env=dict(os.environ, PORT=str(port)),
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        server = None
        try:
            self.assertTrue(wait_until(lambda: socket_open(port)))
            flags = re.search(r"build/llmlimitd (.*) &", shell).group(1)
            flags = flags.replace("http://127.0.0.1:9000/", "http://127.0.0.1:%d/" % port)
            args = [a if a != "alert-secret" else os.path.join(work, a)
                    for a in shlex.split(flags)] + ["--alert-scan-ms", "100"]
            server = Server(BINARY, args=args).start()
            # A forged alert: refused, never printed.
            forged = json.dumps({"id": "x", "type": "limit.threshold", "key": "forged",
                                 "at_percent": 1, "used": 1}).encode()
            request = urllib.request.Request("http://127.0.0.1:%d/" % port, data=forged,
                                             headers={"x-llmlimit-signature": "sha256=00"})
            with self.assertRaises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            self.assertEqual(refused.exception.code, 401)
            commands = re.findall(r"^curl .*?(?=^curl |\Z)", shell, re.S | re.M)
            self.assertEqual(len(commands), 3)
            for command in commands:
                command = command.replace("localhost:8470", "%s:%d" % (server.host, server.port))
                done = subprocess.run(["sh", "-ec", command], capture_output=True, text=True)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertFalse(json.loads(done.stdout).get("error"), done.stdout)
            line = receiver.stdout.readline()
            self.assertEqual(line, expected)
        finally:
            if server is not None:
                server.cleanup()
            receiver.kill()
            receiver.wait()


def socket_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        time.sleep(0.05)
        return False


if __name__ == "__main__":
    main(warnings="ignore")
