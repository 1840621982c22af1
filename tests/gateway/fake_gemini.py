"""The fake upstream's Gemini dialect: POST /v1beta/models/MODEL:generateContent,
:streamGenerateContent (?alt=sse: data-only events; without it a JSON array)
and :countTokens, answered in Google's shapes with usageMetadata. The HTTP
side (sending, waiting, cutting streams) is fake_upstream.py's handler.

A Gemini model name cannot hold ':' or '=', so the mode and parameters go
in it as `fake-MODE.NAME-VALUE.NAME-VALUE`, e.g.
`fake-normal.prompt_tokens-1001.completion_tokens-499`; any other model is
`normal` with the defaults. Parameters besides the common ones (fake_common):
  prompt_tokens     usageMetadata.promptTokenCount (cache included; default:
                    the words of systemInstruction and contents' text)
  cached_tokens     cachedContentTokenCount (inside promptTokenCount)
  completion_tokens candidatesTokenCount: the answer's words (thoughts
                    excluded), cut so that they and the thoughts fit
                    generationConfig.maxOutputTokens
  reasoning_tokens  thoughtsTokenCount
  tool_use_tokens   toolUsePromptTokenCount
A stream sends `chunks` content chunks, each with the usageMetadata so far
(cumulative: prompt and thoughts whole, candidates counted to that chunk),
the last with finishReason STOP. Modes `stream-no-usage` (no usageMetadata
at all) and `usage-no-completion` (no candidatesTokenCount) leave counts
out. The provider key is taken as `x-goog-api-key` only (Google's own
header); the key in `?key=` is refused, so a test sees one never arrives."""

import fake_common
from fake_common import Event, FakeError

ROUTE_PREFIX = "/v1beta/models/"
METHODS = ("generateContent", "streamGenerateContent", "countTokens")
STATUS_NAMES = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
    404: "NOT_FOUND", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
    503: "UNAVAILABLE", 529: "UNAVAILABLE",
}


def error_body(error):
    return {"error": {"code": error.status, "message": error.message,
                      "status": STATUS_NAMES.get(error.status, "UNKNOWN")}}


def failure(status, params):
    return FakeError(status, "fake upstream: fail-%d" % status,
                     headers=fake_common.retry_headers(status, params))


def model_name(model):
    """fake-MODE.NAME-VALUE... as fake_common's fake-MODE:NAME=VALUE..."""
    if not model.startswith("fake-"):
        return model
    head, *parts = model.split(".")
    pairs = []
    for part in parts:
        name, sep, value = part.rpartition("-")
        if not sep:
            raise FakeError(400, "fake upstream: bad parameter %r in model name" % part)
        pairs.append("%s=%s" % (name, value))
    return ":".join([head] + pairs)


def text_words(content):
    total = 0
    for part in (content or {}).get("parts") or [] if isinstance(content, dict) else []:
        if isinstance(part, dict):
            total += fake_common.count_words(part.get("text"))
    return total


def input_words(body):
    system = body.get("systemInstruction")
    total = fake_common.count_words(system) if isinstance(system, str) else text_words(system)
    for content in body.get("contents") or []:
        total += text_words(content)
    return total


