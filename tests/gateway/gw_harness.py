"""What the gateway's integration tests share: the real llmlimitd in gateway
mode on a free port, in front of the fake OpenAI upstream (fake_upstream.py)
running in this process, on the backend named by --backend (memory, sqlite,
or tigerbeetle with a throw-away cluster from TIGERBEETLE_BIN; without it
the suite exits 77, skipped). Python standard library only.

Every test takes a fresh virtual key (its own caller and team) whose limits
it defines itself, so tests never see each other's usage:

    gw = Gateway.start()
    c = gw.caller(usd=10**6)           # a key, its limits defined
    status, headers, body = gw.call(c, CHAT, chat(MODEL_NORMAL))
    c.used("usd")                      # the budget's used amount

Command line (ctest passes these): --binary LLMLIMITD --cli LLMLIMIT
--estimate-tool GW_ESTIMATE_TOOL [--backend memory|sqlite|tigerbeetle]."""

import http.client
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "http"))
sys.path.insert(0, os.path.join(HERE, "..", "tigerbeetle"))
import fake_upstream  # noqa: E402
from harness import Server, wait_until  # noqa: E402,F401

# The harness keeps one keep-alive connection per thread and llmlimitd's
# stderr pipe open; leaving them to the collector is fine here.
warnings.simplefilter("ignore", ResourceWarning)

SKIP = 77
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
EMBEDDINGS = "/v1/embeddings"
MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"
RESPONSES = "/v1/responses"
INPUT_TOKENS = "/v1/responses/input_tokens"
PROVIDER_KEY_ENV = "GW_TEST_PROVIDER_KEY"
WRONG_KEY_ENV = "GW_TEST_WRONG_PROVIDER_KEY"  # a key the fake refuses (401)

# Prices of every test model (gpt-4o-mini's): a call's cost has a fraction
# to round up.
INPUT_PRICE = 150000
CACHED_PRICE = 75000
OUTPUT_PRICE = 600000
MAX_OUTPUT_TOKENS = 4096
DEFAULT_OUTPUT_TOKENS = 256
SHORT_TIMEOUT_SECONDS = 2  # the upstream "fake-short": hangs are cut after this

# Public model name -> (upstream, model sent upstream, which picks the fake's mode).
MODELS = {
    "m-normal": ("fake", "fake-normal"),
    "m-counted": ("fake", "fake-normal:prompt_tokens=1001:completion_tokens=499"),
    "m-cached": ("fake", "fake-cached:prompt_tokens=1001:cached_tokens=401:completion_tokens=499"),
    "m-slow": ("fake", "fake-stream-slow:delay_ms=150:chunks=6:completion_tokens=6"),
    "m-drip": ("fake", "fake-stream-slow:delay_ms=1500:chunks=4:completion_tokens=4"),
    "m-slow-plain": ("fake", "fake-normal:delay_ms=750:chunks=4"),
    "m-paced": ("fake", "fake-normal:delay_ms=50:chunks=4"),
    "m-long": ("fake", "fake-normal:completion_tokens=4096"),
    "m-no-usage": ("fake", "fake-stream-no-usage:completion_tokens=9"),
    "m-fail-400": ("fake", "fake-fail-400"),
    "m-fail-429": ("fake", "fake-fail-429"),
    "m-fail-500": ("fake", "fake-fail-500"),
    "m-close": ("fake", "fake-close-before-answer"),
    "m-empty-200": ("fake", "fake-empty:status=200"),
    "m-empty-307": ("fake", "fake-empty:status=307"),
    "m-empty-500": ("fake", "fake-empty:status=500"),
    "m-hang": ("fake-short", "fake-hang"),
    "m-hang-long": ("fake", "fake-hang"),
    "m-stream-hang": ("fake-short", "fake-stream-hang:chunks=6:completion_tokens=6"),
    "m-stream-hang-long": ("fake", "fake-stream-hang:chunks=6:completion_tokens=6"),
    "m-refused": ("dead", "fake-normal"),
    "m-wrong-key": ("fake-wrong-key", "fake-normal"),
}
MODEL_NORMAL = "m-normal"

