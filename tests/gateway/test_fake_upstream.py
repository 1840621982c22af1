"""The fake OpenAI upstream (fake_upstream.py) answers every mode as its
docstring says: exact bodies, SSE framing and chunked encoding,
include_usage, failures, hangs cut by the client's own timeout, and a log
that records every request and the moment a client went away.
Python 3 standard library only; run by ctest as gateway_fake_upstream."""

import base64
import http.client
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_upstream  # noqa: E402

CHAT = "/v1/chat/completions"
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]
CHAT_DETAILS = {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0}


def chat_body(model="fake-normal", text="one two three", **extra):
    return dict({"model": model, "messages": [{"role": "user", "content": text}]}, **extra)


def chat_usage(prompt, completion, cached=0):
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": CHAT_DETAILS}


class RawResponse:
    """A response read off the socket by hand, so that the chunked framing
    itself is checked, event by event."""

    def __init__(self, port, path, body, headers=None, timeout_s=5.0, method="POST"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        payload = json.dumps(body).encode() if body is not None else b""
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1",
                 "Content-Type: application/json", "Content-Length: %d" % len(payload)]
        lines += ["%s: %s" % item for item in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        self.file = self.sock.makefile("rb")
        self.status = int(self.file.readline().split()[1])
        self.headers = {}
        while True:
            line = self.file.readline().decode().rstrip("\r\n")
            if not line:
                break
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def chunk(self):
        """The next HTTP chunk's data; b"" for the last (size 0) chunk."""
        size = int(self.file.readline().strip(), 16)
        data = self.file.read(size)
        assert self.file.read(2) == b"\r\n", "chunk not followed by CRLF"
        return data

    def event(self):
        """The next SSE event, checked to fill exactly one HTTP chunk:
        parsed JSON, "[DONE]", or None after the last chunk."""
        data = self.chunk()
        if data == b"":
            return None
        assert data.startswith(b"data: ") and data.endswith(b"\n\n"), data
        text = data[len(b"data: "):-2].decode()
        assert "\n" not in text, text
        return text if text == "[DONE]" else json.loads(text)

    def events(self):
        events = []
        while True:
            event = self.event()
            if event is None:
                return events
            events.append(event)

    def named_event(self):
        """The next SSE event, checked to fill exactly one HTTP chunk:
        (name, parsed data), ("", data) for a data-only one, (":", text) for
        a comment, or None after the last chunk."""
        data = self.chunk()
        if data == b"":
            return None
        assert data.endswith(b"\n\n"), data
        text = data[:-2].decode()
        if text.startswith(":"):
            return ":", text
        name = ""
        if text.startswith("event: "):
            name, _, text = text[len("event: "):].partition("\n")
        assert text.startswith("data: ") and "\n" not in text, data
        return name, json.loads(text[len("data: "):])

    def named_events(self):
        events = []
        while True:
            event = self.named_event()
            if event is None:
                return events
            events.append(event)

    def close(self):
        self.file.close()
        self.sock.close()


class FakeUpstreamTest(unittest.TestCase):
    """One fake for the suite, its log cleared before each test."""

    @classmethod
    def setUpClass(cls):
        cls.log_dir = tempfile.mkdtemp(prefix="fake-upstream-test-")
        cls.upstream = fake_upstream.start(log_path=os.path.join(cls.log_dir, "log.jsonl"))
        cls.port = cls.upstream.port

    @classmethod
    def tearDownClass(cls):
        cls.upstream.stop()

    def setUp(self):
        self.upstream.clear()

    def post(self, path, body, headers=None, timeout_s=5.0):
        """(status, headers, parsed body) over http.client."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s)
        try:
            send = {"Content-Type": "application/json"}
            send.update(headers or {})
            conn.request("POST", path, json.dumps(body), send)
            response = conn.getresponse()
            data = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, \
                json.loads(data) if data else None
        finally:
            conn.close()

    def get(self, path):
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path),
                                    timeout=5) as response:
            return response.status, json.loads(response.read())

    def only_record(self):
        records = self.upstream.requests()
        self.assertEqual(len(records), 1, records)
        return records[0]

    def ended_record(self, timeout_s=30.0):
        records = self.upstream.wait_for(
            lambda rs: len(rs) == 1 and rs[0]["end"] is not None, timeout_s)
        return records[0]


class NormalAnswers(FakeUpstreamTest):
    def test_chat_completion_has_openai_shape_and_deterministic_usage(self):
        status, headers, body = self.post(CHAT, chat_body(text="one two  three\nfour"))
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "application/json")
        self.assertAlmostEqual(body.pop("created"), time.time(), delta=5)
        record = self.ended_record()
        self.assertEqual(body, {
            "id": "chatcmpl-fake-%d" % record["id"], "object": "chat.completion",
            "model": "fake-normal",
            "choices": [{"index": 0, "message": {
                "role": "assistant", "content": " ".join(WORDS[:7]), "refusal": None,
                "annotations": []}, "logprobs": None, "finish_reason": "stop"}],
            "usage": chat_usage(4, 7), "service_tier": "default",
            "system_fingerprint": "fp_fake"})
        self.assertEqual(record["end"], "answered")
        self.assertEqual(record["status"], 200)

    def test_content_parts_count_text_only_and_any_model_is_normal(self):
        messages = [{"role": "system", "content": "be brief"},
                    {"role": "user", "content": [
                        {"type": "text", "text": "look at this"},
                        {"type": "image_url", "image_url": {"url": "data:x"}}]}]
        _, _, body = self.post(CHAT, {"model": "gpt-4o-mini", "messages": messages})
        self.assertEqual(body["usage"]["prompt_tokens"], 5)
        self.assertEqual(body["model"], "gpt-4o-mini")
        self.assertEqual(self.only_record()["mode"], "normal")

    def test_max_tokens_caps_completion_and_n_multiplies_usage(self):
        _, _, capped = self.post(CHAT, chat_body(max_tokens=3))
        self.assertEqual(capped["choices"][0]["message"]["content"], "alpha bravo charlie")
        self.assertEqual(capped["choices"][0]["finish_reason"], "length")
        self.assertEqual(capped["usage"]["completion_tokens"], 3)
        _, _, both = self.post(CHAT, chat_body(max_tokens=3, max_completion_tokens=2))
        self.assertEqual(both["usage"]["completion_tokens"], 2)
        _, _, roomy = self.post(CHAT, chat_body(max_tokens=100, n=2))
        self.assertEqual([c["finish_reason"] for c in roomy["choices"]], ["stop", "stop"])
        self.assertEqual(roomy["choices"][1]["message"]["content"], " ".join(WORDS[1:8]))
        self.assertEqual(roomy["usage"]["completion_tokens"], 14)

    def test_parameters_from_model_name_and_headers_which_win(self):
        _, _, by_model = self.post(CHAT, chat_body("fake-normal:prompt_tokens=11"
                                                   ":completion_tokens=2"))
        self.assertEqual(by_model["usage"], chat_usage(11, 2))
        _, _, by_header = self.post(CHAT, chat_body("fake-normal:completion_tokens=2"),
                                    {"x-fake-completion-tokens": "4",
                                     "x-fake-prompt-tokens": "0"})
        self.assertEqual(by_header["usage"], chat_usage(0, 4))
        self.assertEqual(by_header["choices"][0]["message"]["content"], " ".join(WORDS[:4]))

    def test_cached_mode_by_model_or_header(self):
        _, _, half = self.post(CHAT, chat_body("fake-cached", text="a b c d e"))
        self.assertEqual(half["usage"], chat_usage(5, 7, cached=2))
        _, _, one = self.post(CHAT, chat_body("gpt-x", text="a"), {"x-fake-mode": "cached"})
        self.assertEqual(one["usage"]["prompt_tokens_details"]["cached_tokens"], 1)
        _, _, set_ = self.post(CHAT, chat_body("fake-cached:cached_tokens=4:prompt_tokens=9"))
        self.assertEqual(set_["usage"], chat_usage(9, 7, cached=4))
        _, _, clamped = self.post(CHAT, chat_body(text="a b"), {"x-fake-cached-tokens": "50"})
        self.assertEqual(clamped["usage"]["prompt_tokens_details"]["cached_tokens"], 2)

    def test_text_completion(self):
        status, _, body = self.post("/v1/completions", {"model": "fake-normal:completion_tokens=2",
                                                        "prompt": ["a b", "c"]})
        self.assertEqual(status, 200)
        del body["created"]
        self.assertEqual(body, {
            "id": "cmpl-fake-%d" % self.only_record()["id"], "object": "text_completion",
            "model": "fake-normal:completion_tokens=2",
            "choices": [{"text": "alpha bravo", "index": 0, "logprobs": None,
                         "finish_reason": "stop"}],
            "system_fingerprint": "fp_fake",
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
        _, _, tokens = self.post("/v1/completions", {"model": "fake-cached",
                                                     "prompt": [5, 6, 7, 8]})
        self.assertEqual(tokens["usage"]["prompt_tokens"], 4)
        self.assertEqual(tokens["usage"]["prompt_tokens_details"], {"cached_tokens": 2})

    def test_embeddings_float_base64_and_dimensions(self):
        status, _, body = self.post("/v1/embeddings", {"model": "fake-normal",
                                                       "input": ["a b", "c d e"]})
        self.assertEqual(status, 200)
        self.assertEqual(body["object"], "list")
        self.assertEqual(body["usage"], {"prompt_tokens": 5, "total_tokens": 5})
        self.assertEqual([(d["object"], d["index"], len(d["embedding"])) for d in body["data"]],
                         [("embedding", 0, 8), ("embedding", 1, 8)])
        self.assertNotEqual(body["data"][0]["embedding"], body["data"][1]["embedding"])
        _, _, again = self.post("/v1/embeddings", {"model": "fake-normal",
                                                   "input": ["a b", "c d e"],
                                                   "encoding_format": "base64"})
        for plain, coded in zip(body["data"], again["data"]):
            raw = base64.b64decode(coded["embedding"])
            self.assertEqual(list(struct.unpack("<8f", raw)), plain["embedding"])
        _, _, small = self.post("/v1/embeddings", {"model": "fake-normal", "input": "x",
                                                   "dimensions": 3})
        self.assertEqual(len(small["data"][0]["embedding"]), 3)
        _, _, tokens = self.post("/v1/embeddings", {"model": "fake-normal", "input": [1, 2, 3]})
        self.assertEqual((len(tokens["data"]), tokens["usage"]["prompt_tokens"]), (1, 3))

    def test_models_list_and_one_model(self):
        status, body = self.get("/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(body["object"], "list")
        ids = [m["id"] for m in body["data"]]
        self.assertEqual(ids, ["fake-" + mode for mode in fake_upstream.MODES])
        self.assertEqual(body["data"][0], {"id": "fake-normal", "object": "model",
                                           "created": 1700000000, "owned_by": "fake-upstream"})
        self.assertEqual(self.get("/v1/models/fake-hang")[1]["id"], "fake-hang")
        with self.assertRaises(urllib.error.HTTPError) as caught:
            self.get("/v1/models/gpt-4")
        self.assertEqual(caught.exception.code, 404)
        self.assertEqual(json.loads(caught.exception.read())["error"]["code"], "model_not_found")
        self.assertEqual([(r["method"], r["path"]) for r in self.upstream.requests()],
                         [("GET", "/v1/models"), ("GET", "/v1/models/fake-hang"),
                          ("GET", "/v1/models/gpt-4")])

    def test_keep_alive_across_json_and_stream_answers(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        for stream in (True, False, True):
            conn.request("POST", CHAT, json.dumps(chat_body(stream=stream)))
            response = conn.getresponse()
            self.assertEqual(response.status, 200)
            data = response.read()
            self.assertEqual(data.endswith(b"data: [DONE]\n\n"), stream)
        conn.close()
        peers = {r["peer"] for r in self.upstream.requests()}
        self.assertEqual(len(peers), 1, "three calls on one connection")


class Streams(FakeUpstreamTest):
    def test_chat_stream_framing_without_usage(self):
        response = RawResponse(self.port, CHAT, chat_body("fake-stream:completion_tokens=3",
                                                          stream=True))
        self.assertEqual(response.status, 200)
        self.assertEqual(response.headers["content-type"], "text/event-stream; charset=utf-8")
        self.assertEqual(response.headers["transfer-encoding"], "chunked")
        events = response.events()
        response.close()
        self.assertEqual(events[-1], "[DONE]")
        chunks = events[:-1]
        self.assertEqual(len(chunks), 5)
        for chunk in chunks:
            self.assertEqual(chunk["object"], "chat.completion.chunk")
            self.assertNotIn("usage", chunk)
            self.assertEqual(len(chunk["choices"]), 1)
        self.assertEqual(chunks[0]["choices"][0]["delta"],
                         {"role": "assistant", "content": "", "refusal": None})
        self.assertEqual([c["choices"][0]["delta"] for c in chunks[1:4]],
                         [{"content": "alpha"}, {"content": " bravo"}, {"content": " charlie"}])
        self.assertEqual(chunks[4]["choices"][0], {"index": 0, "delta": {}, "logprobs": None,
                                                   "finish_reason": "stop"})
        record = self.ended_record()
        self.assertEqual((record["end"], record["stream"], record["chunks_sent"]),
                         ("stream_complete", True, 6))
        self.assertEqual((record["content_sent"], record["usage_sent"], record["done_sent"]),
                         ("alpha bravo charlie", False, True))

    def test_include_usage_adds_the_usage_chunk_last(self):
        response = RawResponse(self.port, CHAT, chat_body(
            "fake-stream:completion_tokens=2", text="w w w w", stream=True,
            stream_options={"include_usage": True}))
        events = response.events()
        response.close()
        self.assertEqual(events[-1], "[DONE]")
        usage_chunk = events[-2]
        self.assertEqual(usage_chunk["choices"], [])
        self.assertEqual(usage_chunk["usage"], chat_usage(4, 2))
        for chunk in events[:-2]:
            self.assertIsNone(chunk["usage"])
            self.assertEqual(len(chunk["choices"]), 1)
        self.assertEqual(events[-3]["choices"][0]["finish_reason"], "stop")
        self.assertTrue(self.ended_record()["usage_sent"])

    def test_include_usage_false_sends_no_usage(self):
        response = RawResponse(self.port, CHAT, chat_body(
            stream=True, stream_options={"include_usage": False}))
        events = response.events()
        response.close()
        self.assertTrue(all("usage" not in e for e in events[:-1]))
        self.assertTrue(all(len(e["choices"]) == 1 for e in events[:-1]))

    def test_chunks_split_the_words_and_n_interleaves_choices(self):
        response = RawResponse(self.port, CHAT, chat_body(
            "fake-stream:completion_tokens=5:chunks=2", stream=True, n=2))
        events = response.events()[:-1]
        response.close()
        content = [(e["choices"][0]["index"], e["choices"][0]["delta"].get("content"))
                   for e in events[2:6]]
        self.assertEqual(content, [(0, "alpha bravo"), (1, "bravo charlie"),
                                   (0, " charlie delta echo"), (1, " delta echo foxtrot")])
        self.assertEqual([e["choices"][0]["finish_reason"] for e in events[6:]],
                         ["stop", "stop"])

    def test_text_completion_stream_with_usage(self):
        response = RawResponse(self.port, "/v1/completions", {
            "model": "fake-normal:completion_tokens=2", "prompt": "p q", "stream": True,
            "stream_options": {"include_usage": True}})
        events = response.events()
        response.close()
        self.assertEqual([e["choices"][0]["text"] for e in events[:3]], ["alpha", " bravo", ""])
        self.assertEqual(events[2]["choices"][0]["finish_reason"], "stop")
        self.assertEqual(events[0]["object"], "text_completion")
        self.assertEqual(events[3]["usage"], {"prompt_tokens": 2, "completion_tokens": 2,
                                              "total_tokens": 4})
        self.assertEqual(events[4], "[DONE]")

    def test_stream_no_usage_ignores_include_usage(self):
        response = RawResponse(self.port, CHAT, chat_body(
            "fake-stream-no-usage", stream=True, stream_options={"include_usage": True}))
        events = response.events()
        response.close()
        self.assertEqual(events[-1], "[DONE]")
        self.assertTrue(all("usage" not in e and e["choices"] for e in events[:-1]))
        _, _, plain = self.post(CHAT, chat_body("fake-stream-no-usage"))
        self.assertNotIn("usage", plain)
        self.assertEqual(plain["choices"][0]["finish_reason"], "stop")

    def test_stream_options_without_stream_is_refused(self):
        status, _, body = self.post(CHAT, chat_body(stream_options={"include_usage": True}))
        self.assertEqual(status, 400)
        self.assertEqual(body["error"]["param"], "stream_options")

    def test_stream_slow_sends_each_chunk_as_it_is_made(self):
        # The first content chunk must reach us while the fake is still
        # making the others, 1 s apart: its log then shows the stream unfinished
        # (a reader held up for 2 s by a busy machine would see it finished).
        started = time.monotonic()
        response = RawResponse(self.port, CHAT, chat_body(stream=True),
                               {"x-fake-mode": "stream-slow", "x-fake-delay-ms": "1000",
                                "x-fake-chunks": "3"})
        arrivals = [(0.0, response.event())]
        arrivals.append((time.monotonic() - started, response.event()))  # the first content
        unfinished = self.upstream.requests()[-1]
        while True:
            event = response.event()
            if event is None:
                break
            arrivals.append((time.monotonic() - started, event))
        response.close()
        self.assertEqual(len(arrivals), 6)  # role, 3 content, finish, [DONE]
        self.assertIsNone(unfinished["end"], "the whole stream was made before it was sent")
        self.assertLess(unfinished["chunks_sent"], 6)
        # Each content chunk waits its 1 s: the stream cannot end sooner.
        self.assertGreaterEqual(arrivals[-1][0], 3.0)
        self.assertEqual("".join(e["choices"][0]["delta"].get("content", "")
                                 for _, e in arrivals[:-1]), " ".join(WORDS[:7]))

    def test_slow_answer_without_stream_waits_the_whole_time(self):
        started = time.monotonic()
        status, _, _ = self.post(CHAT, chat_body("fake-stream-slow:delay_ms=100:chunks=3"))
        self.assertEqual(status, 200)
        self.assertGreaterEqual(time.monotonic() - started, 0.3)


class Failures(FakeUpstreamTest):
    def test_fail_modes_answer_openai_errors_even_for_streams(self):
        expected = {
            "fail-400": (400, {"message": "This request was refused by the fake upstream "
                               "(fail-400).", "type": "invalid_request_error", "param": None,
                               "code": None}),
            "fail-429": (429, {"message": "Rate limit reached for fake-fail-429 in organization "
                               "org-fake on requests per min (RPM): Limit 1, Used 1, "
                               "Requested 1.", "type": "requests", "param": None,
                               "code": "rate_limit_exceeded"}),
            "fail-500": (500, {"message": "The server had an error while processing your "
                               "request. Sorry about that!", "type": "server_error",
                               "param": None, "code": None}),
        }
        for mode, (status, error) in expected.items():
            for stream in (False, True):
                got, headers, body = self.post(CHAT, chat_body("fake-" + mode, stream=stream))
                self.assertEqual((got, body), (status, {"error": error}), mode)
                self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual([r["status"] for r in self.upstream.requests()],
                         [400, 400, 429, 429, 500, 500])

    def test_fail_429_says_when_to_retry(self):
        _, headers, _ = self.post(CHAT, chat_body(), {"x-fake-mode": "fail-429",
                                                      "x-fake-retry-after-ms": "2500"})
        self.assertEqual((headers["retry-after"], headers["retry-after-ms"]), ("3", "2500"))

    def test_empty_mode_answers_its_status_with_no_body(self):
        for status in (200, 307, 500):
            for stream in (False, True):
                model = "fake-empty:status=%d" % status
                got, headers, body = self.post(CHAT, chat_body(model, stream=stream))
                self.assertEqual((got, body, headers["content-length"]), (status, None, "0"))
                self.assertNotIn("content-type", headers)
        self.assertEqual([r["status"] for r in self.upstream.requests()],
                         [200, 200, 307, 307, 500, 500])
        got, _, _ = self.post(CHAT, chat_body("fake-empty:status=199"))
        self.assertEqual(got, 400)

    def test_close_before_answer(self):
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            self.post(CHAT, chat_body("fake-close-before-answer"))
        record = self.ended_record()
        self.assertEqual((record["end"], record["status"], record["mode"]),
                         ("closed", None, "close-before-answer"))

    def test_hang_is_cut_by_the_clients_timeout_and_logged(self):
        started = time.monotonic()
        sent_ms = fake_upstream.now_ms()
        with self.assertRaises(socket.timeout):
            self.post(CHAT, chat_body("fake-hang"), timeout_s=0.3)
        closed_ms = fake_upstream.now_ms()
        self.assertGreaterEqual(time.monotonic() - started, 0.3)
        record = self.ended_record()
        self.assertEqual((record["end"], record["status"], record["client_gone_how"]),
                         ("client_gone", None, "eof"))
        # Seen gone after the client's 0.3 s timeout, and long before the
        # hang's own end (600 s): the client's close is what ended it.
        self.assertGreaterEqual(record["client_gone_unix_ms"], sent_ms + 300)
        self.assertLess(record["client_gone_unix_ms"], closed_ms + 30000)

    def test_stream_hang_sends_half_then_nothing(self):
        response = RawResponse(self.port, CHAT, chat_body("fake-stream-hang:chunks=3",
                                                          stream=True), timeout_s=0.3)
        events = [response.event() for _ in range(3)]  # role and two of the three chunks
        with self.assertRaises(socket.timeout):
            response.event()
        response.close()
        closed_ms = fake_upstream.now_ms()
        self.assertEqual([e["choices"][0]["finish_reason"] for e in events], [None] * 3)
        record = self.ended_record()
        self.assertEqual((record["end"], record["chunks_sent"], record["done_sent"]),
                         ("client_gone", 3, False))
        self.assertEqual(record["content_sent"], "alpha bravo charlie delta")
        self.assertGreaterEqual(record["client_gone_unix_ms"], closed_ms - 5)
        self.assertLess(record["client_gone_unix_ms"], closed_ms + 1000)

    def test_client_leaving_mid_stream_is_seen_before_the_next_write(self):
        response = RawResponse(self.port, CHAT, chat_body(
            "fake-stream-slow:delay_ms=100:completion_tokens=20", stream=True))
        self.assertEqual(response.event()["choices"][0]["delta"]["role"], "assistant")
        self.assertEqual(response.event()["choices"][0]["delta"]["content"], "alpha")
        response.close()
        record = self.ended_record()
        self.assertEqual(record["end"], "client_gone")
        self.assertTrue(record["content_sent"].startswith("alpha"))
        self.assertFalse(record["done_sent"])
        self.upstream.clear()
        response = RawResponse(self.port, CHAT, chat_body(
            "fake-stream-slow:delay_ms=5000:chunks=20", stream=True))
        response.event()  # the role chunk; the first content chunk is 5 s away
        response.close()
        closed_ms = fake_upstream.now_ms()
        record = self.ended_record(timeout_s=3.0)
        self.assertEqual((record["end"], record["client_gone"], record["client_gone_how"]),
                         ("client_gone", True, "eof"))
        self.assertGreaterEqual(record["client_gone_unix_ms"], closed_ms - 5)
        self.assertLess(record["client_gone_unix_ms"], closed_ms + 3000,
                        "seen while waiting, before the next chunk was due")
        self.assertEqual((record["chunks_sent"], record["content_sent"]), (1, ""))

    def test_reset_while_streaming_fast_is_logged(self):
        response = RawResponse(self.port, CHAT, chat_body(
            "fake-normal:completion_tokens=100000:chunks=10000", stream=True))
        response.event()
        response.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        response.close()  # with linger 0: a reset, with unread data in flight
        record = self.ended_record()
        self.assertEqual(record["end"], "client_gone")
        self.assertIn(record["client_gone_how"], ("eof", "write_failed"))
        self.assertFalse(record["done_sent"])


class BadRequests(FakeUpstreamTest):
    def assert_error(self, status, body, path=CHAT, headers=None, param="absent"):
        got, _, answer = self.post(path, body, headers)
        self.assertEqual(got, status, answer)
        self.assertEqual(set(answer["error"]), {"message", "type", "param", "code"})
        if param != "absent":
            self.assertEqual(answer["error"]["param"], param)
        return answer["error"]

    def test_unknown_modes_and_parameters_are_refused(self):
        self.assertIn("unknown mode", self.assert_error(400, chat_body("fake-hnag"))["message"])
        error = self.assert_error(400, chat_body(), headers={"x-fake-mode": "nope"})
        self.assertIn("x-fake-mode", error["message"])
        self.assert_error(400, chat_body("fake-normal:colour=3"), param="model")
        self.assert_error(400, chat_body(), headers={"x-fake-chunks": "10001"})
        self.assert_error(400, chat_body(), headers={"x-fake-delay-ms": "-1"})
        self.assert_error(400, chat_body(), headers={"x-fake-completion-tokens": "many"})

    def test_openai_style_request_errors(self):
        self.assert_error(400, {"model": "fake-normal"}, param="messages")
        self.assert_error(400, {"model": "fake-normal"}, "/v1/embeddings", param="input")
        self.assert_error(400, {"messages": []})
        self.assert_error(400, chat_body(max_tokens=0), param="max_tokens")
        self.assert_error(400, chat_body(n=17), param="n")
        self.assert_error(400, {"model": "x", "input": "a", "encoding_format": "int8"},
                          "/v1/embeddings", param="encoding_format")
        self.assert_error(404, chat_body(), "/v1/chat/completion")
        self.assertEqual(len(self.upstream.requests()), 7, "every refused call is logged")

    def test_body_over_the_bound_is_refused_before_reading(self):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d"
                     b"\r\n\r\n" % (fake_upstream.BODY_BYTES_MAX + 1))
        answer = sock.makefile("rb").readline()
        sock.close()
        self.assertEqual(answer.split()[1], b"413")

    def test_unparsable_body_is_logged_as_text(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        conn.request("POST", CHAT, b"{not json")
        self.assertEqual(conn.getresponse().status, 400)
        conn.close()
        record = self.only_record()
        self.assertEqual((record["body"], record["body_text"]), (None, "{not json"))


class Log(FakeUpstreamTest):
    def test_log_over_http_has_headers_body_and_time_and_clears(self):
        before_ms = fake_upstream.now_ms()
        body = chat_body(text="secret words")
        self.post(CHAT, body, {"Authorization": "Bearer sk-provider", "X-Other": "1"})
        self.ended_record()
        _, answer = self.get("/_fake/requests")
        self.assertEqual(len(answer["requests"]), 1, "the /_fake routes are not logged")
        record = answer["requests"][0]
        self.assertEqual((record["method"], record["path"], record["body"]), ("POST", CHAT, body))
        self.assertEqual(record["headers"]["authorization"], "Bearer sk-provider")
        self.assertEqual(record["headers"]["x-other"], "1")
        self.assertGreaterEqual(record["received_unix_ms"], before_ms)
        self.assertGreaterEqual(record["ended_unix_ms"], record["received_unix_ms"])
        request = urllib.request.Request("http://127.0.0.1:%d/_fake/requests" % self.port,
                                         method="DELETE")
        with urllib.request.urlopen(request, timeout=5) as response:
            self.assertEqual(json.loads(response.read()), {"cleared": 1})
        self.assertEqual(self.get("/_fake/requests")[1], {"requests": []})


MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"
ANTHROPIC = {"x-api-key": "sk-ant-fake", "anthropic-version": "2023-06-01"}


def messages_body(model="fake-normal", text="one two three", **extra):
    return dict({"model": model, "max_tokens": 1000,
                 "messages": [{"role": "user", "content": text}]}, **extra)


def anthropic_usage(input_tokens, output_tokens, read=0, write_5m=0, write_1h=0):
    return {"input_tokens": input_tokens, "cache_creation_input_tokens": write_5m + write_1h,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": write_5m,
                               "ephemeral_1h_input_tokens": write_1h},
            "output_tokens": output_tokens, "service_tier": "standard"}


def responses_usage(input_tokens, output_tokens, cached=0, reasoning=0):
    return {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input_tokens + output_tokens}


class AnthropicMessages(FakeUpstreamTest):
    def test_stream_sends_anthropics_event_sequence_with_cumulative_usage(self):
        """A Messages stream: message_start with input and cache usage, thinking, text and
        tool_use blocks, ping after the first block start, cumulative message_deltas."""
        body = messages_body("fake-normal:completion_tokens=4:reasoning_tokens=2:tool_calls=1"
                             ":cached_tokens=30:cache_write_5m=20:cache_write_1h=10"
                             ":message_deltas=3", stream=True,
                             tools=[{"name": "Bash", "description": "runs it",
                                     "input_schema": {"type": "object"}}])
        response = RawResponse(self.port, MESSAGES + "?beta=true", body,
                               dict(ANTHROPIC, **{"anthropic-beta": "b1,b2"}))
        self.assertEqual(response.headers["content-type"], "text/event-stream; charset=utf-8")
        events = response.named_events()
        response.close()
        names = [name for name, _ in events]
        self.assertEqual(names, ["message_start", "content_block_start", "ping"]
                         + ["content_block_delta"] * 3 + ["content_block_stop",
                                                          "content_block_start"]
                         + ["content_block_delta"] * 4 + ["content_block_stop",
                                                          "content_block_start"]
                         + ["content_block_delta"] * 3 + ["content_block_stop"]
                         + ["message_delta"] * 3 + ["message_stop"])
        for name, data in events:
            self.assertEqual(data["type"], name)
        start = events[0][1]["message"]
        self.assertEqual((start["id"], start["role"], start["content"], start["stop_reason"]),
                         ("msg_fake_%d" % self.only_record()["id"], "assistant", [], None))
        self.assertEqual(start["usage"], anthropic_usage(5, 1, 30, 20, 10))
        self.assertEqual([e[1]["content_block"]["type"] for e in events
                          if e[0] == "content_block_start"], ["thinking", "text", "tool_use"])
        self.assertEqual(events[13][1]["content_block"]["name"], "Bash")
        deltas = [e[1]["delta"] for e in events if e[0] == "content_block_delta"]
        self.assertEqual([d["type"] for d in deltas],
                         ["thinking_delta"] * 2 + ["signature_delta"] + ["text_delta"] * 4
                         + ["input_json_delta"] * 3)
        self.assertEqual("".join(d.get("text", "") for d in deltas), " ".join(WORDS[:4]))
        self.assertEqual(json.loads("".join(d.get("partial_json", "") for d in deltas)),
                         {"word": "alpha"})
        total = 4 + 2 + 5  # text, thinking, one tool call
        usages = [e[1]["usage"] for e in events if e[0] == "message_delta"]
        self.assertEqual([u["output_tokens"] for u in usages], [4, 8, total])
        self.assertEqual(usages[-1], {"input_tokens": 5, "cache_creation_input_tokens": 30,
                                      "cache_read_input_tokens": 30, "output_tokens": total})
        self.assertEqual(events[-2][1]["delta"], {"stop_reason": "tool_use",
                                                  "stop_sequence": None})
        record = self.ended_record()
        self.assertEqual((record["path"], record["query"]), (MESSAGES + "?beta=true",
                                                            {"beta": "true"}))
        self.assertEqual((record["headers"]["x-api-key"], record["headers"]["anthropic-version"],
                          record["headers"]["anthropic-beta"]),
                         ("sk-ant-fake", "2023-06-01", "b1,b2"))
        self.assertEqual(record["events_sent"], names)
        self.assertEqual((record["end"], record["content_sent"], record["usage_sent"],
                          record["done_sent"], record["chunks_sent"]),
                         ("stream_complete", " ".join(WORDS[:4]), True, True, len(events)))

    def test_message_not_streamed_and_max_tokens(self):
        """A non-streamed message has Anthropic's shape; max_tokens cuts the text and
        says max_tokens."""
        status, headers, body = self.post(MESSAGES, messages_body(
            "fake-cached:cached_tokens=9:cache_write_5m=3", system="be brief"), ANTHROPIC)
        self.assertEqual(status, 200)
        record = self.only_record()
        self.assertEqual(headers["request-id"], "req_fake_%d" % record["id"])
        self.assertEqual(body, {
            "id": "msg_fake_%d" % record["id"], "type": "message", "role": "assistant",
            "model": "fake-cached:cached_tokens=9:cache_write_5m=3",
            "content": [{"type": "text", "text": " ".join(WORDS[:7])}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": anthropic_usage(5, 7, read=9, write_5m=3)})
        _, _, capped = self.post(MESSAGES, messages_body(
            "fake-normal:reasoning_tokens=2", max_tokens=5), ANTHROPIC)
        self.assertEqual([b["type"] for b in capped["content"]], ["thinking", "text"])
        self.assertEqual(capped["content"][1]["text"], "alpha bravo charlie")
        self.assertEqual((capped["stop_reason"], capped["usage"]["output_tokens"]),
                         ("max_tokens", 5))

    def test_count_tokens_and_the_root(self):
        """count_tokens counts the words of system, messages and tools; HEAD / and GET /
        answer 200."""
        status, _, body = self.post(MESSAGES + "/count_tokens", {
            "model": "claude-x", "system": [{"type": "text", "text": "a b"}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "c d e"}]}],
            "tools": [{"name": "t", "description": "f g"}]}, ANTHROPIC)
        self.assertEqual((status, body), (200, {"input_tokens": 7}))
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        conn.request("HEAD", "/")
        head = conn.getresponse()
        self.assertEqual((head.status, head.read()), (200, b""))
        conn.request("GET", "/")
        self.assertEqual(conn.getresponse().status, 200)
        conn.close()
        self.assertEqual([(r["method"], r["path"], r["status"]) for r in self.upstream.requests()],
                         [("POST", MESSAGES + "/count_tokens", 200), ("HEAD", "/", 200),
                          ("GET", "/", 200)])

    def test_errors_have_anthropics_shape_and_retry_headers(self):
        """fail modes, a missing anthropic-version or max_tokens, and an unknown route answer
        {"type": "error", ...}; 429 and 529 say when to retry, should_retry sets x-should-retry."""
        status, headers, body = self.post(MESSAGES, messages_body(
            "fake-fail-429:retry_after_ms=2500:should_retry=0", stream=True), ANTHROPIC)
        record = self.only_record()
        self.assertEqual((status, body), (429, {"type": "error", "error": {
            "type": "rate_limit_error", "message": "This request would exceed the rate limit "
            "for your organization of 1 requests per minute."},
            "request_id": "req_fake_%d" % record["id"]}))
        self.assertEqual((headers["retry-after"], headers["retry-after-ms"],
                          headers["x-should-retry"]), ("3", "2500", "false"))
        expected = {"fake-fail-529": (529, "overloaded_error"),
                    "fake-fail-500": (500, "api_error"),
                    "fake-fail-401": (401, "authentication_error"),
                    "fake-fail-413": (413, "request_too_large"),
                    "fake-stream-error": (500, "api_error")}
        for model, (want_status, kind) in expected.items():
            got, headers, body = self.post(MESSAGES, messages_body(model), ANTHROPIC)
            self.assertEqual((got, body["type"], body["error"]["type"]),
                             (want_status, "error", kind), model)
            self.assertEqual("retry-after" in headers, want_status == 529, model)
        got, _, body = self.post(MESSAGES, messages_body(), {"x-api-key": "k"})
        self.assertEqual((got, body["error"]["message"]),
                         (400, "anthropic-version: header is required"))
        got, _, body = self.post(MESSAGES, {"model": "m", "messages": []}, ANTHROPIC)
        self.assertEqual((got, body["error"]["type"]), (400, "invalid_request_error"))
        got, _, body = self.post("/v1/messages/batches", messages_body(), ANTHROPIC)
        self.assertEqual((got, body["error"]["type"]), (404, "not_found_error"))

    def test_stream_error_sends_an_error_event_after_half(self):
        """stream-error: half the text deltas, then `event: error` (overloaded), then the end."""
        response = RawResponse(self.port, MESSAGES, messages_body(
            "fake-stream-error:completion_tokens=5", stream=True), ANTHROPIC)
        events = response.named_events()
        response.close()
        self.assertEqual([name for name, _ in events],
                         ["message_start", "content_block_start", "ping"]
                         + ["content_block_delta"] * 3 + ["error"])
        self.assertEqual(events[-1][1], {"type": "error", "error": {
            "type": "overloaded_error", "message": "Overloaded"}})
        record = self.ended_record()
        self.assertEqual((record["end"], record["content_sent"], record["usage_sent"]),
                         ("stream_error", "alpha bravo charlie", False))

    def test_stream_close_and_stream_endless(self):
        """stream-close ends the connection mid-stream; stream-endless sends pings until the
        client goes."""
        response = RawResponse(self.port, MESSAGES, messages_body(
            "fake-stream-close:completion_tokens=4", stream=True), ANTHROPIC)
        names = [response.named_event()[0] for _ in range(5)]
        self.assertEqual(response.file.readline(), b"", "closed without the last chunk")
        response.close()
        self.assertEqual(names[-1], "content_block_delta")
        record = self.ended_record()
        self.assertEqual((record["end"], record["content_sent"]), ("closed", "alpha bravo"))
        self.upstream.clear()
        response = RawResponse(self.port, MESSAGES, messages_body(
            "fake-stream-endless:completion_tokens=2:delay_ms=10", stream=True), ANTHROPIC)
        events = [response.named_event() for _ in range(10)]
        response.close()
        self.assertEqual([name for name, _ in events[3:]],
                         ["content_block_delta"] + ["ping"] * 6)
        record = self.ended_record()
        self.assertEqual((record["end"], record["done_sent"]), ("client_gone", False))

    def test_key_as_x_api_key_or_bearer(self):
        """With a key set, Anthropic routes take it as x-api-key or as a bearer token."""
        with fake_upstream.start(api_key="sk-right") as upstream:
            for headers, status in (({"x-api-key": "sk-wrong"}, 401),
                                    ({"x-api-key": "sk-right"}, 200),
                                    ({"Authorization": "Bearer sk-right"}, 200), ({}, 401)):
                conn = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=5)
                conn.request("POST", MESSAGES, json.dumps(messages_body()),
                             dict(headers, **{"anthropic-version": "2023-06-01"}))
                response = conn.getresponse()
                body = json.loads(response.read())
                conn.close()
                self.assertEqual(response.status, status, headers)
                if status == 401:
                    self.assertEqual(body["error"]["type"], "authentication_error")


class OpenAIResponses(FakeUpstreamTest):
    def test_stream_sends_the_responses_event_sequence(self):
        """A Responses stream: created, in_progress, a reasoning item, the message's part and
        deltas, a function call, completed with the usage; sequence numbers in order."""
        body = {"model": "fake-normal:completion_tokens=3:reasoning_tokens=4:cached_tokens=2"
                ":tool_calls=1", "input": "one two three", "instructions": "four",
                "stream": True, "tools": [{"type": "function", "name": "shell",
                                           "description": "five", "parameters": {}}]}
        response = RawResponse(self.port, RESPONSES, body, {"Authorization": "Bearer sk"})
        events = response.named_events()
        response.close()
        names = [name for name, _ in events]
        self.assertEqual(names, [
            "response.created", "response.in_progress", "response.output_item.added",
            "response.output_item.done", "response.output_item.added",
            "response.content_part.added"] + ["response.output_text.delta"] * 3 + [
            "response.output_text.done", "response.content_part.done",
            "response.output_item.done", "response.output_item.added"]
            + ["response.function_call_arguments.delta"] * 2 + [
            "response.function_call_arguments.done", "response.output_item.done",
            "response.completed"])
        self.assertEqual([data["sequence_number"] for _, data in events],
                         list(range(len(events))))
        for name, data in events:
            self.assertEqual(data["type"], name)
        created = events[0][1]["response"]
        record = self.only_record()
        self.assertEqual((created["id"], created["status"], created["usage"], created["output"]),
                         ("resp_fake_%d" % record["id"], "in_progress", None, []))
        self.assertEqual("".join(d["delta"] for n, d in events
                                 if n == "response.output_text.delta"), "alpha bravo charlie")
        final = events[-1][1]["response"]
        self.assertEqual(final["status"], "completed")
        self.assertEqual([item["type"] for item in final["output"]],
                         ["reasoning", "message", "function_call"])
        self.assertEqual(final["output"][2]["name"], "shell")
        self.assertEqual(final["usage"], responses_usage(5, 3 + 4 + 5, cached=2, reasoning=4))
        record = self.ended_record()
        self.assertEqual((record["end"], record["content_sent"], record["usage_sent"],
                          record["done_sent"]),
                         ("stream_complete", "alpha bravo charlie", True, True))

    def test_not_streamed_incomplete_and_failed(self):
        """The body is the completed response; max_output_tokens makes it incomplete; failed
        streams half the text then response.failed with the usage of what was sent."""
        status, _, body = self.post(RESPONSES, {"model": "fake-cached", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "a b c d"}]}]})
        self.assertEqual((status, body["object"], body["status"]), (200, "response", "completed"))
        self.assertEqual(body["output"][0]["content"][0]["text"], " ".join(WORDS[:7]))
        self.assertEqual(body["usage"], responses_usage(4, 7, cached=2))
        _, _, capped = self.post(RESPONSES, {"model": "m", "input": "x", "max_output_tokens": 3})
        self.assertEqual((capped["status"], capped["incomplete_details"],
                          capped["usage"]["output_tokens"]),
                         ("incomplete", {"reason": "max_output_tokens"}, 3))
        response = RawResponse(self.port, RESPONSES, {
            "model": "fake-incomplete:completion_tokens=2", "input": "x", "stream": True})
        last = response.named_events()[-1]
        response.close()
        self.assertEqual((last[0], last[1]["response"]["status"]),
                         ("response.incomplete", "incomplete"))
        response = RawResponse(self.port, RESPONSES, {
            "model": "fake-failed:completion_tokens=5", "input": "x", "stream": True})
        events = response.named_events()
        response.close()
        self.assertEqual([n for n, _ in events[-4:]], ["response.output_text.delta"] * 3
                         + ["response.failed"])
        failed = events[-1][1]["response"]
        self.assertEqual((failed["status"], failed["error"]["code"]), ("failed", "server_error"))
        self.assertEqual(failed["usage"], responses_usage(1, 3))

    def test_stream_error_event_keeps_the_sequence(self):
        """stream-error: half the deltas, then an `error` event with the next sequence number."""
        response = RawResponse(self.port, RESPONSES, {
            "model": "fake-stream-error:completion_tokens=4", "input": "x", "stream": True})
        events = response.named_events()
        response.close()
        self.assertEqual([n for n, _ in events[-3:]], ["response.output_text.delta"] * 2
                         + ["error"])
        self.assertEqual([data["sequence_number"] for _, data in events],
                         list(range(len(events))))
        self.assertEqual(events[-1][1]["code"], "server_error")
        self.assertEqual(self.ended_record()["end"], "stream_error")

    def test_input_tokens_and_stored_responses(self):
        """input_tokens counts; a stored response can be read, listed, deleted; cancel works
        only for background ones; store false keeps nothing."""
        _, _, count = self.post(RESPONSES + "/input_tokens", {
            "model": "m", "input": "a b c", "instructions": "d"})
        self.assertEqual(count, {"object": "response.input_tokens", "input_tokens": 4})
        _, _, made = self.post(RESPONSES, {"model": "m", "input": [
            {"role": "user", "content": "one"}, {"role": "user", "content": "two"}]})
        rid = made["id"]
        self.assertEqual(self.get(RESPONSES + "/" + rid), (200, made))
        _, items = self.get(RESPONSES + "/%s/input_items" % rid)
        self.assertEqual([i["content"] for i in items["data"]], ["two", "one"])
        _, items = self.get(RESPONSES + "/%s/input_items?order=asc" % rid)
        self.assertEqual(([i["content"] for i in items["data"]], items["has_more"]),
                         (["one", "two"], False))
        status, _, refused = self.post(RESPONSES + "/%s/cancel" % rid, {})
        self.assertEqual((status, refused["error"]["type"]), (400, "invalid_request_error"))
        _, _, queued = self.post(RESPONSES, {"model": "m", "input": "x", "background": True})
        self.assertEqual((queued["status"], queued["usage"]), ("queued", None))
        _, _, cancelled = self.post(RESPONSES + "/%s/cancel" % queued["id"], {})
        self.assertEqual(cancelled["status"], "cancelled")
        request = urllib.request.Request(self.upstream.url + RESPONSES + "/" + rid,
                                         method="DELETE")
        with urllib.request.urlopen(request, timeout=5) as response:
            self.assertEqual(json.loads(response.read()), {
                "id": rid, "object": "response.deleted", "deleted": True})
        _, _, unstored = self.post(RESPONSES, {"model": "m", "input": "x", "store": False})
        for gone in (rid, unstored["id"]):
            with self.assertRaises(urllib.error.HTTPError) as caught:
                self.get(RESPONSES + "/" + gone)
            self.assertEqual(caught.exception.code, 404)

    def test_errors_have_openais_shape(self):
        """fail modes and bad requests on /v1/responses answer OpenAI's error object."""
        status, headers, body = self.post(RESPONSES, {"model": "fake-fail-429:should_retry=1",
                                                      "input": "x"})
        self.assertEqual((status, body["error"]["code"], headers["retry-after-ms"],
                          headers["x-should-retry"]), (429, "rate_limit_exceeded", "1000", "true"))
        status, _, body = self.post(RESPONSES, {"model": "m"})
        self.assertEqual((status, body["error"]["param"]), (400, "input"))
        status, _, body = self.post(RESPONSES, {"model": "fake-fail-503", "input": "x"})
        self.assertEqual((status, set(body["error"])), (503, {"message", "type", "param", "code"}))


class CommonModes(FakeUpstreamTest):
    def test_empty_answers(self):
        """empty: 200 with no body, or a stream with no event, on every route."""
        for path, body, headers in ((CHAT, chat_body("fake-empty"), {}),
                                    (MESSAGES, messages_body("fake-empty"), ANTHROPIC),
                                    (RESPONSES, {"model": "fake-empty", "input": "x"}, {})):
            response = RawResponse(self.port, path, body, headers)
            self.assertEqual((response.status, response.headers["content-length"]), (200, "0"))
            response.close()
            response = RawResponse(self.port, path, dict(body, stream=True), headers)
            self.assertEqual((response.status, response.named_events()), (200, []))
            response.close()

    def test_chat_stream_close_and_error(self):
        """On chat completions too: stream-close cuts the connection after half the
        chunks, stream-error sends an error chunk; stream-close without stream sends half
        a body."""
        response = RawResponse(self.port, CHAT, chat_body("fake-stream-close:chunks=4",
                                                          stream=True))
        self.assertEqual(len([response.event() for _ in range(3)]), 3)
        self.assertEqual(response.file.readline(), b"")
        response.close()
        self.assertEqual(self.ended_record()["end"], "closed")
        response = RawResponse(self.port, CHAT, chat_body("fake-stream-error:chunks=2",
                                                          stream=True))
        events = response.events()
        response.close()
        self.assertEqual(events[-1]["error"]["type"], "server_error")
        self.assertEqual(len(events), 3)
        with self.assertRaises(http.client.IncompleteRead):
            self.post(CHAT, chat_body("fake-stream-close"))

    def test_header_cr_and_echo_key(self):
        """header-cr: a Content-Type holding a bare CR and a control byte; echo-key: the key
        received, in a 401's message and Content-Type, or in a stream's first event cut
        across two HTTP chunks."""
        response = RawResponse(self.port, CHAT, chat_body("fake-header-cr"))
        self.assertEqual(response.headers["content-type"], "application/json\rx-injected: yes\x01")
        response.close()
        key = {"Authorization": "Bearer sk-echo-0123456789"}
        status, headers, body = self.post(CHAT, chat_body("fake-echo-key"), key)
        self.assertEqual(status, 401)
        self.assertIn("sk-echo-0123456789", body["error"]["message"])
        self.assertEqual(headers["content-type"], "application/json; echo=sk-echo-0123456789")
        response = RawResponse(self.port, MESSAGES, messages_body("fake-echo-key", stream=True),
                               dict(ANTHROPIC, **{"x-api-key": "sk-echo-0123456789"}))
        self.assertEqual((response.chunk(), response.chunk()),
                         (b": key sk-echo-0", b"123456789\n\n"))
        response.close()


def line_count(path):
    with open(path, encoding="utf-8") as file:
        return sum(1 for _ in file)


class Lifecycle(unittest.TestCase):
    def test_api_key_is_enforced_when_given(self):
        with fake_upstream.start(api_key="sk-right") as upstream:
            for key, status in ((None, 401), ("sk-wrong", 401), ("sk-right", 200)):
                headers = {"Authorization": "Bearer " + key} if key else {}
                request = urllib.request.Request(upstream.url + CHAT, json.dumps(chat_body())
                                                 .encode(), headers)
                try:
                    with urllib.request.urlopen(request, timeout=5) as response:
                        got = response.status
                except urllib.error.HTTPError as error:
                    got = error.code
                    self.assertEqual(json.loads(error.read())["error"]["code"],
                                     "invalid_api_key")
                self.assertEqual(got, status, key)

    def test_stop_ends_a_hang_and_logs_why(self):
        upstream = fake_upstream.start()
        sock = socket.create_connection(("127.0.0.1", upstream.port), timeout=5)
        payload = json.dumps(chat_body("fake-hang")).encode()
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d"
                     b"\r\n\r\n%s" % (len(payload), payload))
        upstream.wait_for(lambda rs: len(rs) == 1)
        upstream.stop()
        self.assertEqual(sock.recv(100), b"", "the connection is closed, unanswered")
        sock.close()
        upstream.wait_for(lambda rs: rs[0]["end"] == "server_stop")

    def test_hang_limit_closes_without_answer(self):
        with fake_upstream.start(hang_seconds_max=0.2) as upstream:
            conn = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=5)
            conn.request("POST", CHAT, json.dumps(chat_body("fake-hang")))
            with self.assertRaises(http.client.RemoteDisconnected):
                conn.getresponse()
            conn.close()
            self.assertEqual(upstream.wait_for(lambda rs: rs[0]["end"])[0]["end"],
                             "hang_timeout")

    def test_command_line_prints_its_address_and_writes_the_log(self):
        with tempfile.TemporaryDirectory() as folder:
            log_path = os.path.join(folder, "upstream.jsonl")
            process = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "fake_upstream.py"), "--port", "0",
                 "--log", log_path], stdout=subprocess.PIPE, text=True)
            try:
                line = process.stdout.readline().strip()
                self.assertRegex(line, r"^fake_upstream listening on 127\.0\.0\.1:[0-9]+$")
                url = "http://" + line.rsplit(" ", 1)[1]
                request = urllib.request.Request(
                    url + CHAT, json.dumps(chat_body()).encode(),
                    {"Authorization": "Bearer sk-cli", "Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=5) as response:
                    self.assertEqual(response.status, 200)
                deadline = time.monotonic() + 30
                while line_count(log_path) < 2 and time.monotonic() < deadline:
                    time.sleep(0.02)  # the "ended" line follows the answer
            finally:
                process.terminate()
                self.assertEqual(process.wait(10), 0)
            with open(log_path, encoding="utf-8") as log:
                lines = [json.loads(text) for text in log]
            self.assertEqual([e["event"] for e in lines], ["received", "ended"])
            self.assertEqual(lines[0]["headers"]["authorization"], "Bearer sk-cli")
            self.assertEqual((lines[1]["id"], lines[1]["status"], lines[1]["end"]),
                             (lines[0]["id"], 200, "answered"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
