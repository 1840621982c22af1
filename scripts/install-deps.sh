#!/bin/sh
# Installs the Debian packages llmlimit builds and tests with; does nothing
# when they are all present. Called by `make`, `make test` and `make run`.
set -e
# chromium: the console's browser tests run the page in it (tests/console).
# tzdata: /usr/share/zoneinfo, where a budget's time_zone is read from.
PKGS="cmake make gcc clang libclang-rt-14-dev pkg-config libjansson-dev libsqlite3-dev \
libcurl4-openssl-dev libssl-dev python3 nodejs chromium tzdata"
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

# Node packages the tests and benches drive (the official openai SDK for the
# gateway, a real tokenizer for the gateway's estimate, puppeteer-core to drive
# Chromium for the console), installed from their package-lock.json files when
# missing or older than the lock file. The server and the CLI need none of them, so a failed install never
# stops the build: it is said here, and the tests that need the package are
# skipped (exit 77) with the reason. When the registry does not answer a ping,
# only npm's local cache is tried, so an offline build does not wait on
# npm's retries.
node_tests() {
    case $1 in
        tests/gateway/node) echo "gateway_sdk_smoke gateway_sdk_* gateway_agents_*" ;;
        bench/gateway_estimate) echo "gateway_estimate_real" ;;
        tests/console) echo "console_browser_* (and bench/console)" ;;
    esac
}
# npm ci DIR, from the registry when it answers, else from npm's cache only.
npm_install() {
    if [ "$registry_answers" = yes ]; then
        echo "install-deps: npm ci in $1" >&2
        npm ci --prefix "$1" --no-audit --no-fund --loglevel=error >/dev/null
    else
        echo "install-deps: npm ci --offline in $1 (from npm's cache)" >&2
        npm ci --prefix "$1" --offline --no-audit --no-fund --loglevel=silent >/dev/null 2>&1
    fi
}
registry_answers=""
not_installed=""
for dir in tests/gateway/node bench/gateway_estimate tests/console; do
    [ -f "$dir/package-lock.json" ] || continue
    # Installed already, from this very lock file (npm writes its own copy)?
    [ -d "$dir/node_modules" ] && ! [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ] &&
        continue
    if ! command -v npm >/dev/null 2>&1; then
        not_installed="$not_installed $dir"
        continue
    fi
    if [ -z "$registry_answers" ]; then
        registry_answers=no
        npm ping --fetch-retries=0 --fetch-timeout=15000 >/dev/null 2>&1 && registry_answers=yes
    fi
    if ! npm_install "$dir"; then
        rm -rf "$dir/node_modules" # half made, it would pass for installed next time
        not_installed="$not_installed $dir"
    fi
done
if [ -n "$not_installed" ]; then
    why="npm is not installed"
    if command -v npm >/dev/null 2>&1; then
        why="npm ci failed"
        [ "$registry_answers" = no ] &&
            why="the npm registry ($(npm config get registry 2>/dev/null)) did not answer and npm's cache lacks the packages"
    fi
    echo "install-deps: WARNING: Node packages not installed ($why):" >&2
    for dir in $not_installed; do
        echo "install-deps:   $dir: $(node_tests "$dir") will be skipped (install later: npm ci --prefix $dir)" >&2
    done
    echo "install-deps: the build goes on: llmlimitd and llmlimit need no Node package." >&2
fi
