"""What the gateway reports (docs/gateway.md): after a scripted workload
/metrics carries llmlimit_gateway_* series per model and caller with the
exact counts, tokens and cost of the calls made, and the request counters
of the gateway's routes by status; on sqlite the audit log
(GET /v1/events) shows every gateway call as a lease of its caller.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import re
import time
import unittest

from gw_harness import (BACKEND, CHAT, EMBEDDINGS, GatewayTest, chat, cost, skip_unless_backend)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it

SAMPLE = re.compile(r'^([a-z_]+)(\{[^}]*\})? (\S+)$')


def parse_metrics(text):
    """{(name, labels text): value} of every sample."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, "not a sample line: %r" % line
        name, labels, value = match.groups()
        samples[(name, labels or "")] = float(value)
    return samples


def labels(model, caller):
    return '{model="%s",caller="%s"}' % (model, caller)


class Metrics(GatewayTest, unittest.TestCase):

    def test_gateway_series_count_a_scripted_workload(self):
        """Calls, denials, upstream errors, tokens, cost and latency per model and caller."""
        a = self.gw.caller(req=4)
        b = self.gw.caller()
        for _ in range(3):
            self.assertEqual(self.gw.call(a, CHAT, chat("m-counted", max_tokens=600))[0], 200)
        self.assertEqual(self.gw.call(a, CHAT, chat("m-fail-500"))[0], 500)
        self.assertEqual(self.gw.call(a, CHAT, chat("m-normal"))[0], 200)
        self.assertEqual(self.gw.call(a, CHAT, chat("m-normal"))[0], 429)  # req=4 is full
        self.assertEqual(self.gw.stream(b, CHAT, chat("m-counted", max_tokens=600,
                                                      stream=True)).status, 200)
        self.assertEqual(self.gw.call(b, EMBEDDINGS, {"model": "m-counted", "input": "x"})[0],
                         200)
        self.assertEqual(self.gw.call(b, CHAT, {"model": "m-normal", "messages": 5})[0], 400)
        samples = parse_metrics(self.gw.metrics())

        def value(name, model, caller):
            return samples.get(("llmlimit_gateway_" + name, labels(model, caller.name)), 0)

        expected = {
            # (series, model, caller): value
            ("calls_total", "m-counted", a): 3,
            ("calls_total", "m-fail-500", a): 1,
            ("calls_total", "m-normal", a): 1,
            ("calls_total", "m-counted", b): 2,
            ("calls_total", "m-normal", b): 0,  # a 400 is not a call
            ("denials_total", "m-normal", a): 1,
            ("denials_total", "m-counted", a): 0,
            ("upstream_errors_total", "m-fail-500", a): 1,
            ("upstream_errors_total", "m-counted", a): 0,
            ("input_tokens_total", "m-counted", a): 3 * 1001,
            ("output_tokens_total", "m-counted", a): 3 * 499,
            ("cost_usd_micros_total", "m-counted", a): 3 * cost(1001, 499),
            ("input_tokens_total", "m-normal", a): 4,
            ("output_tokens_total", "m-normal", a): 7,
            ("cost_usd_micros_total", "m-normal", a): cost(4, 7),
            ("input_tokens_total", "m-fail-500", a): 0,
            ("input_tokens_total", "m-counted", b): 2 * 1001,
            ("output_tokens_total", "m-counted", b): 499,
            ("cost_usd_micros_total", "m-counted", b): cost(1001, 499) + cost(1001, 0),
            ("upstream_latency_seconds_count", "m-counted", a): 3,
            ("upstream_latency_seconds_count", "m-fail-500", a): 1,
            ("upstream_latency_seconds_count", "m-counted", b): 2,
        }
        for (name, model, caller), want in expected.items():
            self.assertEqual(value(name, model, caller), want, (name, model, caller.name))
        inf = samples[("llmlimit_gateway_upstream_latency_seconds_bucket",
                       '{model="m-counted",caller="%s",le="+Inf"}' % a.name)]
        self.assertEqual(inf, 3)
        self.assertGreater(value("upstream_latency_seconds_sum", "m-counted", a), 0)

    def test_console_reports_the_same_counts_by_model_and_caller(self):
        """GET /v1/console/gateway: per model and caller, the calls, tokens, cost and denials."""
        a = self.gw.caller(req=2)
        self.assertEqual(self.gw.call(a, CHAT, chat("m-fail-500"))[0], 500)  # released
        for _ in range(2):
            self.assertEqual(self.gw.call(a, CHAT, chat("m-counted", max_tokens=600))[0], 200)
        self.assertEqual(self.gw.call(a, CHAT, chat("m-counted", max_tokens=600))[0], 429)
        status, _, body = self.gw.server.request("GET", "/v1/console/gateway")
        self.assertEqual(status, 200, body)
        rows = {row["model"]: row for row in body["keys"] if row["caller"] == a.name}
        self.assertEqual(set(rows), {"m-counted", "m-fail-500"})
        counted = rows["m-counted"]
        self.assertEqual(counted, {
            "model": "m-counted", "caller": a.name, "team": a.team, "requests": 2,
            "tokens": 2 * (1001 + 499), "usd_micros": 2 * cost(1001, 499), "denials": 1,
            "upstream_errors": 0, "input_tokens": 2 * 1001, "output_tokens": 2 * 499})
        failed = rows["m-fail-500"]
        self.assertEqual((failed["requests"], failed["upstream_errors"], failed["usd_micros"],
                          failed["denials"]), (1, 1, 0, 0))
        self.assertEqual(a.used("usd"), 2 * cost(1001, 499))

    def test_request_counters_of_the_gateway_routes(self):
        """llmlimit_requests_total counts the gateway's routes by their own status."""
        c = self.gw.caller(req=1)
        before = parse_metrics(self.gw.metrics())
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 429)
        self.assertEqual(self.gw.call(c, "/v1/models", method="GET")[0], 200)
        self.assertEqual(self.gw.call(c, EMBEDDINGS, {"model": "m-normal"})[0], 400)
        d = self.gw.caller()
        self.assertEqual(self.gw.call(d, CHAT, chat("m-refused"))[0], 502)
        self.assertEqual(self.gw.call(d, CHAT, chat("m-hang"))[0], 504)
        # A request is counted once the server has finished it, which can be a
        # moment after its answer reached the client: wait (bounded) for all 6.
        after = {}

        def delta(route, status):
            key = ("llmlimit_requests_total", '{route="%s",status="%s"}' % (route, status))
            return after.get(key, 0) - before.get(key, 0)

        def counted():
            return sum(after.get(k, 0) - before.get(k, 0) for k in after
                       if k[0] == "llmlimit_requests_total" and "gateway_" in k[1])

        deadline = time.monotonic() + 30
        while True:
            after = parse_metrics(self.gw.metrics())
            if counted() >= 6 or time.monotonic() > deadline:
                break
            time.sleep(0.02)

        self.assertEqual(delta("gateway_chat", "200"), 1)
        self.assertEqual(delta("gateway_chat", "429"), 1)
        self.assertEqual(delta("gateway_chat", "other"), 0)
        self.assertEqual(delta("gateway_models", "200"), 1)
        self.assertEqual(delta("gateway_embeddings", "400"), 1)
        self.assertEqual(delta("gateway_chat", "502"), 1)
        self.assertEqual(delta("gateway_chat", "504"), 1)


