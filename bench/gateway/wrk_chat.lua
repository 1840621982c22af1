-- wrk script of the gateway benchmark: the same chat completion POST for
-- every target, with the target's own headers and model from the environment:
--   BENCH_HEADERS="Name: value;Name: value" BENCH_MODEL=gpt-4o-mini \
--     wrk -t1 -c50 -d10s --latency -s wrk_chat.lua http://127.0.0.1:PORT
local model = os.getenv("BENCH_MODEL") or "gpt-4o-mini"

wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.headers["Content-Type"] = "application/json"
for pair in string.gmatch(os.getenv("BENCH_HEADERS") or "", "[^;]+") do
  local name, value = string.match(pair, "^%s*([^:]-)%s*:%s*(.-)%s*$")
  if name and name ~= "" then wrk.headers[name] = value end
end
wrk.body = '{"model":"' .. model .. '","messages":[{"role":"system","content":"You are brief."},'
  .. '{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":32}'
