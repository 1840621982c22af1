#!/bin/sh
# Installs what the tests and benches use beyond the build's packages
# (scripts/install-deps.sh): Debian's clang (libFuzzer), node, Chromium and etcd,
# and the pinned npm packages; does nothing when they are all present.
# Called by `make test`, `make test-asan`, `make bench` and `make fuzz`,
# never by `make run`.
# Usage: sh scripts/install-test-deps.sh [BUILD_DIR...]
# A BUILD_DIR configured before this installed a Debian package is
# configured again, so that CMake finds node there.
set -e
# clang, libclang-rt-14-dev: the libFuzzer harnesses (make fuzz, tests/fuzz).
# nodejs: the Node client's tests, the SDKs and agents of the gateway's tests.
# chromium: the console's browser tests run the page in it (tests/console).
# etcd-server: the control plane's tests start etcd clusters (tests/control).
PKGS="clang libclang-rt-14-dev nodejs chromium etcd-server"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Node may come from outside Debian's packages; accept any node >= 18 on PATH.
if command -v node >/dev/null 2>&1; then
    missing=$(echo "$missing" | sed 's/ nodejs//')
fi
if [ -n "$missing" ]; then
    echo "install-test-deps: installing$missing" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
    for build in "$@"; do
        if [ -f "$build/CMakeCache.txt" ]; then
            cmake "$build" >/dev/null
        fi
    done
fi

# Node packages the tests and benches drive (the official SDKs and the agents
# for the gateway, a real tokenizer for the gateway's estimate, puppeteer-core
# to drive Chromium for the console), installed from their package-lock.json
# files when missing or older than the lock file. The server and the CLI need
# none of them, so a failed install never stops the tests: it is said here,
# and the tests that need the package are skipped (exit 77) with the reason.
# When the registry does not answer a ping, only npm's local cache is tried,
# so an offline run does not wait on npm's retries.
node_tests() {
    case $1 in
        tests/gateway/node) echo "gateway_sdk_smoke gateway_sdk_* gateway_agents_*" ;;
        tests/gateway/gemini) echo "gateway_gemini_agent_*" ;;
        tests/gateway/mcp) echo "gateway_mcp_* gateway_agents_*" ;;
        bench/gateway_estimate) echo "gateway_estimate_real" ;;
        tests/console) echo "console_browser_* (and bench/console)" ;;
    esac
}
# npm ci DIR, from the registry when it answers, else from npm's cache only.
npm_install() {
    if [ "$registry_answers" = yes ]; then
        echo "install-test-deps: npm ci in $1" >&2
        npm ci --prefix "$1" --no-audit --no-fund --loglevel=error >/dev/null
    else
        echo "install-test-deps: npm ci --offline in $1 (from npm's cache)" >&2
        npm ci --prefix "$1" --offline --no-audit --no-fund --loglevel=silent >/dev/null 2>&1
    fi
}
registry_answers=""
not_installed=""
for dir in tests/gateway/node tests/gateway/gemini tests/gateway/mcp bench/gateway_estimate tests/console; do
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
    echo "install-test-deps: WARNING: Node packages not installed ($why):" >&2
    for dir in $not_installed; do
        echo "install-test-deps:   $dir: $(node_tests "$dir") will be skipped (install later: npm ci --prefix $dir)" >&2
    done
    echo "install-test-deps: the tests go on: the others need no Node package." >&2
fi
