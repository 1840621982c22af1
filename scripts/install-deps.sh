#!/bin/sh
# Installs the Debian packages llmlimit builds and tests with; does nothing
# when they are all present. Called by `make`, `make test` and `make run`.
set -e
PKGS="cmake make gcc clang libclang-rt-14-dev pkg-config libmicrohttpd-dev libjansson-dev libsqlite3-dev \
libcurl4-openssl-dev libssl-dev python3 nodejs"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Node may come from outside Debian's packages; accept any node >= 18 on PATH.
if command -v node >/dev/null 2>&1; then
    missing=$(echo "$missing" | sed 's/ nodejs//')
fi
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
