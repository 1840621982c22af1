"""Hostile callers and upstreams against the gateway, and what a person
reads on its answers (docs/gateway.md, docs/agents.md): a gateway lease is
settled by the gateway alone (the data routes refuse to complete, release or
reserve a lease id in its gw: namespace, whatever the token); X-Request-Id
lease ids never collide across callers, even callers holding ':'; a stored
response is continued (previous_response_id, item_reference) only by the key
that created it; an upstream header value with a bare CR or control bytes is
never relayed; the provider key is redacted from every relayed body and
header, streamed too, a key cut across two chunks included; x-ratelimit-*-
requests come from the rolling request limit, concurrency in headers of its
own; a budget smaller than one call's worst case names the settings that
help, a budget denial says in words when it frees; and the agents do what
docs/agents.md says on a spent budget (Codex stops after one call, Claude
Code is told of CLAUDE_CODE_MAX_OUTPUT_TOKENS and then fits).

Backend from --backend (memory, sqlite). The agents' tests are skipped when
node or a package (npm ci --prefix tests/gateway/node) is missing."""

import calendar
import datetime
import json
import os
import re
import sys
import time
import unittest
import zoneinfo

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agents  # noqa: E402
from gw_harness import (CHAT, INPUT_TOKENS, KEYS_MAX, MESSAGES, RESPONSES,  # noqa: E402
                        Caller, GatewayTest, agent_cost, agent_model, chat, read_until,
                        skip_unless_backend, wait_until)
from gw_harness import tearDownModule  # noqa: E402,F401 - unittest calls it

NODE = agents.node_from_argv()
AGENTS_MISSING = agents.missing_prerequisite(NODE)

# Callers whose names hold ':' (and one named "h"), given to the last keys.
COLON_CALLERS = ("alice", "alice:x", "h")


def key_fields(index):
    first = KEYS_MAX - len(COLON_CALLERS)
    return {"caller": COLON_CALLERS[index - first]} if index >= first else {}


EXTRA_MODELS = (
    agent_model("x-echo-key", "fake", "fake-echo-key"),
    agent_model("x-echo-key-anthropic", "fake-anthropic", "fake-echo-key"),
    agent_model("x-header-cr", "fake", "fake-header-cr"),
    agent_model("x-observed", "fake-anthropic", "fake-normal", output_reservation="observed"),
    agent_model("gpt-5.1-codex", "fake", "fake-normal:prompt_tokens=100:completion_tokens=4"),
    agent_model("claude-opus-4-8", "fake-anthropic",
                "fake-normal:prompt_tokens=100:completion_tokens=4"),
)
STARS = re.compile(r"\*{8,}")


def message(model, text="one two three four", max_tokens=64000, **extra):
    return dict({"model": model, "max_tokens": max_tokens,
                 "messages": [{"role": "user", "content": text}]}, **extra)


def lease_id_of(head):
    match = re.search(rb"\r\nx-llmlimit-lease-id: ([^\r\n]*)\r\n", head, re.I)
    assert match, head
    return match.group(1).decode()


class HostileTest(GatewayTest):
    gateway_options = {"extra_models": EXTRA_MODELS, "key_fields": key_fields}

    def named_caller(self, name, **capacities):
        """The key whose caller is `name` (one of COLON_CALLERS), its limits defined."""
        # The last keys of the list (gw.caller() takes them from the front).
        last = self.gw.free_keys[-len(COLON_CALLERS):]
        secret, _, team = last[COLON_CALLERS.index(name)]
        return Caller(self.gw, secret, name, team).define(**capacities)


