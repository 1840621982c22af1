"""The fake upstream's OpenAI Responses dialect: POST /v1/responses (streamed and
not), POST /v1/responses/input_tokens, and the stored responses' routes (GET
/v1/responses/{id}, GET /v1/responses/{id}/input_items, DELETE
/v1/responses/{id}, POST /v1/responses/{id}/cancel), in OpenAI's exact
shapes. Modes and parameters as fake_common.py says; the HTTP side is
fake_upstream.py's handler."""

import collections
import re
import threading
import time

import fake_common
from fake_common import Event, FakeError

PREFIX = "/v1/responses"
STORED_MAX = 10_000
ID_PATTERN = re.compile(r"^/v1/responses/([A-Za-z0-9_-]{1,128})(/input_items|/cancel)?$")
FAILURE_MESSAGES = {
    400: ("This request was refused by the fake upstream (fail-400).",
          "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to sample from this model", "invalid_request_error",
          "model_not_allowed"),
    404: ("The model does not exist or you do not have access to it.",
          "invalid_request_error", "model_not_found"),
    413: ("Request too large.", "invalid_request_error", None),
    429: ("Rate limit reached for requests per min (RPM): Limit 1, Used 1, Requested 1.",
          "requests", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request. Sorry about that!",
          "server_error", None),
    503: ("The server is overloaded or not ready yet.", "server_error", None),
    529: ("The server is overloaded or not ready yet.", "server_error", None),
}


class Store:
    """Responses kept for the read, delete and cancel routes (those created
    with store not false), oldest dropped past STORED_MAX."""

    def __init__(self):
        self._lock = threading.Lock()
        self._items = collections.OrderedDict()

    def put(self, response, input_items):
        with self._lock:
            self._items[response["id"]] = (response, input_items)
            while len(self._items) > STORED_MAX:
                self._items.popitem(last=False)

    def get(self, response_id):
        with self._lock:
            return self._items.get(response_id)

    def delete(self, response_id):
        with self._lock:
            return self._items.pop(response_id, None) is not None


def failure(status, params):
    message, kind, code = FAILURE_MESSAGES[status]
    return FakeError(status, message, kind, code=code,
                     headers=fake_common.retry_headers(status, params))


def part_words(content):
    if isinstance(content, str):
        return fake_common.count_words(content)
    total = 0
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text"):
            total += fake_common.count_words(part.get("text"))
    return total


def input_words(body):
    """Words of instructions, input (a string, or items: messages' text,
    function call outputs) and tools' descriptions."""
    total = fake_common.count_words(body.get("instructions"))
    value = body.get("input")
    if isinstance(value, str):
        total += fake_common.count_words(value)
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        if "content" in item:
            total += part_words(item.get("content"))
        elif item.get("type") == "function_call_output":
            total += fake_common.count_words(item.get("output"))
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            total += fake_common.count_words(tool.get("description"))
    return total


def input_items(body, response_id):
    value = body.get("input")
    if isinstance(value, str):
        value = [{"type": "message", "role": "user",
                  "content": [{"type": "input_text", "text": value}]}]
    items = []
    for number, item in enumerate(value if isinstance(value, list) else []):
        item = dict(item) if isinstance(item, dict) else {"type": "unknown"}
        item.setdefault("id", "in_%s_%d" % (response_id, number))
        if item.get("type", "message") == "message":
            item.setdefault("type", "message")
            item.setdefault("status", "completed")
        items.append(item)
    return items


def holds_call_output(body):
    """Whether the request's input holds a function call's output."""
    value = body.get("input")
    return isinstance(value, list) and any(
        isinstance(item, dict) and item.get("type") == "function_call_output" for item in value)


def check_request(body):
    if not isinstance(body.get("model"), str):
        raise FakeError(400, "Missing required parameter: 'model'.", param="model",
                        code="missing_required_parameter")
    if body.get("input") is None and body.get("previous_response_id") is None:
        raise FakeError(400, "Missing required parameter: 'input'.", param="input",
                        code="missing_required_parameter")
    cap = body.get("max_output_tokens")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        raise FakeError(400, "Invalid 'max_output_tokens': expected an integer >= 1.",
                        param="max_output_tokens", code="invalid_value")


