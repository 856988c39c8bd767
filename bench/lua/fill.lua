-- Memory phase: create exactly QUOTA sessions per wrk thread, as fast as the server takes them.
-- wrk has no request-count limit, so each thread counts what it sent: after QUOTA creates it
-- sends only GET /healthz (creates nothing), writes MARKER_DIR/done.<tid> once, and bench.py,
-- seeing one marker per thread, stops wrk with SIGINT. Counting on the sending side is exact:
-- a create that was sent is applied by the server even if wrk stops before reading its answer.
-- wrk -s fill.lua URL -- QUOTA_PER_THREAD MARKER_DIR
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/") or ".") .. "/common.lua")

sent = 0
marked = false

function init(args)
   quota = tonumber(args[1])
   marker_dir = args[2]
   create = wrk.format("POST", "/sessions", json_headers, '{"detents":["medium","large"]}')
   health = wrk.format("GET", "/healthz", {})
end

function request()
   if verify_pending then
      verify_pending = false
      return create
   end
   if sent < quota then
      sent = sent + 1
      return create
   end
   if not marked then
      marked = true
      local f = io.open(marker_dir .. "/done." .. tid, "w")
      f:write(sent, "\n")
      f:close()
   end
   return health
end

function done(summary, latency, requests)
   report(summary, latency)
end
