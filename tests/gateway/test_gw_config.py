"""gateway.json as llmlimitd loads it (docs/gateway.md, "gateway.json"): a bad
file stops the start with "file: line L: path: reason"; DATA_DIR/gateway.json
is used without --gateway-config; SIGHUP with a valid file changes what
the gateway serves, with a broken one keeps the old configuration (and the
log says why); a file with no keys serves the Keys API's; a provider key
variable that is not set is a start-up error;
a call in flight during a reload finishes with the configuration it
started with.

The configuration does not depend on the backend: memory only."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import unittest

from gw_harness import (BINARY, CHAT, GatewayTest, Server, chat, gateway_config, new_key,
                        provider_env, skip_unless_backend, wait_until)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it

START_FAILURE_TIMEOUT_S = 20


def start_failure(config_text, env=None, file_name="bad.json"):
    """Runs llmlimitd with --gateway-config FILE holding config_text; returns
    (exit code, stderr) of a start that is expected to fail."""
    directory = tempfile.mkdtemp(prefix="llmlimit-gw-config-")
    try:
        path = os.path.join(directory, file_name)
        with open(path, "w") as f:
            f.write(config_text)
        done = subprocess.run(
            [BINARY, "--listen", "127.0.0.1:0", "--backend", "memory",
             "--data-dir", os.path.join(directory, "data"), "--gateway-config", path],
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            env=dict(os.environ, **(env or {})), timeout=START_FAILURE_TIMEOUT_S)
        return done.returncode, done.stderr
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def pretty(config):
    """The config as text with one member per line, so lines are known."""
    return json.dumps(config, indent=1)


def line_of(text, fragment):
    """1-based line of the first line holding fragment."""
    for number, line in enumerate(text.split("\n"), 1):
        if fragment in line:
            return number
    raise AssertionError("%r not in the text" % fragment)


def valid_config(upstream_url="http://127.0.0.1:9/v1"):
    _, sha256 = new_key()
    return gateway_config(upstream_url, [{"sha256": sha256, "caller": "a", "team": "a"}])


class StartFailures(unittest.TestCase):

    def assert_refused(self, text, expected, env=None):
        code, stderr = start_failure(text, env=dict(provider_env(), **(env or {})))
        self.assertNotEqual(code, 0, stderr)
        self.assertIn("invalid gateway config", stderr)
        self.assertIn(expected, stderr)
        self.assertNotIn("listening on", stderr)

    def test_bad_reference_is_refused_with_file_line_path_and_reason(self):
        """A model naming an unknown upstream: "bad.json: line L: models[0].upstream: ..."."""
        config = valid_config()
        config["models"][0]["upstream"] = "opnai"
        text = pretty(config)
        line = line_of(text, '"upstream": "opnai"')
        self.assert_refused(text, "bad.json: line %d: models[0].upstream: unknown upstream "
                                  "'opnai'" % line)

    def test_wrong_type_is_refused_with_its_line(self):
        """An amount given as a string is refused at its line."""
        config = valid_config()
        config["models"][1]["max_output_tokens"] = "4096"
        text = pretty(config)
        line = line_of(text, '"max_output_tokens": "4096"')
        self.assert_refused(text, "bad.json: line %d: models[1].max_output_tokens:" % line)

    def test_unknown_placeholder_is_refused(self):
        """A template with an unknown placeholder is refused naming it."""
        config = valid_config()
        config["limits"][5]["key"] = "usd:{tem}"
        text = pretty(config)
        line = line_of(text, '"usd:{tem}"')
        self.assert_refused(text, "bad.json: line %d: limits[5].key: unknown placeholder "
                                  "'{tem}'" % line)

    def test_an_invalid_default_is_refused_with_its_line_and_field(self):
        """A template's default that PUT /v1/admin/limits would refuse (a concurrency limit
        without its timeout): "bad.json: line L: limits[4].default.timeout_seconds: ..." at the
        default's line; a valid one starts."""
        config = valid_config()
        config["limits"][4]["default"] = {"kind": "concurrency", "capacity": 5}
        text = pretty(config)
        line = line_of(text, '"default": {')
        self.assert_refused(text, "bad.json: line %d: limits[4].default.timeout_seconds: "
                                  "required (> 0) for a concurrency limit" % line)
        config["limits"][4]["default"] = {"kind": "concurrency", "capacity": 0,
                                          "timeout_seconds": 300}
        text = pretty(config)
        self.assert_refused(text, "bad.json: line %d: limits[4].default.capacity: must be an "
                                  "integer 1..9223372036854775807" % line_of(text, '"capacity": 0'))

    def test_invalid_json_is_refused_with_its_position(self):
        """A file that is not JSON: "bad.json: invalid JSON: ... (line L, column C)"."""
        self.assert_refused('{"upstreams": [\n  {"name": "x",,}\n]}',
                            "bad.json: invalid JSON:")
        code, stderr = start_failure('{"upstreams": [\n  {"name": "x",,}\n]}', provider_env())
        self.assertIn("(line 2, column", stderr)

    def test_missing_provider_key_variable_is_a_start_up_error(self):
        """api_key_env naming an unset variable stops the start, naming field and variable."""
        config = valid_config()
        config["upstreams"][0]["api_key_env"] = "GW_TEST_NOT_SET_ANYWHERE"
        text = pretty(config)
        line = line_of(text, '"GW_TEST_NOT_SET_ANYWHERE"')
        self.assert_refused(text, "bad.json: line %d: upstreams[0].api_key_env: environment "
                                  "variable GW_TEST_NOT_SET_ANYWHERE is not set" % line)

    def test_missing_file_is_a_start_up_error(self):
        """--gateway-config naming no file stops the start."""
        directory = tempfile.mkdtemp(prefix="llmlimit-gw-config-")
        try:
            done = subprocess.run(
                [BINARY, "--listen", "127.0.0.1:0", "--backend", "memory",
                 "--data-dir", directory, "--gateway-config",
                 os.path.join(directory, "absent.json")],
                stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=START_FAILURE_TIMEOUT_S)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("absent.json", done.stderr)


