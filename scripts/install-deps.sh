#!/bin/sh
# Installs the Debian packages llmlimit builds and tests with; does nothing
# when they are all present. Called by `make`, `make test` and `make run`.
set -e
# chromium: the console's browser tests run the page in it (tests/console).
PKGS="cmake make gcc clang libclang-rt-14-dev pkg-config libjansson-dev libsqlite3-dev \
libcurl4-openssl-dev libssl-dev python3 nodejs chromium"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Node may come from outside Debian's packages; accept any node >= 18 on PATH.
if command -v node >/dev/null 2>&1; then
    missing=$(echo "$missing" | sed 's/ nodejs//')
fi
if [ -n "$missing" ]; then
    echo "install-deps: installing$missing" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

# Node packages the tests drive (the official openai SDK for the gateway, a
# real tokenizer for the gateway's estimate, puppeteer-core to drive Chromium
# for the console): installed from their package-lock.json files when missing.
for dir in tests/gateway/node bench/gateway_estimate tests/console; do
    if [ -f "$dir/package-lock.json" ] && [ ! -d "$dir/node_modules" ] && command -v npm >/dev/null 2>&1; then
        echo "install-deps: npm ci in $dir" >&2
        npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
    fi
done