# The agent surfaces' models (docs/gateway.md, "Surfaces"): Messages on an
# anthropic upstream (the same fake), Responses on the openai one. Their
# prices differ for every part, so a part priced at another's price shows.
AGENT_PRICES = {
    "input_usd_micros_per_mtok": 3000000,
    "cached_input_usd_micros_per_mtok": 300000,
    "cache_write_5m_input_usd_micros_per_mtok": 3750000,
    "cache_write_1h_input_usd_micros_per_mtok": 6000000,
    "output_usd_micros_per_mtok": 15000000,
    "reasoning_output_usd_micros_per_mtok": 20000000,
}
AGENT_MAX_OUTPUT_TOKENS = 64000
AGENT_DEFAULT_OUTPUT_TOKENS = 1000
# Public name -> (upstream, model sent upstream).
AGENT_MODELS = {
    "a-normal": ("fake-anthropic", "fake-normal"),
    "a-counted": ("fake-anthropic", "fake-normal:prompt_tokens=1001:completion_tokens=499"),
    "a-cache": ("fake-anthropic", "fake-normal:prompt_tokens=1000:cached_tokens=2000"
                ":cache_write_5m=3000:cache_write_1h=4000:completion_tokens=400"
                ":reasoning_tokens=100"),
    "a-deltas": ("fake-anthropic", "fake-normal:prompt_tokens=1001:completion_tokens=499"
                 ":message_deltas=4"),
    "a-slow": ("fake-anthropic", "fake-stream-slow:delay_ms=150:chunks=6:completion_tokens=6"),
    "a-endless": ("fake-anthropic", "fake-stream-endless:prompt_tokens=1001:chunks=6"
                  ":completion_tokens=6"),
    "a-no-usage": ("fake-anthropic", "fake-stream-no-usage:completion_tokens=9"),
    "a-close": ("fake-anthropic", "fake-stream-close:prompt_tokens=1001:chunks=6"
                ":completion_tokens=6"),
    "a-fail-429": ("fake-anthropic", "fake-fail-429"),
    "r-normal": ("fake", "fake-normal"),
    "r-counted": ("fake", "fake-normal:prompt_tokens=1001:completion_tokens=499"),
    "r-cache": ("fake", "fake-normal:prompt_tokens=1001:cached_tokens=401:completion_tokens=499"
                ":reasoning_tokens=99"),
    "r-slow": ("fake", "fake-stream-slow:delay_ms=150:chunks=6:completion_tokens=6"),
    "r-endless": ("fake", "fake-stream-endless:prompt_tokens=1001:chunks=6:completion_tokens=6"),
    "r-incomplete": ("fake", "fake-incomplete:prompt_tokens=1001:completion_tokens=499"),
    "r-failed": ("fake", "fake-failed:prompt_tokens=1001:completion_tokens=499"),
    # Gemini (fake_gemini.py: its model names hold their mode as fake-MODE.NAME-VALUE)
    "g-normal": ("fake-gemini", "fake-normal"),
    "g-counted": ("fake-gemini", "fake-normal.prompt_tokens-1001.completion_tokens-499"),
    "g-parts": ("fake-gemini", "fake-normal.prompt_tokens-3000.cached_tokens-2000"
                ".completion_tokens-400.reasoning_tokens-100.tool_use_tokens-50"),
    "g-chunks": ("fake-gemini", "fake-normal.prompt_tokens-1001.completion_tokens-499"
                 ".chunks-4"),
    "g-no-usage": ("fake-gemini", "fake-stream-no-usage.completion_tokens-9"),
    "g-no-candidates": ("fake-gemini", "fake-usage-no-completion.prompt_tokens-1001"
                        ".completion_tokens-9"),
    "g-slow": ("fake-gemini", "fake-stream-slow.delay_ms-150.chunks-6.completion_tokens-6"),
    "g-hang": ("fake-gemini", "fake-stream-hang.prompt_tokens-1001.chunks-6"
               ".completion_tokens-6"),
    "g-fail-429": ("fake-gemini", "fake-fail-429"),
}