class DataDir(unittest.TestCase):

    def mode_lines(self, server):
        """What the gateway mode lines of this start's log say (one is expected)."""
        return [re.search(r'msg="(gateway mode [a-z]+)"', line).group(1)
                for line in server.stderr_lines if 'msg="gateway mode' in line]

    def test_gateway_json_in_the_data_dir_is_used_without_the_flag(self):
        """DATA_DIR/gateway.json turns gateway mode on by itself, and the start log says so:
        off and where it looked, then on and the file it read."""
        secret, sha256 = new_key()
        config = gateway_config("http://127.0.0.1:9/v1",
                                [{"sha256": sha256, "caller": "a", "team": "a"}])
        with Server(BINARY, env=provider_env()) as server:
            path = os.path.join(server.data_dir, "gateway.json")
            # no gateway.json yet: gateway mode is off
            status, _, body = server.request("GET", "/v1/models", token=secret)
            self.assertEqual((status, body["error"]["code"]), (404, "gateway_not_enabled"))
            self.assertEqual(self.mode_lines(server), ["gateway mode off"])
            self.assertIn('looked_for="%s"' % path, server.stderr_text())
            server.stop()
            with open(path, "w") as f:
                json.dump(config, f)
            server.start()
            status, _, body = server.request("GET", "/v1/models", token=secret)
            self.assertEqual(status, 200, body)
            self.assertEqual(self.mode_lines(server), ["gateway mode on"])
            self.assertIn('msg="gateway mode on" config="%s" models="%d" keys="1" upstreams="%d" '
                          'limit_templates="%d"' % (path, len(config["models"]),
                                                    len(config["upstreams"]),
                                                    len(config["limits"])),
                          server.stderr_text())
            self.assertEqual([m["id"] for m in body["data"]],
                             [m["name"] for m in config["models"]])


