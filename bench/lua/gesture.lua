-- Workload 4: a gesture drag, POST /sessions/{id}/drag {"translation":T,"velocity":0}.
-- With the benchmark's sessions (detents medium and large, container 844: heights 422 and 844)
-- T=+400 from large releases at 444 and settles at medium; T=-400 from medium releases at 822
-- and settles at large. So the gesture alternates like the plain drag, and every request goes
-- through the projection, the nearest-candidate search and a real state change.
-- Sending +400 to a session resting at medium would release at 22 and CLOSE it (dismissing it:
-- later drags would answer 409), so the script must know where each session rests: it shares
-- the session file with drag.lua and never has two requests in flight for one session (pick()).
-- wrk -s gesture.lua URL -- SESSION_FILE NTHREADS
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/") or ".") .. "/common.lua")

alternating_workload('{"translation":400,"velocity":0}', '{"translation":-400,"velocity":0}')
