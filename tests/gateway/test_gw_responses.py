"""OpenAI Responses through the gateway (docs/gateway.md, "OpenAI
Responses"): every limit charged exactly what the final usage says, streamed
or not (cached input inside input_tokens at the cached price, reasoning
inside output_tokens at the reasoning price; response.incomplete and
response.failed charged too); the final event held until the lease is
completed; input_tokens forwarded and never charged; a stored response read,
listed, cancelled and deleted only by the key that created it (404 to any
other, never charged); "background": true refused; denials in OpenAI's shape
with x-should-retry; a client that leaves mid-stream frees its slot at once.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import json
import socket
import time
import unittest

from gw_harness import (AGENT_TEMPLATES, INPUT_TOKENS, RESPONSES, GatewayTest, agent_cost,
                        estimate, estimate_text, read_until, skip_unless_backend, wait_until)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it

# A client that leaves frees its slot by then (test_gw_messages.py says why).
FREED_S_MAX = 1.0


def respond(model, text="one two three four", **extra):
    return dict({"model": model, "input": text}, **extra)


class ResponsesTest(GatewayTest):
    gateway_options = {"templates": AGENT_TEMPLATES}

    def assert_charged(self, caller, all_input, output, usd, cached=0, requests=1):
        """Every limit of caller holds exactly these amounts, all settled."""
        self.assertEqual(caller.snapshot(), {
            "req": (0, requests, 0),
            "tok": (0, all_input + output, 0),
            "in": (0, all_input, 0),
            "unc": (0, all_input - cached, 0),
            "out": (0, output, 0),
            "conc": (0, 0, 0),
            "usd": (0, usd, 0),
        })


class Charges(ResponsesTest, unittest.TestCase):

    def test_a_response_is_charged_its_usage(self):
        """A Responses call charges input_tokens + output_tokens at their prices."""
        c = self.gw.caller()
        status, headers, body = self.gw.call(c, RESPONSES, respond("r-counted"))
        self.assertEqual(status, 200, body)
        self.assertEqual((body["object"], body["status"]), ("response", "completed"))
        self.assertEqual(headers["x-ratelimit-limit-requests"], "100000")  # req, the rolling one
        self.assertNotIn("anthropic-ratelimit-requests-limit", headers)
        self.assert_charged(c, 1001, 499, agent_cost(uncached=1001, output=499))

    def test_cached_input_and_reasoning_are_priced_apart(self):
        """1001 input of which 401 cached, 598 output of which 99 reasoning: cached at the
        cached price, reasoning at the reasoning price, streamed or not."""
        usd = agent_cost(uncached=600, cache_read=401, output=598, reasoning=99)
        self.assertEqual(usd, 1800 + 121 + 7485 + 1980)  # 1800 + 120.3 + 7485 + 1980, up
        for stream in (False, True):
            c = self.gw.caller()
            if stream:
                answer = self.gw.stream(c, RESPONSES, respond("r-cache", stream=True))
                self.assertEqual((answer.status, answer.names[-1]), (200, "response.completed"))
            else:
                status, _, body = self.gw.call(c, RESPONSES, respond("r-cache"))
                self.assertEqual(status, 200, body)
                self.assertEqual(body["usage"]["output_tokens_details"]["reasoning_tokens"], 99)
            # No wait: response.completed is given once the lease is completed.
            self.assert_charged(c, 1001, 598, usd, cached=401)

    def test_incomplete_and_failed_streams_are_charged_their_final_usage(self):
        """A stream ending in response.incomplete or response.failed is charged that event's
        usage."""
        for model, last in (("r-incomplete", "response.incomplete"),
                            ("r-failed", "response.failed")):
            c = self.gw.caller()
            answer = self.gw.stream(c, RESPONSES, respond(model, stream=True))
            self.assertEqual((answer.status, answer.names[-1]), (200, last), model)
            usage = json.loads(answer.events[-1])["response"]["usage"]
            inp, out = usage["input_tokens"], usage["output_tokens"]
            self.assert_charged(c, inp, out, agent_cost(uncached=inp, output=out))

    def test_input_tokens_is_forwarded_and_never_charged(self):
        """input_tokens reaches the upstream and reserves nothing."""
        c = self.gw.caller()
        status, headers, body = self.gw.call(c, INPUT_TOKENS, respond("r-counted"))
        self.assertEqual((status, body["input_tokens"]), (200, 1001), body)
        self.assertNotIn("x-llmlimit-lease-id", headers)
        record = self.gw.upstream.requests()[-1]
        self.assertEqual((record["path"], record["body"]["model"]),
                         (INPUT_TOKENS, "fake-normal:prompt_tokens=1001:completion_tokens=499"))
        self.assertEqual(c.snapshot(), {name: (0, 0, 0) for name in c.keys})

    def test_background_is_refused(self):
        """"background": true is a 400 naming the field; nothing forwarded or held."""
        c = self.gw.caller()
        before = len(self.gw.upstream.requests())
        status, _, body = self.gw.call(c, RESPONSES, respond("r-normal", background=True))
        message = self.assert_openai_error(status, body, 400, "invalid_request",
                                           "invalid_request_error")
        self.assertIn("background", message)
        self.assertEqual(len(self.gw.upstream.requests()), before)
        self.assertEqual(c.snapshot(), {name: (0, 0, 0) for name in c.keys})


class StoredResponses(ResponsesTest, unittest.TestCase):

    def create(self, c, stream=False, **extra):
        if stream:
            answer = self.gw.stream(c, RESPONSES, respond("r-normal", stream=True, **extra))
            self.assertEqual(answer.status, 200, answer.raw)
            return json.loads(answer.events[0])["response"]["id"]
        status, _, body = self.gw.call(c, RESPONSES, respond("r-normal", **extra))
        self.assertEqual(status, 200, body)
        return body["id"]

    def test_only_the_creating_key_may_read_list_cancel_and_delete(self):
        """GET, GET input_items, POST cancel and DELETE of a response go upstream for the key
        that created it (streamed or not), are charged nothing, and answer 404 to another key,
        as to an id never seen."""
        owner, other = self.gw.caller(), self.gw.caller()
        for stream in (False, True):
            response_id = self.create(owner, stream=stream)
            charged = owner.snapshot()
            path = RESPONSES + "/" + response_id
            for method, tail in (("GET", ""), ("GET", "/input_items"), ("POST", "/cancel"),
                                 ("DELETE", "")):
                forwarded = len(self.gw.upstream.requests())
                status, _, body = self.gw.call(other, path + tail, method=method)
                self.assert_openai_error(status, body, 404, None, "invalid_request_error")
                self.assertEqual(len(self.gw.upstream.requests()), forwarded)
            status, _, body = self.gw.call(owner, path, method="GET")
            self.assertEqual(status, 200, body)
            self.assertEqual(body["id"], response_id)
            status, _, body = self.gw.call(owner, path + "/input_items?order=asc", method="GET")
            self.assertEqual((status, body["object"]), (200, "list"))
            self.assertEqual(self.gw.upstream.requests()[-1]["path"],
                             path + "/input_items?order=asc")
            status, _, body = self.gw.call(owner, path + "/cancel", method="POST")
            self.assertEqual(status, 400, body)  # the upstream's: not a background response
            status, _, body = self.gw.call(owner, path, method="DELETE")
            self.assertEqual((status, body["deleted"]), (200, True))
            self.assertEqual(owner.snapshot(), charged)
            self.assertEqual(other.snapshot(), {name: (0, 0, 0) for name in other.keys})
        for path in (RESPONSES + "/resp_never_made", RESPONSES + "/resp_x/other",
                     RESPONSES + "/resp_x%2F..", RESPONSES + "/r%00", RESPONSES + "/r" * 300,
                     RESPONSES + "/" + "r" * 129):
            self.assert_openai_error(*self.gw.call(owner, path, method="GET")[::2], 404, None)
        # a route of a stored response with the wrong method
        self.assert_openai_error(*self.gw.call(owner, RESPONSES + "/" + response_id + "/cancel",
                                               method="GET")[::2], 404, None)

    def test_head_of_a_stored_response_is_its_get_without_a_body(self):
        """HEAD of a response and of its input_items (docs/api.md: HEAD wherever GET): the
        GET's status and headers with no body (the GET behind it on the connection is read
        next), forwarded upstream as a GET, charged nothing; another key's is a 404."""
        owner, other = self.gw.caller(), self.gw.caller()
        response_id = self.create(owner)
        charged = owner.snapshot()
        for tail in ("", "/input_items"):
            path = RESPONSES + "/" + response_id + tail
            with self.subTest(tail=tail):
                conn = self.gw.connection()
                self.addCleanup(conn.close)
                auth = {"Authorization": "Bearer " + owner.secret}
                conn.request("HEAD", path, headers=auth)
                head = conn.getresponse()
                self.assertEqual((head.status, head.read()), (200, b""))
                self.assertEqual(self.gw.upstream.requests()[-1]["method"], "GET")
                conn.request("GET", path, headers=auth)
                get = conn.getresponse()
                body = get.read()
                self.assertEqual(get.status, 200, body)
                self.assertEqual(head.getheader("Content-Length"), str(len(body)))
                self.assertEqual(head.getheader("Content-Type"), get.getheader("Content-Type"))
                status, _, body = self.gw.call(other, path, method="HEAD")
                self.assertEqual((status, body), (404, ""))
        self.assertEqual(owner.snapshot(), charged)
        self.assertEqual(other.snapshot(), {name: (0, 0, 0) for name in other.keys})

    def test_a_response_not_stored_is_not_remembered(self):
        """"store": false (as Codex sends): its id is not kept, so reading it is a 404."""
        owner = self.gw.caller()
        response_id = self.create(owner, store=False)
        forwarded = len(self.gw.upstream.requests())
        self.assert_openai_error(*self.gw.call(owner, RESPONSES + "/" + response_id,
                                               method="GET")[::2], 404, None)
        self.assertEqual(len(self.gw.upstream.requests()), forwarded)


