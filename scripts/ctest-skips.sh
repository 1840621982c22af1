#!/bin/sh
# Prints why each skipped test of the last ctest run in BUILD was skipped:
# the "SKIPPED: <why>" line (any case) it printed before exiting 77 (docs/hardening.md, "Tests
# that cannot lie"). ctest lists skipped tests by name only.
# Usage: sh scripts/ctest-skips.sh BUILD
set -eu
log="${1:?usage: ctest-skips.sh BUILD}/Testing/Temporary/LastTest.log"
[ -f "$log" ] || exit 0
awk '
  /^[0-9]+\/[0-9]+ Test: / { test = $3 }
  tolower($0) ~ /^skipped: / {
    reasons[test] = reasons[test] (reasons[test] == "" ? "" : "; ") substr($0, 10)
  }
  END {
    n = 0
    for (t in reasons) n++
    if (n == 0) exit
    print "Skipped tests and why:"
    for (t in reasons) printf "  %s: %s\n", t, reasons[t] | "sort"
    close("sort")
  }' "$log"