class AuditLog(GatewayTest, unittest.TestCase):

    def test_events_show_the_gateways_leases_with_their_caller(self):
        """sqlite: the audit log has each call's reserve and commit under its caller."""
        c = self.gw.caller()
        status, headers, _ = self.gw.call(c, CHAT, chat("m-counted", max_tokens=600),
                                          headers={"X-Request-Id": "audit-1"})
        self.assertEqual(status, 200)
        lease_id = headers["x-llmlimit-lease-id"]
        self.assertEqual(lease_id, "gw:%s:audit-1" % c.name)
        released = self.gw.call(c, CHAT, chat("m-fail-500"))[1]["x-llmlimit-lease-id"]
        status, events = self.gw.events(lease_id=lease_id, limit=1000)[::2]
        if BACKEND != "sqlite":
            self.assertEqual((status, events), (404, {"error": "not_supported_by_backend"}))
            return
        self.assertEqual(status, 200, events)
        rows = events["events"]
        self.assertTrue(rows)
        for row in rows:
            self.assertEqual((row["lease_id"], row["caller"]), (lease_id, c.name))
        by_type = {}
        for row in rows:
            by_type.setdefault(row["type"], {})[row["key"]] = row
        self.assertEqual(set(by_type["reserved"]), set(c.keys.values()))
        committed = by_type["committed"]
        self.assertEqual(committed[c.keys["usd"]]["actual_amount"], cost(1001, 499))
        self.assertEqual(committed[c.keys["tok"]]["actual_amount"], 1001 + 499)
        self.assertEqual(committed[c.keys["in"]]["actual_amount"], 1001)
        status, events = self.gw.events(lease_id=released, limit=1000)[::2]
        self.assertEqual(status, 200)
        types = {row["type"] for row in events["events"]}
        self.assertEqual(types, {"reserved", "released"})
        for row in events["events"]:
            self.assertEqual(row["caller"], c.name)


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)
