#!/usr/bin/env python3
"""A fake LLM API server that the gateway's tests, the SDK tests and the real
agents (Claude Code, Codex) run against: OpenAI chat completions, completions
and embeddings (this file), Anthropic Messages (fake_anthropic.py), OpenAI
Responses (fake_responses.py) and Gemini (fake_gemini.py); deterministic answers, streams, failures and
hangs on demand, and a log of every request it saw. Python 3 standard library
only.

Run it:   python3 fake_upstream.py --port 0 --log FILE [--api-key KEY]
          (prints "fake_upstream listening on 127.0.0.1:PORT" when ready)
Import it: upstream = fake_upstream.start(); upstream.url; upstream.requests();
           upstream.stop()

Routes: POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings,
GET /v1/models, GET /v1/models/ID; POST /v1/messages (`?beta=true` accepted),
POST /v1/messages/count_tokens; POST /v1/responses, POST
/v1/responses/input_tokens, GET /v1/responses/ID, GET
/v1/responses/ID/input_items, DELETE /v1/responses/ID, POST
/v1/responses/ID/cancel; HEAD / and GET / (200, Claude Code probes HEAD /);
GET /_fake/requests (the log, as {"requests": [...]}) and DELETE
/_fake/requests (clears it). The /_fake routes are not logged and need no key.
With --api-key, OpenAI routes take `Authorization: Bearer KEY`, Anthropic
routes `x-api-key: KEY` or the bearer; Anthropic routes also require an
`anthropic-version` header, as Anthropic does. Errors have each API's shape:
OpenAI {"error": {message, type, param, code}}, Anthropic {"type": "error",
"error": {type, message}, "request_id"}.

Behaviour is chosen per request, so one server serves a whole test suite:

  mode    the header `x-fake-mode: MODE`, else the model name `fake-MODE`
          (the header wins; a gateway may not forward it, so the model name
          works on its own). A model not starting with "fake-" is `normal`;
          "fake-" followed by an unknown mode is a 400.
  params  headers `x-fake-NAME: VALUE` (NAME with dashes), else suffixes of
          the model name `:NAME=VALUE` (with underscores), e.g.
          `fake-stream-slow:delay_ms=50:chunks=4`; every value an integer.
          prompt_tokens      usage.prompt_tokens; Responses: input_tokens
                             (cache included); Messages: input_tokens (cache
                             excluded, as Anthropic counts). Default: the
                             number of whitespace-separated words of the
                             input text: messages' text content, prompt or
                             input; a token array counts its items; Messages:
                             system, messages' text, tool_use input,
                             tool_result content and tools' descriptions;
                             Responses: instructions, input and tools'
                             descriptions
          completion_tokens  tokens (words) of the answer's text per choice
                             (default 7), never more than
                             max_completion_tokens, else max_tokens (Messages:
                             max_tokens; Responses: max_output_tokens, the
                             response then being incomplete), when given,
                             less the reasoning and tool tokens; usage counts
                             all n choices
          cached_tokens      usage.prompt_tokens_details.cached_tokens;
                             Responses: input_tokens_details.cached_tokens;
                             Messages: cache_read_input_tokens (default 0; in
                             mode `cached` half the prompt tokens, at least 1,
                             at most all of them)
          cache_write_5m, cache_write_1h   Messages: the cache_creation's
                             ephemeral_5m_input_tokens and
                             ephemeral_1h_input_tokens, whose sum is
                             cache_creation_input_tokens (default 0)
          reasoning_tokens   Messages: a thinking block of that many words,
                             counted in output_tokens; Responses: a reasoning
                             item, and output_tokens_details.reasoning_tokens
                             (inside output_tokens) (default 0)
          tool_calls         Messages: tool_use blocks (input streamed as
                             input_json_delta); Responses: function_call
                             items; each adds TOOL_CALL_TOKENS (5) to the
                             output tokens (default 0)
          message_deltas     Messages, streamed: how many message_delta events
                             (default 1); each carries the cumulative usage so
                             far (output_tokens ceil(total * k / n)), the last
                             one the total
          chunks             content chunks of a stream (default: one per
                             word of the answer, which has completion_tokens
                             words)
          delay_ms           pause between two chunks of a stream (default 0;
                             100 in mode `stream-slow`); a non-streamed answer
                             waits delay_ms * chunks, the time the stream
                             would have taken; in mode `stream-endless` the
                             time between two keep-alives (default 100)
          retry_after_ms     on a 429, 503 or 529: `retry-after` (seconds,
                             rounded up) and `retry-after-ms` (default 1000)
          should_retry       0 or 1: an error carries `x-should-retry: false`
                             or `true` (default: no such header)
          status             mode `empty` answers this status (200 to 599)
                             with no body at all (Content-Length: 0, no
                             Content-Type), streamed or not; mode `status`
                             answers this one (0 to 999, written as three
                             digits) with the answer's body
          event_bytes        mode `big-event`: the size of its big event's
                             text (default 1.5 MiB)
          dimensions         embedding size (default 8; the request's
                             `dimensions` also sets it)

Modes (an answer is streamed exactly when the request says "stream": true):
  normal, stream      the answer in the route's shape, usage included
  cached              the same, with cached prompt tokens
  stream-slow         the same, with delay_ms between chunks
  stream-no-usage     never sends usage, even when
                      stream_options.include_usage asks for it (a
                      non-streamed answer has no "usage" field; Messages:
                      neither message_start nor message_delta has usage;
                      Responses: "usage": null)
  stream-hang         streams the first half of the content chunks (rounded
                      up), then neither ends nor closes; a non-streamed
                      request hangs without an answer
  stream-close        streams the first half, then closes the connection
                      without ending the chunked body; a non-streamed
                      answer sends its head and half its body, then closes
  stream-endless      streams the first half, then keep-alives for ever
                      (Messages: `ping` events; others an SSE comment)
                      until the client goes or the hang limit; a
                      non-streamed request hangs
  stream-error        streams the first half, then the route's error event
                      (Messages: `event: error` overloaded_error; Responses:
                      `event: error` server_error; chat: `data: {"error":
                      ...}`), then ends the stream; not streamed: as fail-500
  incomplete          Responses: ends with response.incomplete
                      (max_output_tokens); Messages: stop_reason
                      max_tokens; chat: finish_reason length
  failed              Responses: half the text, then response.failed with the
                      usage of what was sent (not streamed: that response
                      object, status failed); other routes: as stream-error
  empty               200 with an empty body (a stream: no event at all); with
                      `status`, that status with no body at all
  fail-400, fail-401, fail-403, fail-404, fail-413, fail-429, fail-500,
  fail-503, fail-529  that status with the route's error body
  close-before-answer  reads the request, closes the connection, answers
                      nothing
  hang                reads the request, never answers
  header-cr           as normal, but the Content-Type value holds a bare CR
                      and a control byte ("application/json\rx-injected:
                      yes\x01"; a stream's begins "text/event-stream")
  echo-key            echoes the API key it received (bearer or x-api-key):
                      not streamed, a 401 in the route's shape whose message
                      holds the key; streamed, a 200 stream that first sends
                      an SSE comment holding the key, split across two HTTP
                      chunks sent 200 ms apart, then the normal events; the
                      Content-Type ends in "; echo=KEY" either way

Hostile answers, which a real API does not give but a broken proxy or server
might (every dialect, never streamed unless said):
  status              the answer's body with the status line `status`
                      (three digits, any); below 200 the connection closes
                      after it
  usage-no-completion chat and completions: a usage without
                      completion_tokens and total_tokens (the usage chunk of
                      a stream too)
  usage-huge          chat and completions: usage.completion_tokens is
                      2^64, an integer above 2^63 - 1 (stream too)
  gzip                the answer's body gzip-compressed, with
                      `Content-Encoding: gzip`, whatever the request accepts
  encoding-unknown    the answer's body as it is, with `Content-Encoding:
                      x-fake-encoding`, which nothing can decode
  big-event           chat and completions streamed: the first content chunk
                      carries a text of event_bytes bytes (default 1.5 MiB),
                      counted in the usage as one token a word

A chat or completion stream sends `data: {chunk}` events: a role chunk (chat
only), the content chunks, a chunk with finish_reason, then, only when the
request had stream_options.include_usage true, a chunk with "choices": [] and
the usage (every earlier chunk then carries "usage": null), then `data:
[DONE]`. Messages and Responses streams send named events (`event: NAME`
then `data: {...}`) in the order their module's Stream class gives. Each
event goes in its own HTTP chunk, sent as it is produced.

The log: every request is one record; the log file gets one JSON line when
it arrives ("event": "received") and one with the whole record when its
handling ends ("event": "ended"), just after the answer. A record has id,
received_unix_ms, peer (the client's address and port: one per connection),
method, path (with its query), query (its parameters, first value each),
headers (lower-case names, Authorization and x-api-key included), body (the
parsed JSON, or null and body_text), mode, then status (logged before the
answer goes out; null when nothing was answered), stream, chunks_sent (SSE
events written), events_sent (the names of named events written),
content_sent (the answer text written so far: choice 0, the text deltas),
usage_sent, done_sent, client_gone, client_gone_unix_ms, client_gone_how
("write_failed" or "eof"), ended_unix_ms and end: "answered",
"stream_complete", "stream_error", "client_gone", "closed", "hang_timeout" or
"server_stop". A client that goes away mid-stream or during a hang is seen at
once: the fake watches the socket for end of file while it waits, and between
chunks. Tests that look at end fields wait for them (FakeUpstream.wait_for).
"""

