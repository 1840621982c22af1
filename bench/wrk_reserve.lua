-- wrk script: the same reserve `llmlimit bench --mode reserve` sends, with a
-- lease id unique to each request, to check that the load generator is not
-- the bottleneck. Keys and amounts come from the environment:
--   BENCH_KEYS=k1,k2,k3 BENCH_AMOUNTS=1,500,1000 wrk -t1 -c50 -d10s -s wrk_reserve.lua URL
local keys = {}
for key in string.gmatch(os.getenv("BENCH_KEYS") or "", "[^,]+") do keys[#keys + 1] = key end
local amounts = {}
for amount in string.gmatch(os.getenv("BENCH_AMOUNTS") or "", "[^,]+") do
  amounts[#amounts + 1] = amount
end
local items = {}
for i, key in ipairs(keys) do
  items[i] = string.format('{"key":"%s","amount":%s}', key, amounts[i] or "1")
end
local tail = '","requirements":[' .. table.concat(items, ",") .. ']}'
math.randomseed(os.time())
local run = string.format("%08x", math.random(0, 0x7fffffff))
local counter = 0

wrk.method = "POST"
wrk.path = "/v1/reserve"
wrk.headers["Content-Type"] = "application/json"
local token = os.getenv("LLMLIMIT_TOKEN")
if token and token ~= "" then wrk.headers["Authorization"] = "Bearer " .. token end

function request()
  counter = counter + 1
  return wrk.format(nil, nil, nil, '{"lease_id":"wrk' .. run .. "-" .. counter .. tail)
end
