"""The Keys API (docs/api.md, "Keys"): keys created with their limits (all or
none), shown without their secret, listed with filters and pages beside
gateway.json's (read-only), changed, blocked, revoked and rotated; each bound
of a key's fields held and refused one past it; and on every gateway route a
revoked, blocked or expired key refused with 401 in the route's own error
shape (key_revoked, key_blocked, key_expired; an unknown secret
invalid_api_key), x-should-retry: false, on its next call, while a call in
flight when its key is revoked finishes and is charged; a key made without
limits works at once with its templates' defaults.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import hashlib
import secrets
import threading
import time
import unittest

from gw_harness import (CHAT, COMPLETIONS, COUNT_TOKENS, EMBEDDINGS, INPUT_TOKENS, MESSAGES,
                        RESPONSES, Caller, Gateway, GatewayTest, chat, cost,
                        skip_unless_backend)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it

KEYS = "/v1/admin/keys"
# The bounds of src/server/server_bounds.h.
KEYS_MODELS_MAX = 64
KEYS_METADATA_MAX = 16
KEYS_METADATA_NAME_LENGTH_MAX = 64
KEYS_METADATA_VALUE_LENGTH_MAX = 256
KEYS_LIMITS_MAX = 16
KEYS_GRACE_SECONDS_MAX = 7 * 24 * 3600
KEYS_PAGE_MAX = 1000
FIELDS = {"id", "sha256_prefix", "caller", "team", "models", "mcp_servers", "status", "source",
          "blocked",
          "created_at_unix_ms", "expires_at_unix_ms", "revoked_at_unix_ms",
          "last_used_unix_ms", "max_wait_seconds", "priority_floor", "metadata"}

# Every gateway route, as (name, method, path, body, Anthropic's shape).
ROUTES = [
    ("chat", "POST", CHAT, chat("m-normal"), False),
    ("completions", "POST", COMPLETIONS, {"model": "m-normal", "prompt": "one"}, False),
    ("embeddings", "POST", EMBEDDINGS, {"model": "m-normal", "input": "one"}, False),
    ("responses", "POST", RESPONSES, {"model": "r-normal", "input": "one"}, False),
    ("input_tokens", "POST", INPUT_TOKENS, {"model": "r-normal", "input": "one"}, False),
    ("response", "GET", RESPONSES + "/resp_123", None, False),
    ("input_items", "GET", RESPONSES + "/resp_123/input_items", None, False),
    ("cancel", "POST", RESPONSES + "/resp_123/cancel", None, False),
    ("messages", "POST", MESSAGES, {"model": "a-normal", "max_tokens": 100,
                                    "messages": [{"role": "user", "content": "one"}]}, True),
    ("count_tokens", "POST", COUNT_TOKENS, {"model": "a-normal", "messages": [
        {"role": "user", "content": "one"}]}, True),
    ("models", "GET", "/v1/models", None, False),
    ("gemini", "POST", "/v1beta/models/g-normal:generateContent",
     {"contents": [{"role": "user", "parts": [{"text": "one"}]}]}, "google"),
    ("gemini_stream", "POST", "/v1beta/models/g-normal:streamGenerateContent?alt=sse",
     {"contents": [{"role": "user", "parts": [{"text": "one"}]}]}, "google"),
    ("gemini_count_tokens", "POST", "/v1beta/models/g-normal:countTokens",
     {"contents": [{"role": "user", "parts": [{"text": "one"}]}]}, "google"),
]


def limits_for(gw, caller, team, **capacities):
    """The definitions of every limit the templates name for caller and team."""
    result = []
    for name, template, *_ in gw.templates:
        definition = dict(Caller.LIMITS[name])
        definition["key"] = template.replace("{caller}", caller).replace("{team}", team)
        if name in capacities:
            definition["capacity"] = capacities[name]
        result.append(definition)
    return result


class KeysTest(GatewayTest):
    def create(self, expect=201, **fields):
        status, _, body = self.gw.server.request("POST", KEYS, fields)
        self.assertEqual(status, expect, body)
        return body

    def api_caller(self, team=None, **fields):
        """A new key with its limits made with it: a Caller, and the create's answer."""
        name = "k-" + secrets.token_hex(4)
        team = team or "team-" + secrets.token_hex(3)
        body = self.create(caller=name, team=team, limits=limits_for(self.gw, name, team),
                           **fields)
        return Caller(self.gw, body["secret"], name, team), body

    def key(self, key_id):
        status, _, body = self.gw.server.request("GET", KEYS + "/" + key_id)
        self.assertEqual(status, 200, body)
        return body

    def change(self, method, key_id, body=None, expect=200, suffix=""):
        status, _, answer = self.gw.server.request(method, KEYS + "/" + key_id + suffix, body)
        self.assertEqual(status, expect, answer)
        return answer

    def listing(self, query):
        status, _, body = self.gw.server.request("GET", KEYS + "?" + query)
        self.assertEqual(status, 200, body)
        return body

    def assert_refused(self, secret, code, routes=ROUTES):
        """Each route answers 401 with code in its own shape, x-should-retry: false, and
        nothing goes upstream."""
        forwarded = len(self.gw.upstream.requests())
        for name, method, path, body, anthropic in routes:
            status, headers, answer = self.gw.call(secret, path, body, method=method)
            self.assertEqual(status, 401, (name, answer))
            self.assertEqual(headers.get("x-should-retry"), "false", (name, headers))
            if anthropic == "google":  # Google's shape: the code in an ErrorInfo's reason
                self.assertEqual((answer["error"]["code"], answer["error"]["status"]),
                                 (401, "UNAUTHENTICATED"), (name, answer))
                reasons = [d.get("reason") for d in answer["error"].get("details", [])
                           if d.get("@type", "").endswith("google.rpc.ErrorInfo")]
                self.assertEqual(reasons, [] if code == "invalid_api_key" else [code],
                                 (name, answer))
                continue
            if anthropic:
                self.assertEqual(answer["type"], "error", (name, answer))
                self.assertEqual(answer["error"]["type"], "authentication_error", (name, answer))
            else:
                self.assertEqual(set(answer["error"]), {"message", "type", "param", "code"},
                                 (name, answer))
            self.assertEqual(answer["error"]["code"], code, (name, answer))
        self.assertEqual(len(self.gw.upstream.requests()), forwarded)


