"""The fake upstream's Anthropic Messages dialect: POST /v1/messages (streamed
and not) and POST /v1/messages/count_tokens, answered in Anthropic's exact
shapes from the request's mode and parameters (fake_common.py). The HTTP
side (sending, waiting, cutting streams) is fake_upstream.py's handler."""

import fake_common
from fake_common import Event, FakeError

VERSION_REQUIRED = True
ROUTES = ("/v1/messages", "/v1/messages/count_tokens")
# Anthropic's error type for each status the fake answers.
ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    500: "api_error", 503: "api_error", 529: "overloaded_error",
}
FAILURE_MESSAGES = {
    400: "This request was refused by the fake upstream (fail-400).",
    401: "invalid x-api-key", 403: "Your API key does not have permission to use the "
    "specified resource.", 404: "Not found", 413: "Request exceeds the maximum allowed "
    "number of bytes.", 429: "This request would exceed the rate limit for your "
    "organization of 1 requests per minute.", 500: "Internal server error",
    503: "Service unavailable", 529: "Overloaded",
}
SIGNATURE = "fake-signature"


def error_body(error, request_id):
    """{"type": "error", "error": {...}, "request_id": ...}; the error's
    kind is kept when it is an Anthropic type, else taken from the status."""
    kind = error.kind if error.kind in ERROR_TYPES.values() else ERROR_TYPES.get(
        error.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message},
            "request_id": request_id}


def failure(status, params):
    return FakeError(status, FAILURE_MESSAGES[status], ERROR_TYPES[status],
                     headers=fake_common.retry_headers(status, params))


def check_key(headers, api_key):
    """x-api-key, or Authorization: Bearer (what ANTHROPIC_AUTH_TOKEN sends)."""
    if api_key is None:
        return
    if headers.get("x-api-key") == api_key or headers.get("authorization") == "Bearer " + api_key:
        return
    raise FakeError(401, "invalid x-api-key", "authentication_error")


def check_request(headers, body, count_only):
    if VERSION_REQUIRED and not headers.get("anthropic-version"):
        raise FakeError(400, "anthropic-version: header is required")
    if not isinstance(body, dict):
        raise FakeError(400, "Request body must be a JSON object")
    if not isinstance(body.get("model"), str):
        raise FakeError(400, "model: Field required")
    if not isinstance(body.get("messages"), list):
        raise FakeError(400, "messages: Field required")
    if count_only:
        return
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise FakeError(400, "max_tokens: Field required")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise FakeError(400, "max_tokens: Input should be greater than or equal to 1")


def block_words(content):
    """Words of a message's content: a string, or blocks (text, tool_use
    input, tool_result content; other blocks count nothing)."""
    if isinstance(content, str):
        return fake_common.count_words(content)
    total = 0
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            total += fake_common.count_words(block.get("text"))
        elif kind == "tool_use":
            total += fake_common.count_words(fake_common.compact(block.get("input")))
        elif kind == "tool_result":
            total += block_words(block.get("content"))
    return total


def input_words(body):
    total = block_words(body.get("system"))
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            total += block_words(message.get("content"))
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            total += fake_common.count_words(tool.get("description"))
    return total


def holds_tool_result(body):
    """Whether the request's last message answers a tool call."""
    messages = body.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    content = last.get("content")
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content)