class Plan:
    """Counts and text of one answer (module docstring)."""

    def __init__(self, mode, params, body, model):
        self.mode = mode
        self.model = model
        self.prompt = params.get("prompt_tokens", input_words(body))
        self.cached = params.get("cached_tokens", 0)
        self.reasoning = params.get("reasoning_tokens", 0)
        self.tool_use = params.get("tool_use_tokens", 0)
        config = body.get("generationConfig") or {}
        room = config.get("maxOutputTokens", 10 ** 9) - self.reasoning
        wanted = params.get("completion_tokens", fake_common.COMPLETION_TOKENS_DEFAULT)
        self.completion = max(0, min(wanted, room))
        self.finish = "MAX_TOKENS" if wanted > room else "STOP"
        self.chunks = max(1, params.get("chunks", self.completion or 1))
        self.delay_seconds = fake_common.delay_seconds(mode, params)

    def text(self):
        return " ".join(fake_common.words(self.completion))

    def usage(self, completion=None):
        """usageMetadata with completion candidates tokens so far (None: all)."""
        if self.mode == "stream-no-usage":
            return None
        completion = self.completion if completion is None else completion
        usage = {"promptTokenCount": self.prompt,
                 "totalTokenCount": self.prompt + completion + self.reasoning + self.tool_use}
        if self.mode != "usage-no-completion":
            usage["candidatesTokenCount"] = completion
        if self.cached:
            usage["cachedContentTokenCount"] = self.cached
        if self.reasoning:
            usage["thoughtsTokenCount"] = self.reasoning
        if self.tool_use:
            usage["toolUsePromptTokenCount"] = self.tool_use
        return usage

    def response(self, text, finish=None, completion=None):
        candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        value = {"candidates": [candidate], "modelVersion": self.model,
                 "responseId": "fake-gemini"}
        usage = self.usage(completion)
        if usage is not None:
            value["usageMetadata"] = usage
        return value


class Stream:
    """The data-only events of a streamed answer: content chunks, each with
    the usage so far; the last carries finishReason."""

    def __init__(self, plan):
        self.plan = plan
        self.cut_after = (plan.chunks + 1) // 2

    def events(self):
        plan = self.plan
        pieces = fake_common.split_words(plan.text().split(), plan.chunks)
        sent = 0
        for number, piece in enumerate(pieces):
            sent += len(piece.split())
            last = number == len(pieces) - 1
            value = plan.response(piece, plan.finish if last else None, sent)
            yield Event(None, value, piece, "content", usage=last and plan.usage() is not None,
                        done=last)

    def keep_alive(self):
        return Event(None, b"", kind="tail")

    def error_events(self):
        return [Event(None, error_body(FakeError(500, "fake upstream: stream-error")),
                      kind="tail", done=True)]


def target(path):
    """(model, method) of the path, else a 404."""
    rest = path[len(ROUTE_PREFIX):]
    model, sep, method = rest.rpartition(":")
    if not sep or not model or method not in METHODS:
        raise FakeError(404, "fake upstream: no such Gemini route %s" % path)
    return model, method


def answer(handler, body_bytes):
    """Answers a request on a Gemini route; returns how it ended."""
    headers = handler.lower_headers()
    if handler.server.api_key is not None and \
            headers.get("x-goog-api-key") != handler.server.api_key:
        raise FakeError(400, "API key not valid. Please pass a valid API key.")
    if "key" in handler.query():
        raise FakeError(400, "fake upstream: a key in the query (the gateway must not send one)")
    if handler.command != "POST":
        raise FakeError(404, "fake upstream: %s not served" % handler.command)
    model, method = target(handler.path_only)
    body = handler.parse_json(body_bytes)
    mode, values = fake_common.choose(headers, {"model": model_name(model)})
    handler.log_update(mode=mode)
    if not isinstance(body.get("contents"), list) and method != "countTokens":
        raise FakeError(400, "contents: required")
    plan = Plan(mode, values, body, model)
    if method == "countTokens":
        handler.send_json(200, {"totalTokens": plan.prompt})
        return "answered"
    sse = method == "streamGenerateContent" and handler.query().get("alt") == "sse"
    if method == "streamGenerateContent" and not sse:
        stream = Stream(plan)
        return handler.answer_generation(
            mode, values, False, lambda status: failure(status, values),
            make_body=lambda: [event.data for event in stream.events()], content=plan.text())
    return handler.answer_generation(
        mode, values, sse, lambda status: failure(status, values),
        make_body=lambda: plan.response(plan.text(), plan.finish), make_stream=lambda: Stream(plan),
        content=plan.text(), slow_seconds=plan.delay_seconds * plan.chunks)
