-- wrk script: GET the URL on the command line; with WRK_GAP_MS=N in the environment, each
-- connection waits N ms between an answer and its next request (wrk's delay()), so that the load
-- is about connections × 1000 / (N + latency) a second whatever the server.
--
--   WRK_GAP_MS=10 wrk -t1 -c32 -d10s -s bench/wrk_paced.lua http://127.0.0.1:PORT/path

local gap = tonumber(os.getenv("WRK_GAP_MS") or "")
if gap and gap > 0 then
   function delay()
      return gap
   end
end
