#!/bin/sh
# Installs the Debian packages llmlimit builds with (llmlimitd, the llmlimit
# command, libllmlimit); does nothing when they are all present. Called by
# `make`, `make run` and `make install`. What only the tests and benches use
# (clang, node, Chromium, npm packages) is scripts/install-test-deps.sh's.
# python3: CMake's configuration looks for it (the test suite is written in it).
set -e
# tzdata: /usr/share/zoneinfo, where a budget's time_zone is read from.
PKGS="cmake make gcc pkg-config libjansson-dev libsqlite3-dev libcurl4-openssl-dev libssl-dev \
python3 tzdata"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "install-deps: installing$missing" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