class Plan:
    """Token counts and content of one response.

    prompt_tokens is usage.input_tokens (OpenAI's input includes the cache:
    default the words of instructions, input and tools' descriptions);
    cached_tokens its cached part (never more than it; half in mode
    `cached`); the output is a reasoning item (when reasoning_tokens are
    asked), a message of completion_tokens words, and tool_calls function
    calls; output_tokens is all of them (reasoning included, TOOL_CALL_TOKENS
    a call), cut at max_output_tokens (the response is then incomplete)."""

    def __init__(self, mode, params, body, record_id):
        self.mode = mode
        self.body = body
        self.stream = body.get("stream") is True
        self.response_id = "resp_fake_%d" % record_id
        self.input_tokens = params.get("prompt_tokens", input_words(body))
        default_cached = max(1, self.input_tokens // 2) if (
            mode == "cached" and self.input_tokens) else 0
        self.cached = min(params.get("cached_tokens", default_cached), self.input_tokens)
        self.send_usage = mode != "stream-no-usage"
        self.reasoning = params.get("reasoning_tokens", 0)
        self.tool_calls = params.get("tool_calls", 0)
        wanted = params.get("completion_tokens", fake_common.COMPLETION_TOKENS_DEFAULT)
        cap = body.get("max_output_tokens")
        room = wanted if cap is None else cap - self.reasoning - (
            self.tool_calls * fake_common.TOOL_CALL_TOKENS)
        self.completion = max(0, min(wanted, room))
        self.status = "completed"
        if mode == "failed":
            self.status = "failed"
        elif mode == "incomplete" or wanted > room:
            self.status = "incomplete"
        self.chunks = params.get("chunks", self.completion)
        self.delay_seconds = fake_common.delay_seconds(mode, params)
        self.tools = [t.get("name") for t in body.get("tools") or []
                      if isinstance(t, dict) and t.get("type") == "function"
                      and isinstance(t.get("name"), str)]
        # mcp_tool: one function call of the request's MCP web_search tool
        # (Codex lists an MCP server's tools in a namespace "mcp__<server>",
        # the call then names the namespace) unless the input already holds
        # a call's output (then the usual text: a tool loop of one turn).
        self.namespace = None
        self.mcp_tool = bool(params.get("mcp_tool")) and not holds_call_output(body)
        if self.mcp_tool:
            self.tool_calls = 1
            for t in body.get("tools") or []:
                if isinstance(t, dict) and t.get("type") == "namespace" and str(
                        t.get("name")).startswith("mcp__") and any(
                        isinstance(f, dict) and f.get("name") == "web_search"
                        for f in t.get("tools") or []):
                    self.namespace, self.tools = t["name"], ["web_search"]
                    break
        self.created_at = int(time.time())

    def text(self):
        return " ".join(fake_common.words(self.completion))

    def pieces(self):
        return fake_common.split_words(self.text().split(), self.chunks)

    def sent_pieces(self):
        """The text deltas a failed response streams: the first half."""
        pieces = self.pieces()
        return pieces[:(len(pieces) + 1) // 2] if self.status == "failed" else pieces

    def usage(self, completion=None):
        if not self.send_usage:
            return None
        completion = self.completion if completion is None else completion
        output = completion + self.reasoning + self.tool_calls * fake_common.TOOL_CALL_TOKENS
        return {"input_tokens": self.input_tokens,
                "input_tokens_details": {"cached_tokens": self.cached},
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": self.reasoning},
                "total_tokens": self.input_tokens + output}

    def final_usage(self):
        if self.status != "failed":
            return self.usage()
        return self.usage(len("".join(self.sent_pieces()).split()))

    def response(self, status, output, usage):
        body = self.body
        reasoning = body.get("reasoning") if isinstance(body.get("reasoning"), dict) else {}
        value = {
            "id": self.response_id, "object": "response", "created_at": self.created_at,
            "status": status, "background": body.get("background") is True, "error": None,
            "incomplete_details": None, "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"), "max_tool_calls": None,
            "model": body["model"], "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "service_tier": "default", "store": body.get("store", True) is not False,
            "temperature": 1.0, "text": {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
            "top_logprobs": 0, "top_p": 1.0, "truncation": "disabled", "usage": usage,
            "user": None, "metadata": body.get("metadata") or {},
        }
        if status == "incomplete":
            value["incomplete_details"] = {"reason": "max_output_tokens"}
        if status == "failed":
            value["error"] = {"code": "server_error",
                              "message": "The fake upstream failed this response (failed)."}
        return value

    # -- output items

    def reasoning_item(self):
        item = {"id": "rs_%s" % self.response_id, "type": "reasoning", "summary": []}
        if "reasoning.encrypted_content" in (self.body.get("include") or []):
            item["encrypted_content"] = "fake-encrypted-%d" % self.reasoning
        return item

    def message_item(self, status, text):
        item = {"id": "msg_%s" % self.response_id, "type": "message", "status": status,
                "content": [], "role": "assistant"}
        if text is not None:
            item["content"] = [text_part(text)]
        return item

    def call_item(self, number, status, arguments):
        name = self.tools[number % len(self.tools)] if self.tools else "fake_tool"
        item = {"id": "fc_%s_%d" % (self.response_id, number), "type": "function_call",
                "status": status, "arguments": arguments,
                "call_id": "call_%s_%d" % (self.response_id, number), "name": name}
        if self.namespace is not None:
            item["namespace"] = self.namespace
        return item

    def arguments(self, number):
        word = fake_common.WORDS[number % len(fake_common.WORDS)]
        return fake_common.compact({"query": word} if self.mcp_tool else {"word": word})

    def output(self):
        """The finished output items."""
        item_status = "completed" if self.status == "completed" else "incomplete"
        items = [self.reasoning_item()] if self.reasoning else []
        items.append(self.message_item(item_status, "".join(self.sent_pieces())))
        if self.status != "failed":
            items += [self.call_item(n, item_status, self.arguments(n))
                      for n in range(self.tool_calls)]
        return items

    def final(self):
        return self.response(self.status, self.output(), self.final_usage())


def text_part(text):
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


class Stream:
    """The events of one streamed response, in the order OpenAI sends them:
    response.created, response.in_progress, then per output item
    response.output_item.added, its parts and deltas, response.output_item.done;
    last response.completed (or .incomplete, or .failed after half the text),
    which alone carries the usage. Every event has its sequence_number."""

    def __init__(self, plan):
        self.plan = plan
        content = sum(1 for event in self.events() if event.kind == "content")
        self.cut_after = (content + 1) // 2
        self._sequence = 0

    def event(self, name, fields, content="", kind="lead", usage=False, done=False):
        data = {"type": name, "sequence_number": self._sequence}
        data.update(fields)
        self._sequence += 1
        return Event(name, data, content, kind, usage, done)

    def events(self):
        self._sequence = 0
        plan = self.plan
        begun = plan.response("in_progress", [], None)
        yield self.event("response.created", {"response": begun})
        yield self.event("response.in_progress", {"response": begun})
        index = 0
        if plan.reasoning:
            item = plan.reasoning_item()
            yield self.event("response.output_item.added", {"output_index": 0, "item": item})
            yield self.event("response.output_item.done", {"output_index": 0, "item": item})
            index = 1
        yield from self.message_events(index)
        if plan.status != "failed":
            for number in range(plan.tool_calls):
                yield from self.call_events(index + 1 + number, number)
        name = {"completed": "response.completed", "incomplete": "response.incomplete",
                "failed": "response.failed"}[plan.status]
        yield self.event(name, {"response": plan.final()}, kind="tail",
                         usage=plan.send_usage, done=True)

    def message_events(self, index):
        plan = self.plan
        item_id = "msg_%s" % plan.response_id
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        yield self.event("response.output_item.added", {
            "output_index": index, "item": plan.message_item("in_progress", None)})
        yield self.event("response.content_part.added", dict(where, part=text_part("")))
        pieces = plan.sent_pieces()
        for piece in pieces:
            yield self.event("response.output_text.delta", dict(where, delta=piece, logprobs=[]),
                             piece, "content")
        if plan.status == "failed":
            return
        text = "".join(pieces)
        yield self.event("response.output_text.done", dict(where, text=text, logprobs=[]),
                         kind="tail")
        yield self.event("response.content_part.done", dict(where, part=text_part(text)),
                         kind="tail")
        status = "completed" if plan.status == "completed" else "incomplete"
        yield self.event("response.output_item.done", {
            "output_index": index, "item": plan.message_item(status, text)}, kind="tail")

    def call_events(self, index, number):
        plan = self.plan
        arguments = plan.arguments(number)
        item_id = "fc_%s_%d" % (plan.response_id, number)
        yield self.event("response.output_item.added", {
            "output_index": index, "item": plan.call_item(number, "in_progress", "")},
            kind="tail")
        half = len(arguments) // 2
        for part in (arguments[:half], arguments[half:]):
            yield self.event("response.function_call_arguments.delta", {
                "item_id": item_id, "output_index": index, "delta": part}, kind="content")
        yield self.event("response.function_call_arguments.done", {
            "item_id": item_id, "output_index": index, "arguments": arguments}, kind="tail")
        yield self.event("response.output_item.done", {
            "output_index": index, "item": plan.call_item(number, "completed", arguments)},
            kind="tail")

    def keep_alive(self):
        """What a stream-endless stream sends, again and again: an SSE comment."""
        return Event(None, b"", kind="tail")

    def error_events(self):
        """What a stream-error stream sends after its first half. The event
        the cut kept back had taken the next sequence number: take it back."""
        self._sequence -= 1
        return [self.event("error", {"code": "server_error", "message": "The fake upstream "
                                     "broke this stream (stream-error).", "param": None},
                           kind="tail", done=True)]


# -- routes


def answer(handler, body_bytes):
    """Answers a request on a Responses route; returns how it ended."""
    handler.check_key()
    path = handler.path_only
    if path == PREFIX and handler.command == "POST":
        return create(handler, handler.parse_json(body_bytes))
    if path == PREFIX + "/input_tokens" and handler.command == "POST":
        body = handler.parse_json(body_bytes)
        mode, params = fake_common.choose(handler.lower_headers(), body)
        handler.log_update(mode=mode)
        check_request(body)
        handler.send_json(200, {"object": "response.input_tokens",
                                "input_tokens": params.get("prompt_tokens", input_words(body))})
        return "answered"
    match = ID_PATTERN.match(path)
    if match is None:
        raise FakeError(404, "Invalid URL (%s %s)" % (handler.command, path))
    return stored_route(handler, match.group(1), match.group(2) or "")


def create(handler, body):
    mode, params = fake_common.choose(handler.lower_headers(), body)
    handler.log_update(mode=mode)
    check_request(body)
    plan = Plan(mode, params, body, handler.record["id"])
    store = handler.server.responses
    answered = fake_common.failure_status(mode) is None and mode not in (
        "close-before-answer", "hang", "empty")
    if body.get("store", True) is not False and answered:
        store.put(plan.final(), input_items(body, plan.response_id))
    if body.get("background") is True and not plan.stream:
        queued = plan.response("queued", [], None)
        store.put(queued, input_items(body, plan.response_id))
        handler.send_json(200, queued)
        return "answered"
    return handler.answer_generation(
        mode, params, plan.stream, lambda status: failure(status, params),
        make_body=plan.final, make_stream=lambda: Stream(plan),
        content="".join(plan.sent_pieces()), slow_seconds=plan.delay_seconds * plan.chunks)


def stored_route(handler, response_id, tail):
    method = handler.command
    entry = handler.server.responses.get(response_id)
    if entry is None or (method, tail) not in (("GET", ""), ("GET", "/input_items"),
                                               ("DELETE", ""), ("POST", "/cancel")):
        if entry is not None:
            raise FakeError(404, "Invalid URL (%s %s)" % (method, handler.path_only))
        raise FakeError(404, "Response with id '%s' not found." % response_id)
    response, items = entry
    if (method, tail) == ("GET", ""):
        handler.send_json(200, response)
    elif tail == "/input_items":
        ordered = items if handler.query().get("order") == "asc" else list(reversed(items))
        handler.send_json(200, {"object": "list", "data": ordered,
                                "first_id": ordered[0]["id"] if ordered else None,
                                "last_id": ordered[-1]["id"] if ordered else None,
                                "has_more": False})
    elif method == "DELETE":
        handler.server.responses.delete(response_id)
        handler.send_json(200, {"id": response_id, "object": "response.deleted",
                                "deleted": True})
    else:
        if not response["background"]:
            raise FakeError(400, "Only responses created with background=true can be "
                            "cancelled.", param=None)
        cancelled = dict(response, status="cancelled")
        handler.server.responses.put(cancelled, items)
        handler.send_json(200, cancelled)
    return "answered"
