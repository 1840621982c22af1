#!/usr/bin/env python3
"""A fake OpenAI API server that the gateway's tests and the SDK smoke test
run against: deterministic answers, streams, failures and hangs on demand,
and a log of every request it saw. Python 3 standard library only.

Run it:   python3 fake_upstream.py --port 0 --log FILE [--api-key KEY]
          (prints "fake_upstream listening on 127.0.0.1:PORT" when ready)
Import it: upstream = fake_upstream.start(); upstream.url; upstream.requests();
           upstream.stop()

Routes: POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings,
GET /v1/models, GET /v1/models/ID; GET /_fake/requests (the log, as
{"requests": [...]}) and DELETE /_fake/requests (clears it). The /_fake
routes are not logged and need no key.

Behaviour is chosen per request, so one server serves a whole test suite:

  mode    the header `x-fake-mode: MODE`, else the model name `fake-MODE`
          (the header wins; a gateway may not forward it, so the model name
          works on its own). A model not starting with "fake-" is `normal`;
          "fake-" followed by an unknown mode is a 400.
  params  headers `x-fake-NAME: VALUE` (NAME with dashes), else suffixes of
          the model name `:NAME=VALUE` (with underscores), e.g.
          `fake-stream-slow:delay_ms=50:chunks=4`; every value an integer.
          prompt_tokens      usage.prompt_tokens (default: the number of
                             whitespace-separated words of the input text:
                             messages' text content, prompt or input; a token
                             array counts its items)
          completion_tokens  tokens per choice (default 7), never more than
                             max_completion_tokens, else max_tokens, when
                             given; usage counts all n choices
          cached_tokens      usage.prompt_tokens_details.cached_tokens
                             (default 0; in mode `cached` half the prompt
                             tokens, at least 1, at most all of them)
          chunks             content chunks of a stream (default: one per
                             word of the answer, which has completion_tokens
                             words)
          delay_ms           pause between two chunks of a stream (default 0;
                             100 in mode `stream-slow`); a non-streamed answer
                             waits delay_ms * chunks, the time the stream
                             would have taken
          retry_after_ms     the Retry-After of `fail-429` (default 1000)
          dimensions         embedding size (default 8; the request's
                             `dimensions` also sets it)
          status             the status of mode `empty` (default 200; 200 to
                             599)

Modes (an answer is streamed exactly when the request says "stream": true):
  normal, stream      the answer in OpenAI's shape, usage included
  cached              the same, with cached prompt tokens
  stream-slow         the same, with delay_ms between chunks
  stream-no-usage     never sends usage, even when
                      stream_options.include_usage asks for it (a
                      non-streamed answer has no "usage" field)
  stream-hang         streams the first half of the content chunks (rounded
                      up), then neither ends nor closes; a non-streamed
                      request hangs without an answer
  fail-400, fail-429, fail-500   that status with an OpenAI-shaped error body
  empty               the status `status` with no body at all
                      (Content-Length: 0, no Content-Type), streamed or not
  close-before-answer  reads the request, closes the connection, answers
                      nothing
  hang                reads the request, never answers

A stream sends `data: {chunk}` events: a role chunk (chat only), the content
chunks, a chunk with finish_reason, then, only when the request had
stream_options.include_usage true, a chunk with "choices": [] and the usage
(every earlier chunk then carries "usage": null), then `data: [DONE]`; each
event in its own HTTP chunk, sent as it is produced.

The log: every request is one record; the log file gets one JSON line when
it arrives ("event": "received") and one with the whole record when its
handling ends ("event": "ended"), just after the answer. A record has id,
received_unix_ms, peer (the client's address and port: one per connection),
method, path, headers (lower-case names, Authorization included), body (the
parsed JSON, or null and body_text), mode, then status (logged before the
answer goes out; null when nothing was answered), stream, chunks_sent (SSE
events written), content_sent (the text of choice 0 written so far),
usage_sent, done_sent, client_gone, client_gone_unix_ms, client_gone_how
("write_failed" or "eof"), ended_unix_ms and end: "answered",
"stream_complete", "client_gone", "closed", "hang_timeout" or "server_stop".
A client that goes away mid-stream or during a hang is seen at once: the
fake watches the socket for end of file while it waits, and between chunks.
Tests that look at end fields wait for them (FakeUpstream.wait_for).
"""

