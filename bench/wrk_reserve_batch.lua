-- wrk script: POST /v1/reserve/batch with BENCH_BATCH reserves per request
-- (default 64), each with the requirements of BENCH_KEYS/BENCH_AMOUNTS and a
-- lease id unique to each reserve. Reservations per second = requests per
-- second x BENCH_BATCH.
--   BENCH_KEYS=k1,k2 BENCH_AMOUNTS=1,500 BENCH_BATCH=64 \
--     wrk -t1 -c50 -d10s -s bench/wrk_reserve_batch.lua URL
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
local batch = tonumber(os.getenv("BENCH_BATCH") or "64")
local run = string.format("%08x", math.random(0, 0x7fffffff))
local counter = 0

wrk.method = "POST"
wrk.path = "/v1/reserve/batch"
wrk.headers["Content-Type"] = "application/json"
local token = os.getenv("LLMLIMIT_TOKEN")
if token and token ~= "" then wrk.headers["Authorization"] = "Bearer " .. token end

function setup(thread)
  thread:set("id", tostring(thread))
end

function request()
  local parts = {}
  for i = 1, batch do
    counter = counter + 1
    parts[i] = '{"lease_id":"wrkb' .. run .. "-" .. counter .. tail
  end
  return wrk.format(nil, nil, nil, '{"requests":[' .. table.concat(parts, ",") .. "]}")
end
