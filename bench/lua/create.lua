-- Workload 3: POST /sessions {"detents":["medium","large"]}. Every request creates a session.
-- wrk -s create.lua URL
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/") or ".") .. "/common.lua")

function init(args)
   req = wrk.format("POST", "/sessions", json_headers, '{"detents":["medium","large"]}')
end

function request()
   return req
end

function done(summary, latency, requests)
   report(summary, latency)
end