import argparse
import base64
import copy
import hashlib
import http.server
import json
import select
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse

MODES = (
    "normal", "cached", "stream", "stream-slow", "stream-no-usage", "stream-hang",
    "fail-400", "fail-429", "fail-500", "close-before-answer", "hang", "empty",
)
COMPLETION_TOKENS_DEFAULT = 7
EMBEDDING_DIMENSIONS_DEFAULT = 8
STREAM_SLOW_DELAY_MS_DEFAULT = 100
RETRY_AFTER_MS_DEFAULT = 1000
HANG_SECONDS_MAX_DEFAULT = 600.0
# Limits on what a request may ask of the fake, so a typo cannot make it
# allocate or sleep without end.
BODY_BYTES_MAX = 16 * 1024 * 1024
PARAM_MAX = {
    "prompt_tokens": 100_000_000, "completion_tokens": 100_000, "cached_tokens": 100_000_000,
    "chunks": 10_000, "delay_ms": 600_000, "retry_after_ms": 3_600_000, "dimensions": 4096,
    "status": 599,
}
CHOICES_MAX = 16
RECORDS_KEPT_MAX = 100_000
# How often a waiting handler looks at its socket and at the stop flag.
POLL_SECONDS = 0.02
WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
    "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
)
ROUTES_POST = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
SYSTEM_FINGERPRINT = "fp_fake"


def now_ms():
    return int(time.time() * 1000)


def compact(value):
    return json.dumps(value, separators=(",", ":"))


class FakeError(Exception):
    """A request the fake answers with an OpenAI-shaped error."""

    def __init__(self, status, message, kind="invalid_request_error", param=None, code=None):
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": kind, "param": param, "code": code}}


# -- the log -----------------------------------------------------------------


class RequestLog:
    """Every request seen, in memory (for /_fake/requests) and as JSON lines
    in a file. Records are updated in place while their request is handled."""

    def __init__(self, path=None):
        self._lock = threading.Lock()
        self._records = []
        self._next_id = 1
        self._file = open(path, "a", encoding="utf-8") if path else None

    def _write(self, line):
        if self._file is not None:
            self._file.write(compact(line) + "\n")
            self._file.flush()

    def received(self, fields):
        with self._lock:
            record = dict({"id": self._next_id}, **fields)
            self._next_id += 1
            self._records.append(record)
            if len(self._records) > RECORDS_KEPT_MAX:
                del self._records[0]
            self._write(dict(record, event="received"))
            return record

    def update(self, record, **fields):
        with self._lock:
            record.update(fields)

    def ended(self, record, **fields):
        with self._lock:
            record.update(fields, ended_unix_ms=now_ms())
            self._write(dict(record, event="ended"))

    def snapshot(self):
        with self._lock:
            return copy.deepcopy(self._records)

    def clear(self):
        with self._lock:
            count = len(self._records)
            self._records = []
            return count

    def close(self):
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


# -- reading a request: mode, parameters, token counts -----------------------


def parse_model(model):
    """Returns (mode or None, {param: text}) from "fake-MODE:name=value..."."""
    if not isinstance(model, str) or not model.startswith("fake-"):
        return None, {}
    parts = model.split(":")
    mode = parts[0][len("fake-"):]
    if mode not in MODES:
        raise FakeError(400, "fake upstream: unknown mode in model name %r" % model, param="model")
    params = {}
    for part in parts[1:]:
        name, sep, value = part.partition("=")
        if not sep or name not in PARAM_MAX:
            raise FakeError(400, "fake upstream: bad parameter %r in model name" % part,
                            param="model")
        params[name] = value
    return mode, params