def agent_cost(uncached=0, cache_read=0, write_5m=0, write_1h=0, output=0, reasoning=0,
               prices=None):
    """usd_micros, rounded up once, as docs/gateway.md ("Cost") defines it."""
    p = prices or AGENT_PRICES
    total = (uncached * p["input_usd_micros_per_mtok"]
             + cache_read * p["cached_input_usd_micros_per_mtok"]
             + write_5m * p["cache_write_5m_input_usd_micros_per_mtok"]
             + write_1h * p["cache_write_1h_input_usd_micros_per_mtok"]
             + (output - reasoning) * p["output_usd_micros_per_mtok"]
             + reasoning * p["reasoning_output_usd_micros_per_mtok"])
    return -(-total // 1000000)


def agent_model(name, upstream, upstream_model, **fields):
    """A model entry at AGENT_PRICES; fields override."""
    model = {"name": name, "upstream": upstream, "upstream_model": upstream_model,
             "max_output_tokens": AGENT_MAX_OUTPUT_TOKENS,
             "default_max_output_tokens": AGENT_DEFAULT_OUTPUT_TOKENS}
    model.update(AGENT_PRICES)
    model.update(fields)
    return model

# Every key's limits: (name, template, amount), and maybe the template's
# default definition. A caller's limits are made from these (kind and
# capacity per name in Caller.LIMITS).
TEMPLATES = [
    ("req", "req:{caller}", "requests"),
    ("tok", "tok:{caller}", "tokens"),
    ("in", "in:{caller}", "input_tokens"),
    ("out", "out:{caller}", "output_tokens"),
    ("conc", "conc:{caller}", "requests"),
    ("usd", "usd:{team}", "usd_micros"),
]
# The agent tests' limits: these and the input without cache reads.
AGENT_TEMPLATES = TEMPLATES + [("unc", "unc:{caller}", "uncached_input_tokens")]
KEYS_MAX = 80  # fresh keys in one configuration
# Prices in LiteLLM's format (a few entries of its file, as it writes them).
LITELLM_PRICES = os.path.join(HERE, "prices_litellm.json")


def argument(name, default=None):
    """Takes `name VALUE` out of sys.argv (ctest passes them)."""
    for i, arg in enumerate(sys.argv):
        if arg == name and i + 1 < len(sys.argv):
            value = sys.argv[i + 1]
            del sys.argv[i:i + 2]
            return value
    return default


BINARY = os.path.abspath(argument("--binary", "build/llmlimitd"))
CLI = os.path.abspath(argument("--cli", "build/llmlimit"))
ESTIMATE_TOOL = os.path.abspath(argument("--estimate-tool", "build/gw_estimate_tool"))
BACKEND = argument("--backend", "memory")
# After a reserve the tigerbeetle backend reports each limit's capacity but
# not what is left (that would take a lookup per limit): its answers carry
# x-ratelimit-limit-* only.
REMAINING_KNOWN = BACKEND != "tigerbeetle"


def skip_unless_backend():
    """Exits 77 (skipped) when the backend cannot run here."""
    if BACKEND == "tigerbeetle" and not os.environ.get("TIGERBEETLE_BIN"):
        print("SKIPPED: TIGERBEETLE_BIN is not set (tigerbeetle backend)")
        sys.exit(SKIP)


# -- figures computed by hand ---------------------------------------------------


def cost(input_tokens, output_tokens, cached_tokens=0):
    """usd_micros, rounded up, exactly as docs/gateway.md defines it."""
    total = ((input_tokens - cached_tokens) * INPUT_PRICE + cached_tokens * CACHED_PRICE
             + output_tokens * OUTPUT_PRICE)
    return -(-total // 1000000)


def estimate(endpoint, body, max_output_tokens=MAX_OUTPUT_TOKENS,
             default_output_tokens=DEFAULT_OUTPUT_TOKENS):
    """(input_tokens, output_tokens) the gateway estimates for body to a
    model with these output bounds (the test models' by default)."""
    done = subprocess.run([ESTIMATE_TOOL, "request", endpoint, str(max_output_tokens),
                           str(default_output_tokens)], input=json.dumps(body).encode(),
                          capture_output=True, timeout=30, check=True)
    first, second = done.stdout.split()
    return int(first), int(second)


def estimate_text(text):
    done = subprocess.run([ESTIMATE_TOOL, "text"], input=text.encode(), capture_output=True,
                          timeout=30, check=True)
    return int(done.stdout)


def chat(model, text="one two three four", **extra):
    return dict({"model": model, "messages": [{"role": "user", "content": text}]}, **extra)


def new_key():
    """A virtual key from `llmlimit gateway new-key`: (secret, sha256)."""
    done = subprocess.run([CLI, "gateway", "new-key"], capture_output=True, text=True,
                          timeout=30, check=True)
    key = json.loads(done.stdout)
    return key["secret"], key["sha256"]


def closed_port():
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def provider_env(provider_key="sk-provider", wrong_key="sk-wrong"):
    """The environment variables gateway_config's upstreams read their keys from."""
    return {PROVIDER_KEY_ENV: provider_key, WRONG_KEY_ENV: wrong_key}


def gateway_config(upstream_url, keys, models=None, dead_port=None, extra_models=(),
                   templates=None):
    """gateway.json for the fake upstream at upstream_url; keys: a list of
    {"sha256", "caller", "team", "models"?}. Besides `models` (MODELS by
    default), the agent surfaces' AGENT_MODELS."""
    dead_port = dead_port or closed_port()
    upstreams = [
        {"name": "fake", "base_url": upstream_url, "api_key_env": PROVIDER_KEY_ENV,
         "timeout_seconds": 60, "connect_timeout_seconds": 5},
        {"name": "fake-anthropic", "api": "anthropic", "base_url": upstream_url,
         "api_key_env": PROVIDER_KEY_ENV, "timeout_seconds": 60, "connect_timeout_seconds": 5},
        {"name": "fake-gemini", "api": "gemini",
         "base_url": upstream_url[:-len("/v1")] + "/v1beta", "api_key_env": PROVIDER_KEY_ENV,
         "timeout_seconds": 60, "connect_timeout_seconds": 5},
        {"name": "fake-short", "base_url": upstream_url, "api_key_env": PROVIDER_KEY_ENV,
         "timeout_seconds": SHORT_TIMEOUT_SECONDS, "connect_timeout_seconds": 2},
        {"name": "fake-wrong-key", "base_url": upstream_url, "api_key_env": WRONG_KEY_ENV},
        {"name": "dead", "base_url": "http://127.0.0.1:%d/v1" % dead_port,
         "api_key_env": PROVIDER_KEY_ENV, "timeout_seconds": 5, "connect_timeout_seconds": 2},
    ]
    model_list = []
    for name, (upstream, upstream_model) in (models or MODELS).items():
        model_list.append({
            "name": name, "upstream": upstream, "upstream_model": upstream_model,
            "input_usd_micros_per_mtok": INPUT_PRICE,
            "cached_input_usd_micros_per_mtok": CACHED_PRICE,
            "output_usd_micros_per_mtok": OUTPUT_PRICE,
            "max_output_tokens": MAX_OUTPUT_TOKENS,
            "default_max_output_tokens": DEFAULT_OUTPUT_TOKENS})
    for name, (upstream, upstream_model) in AGENT_MODELS.items():
        model_list.append(agent_model(name, upstream, upstream_model))
    model_list.extend(extra_models)
    return {"upstreams": upstreams, "models": model_list, "keys": keys,
            "limits": [template_entry(*template) for template in templates or TEMPLATES]}


def template_entry(_, template, amount, default=None):
    """A limits entry from (name, template, amount[, default definition])."""
    entry = {"key": template, "amount": amount}
    if default is not None:
        entry["default"] = default
    return entry


# -- a test's key and its limits ------------------------------------------------


class Caller:
    """A virtual key and the limits its calls reserve (each its own)."""

    # name -> default definition (without key) of each limit
    LIMITS = {
        "req": {"kind": "rolling", "capacity": 100000, "window_seconds": 3600},
        "unc": {"kind": "rolling", "capacity": 10 ** 9 + 3, "window_seconds": 3600},
        "tok": {"kind": "rolling", "capacity": 10 ** 9, "window_seconds": 3600},
        "in": {"kind": "rolling", "capacity": 10 ** 9 + 1, "window_seconds": 3600},
        "out": {"kind": "rolling", "capacity": 10 ** 9 + 2, "window_seconds": 3600},
        "conc": {"kind": "concurrency", "capacity": 1000, "timeout_seconds": 120},
        "usd": {"kind": "budget", "capacity": 10 ** 12, "period": "month",
                "timeout_seconds": 120, "unit": "usd_micros"},
    }

    def __init__(self, gateway, secret, caller, team):
        self.gateway = gateway
        self.secret = secret
        self.name = caller
        self.team = team
        self.keys = {name: template.replace("{caller}", caller).replace("{team}", team)
                     for name, template, *_ in gateway.templates}

    def define(self, skip=(), **capacities):
        """Puts this caller's limits; capacities override by name."""
        for name, definition in self.LIMITS.items():
            if name in skip or name not in self.keys:
                continue
            definition = dict(definition, key=self.keys[name])
            if name in capacities:
                definition["capacity"] = capacities[name]
            status, _, body = self.gateway.server.put_limit(definition)
            assert status == 200, (status, body)
        return self

    def usage(self, name):
        status, _, body = self.gateway.server.usage(self.keys[name])
        assert status == 200, (status, body)
        return body

    def used(self, name):
        return self.usage(name)["used"]

    def reserved(self, name):
        return self.usage(name)["reserved"]

    def snapshot(self):
        """(reserved, used, debt) of every limit, to compare before/after."""
        result = {}
        for name in self.keys:
            usage = self.usage(name)
            result[name] = (usage["reserved"], usage["used"], usage["debt"])
        return result


# -- the gateway ---------------------------------------------------------------


class StreamAnswer:
    """A streamed answer read to its end: status, headers and the data of
    each SSE event."""

    def __init__(self, status, headers, raw):
        self.status = status
        self.headers = headers
        self.raw = raw
        self.events = []
        self.names = []  # each event's `event:` name (None without one), as events
        for block in raw.replace("\r\n", "\n").split("\n\n"):
            lines = [line[len("data: "):] for line in block.split("\n")
                     if line.startswith("data: ")]
            names = [line[len("event: "):] for line in block.split("\n")
                     if line.startswith("event: ")]
            if lines:
                self.events.append("\n".join(lines))
                self.names.append(names[0] if names else None)

    def chunks(self):
        """The JSON events (every one but [DONE])."""
        return [json.loads(e) for e in self.events if e != "[DONE]"]

    def content(self):
        text = ""
        for chunk in self.chunks():
            for choice in chunk.get("choices", []):
                if choice.get("index", 0) == 0:
                    delta = choice.get("delta") or {}
                    text += delta.get("content") or choice.get("text") or ""
        return text


class Gateway:
    """llmlimitd in gateway mode and its fake upstream."""

    def __init__(self, backend=None, keys=KEYS_MAX, models=None, args=(), env=None,
                 restricted_models=("m-normal",), templates=None, extra_models=(),
                 prices_file=None, key_fields=None):
        self.backend = backend or BACKEND
        self.templates = templates or TEMPLATES
        self.provider_key = "sk-provider-" + secrets.token_hex(16)
        self.wrong_key = "sk-wrong-" + secrets.token_hex(16)
        self.upstream = fake_upstream.start(api_key=self.provider_key)
        self.directory = tempfile.mkdtemp(prefix="llmlimit-gw-test-")
        self.config_path = os.path.join(self.directory, "gateway.json")
        self.cluster = None
        self.free_keys = []
        key_list = []
        for i in range(keys):
            secret, sha256 = new_key()
            caller, team = "c%d-%s" % (i, secrets.token_hex(3)), "t%d" % i
            key_list.append(dict({"sha256": sha256, "caller": caller, "team": team},
                                 **(key_fields(i) if key_fields else {})))
            self.free_keys.append((secret, caller, team))
        secret, sha256 = new_key()
        key_list.append({"sha256": sha256, "caller": "restricted", "team": "restricted",
                         "models": list(restricted_models)})
        self.restricted = (secret, "restricted", "restricted")
        self.config = gateway_config(self.upstream.base_url, key_list, models,
                                     extra_models=extra_models, templates=self.templates)
        if prices_file is not None:  # a copy beside gateway.json, named relative to it
            shutil.copy(prices_file, os.path.join(self.directory, "prices.json"))
            self.config["prices_file"] = "prices.json"
        self.write_config(self.config)
        server_args = ["--gateway-config", self.config_path] + list(args)
        if self.backend == "tigerbeetle":
            server_args += self.start_cluster()
        self.server = Server(BINARY, backend=self.backend, args=server_args,
                             env=dict(provider_env(self.provider_key, self.wrong_key),
                                      **(env or {})))

    def start_cluster(self):
        from tb_cluster import Cluster  # noqa: E402
        self.cluster = Cluster()
        self.cluster.format()
        self.cluster.start()
        return ["--tb-addresses", self.cluster.address, "--tb-sessions", "2"]

    def write_config(self, config):
        with open(self.config_path + ".tmp", "w") as f:
            json.dump(config, f, indent=1)
        os.replace(self.config_path + ".tmp", self.config_path)

    @classmethod
    def start(cls, **kw):
        gateway = cls(**kw)
        try:
            gateway.server.start()
            if not wait_until(lambda: gateway.server.request("GET", "/readyz")[0] == 200, 30):
                raise RuntimeError("llmlimitd not ready:\n" + gateway.server.stderr_text())
        except BaseException:
            gateway.stop()
            raise
        return gateway

    def stop(self):
        """Stops everything; returns llmlimitd's exit code."""
        code = None
        try:
            conn = getattr(self.server._local, "conn", None)
            if conn is not None:
                conn.close()
            if self.server.process is not None:
                code = self.server.stop()
        finally:
            self.server.cleanup()
            self.upstream.stop()
            if self.cluster is not None:
                self.cluster.stop()
            for name in os.listdir(self.directory):
                os.unlink(os.path.join(self.directory, name))
            os.rmdir(self.directory)
        return code

    # -- keys

    def caller(self, skip=(), **capacities):
        """A fresh key with its limits defined (capacities by limit name)."""
        secret, name, team = self.free_keys.pop(0)
        return Caller(self, secret, name, team).define(skip=skip, **capacities)

    def restricted_caller(self, **capacities):
        secret, name, team = self.restricted
        return Caller(self, secret, name, team).define(**capacities)

    # -- HTTP

    def connection(self, timeout_s=30):
        return http.client.HTTPConnection(self.server.host, self.server.port, timeout=timeout_s)

    def call(self, caller, path, body=None, headers=None, method="POST", raw=None,
             timeout_s=30, x_api_key=False):
        """One request on a new connection; caller is a Caller, a secret
        string or None (no key), sent as Authorization: Bearer, or as
        x-api-key when x_api_key. Returns (status, headers with lower-case
        names, parsed JSON or text)."""
        send = {"Content-Type": "application/json"}
        secret = caller.secret if isinstance(caller, Caller) else caller
        if secret is not None and x_api_key:
            send["x-api-key"] = secret
        elif secret is not None:
            send["Authorization"] = "Bearer " + secret
        send.update(headers or {})
        payload = raw if raw is not None else (None if body is None else json.dumps(body))
        conn = self.connection(timeout_s)
        try:
            conn.request(method, path, body=payload, headers=send)
            response = conn.getresponse()
            data = response.read()
            reply_headers = {k.lower(): v for k, v in response.getheaders()}
            status = response.status
        finally:
            conn.close()
        text = data.decode("utf-8", "replace")
        try:
            return status, reply_headers, json.loads(text)
        except ValueError:
            return status, reply_headers, text

    def stream(self, caller, path, body, headers=None, timeout_s=30, x_api_key=False):
        """A streaming call read to its end: a StreamAnswer (or, when the
        answer is not an event stream, the same with its body as raw)."""
        send = {"Content-Type": "application/json"}
        if x_api_key:
            send["x-api-key"] = caller.secret
        else:
            send["Authorization"] = "Bearer " + caller.secret
        send.update(headers or {})
        conn = self.connection(timeout_s)
        try:
            conn.request("POST", path, body=json.dumps(body), headers=send)
            response = conn.getresponse()
            data = response.read()
            reply_headers = {k.lower(): v for k, v in response.getheaders()}
            return StreamAnswer(response.status, reply_headers, data.decode("utf-8", "replace"))
        finally:
            conn.close()

    def raw_request(self, caller, path, body, headers=None):
        """Sends a request on a raw socket and returns the socket, for tests
        that read part of an answer and then go away."""
        sock = socket.create_connection((self.server.host, self.server.port), timeout=30)
        payload = json.dumps(body).encode()
        lines = ["POST %s HTTP/1.1" % path, "Host: 127.0.0.1",
                 "Content-Type: application/json", "Content-Length: %d" % len(payload),
                 "Authorization: Bearer " + caller.secret]
        lines += ["%s: %s" % item for item in (headers or {}).items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        return sock

    def metrics(self):
        status, _, text = self.server.request("GET", "/metrics")
        assert status == 200, (status, text)
        return text

    def caller_total(self, name, caller):
        """llmlimit_gateway_<name>_total of a caller, summed over its models."""
        total = 0
        for line in self.metrics().splitlines():
            if line.startswith("llmlimit_gateway_%s_total{" % name) and \
                    'caller="%s"' % caller in line:
                total += int(line.rsplit(" ", 1)[1])
        return total

    def route_answers(self, route, status):
        """llmlimit_requests_total of a route and status: the answers it gave so far."""
        prefix = 'llmlimit_requests_total{route="%s",status="%d"} ' % (route, status)
        for line in self.metrics().splitlines():
            if line.startswith(prefix):
                return int(line[len(prefix):])
        return 0

    def waiting(self):
        """llmlimit_wait_waiting: reserves waiting for capacity now."""
        for line in self.metrics().splitlines():
            if line.startswith("llmlimit_wait_waiting "):
                return int(line.split()[1])
        raise AssertionError("llmlimit_wait_waiting missing")

    def events(self, **query):
        path = "/v1/events?" + urllib.parse.urlencode(query)
        return self.server.request("GET", path)

    def sighup(self):
        import signal
        self.server.process.send_signal(signal.SIGHUP)


def read_until(sock, needle, timeout_s=30.0):
    """Reads from sock until needle has come (bytes); returns all read."""
    deadline = time.monotonic() + timeout_s
    data = b""
    while needle not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("%r not received within %.1fs; got %r" % (needle, timeout_s, data))
        sock.settimeout(left)
        piece = sock.recv(65536)
        if not piece:
            raise AssertionError("connection closed before %r; got %r" % (needle, data))
        data += piece
    return data


def read_answer(sock, timeout_s=10.0):
    """Reads a whole chunked answer off sock (each read within timeout_s):
    (status, headers with lower-case names, body bytes)."""
    sock.settimeout(timeout_s)
    reader = sock.makefile("rb")
    status = int(reader.readline().split()[1])
    headers = {}
    while True:
        line = reader.readline().decode("latin-1").rstrip("\r\n")
        if not line:
            break
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    assert headers.get("transfer-encoding") == "chunked", headers
    body = b""
    while True:
        size = int(reader.readline().split(b";")[0], 16)
        if size == 0:
            reader.readline()
            return status, headers, body
        body += reader.read(size)
        reader.readline()


def run_concurrently(count, function):
    """Runs function(i) on count threads started together; returns the
    results in order (an exception is returned as the result)."""
    results = [None] * count
    barrier = threading.Barrier(count)

    def worker(i):
        try:
            barrier.wait(30)
            results[i] = function(i)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            results[i] = error

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


_shared_gateways = {}


def shared_gateway(options):
    """One gateway per set of options for the whole test module (a
    tigerbeetle cluster takes seconds to start); tests keep apart by
    their own keys."""
    key = repr(sorted(options.items()))
    if key not in _shared_gateways:
        _shared_gateways[key] = Gateway.start(**options)
    return _shared_gateways[key]


def tearDownModule():  # noqa: N802 - unittest's name; test modules import it
    """Stops the module's gateways; each must exit 0."""
    failures = []
    while _shared_gateways:
        _, gw = _shared_gateways.popitem()
        code = gw.stop()
        if code != 0:
            failures.append("llmlimitd exit code %r:\n%s" % (code, gw.server.stderr_text()))
    assert not failures, "\n".join(failures)


class GatewayTest:
    """Mixin for unittest.TestCase classes: cls.gw, the module's gateway
    (stopped by tearDownModule, which the test module imports)."""

    gateway_options = {}

    @classmethod
    def setUpClass(cls):
        cls.gw = shared_gateway(cls.gateway_options)

    def forwarded(self):
        """How many requests the fake upstream has received so far."""
        return len(self.gw.upstream.requests())

    def assert_openai_error(self, status, body, expect_status, expect_code, expect_type=None):
        self.assertEqual(status, expect_status, body)
        self.assertIsInstance(body, dict, body)
        self.assertEqual(set(body), {"error"}, body)
        error = body["error"]
        self.assertIsInstance(error, dict, body)
        self.assertEqual(set(error), {"message", "type", "param", "code"}, body)
        self.assertEqual(error["code"], expect_code, body)
        self.assertIsInstance(error["message"], str)
        self.assertTrue(error["message"], body)
        if expect_type is not None:
            self.assertEqual(error["type"], expect_type, body)
        return error["message"]
