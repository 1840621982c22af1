#!/bin/sh
# Installs the client component into a temporary prefix, then builds the
# example program from that prefix alone with pkg-config, linked against the
# shared and against the static library (its dependencies, libcurl and
# jansson, stay shared: Debian ships no static libcurl dependencies), and
# runs both.
# Usage: test_install.sh BUILD_DIR CC EXAMPLE_SOURCE [CFLAGS]
set -eu
BUILD=$1
CC=$2
SOURCE=$3
CFLAGS=${4:-}
PREFIX=$(mktemp -d -t llmlimit-install-XXXXXX)
trap 'rm -rf "$PREFIX"' EXIT

cmake --install "$BUILD" --component client --prefix "$PREFIX" >/dev/null
PC=$(find "$PREFIX" -name llmlimit.pc)
[ -n "$PC" ] || { echo "FAIL no llmlimit.pc installed"; exit 1; }
[ -f "$PREFIX/include/llmlimit.h" ] || { echo "FAIL no header installed"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$PC")"
LIBDIR=$(pkg-config --variable=libdir llmlimit)

# The example prints its usage and exits 2 without arguments: proof that it
# links and loads.
$CC $CFLAGS -Wall -Werror "$SOURCE" $(pkg-config --cflags --libs llmlimit) -o "$PREFIX/shared"
status=0
LD_LIBRARY_PATH="$LIBDIR" "$PREFIX/shared" 2>/dev/null || status=$?
[ "$status" -eq 2 ] || { echo "FAIL shared example exit $status"; exit 1; }
echo "ok   shared: the example builds from the installed prefix and runs"

$CC $CFLAGS -Wall -Werror "$SOURCE" -I"$PREFIX/include" "$LIBDIR/libllmlimit.a" \
    $(pkg-config --libs libcurl jansson) -lpthread \
    -o "$PREFIX/static"
status=0
"$PREFIX/static" 2>/dev/null || status=$?
[ "$status" -eq 2 ] || { echo "FAIL static example exit $status"; exit 1; }
if ldd "$PREFIX/static" | grep -q libllmlimit; then
    echo "FAIL static example loads libllmlimit.so"
    exit 1
fi
echo "ok   static: the example links libllmlimit.a and runs without the shared library"
echo "2 passed, 0 failed"