def choose(headers, body):
    """The mode and integer parameters of a request (headers win)."""
    model_mode, params = parse_model(body.get("model") if isinstance(body, dict) else None)
    mode = headers.get("x-fake-mode") or model_mode or "normal"
    if mode not in MODES:
        raise FakeError(400, "fake upstream: unknown x-fake-mode %r" % mode)
    for name in PARAM_MAX:
        header = headers.get("x-fake-" + name.replace("_", "-"))
        if header is not None:
            params[name] = header
    values = {}
    for name, text in params.items():
        try:
            value = int(text)
        except ValueError:
            value = -1
        if not 0 <= value <= PARAM_MAX[name]:
            raise FakeError(400, "fake upstream: %s must be an integer in [0, %d], not %r"
                            % (name, PARAM_MAX[name], text))
        values[name] = value
    return mode, values


def count_words(value):
    """Words of a text, or items of a token array, or a list of either."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        if value and all(isinstance(item, int) for item in value):
            return len(value)
        return sum(count_words(item) for item in value)
    return 0


def message_words(messages):
    total = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            total += count_words(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "text":
                    total += count_words(part.get("text"))
    return total


def positive_int(body, name, maximum=None):
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1 or (
            maximum is not None and value > maximum):
        raise FakeError(400, "Invalid '%s': expected an integer in [1, %s], got %s."
                        % (name, maximum or "inf", compact(value)), param=name,
                        code="invalid_value")
    return value


def require(body, name):
    if body.get(name) is None:
        raise FakeError(400, "Missing required parameter: '%s'." % name, param=name,
                        code="missing_required_parameter")


class Plan:
    """What to answer: token counts, text, chunking and timing of one call."""

    def __init__(self, route, mode, params, body):
        self.route = route
        self.mode = mode
        self.model = body.get("model")
        self.stream = body.get("stream") is True
        options = body.get("stream_options")
        if options is not None and not self.stream:
            raise FakeError(400, "The 'stream_options' parameter is only allowed when "
                            "'stream' is enabled.", param="stream_options",
                            code="invalid_value")
        self.include_usage = (isinstance(options, dict) and options.get("include_usage") is True
                              and mode != "stream-no-usage")
        self.send_usage = mode != "stream-no-usage"
        self.choices = positive_int(body, "n", CHOICES_MAX) or 1
        self.prompt_tokens = params.get("prompt_tokens", self._input_words(body))
        self._set_cached(params)
        self._set_completion(params, body)
        self.chunks = params.get("chunks", self.completion_tokens)
        default_delay = STREAM_SLOW_DELAY_MS_DEFAULT if mode == "stream-slow" else 0
        self.delay_seconds = params.get("delay_ms", default_delay) / 1000.0
        self.dimensions = params.get("dimensions", EMBEDDING_DIMENSIONS_DEFAULT)
        self.retry_after_ms = params.get("retry_after_ms", RETRY_AFTER_MS_DEFAULT)

    def _input_words(self, body):
        if self.route == "/v1/chat/completions":
            require(body, "messages")
            messages = body["messages"]
            return message_words(messages) if isinstance(messages, list) else 0
        if self.route == "/v1/embeddings":
            require(body, "input")
            return count_words(body["input"])
        return count_words(body.get("prompt"))

    def _set_cached(self, params):
        default = 0
        if self.mode == "cached" and self.prompt_tokens > 0:
            default = max(1, self.prompt_tokens // 2)
        self.cached_tokens = min(params.get("cached_tokens", default), self.prompt_tokens)
        self.report_cached = self.mode == "cached" or "cached_tokens" in params

    def _set_completion(self, params, body):
        wanted = params.get("completion_tokens", COMPLETION_TOKENS_DEFAULT)
        cap = positive_int(body, "max_completion_tokens")
        if cap is None:
            cap = positive_int(body, "max_tokens")
        self.completion_tokens = wanted if cap is None else min(wanted, cap)
        self.finish_reason = "length" if cap is not None and wanted > cap else "stop"

    def words(self, choice):
        return [WORDS[(i + choice) % len(WORDS)] for i in range(self.completion_tokens)]

    def text(self, choice):
        return " ".join(self.words(choice))

    def pieces(self, choice):
        """The content of each chunk; together they make text(choice)."""
        words = self.words(choice)
        count = len(words)
        pieces = []
        for j in range(self.chunks):
            chosen = range(j * count // self.chunks, (j + 1) * count // self.chunks)
            pieces.append("".join((" " if i else "") + words[i] for i in chosen))
        return pieces

    def usage(self):
        completion = self.completion_tokens * self.choices
        usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
                 "total_tokens": self.prompt_tokens + completion}
        if self.route == "/v1/chat/completions":
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens,
                                              "audio_tokens": 0}
            usage["completion_tokens_details"] = {
                "reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0}
        elif self.report_cached:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return usage


# -- answers in OpenAI's shapes ----------------------------------------------


def chat_completion(plan, answer_id, created):
    choices = [{"index": c,
                "message": {"role": "assistant", "content": plan.text(c), "refusal": None,
                            "annotations": []},
                "logprobs": None, "finish_reason": plan.finish_reason}
               for c in range(plan.choices)]
    body = {"id": answer_id, "object": "chat.completion", "created": created,
            "model": plan.model, "choices": choices}
    if plan.send_usage:
        body["usage"] = plan.usage()
    body["service_tier"] = "default"
    body["system_fingerprint"] = SYSTEM_FINGERPRINT
    return body


def text_completion(plan, answer_id, created):
    choices = [{"text": plan.text(c), "index": c, "logprobs": None,
                "finish_reason": plan.finish_reason} for c in range(plan.choices)]
    body = {"id": answer_id, "object": "text_completion", "created": created,
            "model": plan.model, "choices": choices, "system_fingerprint": SYSTEM_FINGERPRINT}
    if plan.send_usage:
        body["usage"] = plan.usage()
    return body


def embedding_vector(text, index, dimensions):
    """Deterministic values k/128 in [-1, 1), exact in float32, so the float
    and base64 encodings carry the same numbers."""
    seed = hashlib.sha256(("%d:%s" % (index, text)).encode()).digest()
    values = []
    while len(values) < dimensions:
        values.extend((b - 128) / 128.0 for b in seed)
        seed = hashlib.sha256(seed).digest()
    return values[:dimensions]


def embedding_inputs(value):
    if isinstance(value, list) and value and not all(isinstance(v, int) for v in value):
        return [compact(v) if not isinstance(v, str) else v for v in value]
    return [value if isinstance(value, str) else compact(value)]


def embeddings(plan, body):
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise FakeError(400, "Invalid 'encoding_format': expected 'float' or 'base64'.",
                        param="encoding_format", code="invalid_value")
    dimensions = positive_int(body, "dimensions", PARAM_MAX["dimensions"]) or plan.dimensions
    data = []
    for index, text in enumerate(embedding_inputs(body["input"])):
        vector = embedding_vector(text, index, dimensions)
        if encoding == "base64":
            vector = base64.b64encode(struct.pack("<%df" % len(vector), *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": vector})
    return {"object": "list", "data": data, "model": plan.model,
            "usage": {"prompt_tokens": plan.prompt_tokens, "total_tokens": plan.prompt_tokens}}


def error_for_mode(plan):
    if plan.mode == "fail-400":
        return FakeError(400, "This request was refused by the fake upstream (fail-400).")
    if plan.mode == "fail-429":
        return FakeError(429, "Rate limit reached for %s in organization org-fake on requests "
                         "per min (RPM): Limit 1, Used 1, Requested 1." % plan.model,
                         kind="requests", code="rate_limit_exceeded")
    return FakeError(500, "The server had an error while processing your request. Sorry "
                     "about that!", kind="server_error")


def model_object(model_id):
    return {"id": model_id, "object": "model", "created": 1700000000, "owned_by": "fake-upstream"}


def model_list():
    return {"object": "list", "data": [model_object("fake-" + mode) for mode in MODES]}


# -- the HTTP handler --------------------------------------------------------


WRITE_ERRORS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class ClientGone(Exception):
    def __init__(self, how):
        super().__init__(how)
        self.how = how


class ServerStopping(Exception):
    pass


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def version_string(self):
        return "fake-upstream"

    def log_message(self, format, *args):
        pass  # the request log says everything; stderr stays quiet

    def setup(self):
        super().setup()
        self.server.track(self.connection, True)

    def finish(self):
        self.server.track(self.connection, False)
        super().finish()

    # -- bodies and answers

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self.read_chunked_body()
        length = int(self.headers.get("Content-Length") or 0)
        if length > BODY_BYTES_MAX:
            raise FakeError(413, "fake upstream: body over %d bytes" % BODY_BYTES_MAX)
        return self.rfile.read(length)

    def read_chunked_body(self):
        body = b""
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return body
            if len(body) + size > BODY_BYTES_MAX:
                raise FakeError(413, "fake upstream: body over %d bytes" % BODY_BYTES_MAX)
            body += self.rfile.read(size)
            self.rfile.readline()

    def common_headers(self):
        record = getattr(self, "record", None)
        self.send_header("x-request-id", "req_fake_%d" % (record["id"] if record else 0))
        self.send_header("openai-processing-ms", "1")
        self.send_header("x-ratelimit-limit-requests", "10000")
        self.send_header("x-ratelimit-remaining-requests", "9999")
        self.send_header("x-ratelimit-limit-tokens", "2000000")
        self.send_header("x-ratelimit-remaining-tokens", "1999000")
        self.send_header("x-ratelimit-reset-requests", "6ms")
        self.send_header("x-ratelimit-reset-tokens", "30ms")

    def send_json(self, status, value, extra_headers=()):
        data = compact(value).encode()
        if self.record is not None:  # logged first: a client that has the answer sees it
            self.server.request_log.update(self.record, status=status)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, text in extra_headers:
            self.send_header(name, text)
        if not self.path.startswith("/_fake/"):
            self.common_headers()
        self.end_headers()
        self.wfile.write(data)

    def send_error_body(self, error):
        extra = []
        if error.status == 429 and self.plan is not None:
            ms = self.plan.retry_after_ms
            extra = [("retry-after", str((ms + 999) // 1000)), ("retry-after-ms", str(ms))]
        self.send_json(error.status, error.body, extra)

    # -- waiting, and seeing the client go away

    def client_closed(self):
        """True when the peer has closed its side (end of file or reset).
        Data sent ahead (a pipelined request) is no end of file."""
        try:
            poller = select.poll()
            poller.register(self.connection, select.POLLIN)
            if not poller.poll(0):
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (ConnectionError, OSError):
            return True

    def wait(self, seconds):
        """Sleeps, watching the socket and the stop flag; raises ClientGone
        or ServerStopping."""
        deadline = time.monotonic() + seconds
        while True:
            if self.server.stopping.is_set():
                raise ServerStopping()
            if self.client_closed():
                raise ClientGone("eof")
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(POLL_SECONDS, left))

    def write(self, data):
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except WRITE_ERRORS as error:
            raise ClientGone("write_failed") from error

    # -- routes

    def do_GET(self):
        self.handle_request()

    def do_POST(self):
        self.handle_request()

    def do_DELETE(self):
        self.handle_request()

    def handle_request(self):
        self.record = None
        self.plan = None
        self.path_only = urllib.parse.urlsplit(self.path).path
        try:
            body = self.read_body()
        except ValueError:
            error = FakeError(400, "fake upstream: bad Content-Length or chunked body")
        except FakeError as too_large:
            error = too_large
        else:
            error = None
        if error is not None:
            self.close_connection = True  # the rest of the body is still unread
            self.send_json(error.status, error.body)
            return
        if self.path_only.startswith("/_fake/"):
            self.handle_control()
            return
        self.handle_api(body)

    def handle_control(self):
        log = self.server.request_log
        if self.path_only == "/_fake/requests" and self.command == "GET":
            self.send_json(200, {"requests": log.snapshot()})
        elif self.path_only == "/_fake/requests" and self.command == "DELETE":
            self.send_json(200, {"cleared": log.clear()})
        else:
            self.send_json(404, {"error": {"message": "no such fake route", "type": "not_found",
                                           "param": None, "code": None}})

    def log_received(self, body_bytes):
        headers = {}
        for name, value in self.headers.items():
            name = name.lower()
            headers[name] = headers[name] + ", " + value if name in headers else value
        fields = {"received_unix_ms": now_ms(), "peer": "%s:%d" % self.client_address[:2],
                  "method": self.command, "path": self.path,
                  "headers": headers, "body": None, "mode": None, "status": None,
                  "stream": False, "chunks_sent": 0, "content_sent": "", "usage_sent": False,
                  "done_sent": False, "client_gone": False, "client_gone_unix_ms": None,
                  "client_gone_how": None, "ended_unix_ms": None, "end": None}
        try:
            fields["body"] = json.loads(body_bytes) if body_bytes else None
        except ValueError:
            fields["body_text"] = body_bytes.decode("utf-8", "replace")
        return self.server.request_log.received(fields)

    def handle_api(self, body_bytes):
        log = self.server.request_log
        self.record = self.log_received(body_bytes)
        try:
            end = self.answer_or_error(body_bytes)
        except (ClientGone,) + WRITE_ERRORS as gone:
            self.close_connection = True
            end = "client_gone"
            log.update(self.record, client_gone=True, client_gone_unix_ms=now_ms(),
                       client_gone_how=getattr(gone, "how", "write_failed"))
        except ServerStopping:
            self.close_connection = True
            end = "server_stop"
        log.ended(self.record, end=end)

    def answer_or_error(self, body_bytes):
        try:
            return self.answer(body_bytes)
        except FakeError as error:
            self.send_error_body(error)
            return "answered"

    def check_key(self):
        key = self.server.api_key
        if key is not None and self.headers.get("Authorization") != "Bearer " + key:
            raise FakeError(401, "Incorrect API key provided.", code="invalid_api_key")

    def answer(self, body_bytes):
        """Answers one /v1 request; returns how it ended."""
        self.check_key()
        if self.command == "GET" and self.path_only == "/v1/models":
            self.send_json(200, model_list())
            return "answered"
        if self.command == "GET" and self.path_only.startswith("/v1/models/"):
            return self.answer_model(self.path_only[len("/v1/models/"):])
        if self.command != "POST" or self.path_only not in ROUTES_POST:
            raise FakeError(404, "Invalid URL (%s %s)" % (self.command, self.path_only))
        body = self.parse_body(body_bytes)
        mode, params = choose({k.lower(): v for k, v in self.headers.items()}, body)
        self.server.request_log.update(self.record, mode=mode)
        if mode == "close-before-answer":
            return self.close_without_answer()
        if mode == "hang":
            return self.hang()
        if mode == "empty":
            return self.answer_empty(params.get("status", 200))
        self.plan = Plan(self.path_only, mode, params, body)
        if mode.startswith("fail-"):
            raise error_for_mode(self.plan)
        return self.answer_plan(body)

    def answer_model(self, model_id):
        mode, _ = parse_model(model_id)
        if mode is None:
            raise FakeError(404, "The model '%s' does not exist" % model_id,
                            code="model_not_found")
        self.send_json(200, model_object(model_id))
        return "answered"

    def parse_body(self, body_bytes):
        try:
            body = json.loads(body_bytes)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise FakeError(400, "We could not parse the JSON body of your request.")
        if not isinstance(body.get("model"), str):
            raise FakeError(400, "you must provide a model parameter")
        return body

    def answer_empty(self, status):
        """The status line and headers only: Content-Length: 0, no type."""
        if status < 200:
            raise FakeError(400, "fake upstream: status must be in [200, 599], not %d" % status)
        self.server.request_log.update(self.record, status=status)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.common_headers()
        self.end_headers()
        return "answered"

    def close_without_answer(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return "closed"

    def hang(self):
        """Never answers: waits until the client goes, the server stops or
        the hang limit passes (then closes without an answer)."""
        self.wait(self.server.hang_seconds_max)
        self.close_without_answer()
        return "hang_timeout"

    def answer_plan(self, body):
        plan = self.plan
        if plan.stream and plan.route != "/v1/embeddings":
            return self.stream_answer()
        self.wait(plan.delay_seconds * plan.chunks)
        if plan.mode == "stream-hang":
            return self.hang()
        answer_id = "%s-fake-%d" % ("chatcmpl" if plan.route == "/v1/chat/completions"
                                    else "cmpl", self.record["id"])
        if plan.route == "/v1/chat/completions":
            value = chat_completion(plan, answer_id, int(time.time()))
        elif plan.route == "/v1/completions":
            value = text_completion(plan, answer_id, int(time.time()))
        else:
            value = embeddings(plan, body)
        content = plan.text(0) if plan.route != "/v1/embeddings" else ""
        self.server.request_log.update(self.record, usage_sent=plan.send_usage,
                                       content_sent=content)
        self.send_json(200, value)
        return "answered"

    # -- streams

    def stream_answer(self):
        plan = self.plan
        self.server.request_log.update(self.record, status=200, stream=True)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.common_headers()
        self.end_headers()
        stream = Stream(plan, self.record["id"])
        events = stream.events()
        hang_after = None
        if plan.mode == "stream-hang":
            hang_after = stream.lead_events + (plan.chunks + 1) // 2 * plan.choices
        for number, (event, content) in enumerate(events):
            if hang_after is not None and number == hang_after:
                return self.hang()
            if number > 0:
                self.wait(plan.delay_seconds if stream.is_content(number) else 0)
            self.send_event(event, content)
        self.write(b"0\r\n\r\n")
        return "stream_complete"

    def send_event(self, event, content):
        data = b"data: " + (event if isinstance(event, bytes) else compact(event).encode()) \
            + b"\n\n"
        self.write(b"%x\r\n%s\r\n" % (len(data), data))
        record = self.record
        updates = {"chunks_sent": record["chunks_sent"] + 1}
        if content:
            updates["content_sent"] = record["content_sent"] + content
        if isinstance(event, dict) and event.get("usage"):
            updates["usage_sent"] = True
        if event == b"[DONE]":
            updates["done_sent"] = True
        self.server.request_log.update(record, **updates)


class Stream:
    """The SSE events of one streamed answer, in order, each with the text
    it adds to choice 0."""

    def __init__(self, plan, record_id):
        self.plan = plan
        self.chat = plan.route == "/v1/chat/completions"
        self.answer_id = "%s-fake-%d" % ("chatcmpl" if self.chat else "cmpl", record_id)
        self.created = int(time.time())
        self.lead_events = plan.choices if self.chat else 0

    def is_content(self, number):
        first = self.lead_events
        return first <= number < first + self.plan.chunks * self.plan.choices

    def chunk(self, choice, delta=None, text=None, finish_reason=None):
        if self.chat:
            entry = {"index": choice, "delta": delta, "logprobs": None,
                     "finish_reason": finish_reason}
            kind = "chat.completion.chunk"
        else:
            entry = {"text": text, "index": choice, "logprobs": None,
                     "finish_reason": finish_reason}
            kind = "text_completion"
        value = {"id": self.answer_id, "object": kind, "created": self.created,
                 "model": self.plan.model, "system_fingerprint": SYSTEM_FINGERPRINT,
                 "choices": [entry]}
        if self.plan.include_usage:
            value["usage"] = None
        return value

    def events(self):
        plan = self.plan
        if self.chat:
            for c in range(plan.choices):
                yield self.chunk(c, delta={"role": "assistant", "content": "",
                                           "refusal": None}), ""
        pieces = [plan.pieces(c) for c in range(plan.choices)]
        for j in range(plan.chunks):
            for c in range(plan.choices):
                piece = pieces[c][j]
                value = self.chunk(c, delta={"content": piece}, text=piece)
                yield value, piece if c == 0 else ""
        for c in range(plan.choices):
            yield self.chunk(c, delta={}, text="", finish_reason=plan.finish_reason), ""
        if plan.include_usage:
            value = self.chunk(0)
            value["choices"] = []
            value["usage"] = plan.usage()
            yield value, ""
        yield b"[DONE]", ""


# -- the server ----------------------------------------------------------------


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, request_log, api_key, hang_seconds_max):
        self.request_log = request_log
        self.api_key = api_key
        self.hang_seconds_max = hang_seconds_max
        self.stopping = threading.Event()
        self._connections = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, Handler)

    def track(self, connection, is_open):
        with self._connections_lock:
            if is_open:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def close_connections(self):
        """Ends idle keep-alive connections too, so no client waits on a
        stopped fake."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class FakeUpstream:
    """A running fake upstream in this process."""

    def __init__(self, server, request_log):
        self._server = server
        self._log = request_log
        self.host, self.port = server.server_address[:2]
        self.url = "http://%s:%d" % (self.host, self.port)
        self.base_url = self.url + "/v1"
        self._thread = threading.Thread(target=server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def requests(self):
        """Every request logged so far (copies), oldest first."""
        return self._log.snapshot()

    def clear(self):
        return self._log.clear()

    def wait_for(self, predicate, timeout_s=30.0):
        """Waits until predicate(requests()) is true; returns the requests.
        Raises AssertionError with the log on timeout (long: a busy machine
        may take a while, and it costs nothing when the condition comes)."""
        deadline = time.monotonic() + timeout_s
        while True:
            records = self.requests()
            if predicate(records):
                return records
            if time.monotonic() > deadline:
                raise AssertionError("fake upstream: condition not met within %.1fs; log: %s"
                                     % (timeout_s, compact(records)))
            time.sleep(POLL_SECONDS)

    def stop(self):
        """Stops serving; hung and streaming handlers end within a poll."""
        self._server.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2.0)
        time.sleep(POLL_SECONDS * 3)  # handlers see the flag and log how they ended
        self._server.close_connections()
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start(host="127.0.0.1", port=0, log_path=None, api_key=None,
          hang_seconds_max=HANG_SECONDS_MAX_DEFAULT):
    """Starts a fake upstream on a thread of this process. api_key, when
    given, is the only key accepted (Authorization: Bearer KEY; others get
    401). Returns a FakeUpstream."""
    request_log = RequestLog(log_path)
    server = Server((host, port), request_log, api_key, hang_seconds_max)
    return FakeUpstream(server, request_log)


def main(argv=None):
    parser = argparse.ArgumentParser(description="A fake OpenAI API server for tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", help="file to append one JSON line per request event to")
    parser.add_argument("--api-key", help="accept only this key (others get 401)")
    parser.add_argument("--hang-seconds-max", type=float, default=HANG_SECONDS_MAX_DEFAULT,
                        help="how long a hang lasts before the fake closes the connection")
    args = parser.parse_args(argv)
    upstream = start(args.host, args.port, args.log, args.api_key, args.hang_seconds_max)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    print("fake_upstream listening on %s:%d" % (upstream.host, upstream.port), flush=True)
    try:
        while True:
            time.sleep(3600)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        upstream.stop()


if __name__ == "__main__":
    main()