import argparse
import base64
import copy
import gzip
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

import fake_anthropic
import fake_gemini
import fake_responses
from fake_common import (  # noqa: F401 - MODES, WORDS, parse_model: this module's names too
    COMPLETION_TOKENS_DEFAULT, ENDLESS_DELAY_MS_DEFAULT, MODES, PARAM_MAX,
    RETRY_AFTER_MS_DEFAULT, STREAM_SLOW_DELAY_MS_DEFAULT, WORDS, Event, FakeError, choose,
    compact, count_words, delay_seconds, failure_status, now_ms, parse_model, retry_headers,
    split_words, sse_bytes, words)

EMBEDDING_DIMENSIONS_DEFAULT = 8
HANG_SECONDS_MAX_DEFAULT = 600.0
BODY_BYTES_MAX = 16 * 1024 * 1024
CHOICES_MAX = 16
RECORDS_KEPT_MAX = 100_000
# How often a waiting handler looks at its socket and at the stop flag.
POLL_SECONDS = 0.02
ROUTES_POST = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
SYSTEM_FINGERPRINT = "fp_fake"
# Modes whose stream stops after half its content, and how it stops.
CUT_MODES = ("stream-hang", "stream-close", "stream-error", "stream-endless")
# Modes whose whole answer send_hostile spoils (never streamed).
HOSTILE_WHOLE_MODES = ("status", "gzip", "encoding-unknown")
BIG_EVENT_BYTES_DEFAULT = 1536 * 1024


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

    def append(self, record, field, value):
        with self._lock:
            record[field].append(value)

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


