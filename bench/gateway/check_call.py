"""One call of the gateway benchmark before it measures (bench/gateway/run.sh):
a run that measured errors would be worthless. Sends BENCH_BODY to URL +
BENCH_PATH with BENCH_HEADERS ("Name: value;Name: value") and prints the
status and what came back: the usage's total tokens for a whole answer,
"stream" for an event stream that reached its end, "cut" for one that did not.

Usage: BENCH_PATH=... BENCH_BODY=... BENCH_HEADERS=... python3 check_call.py URL"""

import json
import os
import sys
import urllib.request

STREAM_ENDS = ("data: [DONE]", "event: message_stop", "event: response.completed")


def main():
    headers = {"Content-Type": "application/json"}
    for pair in os.environ.get("BENCH_HEADERS", "").split(";"):
        name, _, value = pair.partition(":")
        if name.strip():
            headers[name.strip()] = value.strip()
    request = urllib.request.Request(sys.argv[1] + os.environ["BENCH_PATH"],
                                     os.environ["BENCH_BODY"].encode(), headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
        if response.headers.get("Content-Type", "").startswith("text/event-stream"):
            print(response.status, "stream" if any(e in text for e in STREAM_ENDS) else "cut")
            return
        answer = json.loads(text)
        if "usageMetadata" in answer:  # Gemini's
            print(response.status, answer["usageMetadata"]["totalTokenCount"])
            return
        usage = answer["usage"]
        total = usage.get("total_tokens") or usage["input_tokens"] + usage["output_tokens"]
        print(response.status, total)


if __name__ == "__main__":
    main()
