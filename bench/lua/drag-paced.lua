-- Workload 1, paced: drag.lua, but each connection waits a random 0 to 2 × PACE_MS
-- milliseconds (mean PACE_MS) between an answer and its next request (wrk's delay()). Both
-- servers then see about the same offered load, 64 / (PACE_MS + latency) requests per second,
-- well below either one's capacity, so p99 is the tail a server adds to a request, not the queue
-- a saturated closed loop builds. The pause is random because wrk's timers tick in whole
-- milliseconds: a fixed pause would fire all of a thread's connections in the same tick, a burst
-- of 32 requests whose last one waits for the 31 before it.
-- wrk -s drag-paced.lua URL -- SESSION_FILE NTHREADS PACE_MS
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/") or ".") .. "/common.lua")

alternating_workload('{"to":"medium"}', '{"to":"large"}')

local alternating_init = init
pace_ms = 2

function init(args)
   alternating_init(args)
   pace_ms = tonumber(args[3]) or pace_ms
end

function delay()
   return math.random(0, 2 * pace_ms)
end
