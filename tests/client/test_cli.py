"""The llmlimit command against the real llmlimitd: every command's output
and exit status, tokens from files and the environment, and the example
program built on libllmlimit.

Run by ctest as: test_cli.py --binary LLMLIMITD --cli LLMLIMIT --example EXAMPLE
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
import harness  # noqa: E402


def take_argument(name, default):
    if name in sys.argv:
        i = sys.argv.index(name)
        value = sys.argv[i + 1]
        del sys.argv[i : i + 2]
        return os.path.abspath(value)
    return os.path.abspath(default)


CLI = take_argument("--cli", "build/llmlimit")
EXAMPLE = take_argument("--example", "build/llmlimit_example")
BINARY = harness.binary_from_argv()

passed = 0
failed = 0


def cli_environment(env=None):
    """This process's environment without LLMLIMIT_* settings, plus env."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("LLMLIMIT_")}
    environment.update(env or {})
    return environment


def run(server, *args, env=None, stdin=None, token=None):
    """Runs the CLI; returns (exit status, parsed stdout or text, stderr)."""
    environment = cli_environment(env)
    command = [CLI, "--url", server.url] + list(args)
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=environment,
                          timeout=60)
    try:
        out = json.loads(done.stdout) if done.stdout.strip() else None
    except ValueError:
        out = done.stdout
    return done.returncode, out, done.stderr


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def test(proves):
    def wrap(fn):
        def runner(server):
            global passed, failed
            try:
                fn(server)
                passed += 1
                print("ok   %s: %s" % (fn.__name__, proves))
            except Exception as error:  # noqa: BLE001 (report every failure the same way)
                failed += 1
                print("FAIL %s: %s\n  %s" % (fn.__name__, proves, error))
            sys.stdout.flush()
        runner.__name__ = fn.__name__
        return runner
    return wrap


@test("limits put (flags), get, list and delete print the documented JSON; exit 0")
def test_limits_commands(server):
    code, out, err = run(server, "limits", "put", "--key", "cli:rpm", "--kind", "rolling",
                         "--capacity", "2", "--window-seconds", "60", "--unit", "requests")
    check(code == 0, "put exit %d: %s" % (code, err))
    check(out == {"ok": True, "key": "cli:rpm", "status": "active", "created": True}, out)
    code, out, _ = run(server, "limits", "get", "cli:rpm")
    check(code == 0, code)
    check(out["definition"]["capacity"] == 2 and out["definition"]["unit"] == "requests", out)
    check(out["status"] == "active" and out["pending_decrease_to"] == 0, out)
    code, out, _ = run(server, "--compact", "limits", "list")
    check(code == 0 and any(s["definition"]["key"] == "cli:rpm" for s in out["limits"]), out)
    code, out, _ = run(server, "limits", "delete", "cli:rpm")
    check(code == 0 and out == {"ok": True}, out)
    code, _, err = run(server, "limits", "get", "cli:rpm")
    check(code == 3 and "404" in err, (code, err))


@test("limits put on a limit that exists keeps every field not given, and prints what changed")
def test_limits_put_keeps_what_it_is_not_given(server):
    key = "cli:usd:month"  # as the README's curl session makes it, then its command line
    status, _, _ = server.put_limit({"key": key, "kind": "budget", "capacity": 100000000,
                                     "period": "month", "unit": "usd_micros",
                                     "description": "sales", "timeout_seconds": 120})
    check(status == 200, status)
    _, before, _ = run(server, "limits", "get", key)
    code, out, err = run(server, "limits", "put", "--key", key, "--kind", "budget",
                         "--capacity", "100000000", "--period", "month")
    check(code == 0, err)
    check(out == {"ok": True, "key": key, "status": "active", "created": False, "changed": {}},
          out)
    _, after, _ = run(server, "limits", "get", key)
    check(after == before, (before, after))  # the unit, description and timeout stayed
    code, out, err = run(server, "limits", "put", "--key", key, "--capacity", "200000000",
                         "--unit", "usd")
    check(code == 0, err)
    check(out["changed"] == {"capacity": {"from": 100000000, "to": 200000000},
                             "unit": {"from": "usd_micros", "to": "usd"}}, out)
    _, after, _ = run(server, "limits", "get", key)
    check(after["definition"] == dict(before["definition"], capacity=200000000, unit="usd"),
          after)
    # A kind change is refused by the server, as before; nothing changes.
    code, _, err = run(server, "limits", "put", "--key", key, "--kind", "rolling",
                       "--capacity", "5", "--window-seconds", "60")
    check(code == 2 and "kind: cannot change budget to rolling" in err, (code, err))
    check(run(server, "limits", "get", key)[1] == after, "changed by a refused put")
    # A new key still needs its kind and capacity.
    code, _, err = run(server, "limits", "put", "--key", "cli:new", "--capacity", "5")
    check(code == 2 and "--kind and --capacity" in err, (code, err))
    check(run(server, "limits", "get", "cli:new")[0] == 3, "a refused put made a limit")