class NoFileKeys(unittest.TestCase):
    """gateway.json with no keys (docs/gateway.md, "Turning it on"): every key
    comes from the Keys API."""

    def test_a_config_without_keys_serves_the_keys_of_the_api(self):
        """Absent or [] keys: gateway mode is on with keys="0", a secret no key has is 401
        invalid_api_key, and a key made through the API is served at once."""
        for keys in (None, []):
            config = gateway_config("http://127.0.0.1:9/v1", [])
            if keys is None:
                del config["keys"]
            with Server(BINARY, env=provider_env()) as server:
                path = os.path.join(server.data_dir, "gateway.json")
                server.stop()
                with open(path, "w") as f:
                    json.dump(config, f)
                server.start()
                self.assertIn('msg="gateway mode on" config="%s" models="%d" keys="0"'
                              % (path, len(config["models"])), server.stderr_text())
                stranger, _ = new_key()
                status, _, body = server.request("GET", "/v1/models", token=stranger)
                self.assertEqual((status, body["error"]["code"]), (401, "invalid_api_key"))
                status, _, made = server.request("POST", "/v1/admin/keys",
                                                 body={"caller": "a", "team": "a"})
                self.assertEqual(status, 201, made)
                status, _, body = server.request("GET", "/v1/models", token=made["secret"])
                self.assertEqual(status, 200, body)
                self.assertEqual([m["id"] for m in body["data"]],
                                 [m["name"] for m in config["models"]])


class Reload(GatewayTest, unittest.TestCase):

    def models(self, c):
        status, _, body = self.gw.call(c, "/v1/models", method="GET")
        self.assertEqual(status, 200, body)
        return [m["id"] for m in body["data"]]

    def reload(self, config):
        self.gw.write_config(config)
        lines = len(self.gw.server.stderr_lines)
        self.gw.sighup()
        self.assertTrue(wait_until(lambda: any(
            "gateway config" in line for line in self.gw.server.stderr_lines[lines:])),
            self.gw.server.stderr_text())
        return self.gw.server.stderr_lines[lines:]

    def test_sighup_with_a_valid_file_changes_what_is_served(self):
        """A new model appears after SIGHUP, and calls to it are served."""
        c = self.gw.caller()
        self.assertNotIn("m-new", self.models(c))
        config = json.loads(json.dumps(self.gw.config))
        new_model = dict(config["models"][0], name="m-new")
        config["models"].append(new_model)
        log = self.reload(config)
        self.assertTrue([line for line in log if "gateway config reloaded" in line], log)
        self.assertIn("m-new", self.models(c))
        self.assertEqual(self.gw.call(c, CHAT, chat("m-new"))[0], 200)
        self.gw.config = config

    def test_sighup_with_a_broken_file_keeps_the_old_config(self):
        """A broken file on SIGHUP: the old config stays, and the log says why."""
        c = self.gw.caller()
        before = self.models(c)
        config = json.loads(json.dumps(self.gw.config))
        config["models"][0]["upstream"] = "opnai"
        log = self.reload(config)
        reasons = [line for line in log if "gateway config not reloaded" in line]
        self.assertTrue(reasons, log)
        self.assertIn("models[0].upstream: unknown upstream 'opnai'", reasons[0])
        self.assertIn("gateway.json: line", reasons[0])
        self.assertEqual(self.models(c), before)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200)
        self.gw.write_config(self.gw.config)  # the file in force again, for other tests

    def test_sighup_removing_a_key_locks_it_out(self):
        """A key taken out of the file is refused after SIGHUP."""
        c = self.gw.caller()
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200)
        config = json.loads(json.dumps(self.gw.config))
        config["keys"] = [k for k in config["keys"] if k["caller"] != c.name]
        self.reload(config)
        status, _, body = self.gw.call(c, CHAT, chat("m-normal"))
        self.assert_openai_error(status, body, 401, "invalid_api_key")
        self.gw.config = config

    def test_call_in_flight_finishes_with_the_config_it_started_with(self):
        """A call running while its model is removed finishes and is settled."""
        c = self.gw.caller()
        answer = {}
        thread = threading.Thread(target=lambda: answer.update(
            result=self.gw.call(c, CHAT, chat("m-slow-plain"))))
        thread.start()
        try:
            self.gw.upstream.wait_for(lambda rs: rs and rs[-1]["body"]["model"].startswith(
                "fake-normal:delay_ms"))
            config = json.loads(json.dumps(self.gw.config))
            config["models"] = [m for m in config["models"] if m["name"] != "m-slow-plain"]
            self.reload(config)
            self.assertNotIn("m-slow-plain", self.models(c))
        finally:
            thread.join(30)
        self.gw.config = config
        self.assertEqual(answer["result"][0], 200, answer)
        self.assertEqual(c.snapshot()["tok"], (0, 4 + 7, 0))
        status, _, body = self.gw.call(c, CHAT, chat("m-slow-plain"))
        self.assert_openai_error(status, body, 404, "model_not_found")


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)
