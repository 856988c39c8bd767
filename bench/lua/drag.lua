-- Workload 1: POST /sessions/{id}/drag alternating two detents.
-- Each request picks a random session of this thread's partition (see common.lua: pick) and
-- asks for the detent it is NOT at ({"to":"medium"} from large, {"to":"large"} from medium), so
-- every drag changes state (one detentChanged event), never a no-op.
-- wrk -s drag.lua URL -- SESSION_FILE NTHREADS
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/") or ".") .. "/common.lua")

alternating_workload('{"to":"medium"}', '{"to":"large"}')