@test("limits put --file loads one definition, an array, or `limits list` output")
def test_limits_put_file(server):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "limits.json")
        with open(path, "w") as f:
            json.dump([{"key": "file:a", "kind": "concurrency", "capacity": 3,
                        "timeout_seconds": 30},
                       {"key": "file:b", "kind": "budget", "capacity": 1000000,
                        "period": "month", "unit": "usd_micros"}], f)
        code, out, err = run(server, "limits", "put", "--file", path)
        check(code == 0, err)
        check([o["key"] for o in out] == ["file:a", "file:b"], out)
        _, listed, _ = run(server, "limits", "list")
        code, out, err = run(server, "limits", "put", "--file", "-", stdin=json.dumps(listed))
        check(code == 0 and all(o["ok"] for o in out), (code, out, err))
        code, _, err = run(server, "limits", "put", "--file", "-",
                           stdin='{"key":"file:c","kind":"rolling","capacity":1,"bogus":1}')
        check(code == 2 and "bogus" in err, (code, err))


@test("a budget's period_anchor_day and time_zone: set by flags, kept by a put that does not "
      "name them, and carried through `limits list` and `limits put --file`")
def test_limits_period_fields(server):
    key = "cli:berlin:month15"
    code, out, err = run(server, "limits", "put", "--key", key, "--kind", "budget",
                         "--capacity", "100", "--period", "month", "--period-anchor-day", "15",
                         "--time-zone", "Europe/Berlin")
    check(code == 0 and out["created"], (code, out, err))
    _, got, _ = run(server, "limits", "get", key)
    check((got["definition"]["period_anchor_day"], got["definition"]["time_zone"]) ==
          (15, "Europe/Berlin"), got)
    # A capacity change by flags keeps the periods (the server would refuse to drop them).
    code, out, err = run(server, "limits", "put", "--key", key, "--capacity", "200")
    check(code == 0 and out["changed"] == {"capacity": {"from": 100, "to": 200}}, (code, out, err))
    # Another zone is a period change: refused, naming the field; nothing changes.
    code, _, err = run(server, "limits", "put", "--key", key, "--time-zone", "America/New_York")
    check(code == 2 and "time_zone: cannot change Europe/Berlin to America/New_York" in err,
          (code, err))
    # list -> put --file: the same definitions, zone and anchor included.
    _, listed, _ = run(server, "limits", "list")
    mine = [s for s in listed["limits"] if s["definition"]["key"] == key]
    check(mine and mine[0]["definition"]["time_zone"] == "Europe/Berlin", mine)
    code, out, err = run(server, "limits", "put", "--file", "-", stdin=json.dumps(listed))
    check(code == 0 and all(o["ok"] for o in out), (code, out, err))
    _, after, _ = run(server, "limits", "get", key)
    check(after["definition"] == dict(got["definition"], capacity=200), after)


@test("a limit's alerts and webhook: set by --alerts and --webhook, kept by a put that does not "
      "name them, refused when bad, and carried through `limits list` and `limits put --file`")