class GatewayLeases(HostileTest, unittest.TestCase):
    """hostile 3: a caller reads its lease id off its own call's head; the data routes
    must not let it settle that lease (no client token is configured here, as the docs
    start the server)."""

    def test_a_caller_cannot_complete_or_release_its_streaming_lease(self):
        """Mid-stream, /v1/complete with actual 0, /v1/release and /v1/complete/batch on the
        call's own lease are refused (403): the slot stays held, the call is charged in full."""
        c = self.gw.caller(conc=1)
        sock = self.gw.raw_request(c, CHAT, chat("m-drip", stream=True))
        try:
            head = read_until(sock, b"\r\n\r\n")
            lease = lease_id_of(head)
            self.assertTrue(lease.startswith("gw:"), lease)
            zero = {key: 0 for key in c.keys.values()}
            status, _, body = self.gw.server.complete(lease, zero)
            self.assertEqual(status, 403, body)
            self.assertIn("gateway", body["error"])
            self.assertEqual(body["ok"], False)
            status, _, body = self.gw.server.release(lease)
            self.assertEqual(status, 403, body)
            status, _, body = self.gw.server.request("POST", "/v1/complete/batch", {"requests": [
                {"lease_id": lease, "actuals": [{"key": c.keys["usd"], "actual_amount": 0}]}]})
            self.assertEqual(status, 200, body)
            self.assertEqual(body["results"][0]["status"], 403, body)
            self.assertIn("gateway", body["results"][0]["error"])
            self.assertEqual(c.reserved("conc"), 1)
            read_until(sock, b"[DONE]")
        finally:
            sock.close()
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 0))
        self.assertGreater(c.used("usd"), 0)
        self.assertEqual(c.used("req"), 1)

    def test_every_gateway_lease_is_in_the_gw_namespace(self):
        """With and without X-Request-Id, the lease id begins with gw:."""
        c = self.gw.caller()
        for headers in ({}, {"X-Request-Id": "n-1"}, {"X-Request-Id": "with space"}):
            status, reply, _ = self.gw.call(c, CHAT, chat("m-normal"), headers=headers)
            self.assertEqual(status, 200)
            self.assertTrue(reply["x-llmlimit-lease-id"].startswith("gw:"), reply)

    def test_a_plain_client_cannot_reserve_a_gw_lease(self):
        """/v1/reserve and /v1/reserve/batch refuse a lease id beginning with gw: (403), and
        take nothing; other ids in the same batch are served."""
        c = self.gw.caller()
        key = c.keys["req"]
        status, _, body = self.gw.server.reserve("gw:%s:planted" % c.name, {key: 1})
        self.assertEqual(status, 403, body)
        self.assertIn("gateway", body["error"])
        status, _, body = self.gw.server.request("POST", "/v1/reserve/batch", {"requests": [
            {"lease_id": "gw:planted-2", "requirements": [{"key": key, "amount": 1}]},
            {"lease_id": "plain-" + c.name, "requirements": [{"key": key, "amount": 1}]}]})
        self.assertEqual(status, 200, body)
        self.assertEqual([r["status"] for r in body["results"]], [403, 200], body)
        self.assertEqual(c.reserved("req"), 1)
        self.assertEqual(self.gw.server.release("plain-" + c.name)[0], 200)
        # a lease id that merely holds "gw" elsewhere is an ordinary one
        status, _, body = self.gw.server.reserve("x-gw:" + c.name, {key: 1})
        self.assertEqual((status, body["allowed"]), (200, True), body)
        self.assertEqual(self.gw.server.release("x-gw:" + c.name)[0], 200)