class Api(KeysTest, unittest.TestCase):
    def test_a_created_key_shows_its_secret_once_and_works_at_once(self):
        """201 with id, secret, sha256 (the secret's SHA-256) and the fields; the key calls
        at once and is charged in the limits made with it; GET and the list never show the
        secret or the whole digest, and last_used_unix_ms moves with a call."""
        c, body = self.api_caller(models=["m-normal", "m-counted"], metadata={"owner": "ops"},
                                  max_wait_seconds=5, priority_floor=2)
        self.assertEqual(body["sha256"], hashlib.sha256(body["secret"].encode()).hexdigest())
        self.assertTrue(body["secret"].startswith("llk-"), body)
        self.assertEqual(FIELDS - set(body), set(), body)
        self.assertEqual((body["status"], body["source"], body["caller"], body["team"]),
                         ("active", "api", c.name, c.team))
        self.assertEqual(body["models"], ["m-normal", "m-counted"])
        self.assertEqual(body["metadata"], {"owner": "ops"})
        self.assertEqual((body["max_wait_seconds"], body["priority_floor"]), (5, 2))
        self.assertEqual(body["sha256_prefix"], body["sha256"][:8])
        self.assertEqual(len(body["limits"]), len(self.gw.templates))
        self.assertIsNone(body["last_used_unix_ms"])
        status, _, answer = self.gw.call(c, CHAT, chat("m-counted", max_tokens=600))
        self.assertEqual(status, 200, answer)
        self.assertEqual(c.used("usd"), cost(1001, 499))
        shown = self.key(body["id"])
        self.assertEqual(set(shown), FIELDS, shown)
        self.assertIsInstance(shown["last_used_unix_ms"], int)
        listed = self.listing("caller=" + c.name)["keys"]
        self.assertEqual([k["id"] for k in listed], [body["id"]])
        for text in (str(shown), str(listed)):
            self.assertNotIn(body["secret"], text)
            self.assertNotIn(body["sha256"], text)

    def test_a_key_only_calls_its_models(self):
        """models: another model is 404 model_not_found, and /v1/models lists its own."""
        c, _ = self.api_caller(models=["m-normal"])
        status, _, answer = self.gw.call(c, CHAT, chat("m-counted"))
        self.assertEqual((status, answer["error"]["code"]), (404, "model_not_found"), answer)
        status, _, answer = self.gw.call(c, "/v1/models", method="GET")
        self.assertEqual([m["id"] for m in answer["data"]], ["m-normal"])
        self.create(expect=400, caller="x", team="y", models=["no-such-model"])

    def test_limits_are_created_with_the_key_all_or_none(self):
        """One invalid definition, or one whose key has a limit already: neither the key
        nor any of its limits is created."""
        name, team = "k-" + secrets.token_hex(4), "t-" + secrets.token_hex(3)
        good = limits_for(self.gw, name, team)
        bad = dict(good[1], capacity=-1)
        answer = self.create(expect=400, caller=name, team=team, limits=[good[0], bad])
        self.assertIn("limits[1]", answer["error"])
        existing = dict(good[2])
        self.assertEqual(self.gw.server.put_limit(existing)[0], 200)
        answer = self.create(expect=409, caller=name, team=team, limits=good)
        self.assertIn("limit_exists: " + existing["key"], answer["error"])
        self.assertEqual(self.listing("caller=" + name)["keys"], [])
        for definition in good:
            if definition["key"] != existing["key"]:
                status = self.gw.server.request("GET", "/v1/admin/limits/" + definition["key"])[0]
                self.assertEqual(status, 404, definition)
        answer = self.create(expect=400, caller=name, team=team, limits=[good[0], good[0]])
        self.assertIn("duplicate", answer["error"])

    def test_each_bound_holds_and_one_past_it_is_refused(self):
        """metadata entries, name and value lengths; models; limits; grace_seconds; a
        page's limit: each at its bound is taken, one past it is a 400 naming the field."""
        base = {"caller": "bounds-" + secrets.token_hex(3), "team": "bounds"}
        metadata = {"m%02d" % i: "v" for i in range(KEYS_METADATA_MAX)}
        self.create(metadata=metadata, **base)
        answer = self.create(expect=400, metadata=dict(metadata, extra="v"), **base)
        self.assertIn("metadata", answer["error"])
        self.create(metadata={"n" * KEYS_METADATA_NAME_LENGTH_MAX: "v"}, **base)
        self.create(expect=400, metadata={"n" * (KEYS_METADATA_NAME_LENGTH_MAX + 1): "v"},
                    **base)
        self.create(metadata={"n": "v" * KEYS_METADATA_VALUE_LENGTH_MAX}, **base)
        self.create(expect=400, metadata={"n": "v" * (KEYS_METADATA_VALUE_LENGTH_MAX + 1)},
                    **base)
        self.create(expect=400, metadata={"n": 1}, **base)
        answer = self.create(expect=400, models=["m%d" % i for i in range(KEYS_MODELS_MAX + 1)],
                             **base)
        self.assertIn("at most %d" % KEYS_MODELS_MAX, answer["error"])
        limits = [{"key": "bounds:%d:%s" % (i, secrets.token_hex(3)), "kind": "rolling",
                   "capacity": 10, "window_seconds": 60} for i in range(KEYS_LIMITS_MAX + 1)]
        answer = self.create(expect=400, limits=limits, **base)
        self.assertIn("at most %d" % KEYS_LIMITS_MAX, answer["error"])
        body = self.create(limits=limits[:KEYS_LIMITS_MAX], **base)
        self.assertEqual(len(body["limits"]), KEYS_LIMITS_MAX)
        self.change("POST", body["id"], {"grace_seconds": KEYS_GRACE_SECONDS_MAX},
                    suffix="/rotate")
        answer = self.change("POST", body["id"], {"grace_seconds": KEYS_GRACE_SECONDS_MAX + 1},
                             expect=400, suffix="/rotate")
        self.assertIn("grace_seconds", answer["error"])
        self.listing("limit=%d" % KEYS_PAGE_MAX)
        status, _, _ = self.gw.server.request("GET", KEYS + "?limit=%d" % (KEYS_PAGE_MAX + 1))
        self.assertEqual(status, 400)
        for bad in ({"team": "t"}, {"caller": "c"}, {"caller": "has space", "team": "t"},
                    {"caller": "c", "team": "t", "secret": "mine"},
                    {"caller": "c", "team": "t", "max_wait_seconds": 61},
                    {"caller": "c", "team": "t", "priority_floor": 10},
                    {"caller": "c", "team": "t", "expires_at_unix_ms": "soon"}):
            status, _, answer = self.gw.server.request("POST", KEYS, bad)
            self.assertEqual(status, 400, (bad, answer))

    def test_the_list_filters_and_pages(self):
        """team, caller and status filters; pages of `limit` keys follow next_cursor to
        every key once, and the last page's next_cursor is null."""
        team = "page-" + secrets.token_hex(3)
        ids = [self.create(caller="p%d-%s" % (i, team), team=team)["id"] for i in range(5)]
        seen, query = [], "team=%s&limit=2" % team
        for _ in range(10):
            page = self.listing(query)
            self.assertLessEqual(len(page["keys"]), 2)
            seen += [k["id"] for k in page["keys"]]
            if page["next_cursor"] is None:
                break
            query = "team=%s&limit=2&cursor=%s" % (team, page["next_cursor"])
        self.assertEqual(seen, ids)
        self.change("DELETE", ids[1])
        revoked = self.listing("team=%s&status=revoked" % team)["keys"]
        self.assertEqual([k["id"] for k in revoked], [ids[1]])
        self.assertEqual(revoked[0]["status"], "revoked")
        active = self.listing("team=%s&status=active" % team)["keys"]
        self.assertEqual(len(active), 4)
        self.assertEqual(len(self.listing("caller=p3-%s" % team)["keys"]), 1)
        status, _, _ = self.gw.server.request("GET", KEYS + "?status=gone")
        self.assertEqual(status, 400)

    def test_gateway_json_keys_are_listed_and_read_only(self):
        """Keys of gateway.json show as source "file", active; PATCH, DELETE and rotate on
        one are a 409 key_read_only, and it keeps working."""
        secret, name, _ = self.gw.free_keys.pop(0)
        listed = self.listing("caller=" + name)["keys"]
        self.assertEqual(len(listed), 1, listed)
        key = listed[0]
        self.assertEqual((key["source"], key["status"]), ("file", "active"))
        self.assertEqual(key["sha256_prefix"], hashlib.sha256(secret.encode()).hexdigest()[:8])
        self.assertEqual(self.key(key["id"])["caller"], name)
        for method, body, suffix in (("PATCH", {"blocked": True}, ""), ("DELETE", None, ""),
                                     ("POST", {}, "/rotate")):
            answer = self.change(method, key["id"], body, expect=409, suffix=suffix)
            self.assertIn("key_read_only", answer["error"])
        status, _, _ = self.gw.call(secret, "/v1/models", method="GET")
        self.assertEqual(status, 200)

    def test_patch_changes_what_it_names(self):
        """models, expires_at_unix_ms, blocked, max_wait_seconds, priority_floor and
        metadata change; caller and team cannot; unknown ids are 404; a revoked key is
        409 and stays revoked."""
        c, body = self.api_caller()
        changed = self.change("PATCH", body["id"], {
            "models": ["m-normal"], "max_wait_seconds": 7, "priority_floor": 3,
            "metadata": {"a": "b"}, "expires_at_unix_ms": int(time.time() * 1000) + 3600000})
        self.assertEqual((changed["models"], changed["max_wait_seconds"],
                          changed["priority_floor"], changed["metadata"]),
                         (["m-normal"], 7, 3, {"a": "b"}))
        self.assertNotIn("secret", changed)
        self.assertEqual(self.key(body["id"])["models"], ["m-normal"])
        status, _, _ = self.gw.call(c, CHAT, chat("m-counted"))
        self.assertEqual(status, 404)
        self.change("PATCH", body["id"], {"models": None, "expires_at_unix_ms": None})
        status, _, answer = self.gw.call(c, CHAT, chat("m-counted"))
        self.assertEqual(status, 200, answer)
        for bad in ({"caller": "other"}, {"team": "other"}, {"blocked": "yes"}, {"nope": 1}):
            self.change("PATCH", body["id"], bad, expect=400)
        self.change("PATCH", "key_0000000000000000", {"blocked": True}, expect=404)
        self.change("DELETE", "key_0000000000000000", expect=404)
        self.change("DELETE", body["id"])
        answer = self.change("PATCH", body["id"], {"blocked": False}, expect=409)
        self.assertIn("key_revoked", answer["error"])
        self.change("POST", body["id"], {}, expect=409, suffix="/rotate")
        self.assertEqual(self.key(body["id"])["status"], "revoked")