def test_limits_alert_fields(server):
    key = "cli:alerted"
    code, out, err = run(server, "limits", "put", "--key", key, "--kind", "budget",
                         "--capacity", "100", "--period", "month",
                         "--alerts", '[{"at_percent":80},{"runout_before_period_end":true}]',
                         "--webhook", "https://hooks.example/a")
    check(code == 0 and out["created"], (code, out, err))
    _, got, _ = run(server, "limits", "get", key)
    check(got["definition"]["alerts"] == [{"at_percent": 80}, {"runout_before_period_end": True}]
          and got["definition"]["webhook"] == "https://hooks.example/a", got)
    code, out, err = run(server, "limits", "put", "--key", key, "--capacity", "200")
    check(code == 0 and out["changed"] == {"capacity": {"from": 100, "to": 200}}, (code, out, err))
    code, _, err = run(server, "limits", "put", "--key", key, "--alerts", '[{"at_percent":0}]')
    check(code == 2 and "alerts[0].at_percent" in err, (code, err))
    code, out, err = run(server, "limits", "put", "--key", key, "--webhook",
                         '{"url":"https://hooks.example/s","format":"slack"}')
    check(code == 0 and "webhook" in out["changed"], (code, out, err))
    _, listed, _ = run(server, "limits", "list")
    mine = [s for s in listed["limits"] if s["definition"]["key"] == key]
    code, _, err = run(server, "limits", "delete", key)
    check(code == 0, err)
    code, out, err = run(server, "limits", "put", "--file", "-", stdin=json.dumps(mine))
    check(code == 0 and all(o["ok"] for o in out), (code, out, err))
    _, after, _ = run(server, "limits", "get", key)
    check(after["definition"] == dict(got["definition"], capacity=200,
                                      webhook={"url": "https://hooks.example/s",
                                               "format": "slack"}), after)
    # A prepaid budget has no anchor or zone to print.
    code, out, err = run(server, "limits", "put", "--key", "cli:prepaid", "--kind", "budget",
                         "--capacity", "10", "--period", "none")
    check(code == 0, err)
    _, prepaid, _ = run(server, "limits", "get", "cli:prepaid")
    check(prepaid["definition"]["period"] == "none" and
          "time_zone" not in prepaid["definition"], prepaid)


@test("reserve prints the lease and answer: exit 0 allowed, 1 denied (capacity or unknown key)")
def test_reserve_complete_release(server):
    server.put_limit({"key": "cli:slots", "kind": "concurrency", "capacity": 1,
                      "timeout_seconds": 30})
    server.put_limit({"key": "cli:tpm", "kind": "rolling", "capacity": 1000,
                      "window_seconds": 60})
    code, out, err = run(server, "reserve", "--lease-id", "cli-lease-1", "cli:slots=1",
                         "cli:tpm=500")
    check(code == 0, err)
    check(out["lease_id"] == "cli-lease-1" and out["allowed"] is True, out)
    check(out["denied_keys"] == [] and out["error"] == "", out)
    code, out, _ = run(server, "reserve", "cli:slots=1", "cli:tpm=1")
    check(code == 1 and out["allowed"] is False and out["denied_keys"] == ["cli:slots"], out)
    check(len(out["lease_id"]) == 36, out)
    code, out, _ = run(server, "reserve", "cli:missing=1")
    check(code == 1 and out["error"] == "unknown_limit_key: cli:missing", out)
    code, out, err = run(server, "complete", "cli-lease-1", "cli:tpm=200")
    check(code == 0 and out == {"ok": True, "reconciled": True, "warnings": []}, (out, err))
    _, usage, _ = run(server, "usage", "cli:tpm")
    check(usage["used"] == 200 and usage["reserved"] == 0, usage)
    code, _, err = run(server, "release", "cli-lease-1")
    check(code == 3 and "already_finalized" in err, (code, err))
    code, out, _ = run(server, "reserve", "--lease-id", "cli-lease-2", "cli:slots=1")
    check(code == 0, out)
    code, out, _ = run(server, "release", "cli-lease-2")
    check(code == 0 and out == {"ok": True}, out)


