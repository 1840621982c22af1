"""llmlimit keys create|list|show|update|block|unblock|revoke|rotate (docs/cli.md,
"keys"), the real command against the real llmlimitd in gateway mode: one line of
JSON per answer, the secret printed by create and rotate only, each change in
force on the gateway's next call, and the exit statuses of bad arguments (2) and
of a key the server does not have (3).

Backend from --backend (memory, sqlite, tigerbeetle)."""

import json
import os
import secrets
import subprocess
import tempfile
import unittest

from gw_harness import CHAT, CLI, GatewayTest, chat, skip_unless_backend
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it
from test_gw_keys import limits_for


class KeysCli(GatewayTest, unittest.TestCase):
    def run_cli(self, *args, expect=0, stdin=None):
        env = dict(os.environ)
        env.pop("LLMLIMIT_ADMIN_TOKEN", None)
        env.pop("LLMLIMIT_TOKEN", None)
        done = subprocess.run([CLI, "--url", self.gw.server.url, "keys"] + list(args),
                              capture_output=True, text=True, timeout=30, env=env, input=stdin)
        self.assertEqual(done.returncode, expect, (args, done.stdout, done.stderr))
        if expect != 0:
            return done.stderr
        lines = done.stdout.splitlines()
        self.assertEqual(len(lines), 1, done.stdout)  # one line of JSON
        return json.loads(lines[0])

    def call(self, secret):
        status, _, answer = self.gw.call(secret, CHAT, chat("m-normal"))
        return status, (answer.get("error") or {}).get("code")

    def test_the_life_of_a_key_through_the_command(self):
        """create (with its limits from a file) prints the secret; list and show do not;
        update, block, unblock, revoke and rotate each change what the gateway does."""
        name, team = "cli-" + secrets.token_hex(3), "cli-team-" + secrets.token_hex(3)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(limits_for(self.gw, name, team), f)
        try:
            key = self.run_cli("create", "--caller", name, "--team", team, "--model", "m-normal",
                               "--metadata", "owner=ops", "--max-wait-seconds", "3",
                               "--limits-file", f.name)
        finally:
            os.unlink(f.name)
        secret = key["secret"]
        self.assertEqual((key["caller"], key["team"], key["models"], key["metadata"]),
                         (name, team, ["m-normal"], {"owner": "ops"}))
        self.assertEqual(self.call(secret), (200, None))
        shown = self.run_cli("show", key["id"])
        listed = self.run_cli("list", "--team", team, "--limit", "5")
        self.assertEqual([k["id"] for k in listed["keys"]], [key["id"]])
        for answer in (shown, listed):
            self.assertNotIn(secret, json.dumps(answer))
            self.assertNotIn("secret", json.dumps(answer))
        updated = self.run_cli("update", key["id"], "--all-models", "--priority-floor", "4",
                               "--metadata", "owner=sre")
        self.assertEqual((updated["models"], updated["priority_floor"], updated["metadata"]),
                         (None, 4, {"owner": "sre"}))
        # MCP servers (docs/mcp.md): none, then every one again; a name the gateway has
        # not is the server's 400, exit 2
        self.assertIsNone(updated["mcp_servers"])
        self.assertEqual(self.run_cli("update", key["id"], "--no-mcp-servers")["mcp_servers"], [])
        self.assertIsNone(self.run_cli("update", key["id"], "--all-mcp-servers")["mcp_servers"])
        error = self.run_cli("update", key["id"], "--mcp-server", "nope", expect=2)
        self.assertIn("unknown MCP server 'nope'", error)
        self.assertEqual(self.run_cli("block", key["id"])["status"], "blocked")
        self.assertEqual(self.call(secret), (401, "key_blocked"))
        self.assertEqual(self.run_cli("unblock", key["id"])["status"], "active")
        self.assertEqual(self.call(secret), (200, None))
        rotated = self.run_cli("rotate", key["id"], "--grace-seconds", "0")
        self.assertNotEqual(rotated["secret"], secret)
        self.assertEqual(self.call(secret), (401, "invalid_api_key"))
        self.assertEqual(self.call(rotated["secret"]), (200, None))
        self.assertEqual(self.run_cli("revoke", key["id"])["status"], "revoked")
        self.assertEqual(self.call(rotated["secret"]), (401, "key_revoked"))
        self.assertEqual(self.run_cli("list", "--team", team, "--status", "revoked")["keys"][0]
                         ["id"], key["id"])

    def test_bad_arguments_and_unknown_keys(self):
        """Bad arguments exit 2 before anything is sent (nothing is created); a refused body
        exits 2 with the server's reason; an unknown id exits 3 (404)."""
        team = "cli-bad-" + secrets.token_hex(3)
        for args in (("create", "--team", team), ("create", "--caller", "x", "--team", team,
                                                   "--max-wait-seconds", "many"),
                     ("create", "--caller", "x", "--team", team, "--metadata", "novalue"),
                     ("show",), ("show", "../etc"), ("update", "key_0000000000000000"),
                     ("rotate", "key_0000000000000000", "--grace", "1"), ("frobnicate",)):
            self.run_cli(*args, expect=2)
        self.assertEqual(self.run_cli("list", "--team", team)["keys"], [])
        error = self.run_cli("create", "--caller", "x", "--team", team, "--priority-floor",
                             "10", expect=2)
        self.assertIn("priority_floor", error)
        error = self.run_cli("show", "key_0000000000000000", expect=3)
        self.assertIn("key_not_found", error)
        self.run_cli("revoke", "key_0000000000000000", expect=3)


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main()