class RequestIdLeases(HostileTest, unittest.TestCase):
    """hostile 11: lease ids from X-Request-Id are one-to-one with (caller, id)."""

    def test_callers_holding_colons_never_share_a_lease(self):
        """alice + x:r1 and alice:x + r1 are two calls, both served; caller h's readable id
        cannot be another's hashed one."""
        alice, alice_x, h = (self.named_caller(name) for name in COLON_CALLERS)
        status, one, body = self.gw.call(alice, CHAT, chat("m-normal"),
                                         headers={"X-Request-Id": "x:r1"})
        self.assertEqual(status, 200, body)
        status, two, body = self.gw.call(alice_x, CHAT, chat("m-normal"),
                                         headers={"X-Request-Id": "r1"})
        self.assertEqual(status, 200, body)
        self.assertNotEqual(one["x-llmlimit-lease-id"], two["x-llmlimit-lease-id"])
        self.assertEqual(one["x-llmlimit-lease-id"], "gw:alice:x:r1")
        self.assertRegex(two["x-llmlimit-lease-id"], r"^gw:h:[0-9a-f]{40}$")
        # caller "h" with an id of 40 hex digits: not "gw:h:<hex>", the hashed form
        hashed = two["x-llmlimit-lease-id"][len("gw:h:"):]
        status, three, body = self.gw.call(h, CHAT, chat("m-normal"),
                                           headers={"X-Request-Id": hashed})
        self.assertEqual(status, 200, body)
        self.assertNotEqual(three["x-llmlimit-lease-id"], two["x-llmlimit-lease-id"])
        self.assertEqual((alice.used("req"), alice_x.used("req"), h.used("req")), (1, 1, 1))

    def test_long_ids_differing_past_a_kilobyte_are_two_calls(self):
        """Two X-Request-Ids alike in their first 2000 bytes are two leases."""
        c = self.gw.caller()
        lease_ids = []
        for last in "ab":
            status, headers, body = self.gw.call(c, CHAT, chat("m-normal"),
                                                 headers={"X-Request-Id": "z" * 2000 + last})
            self.assertEqual(status, 200, body)
            lease_ids.append(headers["x-llmlimit-lease-id"])
        self.assertNotEqual(lease_ids[0], lease_ids[1])


class StoredResponseReferences(HostileTest, unittest.TestCase):
    """hostile 5: previous_response_id and item_reference point at a stored response's
    content: only the key that created it may use them."""

    def create(self, c, stream=False):
        """A stored response of c: (its id, its output items' ids)."""
        body = {"model": "r-normal", "input": "one two", "stream": stream}
        if stream:
            answer = self.gw.stream(c, RESPONSES, body)
            self.assertEqual(answer.status, 200, answer.raw)
            final = [e for e in answer.chunks() if e["type"] == "response.completed"][0]
            response = final["response"]
        else:
            status, _, response = self.gw.call(c, RESPONSES, body)
            self.assertEqual(status, 200, response)
        return response["id"], [item["id"] for item in response["output"]]

    def test_another_keys_response_cannot_be_continued(self):
        """previous_response_id of another key's response, or one never seen: 400, nothing
        reserved or forwarded; its own key continues it."""
        owner, other = self.gw.caller(), self.gw.caller()
        response_id, _ = self.create(owner)
        forwarded = self.forwarded()
        for path in (RESPONSES, INPUT_TOKENS):
            for previous in (response_id, "resp_never_seen"):
                status, _, body = self.gw.call(other, path, {
                    "model": "r-normal", "input": "go on", "previous_response_id": previous})
                self.assert_openai_error(status, body, 400, "previous_response_not_found")
                self.assertIn(previous, body["error"]["message"])
        self.assertEqual(self.forwarded(), forwarded)
        self.assertEqual(other.snapshot()["req"], (0, 0, 0))
        status, _, body = self.gw.call(owner, RESPONSES, {
            "model": "r-normal", "input": "go on", "previous_response_id": response_id})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["previous_response_id"], response_id)

    def test_another_keys_items_cannot_be_referenced(self):
        """item_reference (typed, or an item of only an id) to another key's output item:
        400; its own key may reference the items of its responses, streamed or not."""
        owner, other = self.gw.caller(), self.gw.caller()
        _, items = self.create(owner)
        _, streamed_items = self.create(owner, stream=True)
        forwarded = self.forwarded()
        for reference in ({"type": "item_reference", "id": items[0]}, {"id": items[0]},
                          {"type": "item_reference", "id": "msg_never_seen"}):
            status, _, body = self.gw.call(other, RESPONSES, {
                "model": "r-normal", "input": [reference]})
            self.assert_openai_error(status, body, 400, "item_not_found")
            self.assertIn(reference["id"], body["error"]["message"])
        self.assertEqual(self.forwarded(), forwarded)
        for item in (items[0], streamed_items[0]):
            status, _, body = self.gw.call(owner, RESPONSES, {
                "model": "r-normal",
                "input": [{"type": "item_reference", "id": item},
                          {"role": "user", "content": "and then"}]})
            self.assertEqual(status, 200, body)

    def test_input_items_listed_to_their_owner_may_be_referenced(self):
        """The ids of a stored response's input items, as its key lists them, are its own."""
        owner, other = self.gw.caller(), self.gw.caller()
        response_id, _ = self.create(owner)
        status, _, listing = self.gw.call(owner, RESPONSES + "/" + response_id + "/input_items",
                                          method="GET")
        self.assertEqual(status, 200, listing)
        item = listing["data"][0]["id"]
        for c, expect in ((other, 400), (owner, 200)):
            status, _, body = self.gw.call(c, RESPONSES, {
                "model": "r-normal", "input": [{"type": "item_reference", "id": item}]})
            self.assertEqual(status, expect, body)


