"""The output reservation policies measured through llmlimitd (docs/gateway.md,
"Output reservation"): Claude Code's calls (max_tokens 64000, 20000 input
tokens written to the cache) at Opus prices against a 20 USD budget. Under
"max_tokens" the budget admits as many calls at once as their full
reservations fit, and even if every one writes all 64000 tokens it is never
passed; under "observed", once 20 short answers are seen, it admits as many
as the 99th percentile's reservations fit, and if each of those then writes
64000 tokens the budget is passed by that many full calls (the excess is
debt). The figures are printed; docs/gateway.md quotes them.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import threading
import time
import unittest

from gw_harness import (MESSAGES, GatewayTest, agent_model, estimate, run_concurrently,
                        skip_unless_backend)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it

OPUS = {  # usd_micros per Mtok
    "input_usd_micros_per_mtok": 15000000,
    "cached_input_usd_micros_per_mtok": 1500000,
    "cache_write_5m_input_usd_micros_per_mtok": 18750000,
    "cache_write_1h_input_usd_micros_per_mtok": 30000000,
    "output_usd_micros_per_mtok": 75000000,
    "reasoning_output_usd_micros_per_mtok": 75000000,
}
BUDGET = 20000000  # 20 USD
MAX_TOKENS = 64000
CACHED_INPUT = 20000
WARM_UP = [200 + 199 * i for i in range(20)]  # outputs 200 .. 3981
CALLS = 40  # sent at once, more than either policy admits
# The fake answers after this long: every call reaches its reserve while the
# admitted ones are still running (checked below, not assumed).
DELAY_MS = 10000
# The fake reports 20000 input tokens written to the cache and as output
# what max_tokens allows (completion_tokens 64000, capped by max_tokens).
UPSTREAM = ("fake-normal:prompt_tokens=0:cache_write_5m=%d:completion_tokens=%d:chunks=1"
            ":delay_ms=%d" % (CACHED_INPUT, MAX_TOKENS, DELAY_MS))
MODELS = (agent_model("opus-max-tokens", "fake-anthropic", UPSTREAM, **OPUS),
          agent_model("opus-observed", "fake-anthropic", UPSTREAM, output_reservation="observed",
                      **OPUS))
# A system prompt of 15465 words: the gateway estimates 19999 tokens for the
# request, written to the cache (cache_control), as Claude Code's are.
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet".split()
SYSTEM = " ".join(WORDS[i % len(WORDS)] for i in range(15465))


def request(model, max_tokens):
    return {"model": model, "max_tokens": max_tokens,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "say hi"}]}


def cost(input_priced, output, input_price):
    return -(-(input_priced * input_price + output * OPUS["output_usd_micros_per_mtok"])
             // 1000000)


def reservation(model, output):
    """usd_micros a call reserves: its estimated input as a 5-minute cache write."""
    input_tokens = estimate("messages", request(model, MAX_TOKENS), MAX_TOKENS)[0]
    return cost(input_tokens, output, OPUS["cache_write_5m_input_usd_micros_per_mtok"])


def spent(output):
    """usd_micros a call is charged: the fake's usage."""
    return cost(CACHED_INPUT, output, OPUS["cache_write_5m_input_usd_micros_per_mtok"])


class OutputReservation(GatewayTest, unittest.TestCase):
    gateway_options = {"extra_models": MODELS}

    def burst(self, c, model):
        """CALLS calls at once with max_tokens 64000: (admitted, denied); fails unless every
        denial was answered before the first admitted call came back."""
        answered = []
        lock = threading.Lock()

        def one(_):
            status, _, body = self.gw.call(c, MESSAGES, request(model, MAX_TOKENS),
                                           timeout_s=DELAY_MS / 1000 + 120)
            with lock:
                answered.append((time.monotonic(), status))
            return status

        statuses = run_concurrently(CALLS, one)
        self.assertTrue(set(statuses) <= {200, 429}, statuses)
        first_ok = min(t for t, s in answered if s == 200)
        self.assertTrue(all(t < first_ok for t, s in answered if s == 429),
                        "a call was answered before every call had its reserve")
        return statuses.count(200), statuses.count(429)

    def test_max_tokens_admits_what_fits_and_never_passes_the_budget(self):
        """max_tokens: the budget admits floor(20 USD / full reservation) calls; all of them
        writing 64000 tokens stay within it."""
        c = self.gw.caller(usd=BUDGET)
        per_call = reservation("opus-max-tokens", MAX_TOKENS)
        admitted, denied = self.burst(c, "opus-max-tokens")
        print("  max_tokens: reserves %d usd_micros a call; admitted %d of %d at once"
              % (per_call, admitted, CALLS))
        self.assertEqual(admitted, BUDGET // per_call)
        usage = c.usage("usd")
        self.assertEqual((usage["used"], usage["debt"]), (admitted * spent(MAX_TOKENS), 0))
        self.assertLessEqual(usage["used"], BUDGET)
        print("  max_tokens: spent %d usd_micros of %d" % (usage["used"], BUDGET))

    def test_observed_admits_more_and_its_worst_case_passes_the_budget(self):
        """observed: after 20 outputs of 200..3981 tokens the 99th percentile (3981) is
        reserved, so floor(20 USD / that) calls are admitted; each writing 64000 tokens, the
        budget is passed by all of them, the excess recorded as debt."""
        warm_up_cost = sum(spent(n) for n in WARM_UP)
        c = self.gw.caller(usd=warm_up_cost + BUDGET)
        statuses = run_concurrently(len(WARM_UP), lambda i: self.gw.call(
            c, MESSAGES, request("opus-observed", WARM_UP[i]), timeout_s=120)[0])
        self.assertEqual(statuses, [200] * len(WARM_UP))
        self.assertEqual(c.used("usd"), warm_up_cost)  # 20 USD left
        per_call = reservation("opus-observed", max(WARM_UP))
        admitted, denied = self.burst(c, "opus-observed")
        print("  observed: reserves %d usd_micros a call; admitted %d of %d at once"
              % (per_call, admitted, CALLS))
        self.assertEqual(admitted, BUDGET // per_call)
        usage = c.usage("usd")
        total = admitted * spent(MAX_TOKENS)
        self.assertEqual(usage["used"] + usage["debt"], warm_up_cost + total)
        self.assertGreater(total, BUDGET)
        print("  observed: the burst spent %d usd_micros against %d (%.2f times the budget)"
              % (total, BUDGET, total / BUDGET))


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)
