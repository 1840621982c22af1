#!/bin/sh
# The installed libraries export the public API and nothing else: every
# global symbol defined in libllmlimit.a and libllmlimit.so starts with
# llmlimit_ (the library's internals, such as its JSON helpers, stay local).
# Usage: test_exports.sh BUILD_DIR
set -eu
BUILD=$1
status=0
for library in "$BUILD/libllmlimit.a" "$BUILD/libllmlimit.so"; do
    if [ "${library%.so}" != "$library" ]; then
        symbols=$(nm -D --defined-only "$library" | awk 'NF == 3 { print $3 }')
    else
        symbols=$(nm -g --defined-only "$library" | awk 'NF == 3 { print $3 }')
    fi
    public=$(printf '%s\n' "$symbols" | grep -c '^llmlimit_' || true)
    others=$(printf '%s\n' "$symbols" | grep -v '^llmlimit_' | grep -v '^$' |
        grep -v '^_\(init\|fini\|edata\|end\|_bss_start\)$' || true)
    echo "$library: $public llmlimit_ symbols"
    if [ "$public" -lt 10 ]; then
        echo "FAIL: $library exports too few llmlimit_ symbols" >&2
        status=1
    fi
    if [ -n "$others" ]; then
        echo "FAIL: $library exports internal symbols:" >&2
        printf '%s\n' "$others" >&2
        status=1
    fi
done
exit $status