class UpstreamHeaders(HostileTest, unittest.TestCase):
    """hostile 9: only valid header values are relayed."""

    def head_of(self, c, body):
        sock = self.gw.raw_request(c, CHAT, body)
        try:
            data = read_until(sock, b"\r\n\r\n")
        finally:
            sock.close()
        return data[:data.index(b"\r\n\r\n")]

    def test_a_content_type_with_a_bare_cr_is_not_relayed(self):
        """Content-Type "application/json\\rx-injected: yes\\x01": the client's head has no CR
        but those ending its lines, no control byte, no injected field; streamed or not."""
        c = self.gw.caller()
        for body, expect in ((chat("x-header-cr"), None),
                             (chat("x-header-cr", stream=True), "text/event-stream")):
            head = self.head_of(c, body)
            self.assertTrue(head.startswith(b"HTTP/1.1 200"), head)
            for line in head.split(b"\r\n"):
                self.assertFalse([b for b in line if b < 0x20 or b == 0x7f], head)
                self.assertFalse(line.lower().startswith(b"x-injected"), head)
            types = [line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
                     if line.lower().startswith(b"content-type:")]
            self.assertEqual(types, [expect.encode()] if expect else [], head)


class ProviderKeyRedaction(HostileTest, unittest.TestCase):
    """hostile 13: an upstream that echoes the provider key never shows it to a client."""

    def test_an_error_body_echoing_the_key_is_redacted(self):
        """A 401 whose message (and Content-Type) hold the provider key: passed on with the
        key starred out, on the chat, Responses and Messages surfaces."""
        c = self.gw.caller()
        for path, body in ((CHAT, chat("x-echo-key")),
                           (RESPONSES, {"model": "x-echo-key", "input": "hi"}),
                           (MESSAGES, message("x-echo-key-anthropic", max_tokens=100))):
            status, headers, answer = self.gw.call(c, path, body)
            self.assertEqual(status, 401, answer)
            text = json.dumps(answer) + json.dumps(headers)
            self.assertNotIn(self.gw.provider_key, text)
            self.assertRegex(json.dumps(answer), STARS)
            self.assertRegex(headers["content-type"], r"^application/json; echo=\*+$")

    def test_a_stream_echoing_the_key_across_two_chunks_is_redacted(self):
        """A stream whose first event holds the key, cut in two HTTP chunks 200 ms apart: no
        byte sequence of the key reaches the client, and the rest of the stream does."""
        c = self.gw.caller()
        for path, body in ((CHAT, chat("x-echo-key", stream=True)),
                           (MESSAGES, message("x-echo-key-anthropic", max_tokens=100,
                                              stream=True))):
            answer = self.gw.stream(c, path, body)
            self.assertEqual(answer.status, 200, answer.raw)
            self.assertNotIn(self.gw.provider_key, answer.raw + json.dumps(answer.headers))
            self.assertRegex(answer.raw, r"^: key \*{8,}\r?\n")
            self.assertTrue(answer.events, answer.raw)
        self.assertEqual(c.used("req"), 2)


