"""Wraps an OpenAI-compatible chat completion with llmlimit.

Before the call it reserves, in one atomic step, one request of the model's
RPM, an upper bound of tokens of its TPM and an upper bound of cost of the
team's monthly budget; after the call it completes with the real token
usage and cost the provider reported. A failed call releases everything.

    python3 openai_wrapper.py --setup --team sales "Write a haiku about queues"

--setup defines the limits the call needs, as `llmlimit limits put` does: a
limit that does not exist is created (500 requests and 30,000 tokens a
minute, $100 a month, unless --rpm, --tpm, --budget-usd-micros say
otherwise); a limit that exists keeps every field, and changes only the
capacity a flag names, when it differs. It says on stderr what it did.

Environment: LLMLIMIT_URL (default http://127.0.0.1:8470),
LLMLIMIT_CLIENT_TOKEN, OPENAI_BASE_URL (default https://api.openai.com/v1),
OPENAI_API_KEY. Standard library only.
"""

import argparse
import json
import os
import sys
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from llmlimit import ApiError, Client, Denied, Unavailable  # noqa: E402

# Prices in usd_micros per million tokens: (input, output). $2.50 per
# million input tokens is 2_500_000 usd_micros per million tokens.
PRICES = {
    "gpt-4o": (2_500_000, 10_000_000),
    "gpt-4o-mini": (150_000, 600_000),
}
TOKENS_PER_MILLION = 1_000_000

# What --setup gives a limit it creates.
SETUP_RPM = 500
SETUP_TPM = 30_000
SETUP_MONTHLY_USD_MICROS = 100_000_000

# A token is about 4 characters of English; reserving for 3 over-estimates,
# which is the safe side: complete gives back what was not used.
CHARS_PER_TOKEN_ESTIMATE = 3
TOKENS_PER_MESSAGE_OVERHEAD = 8


