#!/bin/sh
# libllgateway.a keeps to its prefix: every global symbol it defines starts
# with gw_, so that no name of the gateway's can clash with one of the
# server's or the backends' it is linked with (the config loader's helpers
# once were decode_keys, decode_limits, loader_fail ...).
# Usage: test_exports.sh LIBLLGATEWAY_A
set -eu
library=$1
# AddressSanitizer adds an __odr_asan.<name> beside each exported variable:
# its, not the gateway's (the variable itself is checked).
symbols=$(nm -g --defined-only "$library" | awk 'NF == 3 { print $3 }' | grep -v '^__odr_asan\.' || true)
prefixed=$(printf '%s\n' "$symbols" | grep -c '^gw_' || true)
others=$(printf '%s\n' "$symbols" | grep -v '^gw_' | grep -v '^$' || true)
echo "$library: $prefixed gw_ symbols"
status=0
if [ "$prefixed" -lt 10 ]; then
    echo "FAIL: $library defines too few gw_ symbols (is it the gateway's library?)" >&2
    status=1
fi
if [ -n "$others" ]; then
    echo "FAIL: $library defines global symbols without the gw_ prefix:" >&2
    printf '%s\n' "$others" >&2
    status=1
fi
exit $status