class RequestHeaders(HostileTest, unittest.TestCase):
    """first hour 2: x-ratelimit-*-requests is what OpenAI's clients read as requests per
    minute: the rolling request limit's; concurrency has headers of its own."""

    def test_requests_headers_are_the_rolling_limits_and_slots_their_own(self):
        """5 slots and 100000 requests an hour: x-ratelimit-*-requests show the hour's limit,
        x-llmlimit-concurrency-* the slots; on Messages the anthropic ones too."""
        c = self.gw.caller(conc=5)
        status, headers, _ = self.gw.call(c, CHAT, chat("m-normal"))
        self.assertEqual(status, 200)
        self.assertEqual((headers["x-ratelimit-limit-requests"],
                          headers["x-ratelimit-remaining-requests"]), ("100000", "99999"))
        reset = headers["x-ratelimit-reset-requests"]
        self.assertRegex(reset, r"^(59m\d+s|1h0m0s)$")
        self.assertEqual((headers["x-llmlimit-concurrency-limit"],
                          headers["x-llmlimit-concurrency-remaining"]), ("5", "4"))
        status, headers, _ = self.gw.call(c, MESSAGES, message("a-normal", max_tokens=100))
        self.assertEqual(status, 200)
        self.assertEqual(headers["anthropic-ratelimit-requests-limit"], "100000")
        self.assertEqual(headers["x-llmlimit-concurrency-limit"], "5")

    def test_without_a_rolling_limit_no_requests_headers(self):
        """Only a concurrency limit of requests: no x-ratelimit-*-requests at all."""
        c = self.gw.caller(skip=("req",), conc=5)
        c.gateway.server.put_limit({"key": c.keys["req"], "kind": "concurrency",
                                    "capacity": 7, "timeout_seconds": 60})
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal"))
        self.assertEqual(status, 200, body)
        self.assertFalse([h for h in headers if h.endswith("-requests")], headers)
        self.assertEqual(headers["x-llmlimit-concurrency-limit"], "5")

    def test_a_concurrency_denial_says_so_in_its_own_headers(self):
        """All slots taken: the 429 carries x-llmlimit-concurrency-limit, not x-ratelimit-*-
        requests (the hour's limit had room)."""
        c = self.gw.caller(conc=1)
        self.gw.server.reserve("slot-" + c.name, {c.keys["conc"]: 1})
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal"))
        self.assert_openai_error(status, body, 429, "rate_limit_exceeded")
        self.assertEqual(headers["x-llmlimit-concurrency-limit"], "1")
        self.assertNotIn("x-ratelimit-limit-requests", headers)
        self.assertEqual(self.gw.server.release("slot-" + c.name)[0], 200)


def utc_text(unix_ms, seconds=False):
    return time.strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC",
                         time.gmtime(unix_ms / 1000))