class Refused(KeysTest, unittest.TestCase):
    def test_revoked_blocked_and_expired_keys_are_refused_on_every_route(self):
        """Each refusal on every route, in its shape; unblocking lets the key in again."""
        c, body = self.api_caller()
        status, _, answer = self.gw.call(c, CHAT, chat("m-normal"))
        self.assertEqual(status, 200, answer)
        self.assert_refused("llk-" + secrets.token_urlsafe(32), "invalid_api_key")
        self.assertEqual(self.change("PATCH", body["id"], {"blocked": True})["status"],
                         "blocked")
        self.assert_refused(c.secret, "key_blocked")
        self.change("PATCH", body["id"], {"blocked": False})
        status, _, answer = self.gw.call(c, CHAT, chat("m-normal"))
        self.assertEqual(status, 200, answer)
        self.assertEqual(self.change("DELETE", body["id"])["status"], "revoked")
        self.assert_refused(c.secret, "key_revoked")
        c2, body2 = self.api_caller(expires_at_unix_ms=int(time.time() * 1000) + 1500)
        status, _, answer = self.gw.call(c2, CHAT, chat("m-normal"))
        self.assertEqual(status, 200, answer)
        time.sleep(1.6)
        self.assertEqual(self.key(body2["id"])["status"], "expired")
        self.assert_refused(c2.secret, "key_expired")
        # x-api-key, as Anthropic's clients send it, is refused the same way
        status, _, answer = self.gw.call(c2, MESSAGES, ROUTES[8][3], x_api_key=True)
        self.assertEqual((status, answer["error"]["code"]), (401, "key_expired"))

    def test_a_call_in_flight_finishes_and_is_charged_when_its_key_is_revoked(self):
        """A stream under way when its key is revoked runs to its end and is charged; the
        key's next call is refused."""
        c, body = self.api_caller()
        result = {}

        def call():
            result["answer"] = self.gw.stream(c, CHAT, chat("m-slow", stream=True,
                                                            stream_options={
                                                                "include_usage": True}))

        thread = threading.Thread(target=call)
        thread.start()
        time.sleep(0.3)  # the stream is under way (6 chunks 150 ms apart)
        self.change("DELETE", body["id"])
        self.assert_refused(c.secret, "key_revoked", routes=ROUTES[:1])
        thread.join(30)
        answer = result["answer"]
        self.assertEqual(answer.status, 200, answer.raw)
        self.assertIn("[DONE]", answer.events)
        self.assertGreater(c.used("usd"), 0)
        self.assertGreater(c.used("req"), 0)

    def test_a_rotated_key_takes_its_new_secret_and_the_old_one_for_its_grace(self):
        """rotate: a new secret (shown once) works at once; the old one works for
        grace_seconds, then is an unknown key; without grace it stops at once."""
        c, body = self.api_caller()
        rotated = self.change("POST", body["id"], {"grace_seconds": 2}, suffix="/rotate")
        self.assertNotEqual(rotated["secret"], c.secret)
        self.assertEqual(rotated["sha256"],
                         hashlib.sha256(rotated["secret"].encode()).hexdigest())
        self.assertEqual(rotated["id"], body["id"])
        for secret in (rotated["secret"], c.secret):
            status, _, answer = self.gw.call(secret, CHAT, chat("m-normal"))
            self.assertEqual(status, 200, answer)
        time.sleep(2.2)
        self.assert_refused(c.secret, "invalid_api_key", routes=ROUTES[:1])
        status, _, answer = self.gw.call(rotated["secret"], CHAT, chat("m-normal"))
        self.assertEqual(status, 200, answer)
        again = self.change("POST", body["id"], suffix="/rotate")  # no body: grace 0
        self.assert_refused(rotated["secret"], "invalid_api_key", routes=ROUTES[:1])
        status, _, answer = self.gw.call(again["secret"], CHAT, chat("m-normal"))
        self.assertEqual(status, 200, answer)


