#!/bin/sh
# The token estimate against the real o200k_base tokenizer on every sample
# of bench/gateway_estimate/corpus: fails when the estimate of a file is
# more than 15% under its real count, or the estimate of a one-line sample
# more than one token under (docs/gateway-estimate.md has the figures).
# Skipped (77) when the tokenizer is not installed: run `npm ci` in
# bench/gateway_estimate first.
#   test_estimate_real.sh BENCH_DIR DRIVER
set -eu
bench_dir=$1
driver=$2
if ! command -v node >/dev/null 2>&1 || [ ! -d "$bench_dir/node_modules/gpt-tokenizer" ]; then
    echo "SKIPPED: node or $bench_dir/node_modules/gpt-tokenizer is missing (npm ci there)"
    exit 77
fi
exec node "$bench_dir/measure.mjs" --driver "$driver" --check 0.15
