"""What the fake upstream's three dialects share (fake_upstream.py: OpenAI chat,
completions and embeddings; fake_anthropic.py: Anthropic Messages;
fake_responses.py: OpenAI Responses): the modes and parameters a request
chooses, the words every answer is made of, errors, and stream events.
Python 3 standard library only."""

import collections
import json
import time

MODES = (
    "normal", "cached", "stream", "stream-slow", "stream-no-usage", "stream-hang",
    "fail-400", "fail-429", "fail-500", "close-before-answer", "hang",
    # added for the agent surfaces; every dialect answers them
    "stream-close", "stream-endless", "stream-error", "empty", "incomplete", "failed",
    "fail-401", "fail-403", "fail-404", "fail-413", "fail-503", "fail-529",
    # added for the gateway's hostile-upstream tests
    "header-cr", "echo-key",
    # hostile answers (fake_upstream.py describes them)
    "status", "usage-no-completion", "usage-huge", "gzip", "encoding-unknown", "big-event",
)
COMPLETION_TOKENS_DEFAULT = 7
STREAM_SLOW_DELAY_MS_DEFAULT = 100
ENDLESS_DELAY_MS_DEFAULT = 100
RETRY_AFTER_MS_DEFAULT = 1000
# Limits on what a request may ask of the fake, so a typo cannot make it
# allocate or sleep without end.
PARAM_MAX = {
    "prompt_tokens": 100_000_000, "completion_tokens": 100_000, "cached_tokens": 100_000_000,
    "chunks": 10_000, "delay_ms": 600_000, "retry_after_ms": 3_600_000, "dimensions": 4096,
    "cache_write_5m": 100_000_000, "cache_write_1h": 100_000_000, "reasoning_tokens": 100_000,
    "tool_calls": 16, "message_deltas": 16, "should_retry": 1, "status": 999,
    "event_bytes": 4 * 1024 * 1024, "tool_use_tokens": 100_000_000,
    # Messages: answer one tool_use block naming the request's mcp__*__web_search
    # tool, else its first mcp__ tool (input {"query": ...}), unless the request already holds
    # a tool_result: then the usual text (an agent's tool loop of one turn).
    "mcp_tool": 1,
}
WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
    "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
)
# What one tool call adds to the output tokens, in every dialect.
TOOL_CALL_TOKENS = 5

# One server-sent event of a stream. name: the `event:` line (None: a
# data-only event); data: a dict (sent as compact JSON) or bytes (sent as
# they are; b"" with name None is a keep-alive comment); content: the
# answer text it adds (what the log's content_sent gathers); kind: "lead",
# "content" (the pieces a slow stream waits between, and the ones a cut
# stream sends half of) or "tail"; usage: it carries the final usage;
# done: it is the stream's last event.
Event = collections.namedtuple("Event", "name data content kind usage done",
                               defaults=("", "lead", False, False))


def now_ms():
    return int(time.time() * 1000)


def compact(value):
    return json.dumps(value, separators=(",", ":"))


def sse_bytes(event):
    """The bytes of one event on the wire."""
    if event.name is None and event.data == b"":
        return b": keep-alive\n\n"
    data = event.data if isinstance(event.data, bytes) else compact(event.data).encode()
    head = b"event: %s\n" % event.name.encode() if event.name else b""
    return head + b"data: " + data + b"\n\n"


class FakeError(Exception):
    """A request the fake refuses. The route's dialect gives the body its
    shape (OpenAI {"error": {...}}, or Anthropic {"type": "error", ...});
    kind is the OpenAI error type, or the Anthropic one (else from status)."""

    def __init__(self, status, message, kind="invalid_request_error", param=None, code=None,
                 headers=()):
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code
        self.headers = list(headers)

    @property
    def body(self):
        return {"error": {"message": self.message, "type": self.kind, "param": self.param,
                          "code": self.code}}


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


def words(count, offset=0):
    return [WORDS[(i + offset) % len(WORDS)] for i in range(count)]


def split_words(items, pieces):
    """items (words) in `pieces` runs, joined with spaces; together they make
    " ".join(items). Some runs are empty when there are more pieces than words."""
    count = len(items)
    runs = []
    for j in range(pieces):
        chosen = range(j * count // pieces, (j + 1) * count // pieces)
        runs.append("".join((" " if i else "") + items[i] for i in chosen))
    return runs


def delay_seconds(mode, params):
    """The pause before each content event of a stream."""
    default = STREAM_SLOW_DELAY_MS_DEFAULT if mode == "stream-slow" else 0
    return params.get("delay_ms", default) / 1000.0


def failure_status(mode):
    """The HTTP status of a fail-NNN mode, else None."""
    return int(mode[len("fail-"):]) if mode.startswith("fail-") else None


def retry_headers(status, params):
    """retry-after (whole seconds, rounded up) and retry-after-ms on a 429,
    503 or 529; x-should-retry when the request set should_retry."""
    headers = []
    if status in (429, 503, 529):
        ms = params.get("retry_after_ms", RETRY_AFTER_MS_DEFAULT)
        headers += [("retry-after", str((ms + 999) // 1000)), ("retry-after-ms", str(ms))]
    if "should_retry" in params:
        headers.append(("x-should-retry", "true" if params["should_retry"] else "false"))
    return headers