class Plan:
    """Token counts and content of one Messages answer.

    prompt_tokens is usage.input_tokens (Anthropic's input excludes the
    cache: default the words of system, messages and tools' descriptions);
    cached_tokens is cache_read_input_tokens, cache_write_5m and
    cache_write_1h make cache_creation_input_tokens; the answer is a
    thinking block of reasoning_tokens words (when asked), a text block of
    completion_tokens words, and tool_calls tool_use blocks; output_tokens
    is all of them (TOOL_CALL_TOKENS a tool call), cut at max_tokens."""

    def __init__(self, mode, params, body, record_id):
        self.mode = mode
        self.model = body["model"]
        self.stream = body.get("stream") is True
        self.message_id = "msg_fake_%d" % record_id
        self.input_tokens = params.get("prompt_tokens", input_words(body))
        self.cache_read = params.get("cached_tokens", 0)
        self.cache_5m = params.get("cache_write_5m", 0)
        self.cache_1h = params.get("cache_write_1h", 0)
        self.send_usage = mode != "stream-no-usage"
        self.reasoning = params.get("reasoning_tokens", 0)
        self.tool_calls = params.get("tool_calls", 0)
        self.tools = [t.get("name") for t in body.get("tools") or []
                      if isinstance(t, dict) and isinstance(t.get("name"), str)]
        self.mcp_tool = bool(params.get("mcp_tool")) and not holds_tool_result(body)
        if self.mcp_tool:
            self.tool_calls = 1
            mcp = [name for name in self.tools if name.startswith("mcp__")]
            self.tools = [name for name in mcp if name.endswith("__web_search")] or mcp or self.tools
        wanted = params.get("completion_tokens", fake_common.COMPLETION_TOKENS_DEFAULT)
        room = body["max_tokens"] - self.reasoning - self.tool_calls * fake_common.TOOL_CALL_TOKENS
        self.completion = max(0, min(wanted, room))
        self.stop_reason = "max_tokens" if wanted > room or mode == "incomplete" else (
            "tool_use" if self.tool_calls else "end_turn")
        self.chunks = params.get("chunks", self.completion)
        self.message_deltas = max(1, params.get("message_deltas", 1))
        self.delay_seconds = fake_common.delay_seconds(mode, params)

    @property
    def output_tokens(self):
        return self.completion + self.reasoning + self.tool_calls * fake_common.TOOL_CALL_TOKENS

    def text(self):
        return " ".join(fake_common.words(self.completion))

    def thinking(self):
        return " ".join(fake_common.words(self.reasoning, offset=13))

    def tool_name(self, number):
        return self.tools[number % len(self.tools)] if self.tools else "fake_tool"

    def tool_input(self, number):
        if self.mcp_tool:
            return {"query": fake_common.WORDS[number % len(fake_common.WORDS)]}
        return {"word": fake_common.WORDS[number % len(fake_common.WORDS)]}

    def usage(self):
        """message_start's usage, and the non-streamed answer's."""
        if not self.send_usage:
            return None
        return {"input_tokens": self.input_tokens,
                "cache_creation_input_tokens": self.cache_5m + self.cache_1h,
                "cache_read_input_tokens": self.cache_read,
                "cache_creation": {"ephemeral_5m_input_tokens": self.cache_5m,
                                   "ephemeral_1h_input_tokens": self.cache_1h},
                "output_tokens": self.output_tokens, "service_tier": "standard"}

    def blocks(self):
        blocks = []
        if self.reasoning:
            blocks.append({"type": "thinking", "thinking": self.thinking(),
                           "signature": SIGNATURE})
        blocks.append({"type": "text", "text": self.text()})
        for number in range(self.tool_calls):
            blocks.append({"type": "tool_use", "id": "toolu_fake_%d" % number,
                           "name": self.tool_name(number), "input": self.tool_input(number)})
        return blocks


def message(plan):
    """The non-streamed answer."""
    value = {"id": plan.message_id, "type": "message", "role": "assistant", "model": plan.model,
             "content": plan.blocks(), "stop_reason": plan.stop_reason, "stop_sequence": None}
    usage = plan.usage()
    if usage is not None:
        value["usage"] = usage
    return value