# -- reading a request: token counts ------------------------------------------


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
        self.delay_seconds = delay_seconds(mode, params)
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
        self.big_text = ""
        if self.mode == "big-event" and self.stream:
            size = params.get("event_bytes", BIG_EVENT_BYTES_DEFAULT)
            big = words(size // 6 + 1)
            self.big_text = " ".join(big)[:size]
            self.completion_tokens += len(self.big_text.split())
        self.finish_reason = "length" if (cap is not None and wanted > cap) or (
            self.mode == "incomplete") else "stop"

    def words(self, choice):
        count = self.completion_tokens - len(self.big_text.split())
        return [WORDS[(i + choice) % len(WORDS)] for i in range(count)]

    def text(self, choice):
        return " ".join(self.words(choice))

    def pieces(self, choice):
        """The content of each chunk; together they make text(choice)."""
        return split_words(self.words(choice), self.chunks)

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
        if self.mode == "usage-no-completion":
            del usage["completion_tokens"], usage["total_tokens"]
        elif self.mode == "usage-huge":
            usage["completion_tokens"] = 2 ** 64
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


def error_for_status(status, model, params):
    """The OpenAI-shaped error of a fail-NNN mode (or of stream-error when
    not streamed: a 500)."""
    headers = retry_headers(status, params)
    if status == 429:
        return FakeError(429, "Rate limit reached for %s in organization org-fake on requests "
                         "per min (RPM): Limit 1, Used 1, Requested 1." % model,
                         kind="requests", code="rate_limit_exceeded", headers=headers)
    if status in (500, 503, 529):
        return FakeError(status, "The server had an error while processing your request. "
                         "Sorry about that!", kind="server_error", headers=headers)
    return fake_responses.failure(status, params) if status != 400 else FakeError(
        400, "This request was refused by the fake upstream (fail-400).", headers=headers)


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

    def dialect(self):
        """The module answering this route's dialect, or None for OpenAI's
        chat, completions, embeddings and models."""
        path = getattr(self, "path_only", "")
        if path == "/v1/messages" or path.startswith("/v1/messages/"):
            return fake_anthropic
        if path == "/v1/responses" or path.startswith("/v1/responses/"):
            return fake_responses
        if path.startswith(fake_gemini.ROUTE_PREFIX):
            return fake_gemini
        return None

    def request_id(self):
        record = getattr(self, "record", None)
        return "req_fake_%d" % (record["id"] if record else 0)

    def common_headers(self):
        if self.dialect() is fake_anthropic:
            self.send_header("request-id", self.request_id())
            self.send_header("anthropic-ratelimit-requests-limit", "4000")
            self.send_header("anthropic-ratelimit-requests-remaining", "3999")
            self.send_header("anthropic-ratelimit-requests-reset", "2026-01-01T00:00:00Z")
            return
        self.send_header("x-request-id", self.request_id())
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
        self.send_header("Content-Type", self.content_type or "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, text in extra_headers:
            self.send_header(name, text)
        if not self.path.startswith("/_fake/"):
            self.common_headers()
        self.end_headers()
        self.wfile.write(data)

    def send_error_body(self, error):
        body = error.body
        if self.dialect() is fake_anthropic:
            body = fake_anthropic.error_body(error, self.request_id())
        elif self.dialect() is fake_gemini:
            body = fake_gemini.error_body(error)
        self.send_json(error.status, body, error.headers)

    def lower_headers(self):
        return {name.lower(): value for name, value in self.headers.items()}

    def query(self):
        """The query string's parameters (the first value of each)."""
        pairs = urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query,
                                       keep_blank_values=True)
        query = {}
        for name, value in pairs:
            query.setdefault(name, value)
        return query

    def log_update(self, **fields):
        self.server.request_log.update(self.record, **fields)

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

    def do_HEAD(self):
        self.handle_request()

    def do_POST(self):
        self.handle_request()

    def do_DELETE(self):
        self.handle_request()

    def handle_request(self):
        self.record = None
        self.plan = None
        self.content_type = None  # header-cr, echo-key: the Content-Type sent instead
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
            self.send_error_body(error)
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
                  "method": self.command, "path": self.path, "query": self.query(),
                  "headers": headers, "body": None, "mode": None, "status": None,
                  "stream": False, "chunks_sent": 0, "events_sent": [], "content_sent": "",
                  "usage_sent": False, "done_sent": False, "client_gone": False,
                  "client_gone_unix_ms": None, "client_gone_how": None, "ended_unix_ms": None,
                  "end": None}
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

    def received_key(self):
        """The API key the request carried: its bearer token, else x-api-key."""
        authorization = self.headers.get("Authorization") or ""
        if authorization.startswith("Bearer "):
            return authorization[len("Bearer "):]
        return self.headers.get("x-api-key") or ""

    def check_key(self):
        key = self.server.api_key
        if key is not None and self.headers.get("Authorization") != "Bearer " + key:
            raise FakeError(401, "Incorrect API key provided.", code="invalid_api_key")

    def answer(self, body_bytes):
        """Answers one request outside /_fake; returns how it ended."""
        if self.path_only == "/" and self.command in ("HEAD", "GET"):
            return self.answer_root()
        dialect = self.dialect()
        if dialect is not None:
            return dialect.answer(self, body_bytes)
        self.check_key()
        if self.command == "GET" and self.path_only == "/v1/models":
            self.send_json(200, model_list())
            return "answered"
        if self.command == "GET" and self.path_only.startswith("/v1/models/"):
            return self.answer_model(self.path_only[len("/v1/models/"):])
        if self.command != "POST" or self.path_only not in ROUTES_POST:
            raise FakeError(404, "Invalid URL (%s %s)" % (self.command, self.path_only))
        body = self.parse_body(body_bytes)
        mode, params = choose(self.lower_headers(), body)
        self.log_update(mode=mode)
        if mode in ("close-before-answer", "hang") or failure_status(mode):
            return self.answer_generation(mode, params, False,
                                          lambda status: error_for_status(status, body["model"],
                                                                          params))
        self.plan = Plan(self.path_only, mode, params, body)
        return self.answer_plan(body, params)

    def answer_root(self):
        """HEAD / and GET /: 200 (Claude Code probes HEAD / first)."""
        if self.command == "HEAD":
            self.log_update(status=200)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return "answered"
        data = b"fake upstream\n"
        self.log_update(status=200)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return "answered"

    def parse_json(self, body_bytes):
        """The request's JSON object, else a 400 in the route's shape."""
        try:
            body = json.loads(body_bytes)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise FakeError(400, "We could not parse the JSON body of your request.")
        return body

    def answer_generation(self, mode, params, stream, failure, make_body=None, make_stream=None,
                          content="", slow_seconds=0.0):
        """What every dialect's generating route does with the modes that
        are not about its answer's shape: failures, hangs, closes, empty
        answers, cut streams; else sends make_body() or streams
        make_stream(). failure(status) is the dialect's error for a status."""
        if mode == "close-before-answer":
            return self.close_without_answer()
        if mode == "hang":
            return self.hang()
        kind = "text/event-stream" if stream else "application/json"
        if mode == "header-cr":
            self.content_type = kind + "\rx-injected: yes\x01"
        if mode == "echo-key":
            self.content_type = kind + "; echo=" + self.received_key()
            if not stream:
                error = failure(401)
                error.message = "Incorrect API key provided: %s." % self.received_key()
                raise error
        status = failure_status(mode)
        if status is not None:
            raise failure(status)
        if mode == "empty":
            return self.send_empty(stream, int(params["status"]) if "status" in params else None)
        if mode in HOSTILE_WHOLE_MODES:
            return self.send_hostile(mode, params, make_body(), content)
        if stream:
            return self.stream_answer(make_stream(), mode, params)
        if mode == "stream-error":
            raise failure(500)
        self.wait(slow_seconds)
        if mode in ("stream-hang", "stream-endless"):
            return self.hang()
        value = make_body()
        self.log_update(usage_sent="usage" in value and value["usage"] is not None,
                        content_sent=content)
        if mode == "stream-close":
            return self.send_half_and_close(value)
        self.send_json(200, value)
        return "answered"

    def send_empty(self, stream, status=None):
        """200 with nothing in it: an empty JSON body, or a stream with no event;
        with a status: the status line and headers only, Content-Length: 0, no type."""
        if status is not None and not 200 <= status <= 599:
            raise FakeError(400, "fake upstream: status must be in [200, 599], not %d" % status)
        if status is not None:
            self.log_update(status=status)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.common_headers()
            self.end_headers()
            return "answered"
        self.log_update(status=200, stream=stream)
        self.send_response(200)
        if stream:
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "0")
        self.common_headers()
        self.end_headers()
        if stream:
            self.write(b"0\r\n\r\n")
        return "answered"

    def send_hostile(self, mode, params, value, content):
        """The whole answer, not streamed, as mode `status`, `gzip` or
        `encoding-unknown` spoils it; written by hand, since http.server
        writes only statuses it likes."""
        data = compact(value).encode()
        status = params.get("status", 200) if mode == "status" else 200
        head = ["HTTP/1.1 %03d Fake" % status, "Content-Type: application/json"]
        if mode == "gzip":
            data = gzip.compress(data)
            head.append("Content-Encoding: gzip")
        elif mode == "encoding-unknown":
            head.append("Content-Encoding: x-fake-encoding")
        head.append("Content-Length: %d" % len(data))
        if status < 200:
            head.append("Connection: close")
        self.log_update(status=status, content_sent=content,
                        usage_sent=isinstance(value, dict) and value.get("usage") is not None)
        self.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        if status < 200:
            return self.close_without_answer()
        return "answered"

    def send_half_and_close(self, value):
        """The head and the first half of the body, then the connection closes."""
        data = compact(value).encode()
        self.log_update(status=200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.common_headers()
        self.end_headers()
        self.write(data[:len(data) // 2])
        return self.close_without_answer()

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

    def answer_plan(self, body, params):
        plan = self.plan
        return self.answer_generation(
            "stream-error" if plan.mode == "failed" else plan.mode, params,
            plan.stream and plan.route != "/v1/embeddings",
            lambda status: error_for_status(status, plan.model, params),
            make_body=lambda: self.openai_body(body),
            make_stream=lambda: Stream(plan, self.record["id"]),
            content=plan.text(0) if plan.route != "/v1/embeddings" else "",
            slow_seconds=plan.delay_seconds * plan.chunks)

    def openai_body(self, body):
        plan = self.plan
        answer_id = "%s-fake-%d" % ("chatcmpl" if plan.route == "/v1/chat/completions"
                                    else "cmpl", self.record["id"])
        if plan.route == "/v1/chat/completions":
            value = chat_completion(plan, answer_id, int(time.time()))
        elif plan.route == "/v1/completions":
            value = text_completion(plan, answer_id, int(time.time()))
        else:
            value = embeddings(plan, body)
        return value

    # -- streams

    def stream_answer(self, stream, mode, params):
        """Sends stream.events() as they are made: a pause before each
        content event; in a CUT_MODES mode only the first stream.cut_after
        content events, then the cut."""
        self.log_update(status=200, stream=True)
        self.send_response(200)
        self.send_header("Content-Type", self.content_type or "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.common_headers()
        self.end_headers()
        if mode == "echo-key":
            self.send_split_key()
        pause = delay_seconds(mode, params)
        cut = stream.cut_after if mode in CUT_MODES else None
        contents = 0
        for number, event in enumerate(stream.events()):
            if cut is not None and contents >= cut and event.kind != "lead":
                return self.cut_stream(stream, mode, params)
            if number > 0:
                self.wait(pause if event.kind == "content" else 0)
            self.send_event(event)
            contents += event.kind == "content"
        self.write(b"0\r\n\r\n")
        return "stream_complete"

    def send_split_key(self):
        """echo-key: an SSE comment holding the key received, in two HTTP
        chunks 200 ms apart (the key cut in its middle)."""
        key = self.received_key().encode()
        self.write(b"%x\r\n%s\r\n" % (len(b": key ") + len(key) // 2,
                                       b": key " + key[:len(key) // 2]))
        self.wait(0.2)
        rest = key[len(key) // 2:] + b"\n\n"
        self.write(b"%x\r\n%s\r\n" % (len(rest), rest))

    def cut_stream(self, stream, mode, params):
        if mode == "stream-hang":
            return self.hang()
        if mode == "stream-close":
            return self.close_without_answer()
        if mode == "stream-error":
            for event in stream.error_events():
                self.send_event(event)
            self.write(b"0\r\n\r\n")
            return "stream_error"
        return self.keep_alive_forever(stream, params)

    def keep_alive_forever(self, stream, params):
        """stream-endless: a keep-alive every delay_ms (default 100) until
        the client goes, the server stops or the hang limit passes."""
        interval = params.get("delay_ms", ENDLESS_DELAY_MS_DEFAULT) / 1000.0
        deadline = time.monotonic() + self.server.hang_seconds_max
        while time.monotonic() < deadline:
            self.wait(max(interval, POLL_SECONDS))
            self.send_event(stream.keep_alive())
        self.close_without_answer()
        return "hang_timeout"

    def send_event(self, event):
        data = sse_bytes(event)
        self.write(b"%x\r\n%s\r\n" % (len(data), data))
        record = self.record
        updates = {"chunks_sent": record["chunks_sent"] + 1}
        if event.name is not None:
            self.server.request_log.append(record, "events_sent", event.name)
        if event.content:
            updates["content_sent"] = record["content_sent"] + event.content
        if event.usage:
            updates["usage_sent"] = True
        if event.done:
            updates["done_sent"] = True
        self.server.request_log.update(record, **updates)


class Stream:
    """The SSE events of one streamed answer, in order: the role chunks
    (chat), the content chunks, the finish chunks, the usage chunk (when
    asked for), [DONE]."""

    def __init__(self, plan, record_id):
        self.plan = plan
        self.chat = plan.route == "/v1/chat/completions"
        self.answer_id = "%s-fake-%d" % ("chatcmpl" if self.chat else "cmpl", record_id)
        self.created = int(time.time())
        # a cut stream stops after the first half (rounded up) of the
        # content chunks of every choice
        self.cut_after = (plan.chunks + 1) // 2 * plan.choices

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
                yield Event(None, self.chunk(c, delta={"role": "assistant", "content": "",
                                                       "refusal": None}))
        pieces = [plan.pieces(c) for c in range(plan.choices)]
        if plan.big_text:
            value = self.chunk(0, delta={"content": plan.big_text}, text=plan.big_text)
            yield Event(None, value, plan.big_text, "lead")
        for j in range(plan.chunks):
            for c in range(plan.choices):
                piece = pieces[c][j]
                value = self.chunk(c, delta={"content": piece}, text=piece)
                yield Event(None, value, piece if c == 0 else "", "content")
        for c in range(plan.choices):
            yield Event(None, self.chunk(c, delta={}, text="", finish_reason=plan.finish_reason),
                        kind="tail")
        if plan.include_usage:
            value = self.chunk(0)
            value["choices"] = []
            value["usage"] = plan.usage()
            yield Event(None, value, kind="tail", usage=True)
        yield Event(None, b"[DONE]", kind="tail", done=True)

    def error_events(self):
        """What a stream-error stream sends after its first half."""
        error = error_for_status(500, self.plan.model, {})
        return [Event(None, error.body, kind="tail")]

    def keep_alive(self):
        return Event(None, b"", kind="tail")


# -- the server ----------------------------------------------------------------


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog (5) resets connections when a gateway
    # opens dozens at once on a busy machine
    request_queue_size = 1024

    def __init__(self, address, request_log, api_key, hang_seconds_max):
        self.request_log = request_log
        self.api_key = api_key
        self.hang_seconds_max = hang_seconds_max
        self.responses = fake_responses.Store()
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

    def wait_for(self, predicate, timeout_s=5.0):
        """Waits until predicate(requests()) is true; returns the requests.
        Raises AssertionError with the log on timeout."""
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