def cost_usd_micros(model: str, prompt_tokens: int, completion_tokens: int) -> int:
    """Exact integer cost, rounded up to the next micro-dollar."""
    input_price, output_price = PRICES[model]
    total = prompt_tokens * input_price + completion_tokens * output_price
    return -(-total // TOKENS_PER_MILLION)


def estimate_prompt_tokens(messages: List[Dict[str, str]]) -> int:
    chars = sum(len(m.get("content", "")) for m in messages)
    return -(-chars // CHARS_PER_TOKEN_ESTIMATE) + TOKENS_PER_MESSAGE_OVERHEAD * len(messages)


@dataclass
class ChatReport:
    reply: str
    lease_id: str
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd_micros: int
    reserved_tokens: int
    reserved_usd_micros: int
    warnings: List[str]

    def summary(self) -> str:
        return ("tokens: prompt %d, completion %d, total %d (reserved %d); "
                "cost $%.6f (reserved $%.6f)" % (
                    self.prompt_tokens, self.completion_tokens, self.total_tokens,
                    self.reserved_tokens, self.cost_usd_micros / 1e6,
                    self.reserved_usd_micros / 1e6))


class LimitedChat:
    """Chat completions that never exceed the model's RPM/TPM or the team's budget."""

    def __init__(self, limiter: Client, team: str, base_url: Optional[str] = None,
                 api_key: Optional[str] = None, timeout_s: float = 120):
        self.limiter = limiter
        self.team = team
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL")
                         or "https://api.openai.com/v1").rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.timeout_s = timeout_s

    def keys(self, model: str) -> Dict[str, str]:
        return {
            "rpm": "global:llm:openai:%s:rpm" % model,
            "tpm": "global:llm:openai:%s:tpm" % model,
            "usd": "team:%s:usd:month" % self.team,
        }

    def setup_limits(self, model: str, rpm: Optional[int] = None, tpm: Optional[int] = None,
                     monthly_usd_micros: Optional[int] = None) -> Dict[str, Dict[str, Any]]:
        """Defines the limits of model and team (admin token needed), as
        `llmlimit limits put` does: one that does not exist is created, with
        SETUP_* for a capacity not given; one that exists changes only a
        capacity given, and only when it differs. Returns, per key, what
        happened: {"created": True}, or {"created": False, "changed": {...}}
        with {"capacity": {"from": old, "to": new}} or nothing in changed."""
        keys = self.keys(model)
        wanted = [
            ({"key": keys["rpm"], "kind": "rolling", "window_seconds": 60, "unit": "requests"},
             rpm, SETUP_RPM),
            ({"key": keys["tpm"], "kind": "rolling", "window_seconds": 60, "unit": "tokens"},
             tpm, SETUP_TPM),
            ({"key": keys["usd"], "kind": "budget", "period": "month", "unit": "usd_micros"},
             monthly_usd_micros, SETUP_MONTHLY_USD_MICROS),
        ]
        return {definition["key"]: self._put_what_differs(definition, capacity, default)
                for definition, capacity, default in wanted}

    def _put_what_differs(self, definition: Dict[str, Any], capacity: Optional[int],
                          default: int) -> Dict[str, Any]:
        try:
            current = self.limiter.get_limit(definition["key"])["definition"]
        except ApiError as error:
            if error.status != 404:
                raise
            self.limiter.put_limit(dict(definition,
                                        capacity=default if capacity is None else capacity))
            return {"created": True}
        if capacity is None or current["capacity"] == capacity:
            return {"created": False, "changed": {}}
        # The server replaces a whole definition: send the current one with
        # the new capacity, so nothing else changes.
        self.limiter.put_limit(dict(current, capacity=capacity))
        return {"created": False,
                "changed": {"capacity": {"from": current["capacity"], "to": capacity}}}

    def chat(self, messages: List[Dict[str, str]], model: str = "gpt-4o-mini",
             max_tokens: int = 512, deadline_s: float = 30) -> ChatReport:
        """One chat completion inside an llmlimit lease. Raises llmlimit's
        Denied/Unavailable before any call is made, or the provider's error
        (after releasing the lease)."""
        keys = self.keys(model)
        prompt_estimate = estimate_prompt_tokens(messages)
        reserved_tokens = prompt_estimate + max_tokens
        reserved_usd = cost_usd_micros(model, prompt_estimate, max_tokens)
        requirements = {keys["rpm"]: 1, keys["tpm"]: reserved_tokens, keys["usd"]: reserved_usd}
        with self.limiter.acquire(requirements, deadline_s=deadline_s) as lease:
            answer = self._call(model, messages, max_tokens)
            usage = answer.get("usage") or {}
            prompt = int(usage.get("prompt_tokens", prompt_estimate))
            completion = int(usage.get("completion_tokens", max_tokens))
            total = int(usage.get("total_tokens", prompt + completion))
            cost = cost_usd_micros(model, prompt, completion)
            lease.actual(keys["tpm"], total)
            lease.actual(keys["usd"], cost)
        completion_result = lease.completion
        return ChatReport(
            reply=answer["choices"][0]["message"]["content"], lease_id=lease.lease_id,
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=total,
            cost_usd_micros=cost, reserved_tokens=reserved_tokens,
            reserved_usd_micros=reserved_usd,
            warnings=list(completion_result.warnings) if completion_result else [])

    def _call(self, model: str, messages: List[Dict[str, str]], max_tokens: int) -> Any:
        body = json.dumps({"model": model, "messages": messages, "max_tokens": max_tokens})
        request = urllib.request.Request(
            self.base_url + "/chat/completions", data=body.encode(), method="POST",
            headers={"Content-Type": "application/json",
                     "Authorization": "Bearer " + self.api_key})
        with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
            return json.loads(reply.read())


def setup_text(what: Dict[str, Any]) -> str:
    if what["created"]:
        return "created"
    if not what["changed"]:
        return "unchanged"
    return ", ".join("%s %s -> %s" % (name, change["from"], change["to"])
                     for name, change in what["changed"].items())


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="One rate-limited chat completion.")
    parser.add_argument("prompt")
    parser.add_argument("--model", default="gpt-4o-mini", choices=sorted(PRICES))
    parser.add_argument("--team", default="sales")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--setup", action="store_true",
                        help="create the limits that are missing; change only what a flag names")
    parser.add_argument("--rpm", type=int, help="with --setup: requests per minute")
    parser.add_argument("--tpm", type=int, help="with --setup: tokens per minute")
    parser.add_argument("--budget-usd-micros", type=int,
                        help="with --setup: the team's monthly budget in usd_micros")
    args = parser.parse_args(argv)
    with Client() as limiter:
        chat = LimitedChat(limiter, args.team)
        if args.setup:
            done = chat.setup_limits(args.model, rpm=args.rpm, tpm=args.tpm,
                                     monthly_usd_micros=args.budget_usd_micros)
            for key, what in done.items():
                print("setup: %s %s" % (key, setup_text(what)), file=sys.stderr)
        try:
            report = chat.chat([{"role": "user", "content": args.prompt}], args.model,
                               args.max_tokens)
        except (Denied, Unavailable) as error:
            print("not sent: %s" % error, file=sys.stderr)
            return 2
    print(report.reply)
    print(report.summary(), file=sys.stderr)
    for warning in report.warnings:
        print("warning: %s" % warning, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