class BudgetMessages(HostileTest, unittest.TestCase):
    """first hour 3: what a person reads when a budget stops a call."""

    def test_a_budget_smaller_than_one_call_names_what_helps(self):
        """Claude Code's max_tokens 64000 cannot fit a 0.5 USD budget: the 400 names
        CLAUDE_CODE_MAX_OUTPUT_TOKENS and output_reservation "observed"; an observed model
        takes the same call."""
        c = self.gw.caller(usd=500000)
        status, _, body = self.gw.call(c, MESSAGES, message("a-normal"))
        self.assertEqual(status, 400, body)
        self.assertEqual(body["error"]["type"], "invalid_request_error")
        text = body["error"]["message"]
        for words in (c.keys["usd"], "max_tokens", "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
                      '"output_reservation": "observed"'):
            self.assertIn(words, text)
        print("  " + text)
        status, _, body = self.gw.call(c, MESSAGES, message("x-observed"))
        self.assertEqual(status, 200, body)

    def test_a_spent_budget_says_when_it_resets(self):
        """A budget spent for the period: the 429 says "resets <date> UTC" (its period's end),
        not a number of milliseconds."""
        c = self.gw.caller(usd=1000000)
        lease = "spend-" + c.name
        self.assertEqual(self.gw.server.reserve(lease, {c.keys["usd"]: 1000000})[0], 200)
        self.assertEqual(self.gw.server.complete(lease, {c.keys["usd"]: 1000000})[0], 200)
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal"))
        self.assert_openai_error(status, body, 429, "insufficient_quota")
        text = body["error"]["message"]
        print("  " + text)
        end = c.usage("usd")["period_end_unix_ms"]
        self.assertIn("resets " + utc_text(end), text)
        self.assertNotRegex(text, r"\d{4,} ?ms")
        self.assertEqual(headers["x-should-retry"], "false")

    def test_a_spent_budget_in_a_time_zone_says_its_local_reset(self):
        """A monthly budget in Europe/Berlin spent: the 429 names its reset in Berlin's wall
        time (local midnight, when its period starts) and in UTC."""
        c = self.gw.caller(skip=("usd",))
        status, _, body = self.gw.server.put_limit({"key": c.keys["usd"], "kind": "budget",
                                                    "capacity": 1000000, "period": "month",
                                                    "time_zone": "Europe/Berlin",
                                                    "unit": "usd_micros"})
        self.assertEqual(status, 200, body)
        lease = "berlin-" + c.name
        self.assertEqual(self.gw.server.reserve(lease, {c.keys["usd"]: 1000000})[0], 200)
        self.assertEqual(self.gw.server.complete(lease, {c.keys["usd"]: 1000000})[0], 200)
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal"))
        self.assert_openai_error(status, body, 429, "insufficient_quota")
        text = body["error"]["message"]
        print("  " + text)
        end = c.usage("usd")["period_end_unix_ms"]
        local = datetime.datetime.fromtimestamp(end / 1000, zoneinfo.ZoneInfo("Europe/Berlin"))
        self.assertEqual(local.strftime("%d %H:%M"), "01 00:00")  # local midnight, the 1st
        self.assertIn("resets %s Europe/Berlin (%s)" % (local.strftime("%Y-%m-%d %H:%M"),
                                                       utc_text(end)), text)
        self.assertEqual(headers["x-should-retry"], "false")

    def test_a_spent_prepaid_budget_says_it_never_resets(self):
        """A prepaid budget (period "none") spent: the 429 says it never resets and that an
        operator tops it up, not a reset in the year 10000."""
        c = self.gw.caller(skip=("usd",))
        status, _, body = self.gw.server.put_limit({"key": c.keys["usd"], "kind": "budget",
                                                    "capacity": 1000000, "period": "none",
                                                    "unit": "usd_micros"})
        self.assertEqual(status, 200, body)
        lease = "prepaid-" + c.name
        self.assertEqual(self.gw.server.reserve(lease, {c.keys["usd"]: 1000000})[0], 200)
        self.assertEqual(self.gw.server.complete(lease, {c.keys["usd"]: 1000000})[0], 200)
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal"))
        self.assert_openai_error(status, body, 429, "insufficient_quota")
        text = body["error"]["message"]
        print("  " + text)
        self.assertIn("never resets", text)
        self.assertIn("raising its capacity", text)
        self.assertNotIn("10000", text)
        self.assertEqual(headers["x-should-retry"], "false")

    def test_a_budget_held_by_calls_in_flight_says_until_when(self):
        """A budget whose room is held by a call in flight: the 429 gives the latest time it
        frees, in UTC, within the hold's timeout."""
        c = self.gw.caller()
        self.gw.server.put_limit({"key": c.keys["usd"], "kind": "budget", "capacity": 1000000,
                                  "period": "month", "timeout_seconds": 120,
                                  "unit": "usd_micros"})
        before = int(time.time() * 1000)
        self.assertEqual(self.gw.server.reserve("hold-" + c.name,
                                                {c.keys["usd"]: 1000000})[0], 200)
        status, _, body = self.gw.call(c, CHAT, chat("m-normal"))
        self.assert_openai_error(status, body, 429, "insufficient_quota")
        text = body["error"]["message"]
        match = re.search(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", text)
        self.assertTrue(match, text)
        at_ms = calendar.timegm(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")) * 1000
        self.assertLessEqual(before + 119000, at_ms)
        self.assertLessEqual(at_ms, before + 122000 + 60000)
        self.assertNotRegex(text, r"\d{4,} ?ms")
        self.assertEqual(self.gw.server.release("hold-" + c.name)[0], 200)

    def test_a_rate_limit_denial_says_when_in_words(self):
        """A rolling limit spent for the hour: "retry in 59 min ..." rather than milliseconds."""
        c = self.gw.caller(req=1)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200)
        status, _, body = self.gw.call(c, CHAT, chat("m-normal"))
        self.assert_openai_error(status, body, 429, "rate_limit_exceeded")
        self.assertRegex(body["error"]["message"], r"retry in (59 min \d+ s|1 h 0 min)")


@unittest.skipIf(AGENTS_MISSING, "agents: %s" % AGENTS_MISSING)
class AgentsOnASpentBudget(HostileTest, unittest.TestCase):
    """first hour 3: docs/agents.md's statements, checked with the real agents."""

    def test_codex_stops_after_one_budget_denial_with_its_default_retries(self):
        """Codex 0.171.0 with no retry settings: a spent budget (insufficient_quota) ends the
        turn after one call ("Quota exceeded"); it is not tried again after retry-after."""
        c = self.gw.caller()
        self.gw.server.put_limit({"key": c.keys["usd"], "kind": "budget", "capacity": 1000000,
                                  "period": "month", "timeout_seconds": 120,
                                  "unit": "usd_micros"})
        lease = "spend-" + c.name
        self.assertEqual(self.gw.server.reserve(lease, {c.keys["usd"]: 1000000})[0], 200)
        self.assertEqual(self.gw.server.complete(lease, {c.keys["usd"]: 1000000})[0], 200)
        result = agents.run_codex(self.gw.server.url, "say hi", c.secret, "gpt-5.1-codex",
                                  node=NODE, timeout_s=120)
        self.assertEqual(result.code, 1, result.stdout + result.stderr)
        self.assertEqual(result.json[-1]["type"], "turn.failed")
        self.assertIn("Quota exceeded", result.json[-1]["error"]["message"])
        self.assertEqual(self.gw.caller_total("denials", c.name), 1)

    def test_claude_code_is_told_what_to_set_and_then_fits(self):
        """A 0.5 USD budget: Claude Code's first call (max_tokens 64000) is a 400 whose text
        names CLAUDE_CODE_MAX_OUTPUT_TOKENS; with it set to 8000 (docs/agents.md) it runs."""
        c = self.gw.caller(usd=500000)
        result = agents.run_claude(self.gw.server.url, "say hi", api_key=c.secret, node=NODE,
                                   env={"CLAUDE_CODE_MAX_RETRIES": "0"})
        self.assertEqual(result.code, 1, result.stdout)
        self.assertIn("CLAUDE_CODE_MAX_OUTPUT_TOKENS", result.json["result"])
        result = agents.run_claude(self.gw.server.url, "say hi", api_key=c.secret, node=NODE,
                                   env={"CLAUDE_CODE_MAX_RETRIES": "0",
                                        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000"})
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        self.assertEqual(c.used("usd"), agent_cost(uncached=100, output=4))


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)