class DenialsAndClients(ResponsesTest, unittest.TestCase):

    def test_a_budget_denial_says_not_to_retry(self):
        """A budget that cannot take the call: 429 insufficient_quota in OpenAI's shape naming
        the limit, retry-after over a minute and x-should-retry: false."""
        c = self.gw.caller(usd=1500000)
        sock = self.gw.raw_request(c, RESPONSES, respond("r-endless", stream=True,
                                                         max_output_tokens=60000))
        read_until(sock, b"charlie")
        status, headers, body = self.gw.call(c, RESPONSES, respond("r-normal",
                                                                   max_output_tokens=60000))
        message = self.assert_openai_error(status, body, 429, "insufficient_quota",
                                           "insufficient_quota")
        self.assertIn(c.keys["usd"], message)
        self.assertGreater(int(headers["retry-after"]), 60)
        self.assertEqual(headers["x-should-retry"], "false")
        sock.close()
        self.assertTrue(wait_until(lambda: c.reserved("usd") == 0))

    def test_a_client_leaving_mid_stream_frees_its_slot_at_once(self):
        """A stream that would never end: the client closes after half the answer; the slot is
        free within FREED_S_MAX, charged the input estimate and the output streamed."""
        c = self.gw.caller(conc=1)
        body = respond("r-endless", stream=True)
        sock = self.gw.raw_request(c, RESPONSES, body)
        read_until(sock, b"charlie")
        self.assertEqual(c.reserved("conc"), 1)
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        started = time.monotonic()
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 0, timeout_s=FREED_S_MAX,
                                   interval_s=0.01), "the slot was not freed in 1 s")
        print("  slot freed %.3f s after the client left" % (time.monotonic() - started))
        record = self.gw.upstream.wait_for(lambda rs: rs[-1]["end"] is not None)[-1]
        self.assertEqual(record["end"], "client_gone")
        input_tokens = estimate("responses", body)[0]
        output = estimate_text("alpha bravo charlie")
        wait_until(lambda: c.reserved("usd") == 0)
        self.assert_charged(c, input_tokens, output,
                            agent_cost(uncached=input_tokens, output=output))


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)
