"""Writes DATA_DIR/keys.json with COUNT keys of the Keys API (docs/api.md,
"keys.json"), as llmlimitd would have written them, and prints the secret of
the last one (caller and team "bench"); the others get callers of their own.
Making 100,000 keys through the API would rewrite the file 100,000 times
(docs/benchmarks-history.md has what that costs); the gateway benchmark only
needs them there.

Usage: python3 bench/keys/keys_json.py DATA_DIR COUNT"""

import base64
import hashlib
import json
import os
import secrets
import sys
import time


def main():
    data_dir, count = sys.argv[1], int(sys.argv[2])
    now = int(time.time() * 1000)
    lines, secret = [], None
    for i in range(count):
        secret = "llk-" + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
        digest = hashlib.sha256(secret.encode()).hexdigest()
        last = i == count - 1
        entry = {"id": "key_%016x" % (i + 1), "sha256": digest, "first_sha256": digest,
                 "caller": "bench" if last else "k%d" % i, "team": "bench" if last else "t%d" % i,
                 "models": None, "metadata": {}, "created_at_unix_ms": now,
                 "expires_at_unix_ms": None, "revoked_at_unix_ms": 0, "last_used_unix_ms": 0,
                 "blocked": False, "max_wait_seconds": 0, "priority_floor": 0}
        lines.append(json.dumps(entry, separators=(",", ":")))
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, "keys.json"), "w") as f:
        f.write('{"version":1,"keys":[\n' + ",\n".join(lines) + "\n]}\n")
    print(secret)


if __name__ == "__main__":
    main()
