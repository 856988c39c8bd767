-- Workload 2: GET /sessions/{id} over random sessions of this thread's partition.
-- wrk -s get.lua URL -- SESSION_FILE NTHREADS
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/") or ".") .. "/common.lua")

reqs = {}

function init(args)
   load_sessions(args)
   for i = 1, n do
      reqs[i] = wrk.format("GET", "/sessions/" .. ids[i], {})
   end
end

function request()
   return reqs[pick()]
end

function done(summary, latency, requests)
   report(summary, latency)
end
