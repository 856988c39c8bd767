-- Workload 1: POST /sessions/{id}/drag alternating two detents.
-- Each request picks a random session of this thread's partition (see common.lua: pick) and
-- asks for the detent it is NOT at ({"to":"medium"} from large, {"to":"large"} from medium), so
-- every drag changes state (one detentChanged event), never a no-op.
-- wrk -s drag.lua URL -- SESSION_FILE NTHREADS
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/") or ".") .. "/common.lua")

to_medium = {}
to_large = {}

function init(args)
   load_sessions(args)
   for i = 1, n do
      local path = "/sessions/" .. ids[i] .. "/drag"
      to_medium[i] = wrk.format("POST", path, json_headers, '{"to":"medium"}')
      to_large[i] = wrk.format("POST", path, json_headers, '{"to":"large"}')
   end
end

function request()
   if verify_pending then
      verify_pending = false
      return to_medium[1]
   end
   local s = pick()
   if large[s] then
      large[s] = false
      return to_medium[s]
   else
      large[s] = true
      return to_large[s]
   end
end

function done(summary, latency, requests)
   report(summary, latency)
   save_sessions()
end