# Templates with defaults (docs/gateway.md, "Limit defaults").
DEFAULT_TEMPLATES = (
    ("conc", "kconc:{caller}", "requests",
     {"kind": "concurrency", "capacity": 5, "timeout_seconds": 300}),
    ("usd", "kusd:{team}", "usd_micros",
     {"kind": "budget", "capacity": 10 ** 9, "period": "month", "unit": "usd_micros"}),
)


class WithDefaults(KeysTest, unittest.TestCase):
    gateway_options = {"templates": DEFAULT_TEMPLATES}

    def test_a_new_key_works_at_once_with_its_templates_defaults(self):
        """An API key made without limits: its first call creates them from the templates'
        defaults and is charged there; a team budget made with the key is its own, and is
        never changed by the default."""
        name = "d-" + secrets.token_hex(4)
        body = self.create(caller=name, team="team-" + name)
        status, _, answer = self.gw.call(body["secret"], CHAT, chat("m-counted", max_tokens=600))
        self.assertEqual(status, 200, answer)
        usage = self.gw.server.usage("kusd:team-" + name)[2]
        self.assertEqual((usage["capacity"], usage["used"]), (10 ** 9, cost(1001, 499)))
        self.assertEqual(self.gw.server.usage("kconc:" + name)[2]["capacity"], 5)
        own = "own-" + secrets.token_hex(4)
        body = self.create(caller=own, team="team-" + own, limits=[
            {"key": "kusd:team-" + own, "kind": "budget", "capacity": 5000, "period": "month",
             "unit": "usd_micros"}])
        status, _, answer = self.gw.call(body["secret"], CHAT, chat("m-counted", max_tokens=600))
        self.assertEqual(status, 200, answer)
        usage = self.gw.server.usage("kusd:team-" + own)[2]
        self.assertEqual((usage["capacity"], usage["used"]), (5000, cost(1001, 499)))


class AdminToken(unittest.TestCase):
    def test_the_keys_routes_need_the_admin_token(self):
        """With an admin token set, every Keys route without it (or with another) is 401;
        with it, the create answers 201."""
        token = secrets.token_hex(16)
        gw = Gateway.start(keys=1, env={"LLMLIMIT_ADMIN_TOKEN": token})
        try:
            for method, path in (("POST", KEYS), ("GET", KEYS), ("GET", KEYS + "/key_1"),
                                 ("PATCH", KEYS + "/key_1"), ("DELETE", KEYS + "/key_1"),
                                 ("POST", KEYS + "/key_1/rotate")):
                for sent in (None, "wrong"):
                    status, _, _ = gw.server.request(method, path, {"caller": "a", "team": "b"},
                                                     token=sent)
                    self.assertEqual(status, 401, (method, path, sent))
            status, _, body = gw.server.request("POST", KEYS, {"caller": "a", "team": "b"},
                                                token=token)
            self.assertEqual(status, 201, body)
        finally:
            self.assertEqual(gw.stop(), 0)


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main()