@test("reserve --wait waits like acquire and reports the last denial at the deadline")
def test_reserve_wait(server):
    # A window that frees in a minute: the server's retry_after_ms says the
    # next try would come after the deadline, so the denial is the answer
    # (however slowly this machine answers, within the 20 s).
    server.put_limit({"key": "cli:minute", "kind": "rolling", "capacity": 1,
                      "window_seconds": 60})
    check(run(server, "reserve", "cli:minute=1")[0] == 0, "first in the window")
    code, out, err = run(server, "reserve", "--wait", "--timeout-ms", "20000", "cli:minute=1")
    check(code == 1 and out["allowed"] is False and out["retry_after_ms"] > 20000,
          ("window", code, out, err))
    # A slot released while the command waits: it gets the slot.
    server.put_limit({"key": "cli:gpu", "kind": "concurrency", "capacity": 1,
                      "timeout_seconds": 30})
    check(run(server, "reserve", "--lease-id", "gpu-1", "cli:gpu=1")[0] == 0, "first")
    waiting = subprocess.Popen([CLI, "--url", server.url, "reserve", "--wait", "--timeout-ms",
                                "30000", "cli:gpu=1"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=cli_environment())
    time.sleep(0.3)
    check(run(server, "release", "gpu-1")[0] == 0, "release")
    out, err = waiting.communicate(timeout=60)
    check(waiting.returncode == 0 and json.loads(out)["allowed"] is True,
          ("released", waiting.returncode, out, err))


@test("usage prints every field; --at-unix-ms picks a budget period")
def test_usage(server):
    server.put_limit({"key": "cli:month", "kind": "budget", "capacity": 500, "period": "month"})
    code, out, _ = run(server, "usage", "cli:month")
    check(code == 0, code)
    check(set(out) == {"key", "kind", "status", "capacity", "reserved", "used", "debt",
                       "available", "period_start_unix_ms", "period_end_unix_ms"}, out)
    check(out["kind"] == "budget" and out["available"] == 500, out)
    code, past, _ = run(server, "usage", "--at-unix-ms", "1000000000000", "cli:month")
    check(code == 0 and past["period_end_unix_ms"] <= out["period_start_unix_ms"], past)


@test("usage errors exit 2 before anything is sent; transport errors exit 3")
def test_usage_errors(server):
    check(run(server, "reserve")[0] == 2, "reserve without requirements")
    check(run(server, "reserve", "k=0")[0] == 2, "amount 0")
    check(run(server, "reserve", "k=abc")[0] == 2, "amount abc")
    check(run(server, "limits", "put", "--key", "x")[0] == 2, "put without kind")
    check(run(server, "nonsense")[0] == 2, "unknown command")
    check(run(server, "bench")[0] == 2, "bench without keys")
    code, out, _ = run(server, "reserve", "--help")
    check(code == 0 and "KEY=AMOUNT" in out, "help")
    done = subprocess.run([CLI, "--url", "http://127.0.0.1:1", "usage", "x"],
                          capture_output=True, text=True, env=cli_environment(), timeout=60)
    check(done.returncode == 3, done.returncode)


@test("tokens come from --token-file or the environment, admin token for limits")
def test_tokens(_unused):
    with tempfile.TemporaryDirectory() as directory:
        admin_file = os.path.join(directory, "admin")
        client_file = os.path.join(directory, "client")
        with open(admin_file, "w") as f:
            f.write("admin-secret\n")
        with open(client_file, "w") as f:
            f.write("client-secret\n")
        with harness.Server(BINARY, args=["--admin-token-file", admin_file,
                                          "--client-token-file", client_file]) as server:
            code, _, err = run(server, "limits", "list")
            check(code == 3 and "401" in err, (code, err))
            code, _, err = run(server, "--token-file", admin_file, "limits", "put", "--key",
                               "t:k", "--kind", "rolling", "--capacity", "5",
                               "--window-seconds", "60")
            check(code == 0, err)
            env = {"LLMLIMIT_ADMIN_TOKEN": "admin-secret", "LLMLIMIT_TOKEN": "client-secret"}
            check(run(server, "limits", "get", "t:k", env=env)[0] == 0, "admin from env")
            check(run(server, "reserve", "t:k=1", env=env)[0] == 0, "client from env")
            code, _, err = run(server, "usage", "t:k", env={"LLMLIMIT_TOKEN": "wrong"})
            check(code == 3 and "401" in err, (code, err))



@test("the example program acquires, calls and completes through libllmlimit")
def test_example(server):
    for key, kind, extra in (("ex:rpm", "rolling", {"window_seconds": 60}),
                             ("ex:tpm", "rolling", {"window_seconds": 60}),
                             ("ex:usd", "budget", {"period": "month"})):
        definition = {"key": key, "kind": kind, "capacity": 1000000}
        definition.update(extra)
        status, _, _ = server.put_limit(definition)
        check(status == 200, status)
    environment = dict(os.environ, LLMLIMIT_URL=server.url)
    done = subprocess.run([EXAMPLE, "ex:rpm", "ex:tpm", "ex:usd"], capture_output=True,
                          text=True, env=environment, timeout=60)
    check(done.returncode == 0, done.stderr)
    check("completed: 750 tokens, reconciled yes" in done.stdout, done.stdout)
    status, _, usage = server.usage("ex:tpm")
    check(usage["used"] == 750 and usage["reserved"] == 0, usage)


@test("bench runs against the server and reports its figures as JSON")
def test_bench(server):
    server.put_limit({"key": "bench:rpm", "kind": "rolling", "capacity": 100,
                      "window_seconds": 60})
    code, out, err = run(server, "bench", "--keys", "bench:rpm", "--duration", "1",
                         "--connections", "2", "--json", "--quiet")
    check(code == 0, err)
    # Allowed until the capacity is used, however many requests this machine made in 1 s.
    check(out["requests"] > 0, out)
    check(out["allowed"] == min(100, out["requests"]) and out["errors"] == 0, out)
    check(out["allowed"] + out["denied"] == out["requests"], out)
    check(out["latency_ms"]["p50"] <= out["latency_ms"]["max"], out)


@test("events pages the sqlite audit log by key, lease and since; memory answers 404")
def test_events(memory_server):
    code, _, err = run(memory_server, "events")
    check(code == 3 and "not_supported_by_backend" in err, (code, err))
    with harness.Server(BINARY, backend="sqlite") as server:
        server.put_limit({"key": "ev:b", "kind": "budget", "capacity": 100, "period": "day"})
        check(run(server, "reserve", "--lease-id", "ev-1", "ev:b=10")[0] == 0, "reserve")
        check(run(server, "complete", "ev-1", "ev:b=12")[0] == 0, "complete")
        code, out, err = run(server, "events", "--lease-id", "ev-1")
        check(code == 0, err)
        types = [event["type"] for event in out["events"]]
        check(types[:2] == ["reserved", "committed"] and "overrun" in types, types)
        first = out["events"][0]["id"]
        code, out, _ = run(server, "--compact", "events", "--key", "ev:b", "--since", str(first),
                           "--limit", "1")
        check(code == 0 and len(out["events"]) == 1 and out["events"][0]["id"] > first, out)
        check(run(server, "events", "--limit", "x")[0] == 2, "bad --limit")


@test("every answer is one line of JSON as docs/cli.md prints it; --pretty indents, "
      "--compact drops the blanks")
def test_output_formats(server):
    def stdout(*args, stdin=None):
        done = subprocess.run([CLI, "--url", server.url] + list(args), input=stdin,
                              capture_output=True, text=True, env=cli_environment(), timeout=60)
        check(done.returncode == 0, done.stderr)
        return done.stdout

    put = ["limits", "put", "--key", "cli:format", "--kind", "concurrency", "--capacity", "4",
           "--timeout-seconds", "120"]
    check(stdout(*put) == '{"ok": true, "key": "cli:format", "status": "active", '
          '"created": true}\n', "default")
    check(stdout("--compact", *put) == '{"ok":true,"key":"cli:format","status":"active",'
          '"created":false,"changed":{}}\n', "--compact")
    pretty = stdout(*put, "--pretty")  # a global option may stand after the command
    check(pretty.startswith('{\n  "ok": true,\n  "key": "cli:format",\n') and
          pretty.endswith("}\n"), "--pretty: %r" % pretty)
    check(json.loads(pretty)["changed"] == {}, pretty)
    # A file of two definitions: their answers in one array, on one line.
    two = json.dumps([{"key": "cli:format:" + name, "kind": "rolling", "capacity": 1,
                       "window_seconds": 60} for name in ("a", "b")])
    lines = stdout("limits", "put", "--file", "-", stdin=two).splitlines()
    check(len(lines) == 1 and [a["key"] for a in json.loads(lines[0])] ==
          ["cli:format:a", "cli:format:b"], lines)
    listing = stdout("limits", "list")
    check(listing.count("\n") == 1 and json.loads(listing)["limits"], listing[:200])


def main():
    tests = [test_limits_commands, test_limits_put_keeps_what_it_is_not_given,
             test_limits_put_file, test_limits_period_fields, test_reserve_complete_release,
             test_reserve_wait, test_usage, test_usage_errors, test_example, test_bench,
             test_events, test_output_formats]
    with harness.Server(BINARY) as server:
        for fn in tests:
            fn(server)
    test_tokens(None)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
