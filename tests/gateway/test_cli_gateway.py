#!/usr/bin/env python3
"""`llmlimit gateway` end to end: new-key prints a secret whose SHA-256 is
the sha256 it prints, hash-key agrees with Python's hashlib, check loads a
valid gateway.json and names the file, line and field of a bad one."""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

failures = 0


def check(condition, what):
    global failures
    print(("ok   " if condition else "FAIL ") + what)
    failures += 0 if condition else 1


def run(cli, *args, stdin=None, env=None):
    return subprocess.run([cli, *args], input=stdin, capture_output=True, text=True, env=env,
                          timeout=30)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    cli = parser.parse_args().cli

    r = run(cli, "gateway", "new-key")
    key = json.loads(r.stdout) if r.returncode == 0 else {}
    secret = key.get("secret", "")
    check(r.returncode == 0 and re.fullmatch(r"llk-[A-Za-z0-9_-]{43}", secret) is not None,
          "new-key prints llk- and 43 base64url characters")
    check(key.get("sha256") == hashlib.sha256(secret.encode()).hexdigest(),
          "new-key's sha256 is the SHA-256 of its secret")
    again = json.loads(run(cli, "gateway", "new-key").stdout)
    check(again["secret"] != secret, "two new keys differ")

    r = run(cli, "--compact", "gateway", "hash-key", stdin=secret + "\n")
    check(r.returncode == 0 and json.loads(r.stdout) == {"sha256": key.get("sha256")},
          "hash-key of the secret gives the same sha256")
    r = run(cli, "gateway", "hash-key", stdin="\n")
    check(r.returncode == 2 and "the secret is empty" in r.stderr, "hash-key refuses an empty secret")

    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "gateway.json")
        config = {
            "upstreams": [{"name": "openai", "base_url": "https://api.openai.com/v1",
                           "api_key_env": "GW_CLI_TEST_KEY"}],
            "models": [{"name": "gpt-4o-mini", "upstream": "openai",
                        "input_usd_micros_per_mtok": 150000, "output_usd_micros_per_mtok": 600000,
                        "max_output_tokens": 16384, "default_max_output_tokens": 1024}],
            "keys": [{"sha256": key.get("sha256"), "caller": "sales-bot", "team": "sales"}],
            "limits": [{"key": "team:{team}:usd:month", "amount": "usd_micros"}],
        }
        with open(path, "w") as f:
            json.dump(config, f, indent=2)
        env = dict(os.environ, GW_CLI_TEST_KEY="sk-test")
        r = run(cli, "--compact", "gateway", "check", path, env=env)
        check(r.returncode == 0 and json.loads(r.stdout) == {
            "ok": True, "file": path, "upstreams": 1, "models": 1, "keys": 1, "limits": 1},
            "check loads a valid file and counts what it holds")
        env.pop("GW_CLI_TEST_KEY")
        r = run(cli, "gateway", "check", path, env=env)
        check(r.returncode == 2 and r.stderr.strip() == (
            f"llmlimit gateway: {path}: line 6: upstreams[0].api_key_env: environment variable "
            "GW_CLI_TEST_KEY is not set"), "check names the file, line and field of an error")
    r = run(cli, "gateway", "frobnicate")
    check(r.returncode == 2, "an unknown subcommand is a usage error")
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
