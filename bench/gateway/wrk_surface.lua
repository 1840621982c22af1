-- wrk script of the gateway benchmark: the same POST for every target, its
-- path, body and the target's own headers from the environment
-- (bench/gateway/run.sh sets them for each surface):
--   BENCH_PATH=/v1/messages BENCH_BODY='{"model":...}' \
--   BENCH_HEADERS="Name: value;Name: value" \
--     wrk -t1 -c50 -d10s --latency -s wrk_surface.lua http://127.0.0.1:PORT
wrk.method = "POST"
wrk.path = os.getenv("BENCH_PATH") or "/v1/chat/completions"
wrk.headers["Content-Type"] = "application/json"
for pair in string.gmatch(os.getenv("BENCH_HEADERS") or "", "[^;]+") do
  local name, value = string.match(pair, "^%s*([^:]-)%s*:%s*(.-)%s*$")
  if name and name ~= "" then wrk.headers[name] = value end
end
wrk.body = os.getenv("BENCH_BODY")