class Stream:
    """The events of one streamed answer, in the order Anthropic sends them:
    message_start (usage with input and cache fields, output_tokens 1),
    content_block_start of the first block, ping, its deltas,
    content_block_stop, the other blocks, message_delta (message_deltas of
    them, each with the cumulative usage so far: the last one is the
    total), message_stop."""

    def __init__(self, plan):
        self.plan = plan
        content = sum(1 for event in self.events() if event.kind == "content")
        # a cut stream (stream-hang, -close, -error, -endless) stops after
        # half its content deltas, rounded up
        self.cut_after = (content + 1) // 2

    def start(self):
        usage = self.plan.usage()
        if usage is not None:
            usage = dict(usage, output_tokens=min(1, self.plan.output_tokens))
        message_start = {"id": self.plan.message_id, "type": "message", "role": "assistant",
                         "model": self.plan.model, "content": [], "stop_reason": None,
                         "stop_sequence": None}
        if usage is not None:
            message_start["usage"] = usage
        return Event("message_start", {"type": "message_start", "message": message_start})

    def block_events(self):
        """(content_block_start data, [(delta, content text)]) per block."""
        plan = self.plan
        if plan.reasoning:
            pieces = fake_common.split_words(plan.thinking().split(), plan.reasoning)
            deltas = [({"type": "thinking_delta", "thinking": p}, "") for p in pieces]
            deltas.append(({"type": "signature_delta", "signature": SIGNATURE}, ""))
            yield {"type": "thinking", "thinking": "", "signature": ""}, deltas
        pieces = fake_common.split_words(plan.text().split(), plan.chunks)
        yield {"type": "text", "text": ""}, [({"type": "text_delta", "text": p}, p)
                                             for p in pieces]
        for number in range(plan.tool_calls):
            start = {"type": "tool_use", "id": "toolu_fake_%d" % number,
                     "name": plan.tool_name(number), "input": {}}
            text = fake_common.compact(plan.tool_input(number))
            half = len(text) // 2
            yield start, [({"type": "input_json_delta", "partial_json": part}, "")
                          for part in ("", text[:half], text[half:])]

    def events(self):
        yield self.start()
        for index, (block, deltas) in enumerate(self.block_events()):
            yield Event("content_block_start", {"type": "content_block_start", "index": index,
                                                "content_block": block})
            if index == 0:
                yield Event("ping", {"type": "ping"})
            for delta, content in deltas:
                yield Event("content_block_delta", {"type": "content_block_delta",
                                                    "index": index, "delta": delta},
                            content, "content")
            yield Event("content_block_stop", {"type": "content_block_stop", "index": index},
                        kind="tail")
        yield from self.deltas()
        yield Event("message_stop", {"type": "message_stop"}, kind="tail", done=True)

    def deltas(self):
        plan = self.plan
        total = plan.output_tokens
        for number in range(1, plan.message_deltas + 1):
            data = {"type": "message_delta",
                    "delta": {"stop_reason": plan.stop_reason, "stop_sequence": None}}
            if plan.send_usage:
                data["usage"] = {"input_tokens": plan.input_tokens,
                                 "cache_creation_input_tokens": plan.cache_5m + plan.cache_1h,
                                 "cache_read_input_tokens": plan.cache_read,
                                 "output_tokens": -(-total * number // plan.message_deltas)}
            yield Event("message_delta", data, kind="tail",
                        usage=plan.send_usage and number == plan.message_deltas)

    def keep_alive(self):
        """What a stream-endless stream sends, again and again."""
        return Event("ping", {"type": "ping"}, kind="tail")

    def error_events(self):
        """What a stream-error stream sends after its first half."""
        return [Event("error", {"type": "error", "error": {
            "type": "overloaded_error", "message": "Overloaded"}}, kind="tail", done=True)]


def answer(handler, body_bytes):
    """Answers a request on an Anthropic route; returns how it ended."""
    headers = handler.lower_headers()
    check_key(headers, handler.server.api_key)
    if handler.command != "POST" or handler.path_only not in ROUTES:
        raise FakeError(404, "Not found: %s %s" % (handler.command, handler.path_only),
                        "not_found_error")
    body = handler.parse_json(body_bytes)
    count_only = handler.path_only.endswith("/count_tokens")
    mode, params = fake_common.choose(headers, body)
    handler.log_update(mode=mode)
    check_request(headers, body, count_only)
    if count_only:
        handler.send_json(200, {"input_tokens": params.get("prompt_tokens", input_words(body))})
        return "answered"
    plan = Plan(mode, params, body, handler.record["id"])
    return handler.answer_generation(
        mode, params, plan.stream, lambda status: failure(status, params),
        make_body=lambda: message(plan), make_stream=lambda: Stream(plan),
        content=plan.text(), slow_seconds=plan.delay_seconds * plan.chunks)
