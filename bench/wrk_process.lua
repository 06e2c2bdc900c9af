-- wrk script: POST push payloads to PushMedia's /v1/process.
--
--   wrk -t1 -c64 -d30s --latency --timeout 120s -s bench/wrk_process.lua http://127.0.0.1:PORT -- MODE URLS_FILE [BUDGET_MS]
--
-- WRK_GAP_MS=N in the environment: each connection waits N ms between an answer and its next
-- request (wrk's delay()), so that the load is about connections × 1000 / (N + latency) a second
-- whatever the server.
--
-- MODE hit:  cycles through the media URLs in URLS_FILE (one per line), which the caller has
--            already processed once, so every request is a cache hit.
-- MODE same: like hit, but the payload text does not change between requests either: one
--            campaign's payload sent for every device (answered from the hook's memo of
--            repeated bodies once its media is cached).
-- MODE miss: every request names a media URL never seen before (URLS_FILE's URLs in turn, each
--            with a distinct query string "?miss=<thread>-<n>"), so every request is a cache
--            miss: fetch, sniff, transcode, store.
-- done() prints one line "WRK_JSON {...}" with the totals, errors, latency percentiles (µs) and
-- the outcomes seen (X-PushMedia-Outcome header; cache hits counted from the body).

local threads = {}
local counter = 0

function setup(thread)
   table.insert(threads, thread)
   thread:set("tid", #threads)
end

local urls = {}
local mode = "hit"
local budget = "60000"
local tid = 0
outcomes = {}
cache_hits = 0
non2xx = 0

function init(args)
   mode = args[1] or "hit"
   local file = assert(io.open(args[2], "r"))
   for line in file:lines() do
      if #line > 0 then table.insert(urls, line) end
   end
   file:close()
   budget = args[3] or budget
   tid = wrk.thread:get("tid")
   counter = tid * 7919  -- threads start at different URLs
end

local headers = { ["Content-Type"] = "application/json" }

-- WRK_GAP_MS: bench/wrk_paced.lua's delay(), beside this file.
dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "wrk_paced.lua")

function request()
   counter = counter + 1
   local url = urls[(counter % #urls) + 1]
   if mode == "miss" then
      url = url .. "?miss=" .. tid .. "-" .. counter
   end
   local text = "Item " .. counter
   if mode == "same" then text = "Item" end
   local body = '{"aps":{"alert":{"title":"Bench","body":"' .. text .. '"},"mutable-content":1},"media_url":"' .. url .. '"}'
   return wrk.format("POST", "/v1/process?budget_ms=" .. budget, headers, body)
end

function response(status, hdrs, body)
   local outcome = "none"
   for k, v in pairs(hdrs) do
      if string.lower(k) == "x-pushmedia-outcome" then outcome = v end
   end
   if status < 200 or status > 299 then
      non2xx = non2xx + 1
      outcome = "http_" .. status
   end
   outcomes[outcome] = (outcomes[outcome] or 0) + 1
   if body and string.find(body, '"cache_hit":true', 1, true) then
      cache_hits = cache_hits + 1
   end
end

function done(summary, latency, requests)
   local all = {}
   local hits = 0
   local bad = 0
   for _, t in ipairs(threads) do
      local o = t:get("outcomes")
      for k, v in pairs(o) do all[k] = (all[k] or 0) + v end
      hits = hits + t:get("cache_hits")
      bad = bad + t:get("non2xx")
   end
   local parts = {}
   for k, v in pairs(all) do table.insert(parts, string.format('"%s":%d', k, v)) end
   local e = summary.errors
   io.write(string.format(
      'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},"non2xx":%d,' ..
      '"latency_us":{"min":%d,"mean":%.1f,"max":%d,"stdev":%.1f,"p50":%d,"p90":%d,"p99":%d,"p999":%d},' ..
      '"cache_hits":%d,"outcomes":{%s}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout, bad,
      latency.min, latency.mean, latency.max, latency.stdev,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
      hits, table.concat(parts, ",")))
end
