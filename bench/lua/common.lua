-- Shared by the workload scripts (drag, gesture, get, create, fill); loaded with dofile.
--
-- wrk runs one Lua state per thread plus a main one: setup(thread) runs in the main state once
-- per thread (before that thread's init), init(args) in the thread's state, request() in the
-- thread's state, done() in the main state after every thread stopped.
--
-- Script arguments (after "--" on wrk's command line):
--   args[1]  session file: one "ID DETENT" per line (DETENT = large|medium), as bench.py writes it
--   args[2]  number of wrk threads (sessions are partitioned: thread k takes lines k, k+n, ...,
--            so no two threads ever touch the same session)
--   args[3…] workload specific
--
-- Every script prints one line "BENCH_RESULT {json}" from done(): requests, duration, errors
-- and latency percentiles in microseconds (wrk's --latency stops at p99; p99.9 is here).

threads = {}

function setup(thread)
   thread:set("tid", #threads)
   -- wrk calls request() once on thread 0 before it starts, only to check the request parses
   -- (script_verify_request); that request is never sent, so it must not move tracked state.
   thread:set("verify_pending", #threads == 0)
   table.insert(threads, thread)
end

-- Thread state ---------------------------------------------------------------------------------
ids = {}        -- session ids of this thread's partition
large = {}      -- large[i] == true when session i rests at "large" (what we last asked for)
n = 0
head = 0        -- ring of session indices (see pick)
ring = {}
session_file = nil
json_headers = { ["Content-Type"] = "application/json" }

function load_sessions(args)
   session_file = args[1]
   local nthreads = tonumber(args[2]) or 1
   if not session_file then error("session file argument missing") end
   local f = assert(io.open(session_file, "r"))
   local line_no = 0
   for line in f:lines() do
      local id, detent = line:match("^(%S+)%s+(%S+)")
      if id then
         if line_no % nthreads == tid then
            n = n + 1
            ids[n] = id
            large[n] = (detent ~= "medium")
         end
         line_no = line_no + 1
      end
   end
   f:close()
   if n == 0 then error("no sessions for thread " .. tid .. " in " .. session_file) end
   for i = 1, n do ring[i] = i end
   math.randomseed(os.time() * 1000 + tid * 7919 + n)
   -- shuffle once so threads and runs start at different places
   for i = n, 2, -1 do
      local j = math.random(i)
      ring[i], ring[j] = ring[j], ring[i]
   end
end

-- A random session among the half least recently used: the ring holds every session index; the
-- head slot is swapped with a random slot in the first half, taken, and stays behind as the
-- tail. A session is picked again only after at least n/2 other picks of this thread, far more
-- than the requests this thread can have in flight, so two requests for one session are never
-- in flight together and the server sees them in the order they were sent (a drag that
-- alternates needs that: a reordered pair would leave the session where we do not expect it).
function pick()
   local window = math.floor(n / 2)
   if window < 1 then window = 1 end
   local r = math.random(0, window - 1)
   local a = head + 1
   local b = ((head + r) % n) + 1
   ring[a], ring[b] = ring[b], ring[a]
   local s = ring[a]
   head = (head + 1) % n
   return s
end

-- Main state -----------------------------------------------------------------------------------
local function num(x) return string.format("%.3f", x) end

function report(summary, latency)
   local e = summary.errors
   local parts = {
      '"requests":' .. summary.requests,
      '"duration_us":' .. summary.duration,
      '"bytes":' .. summary.bytes,
      '"errors":{"connect":' .. e.connect .. ',"read":' .. e.read .. ',"write":' .. e.write ..
         ',"status":' .. e.status .. ',"timeout":' .. e.timeout .. '}',
      '"latency_us":{"min":' .. num(latency.min) .. ',"mean":' .. num(latency.mean) ..
         ',"p50":' .. num(latency:percentile(50)) .. ',"p90":' .. num(latency:percentile(90)) ..
         ',"p99":' .. num(latency:percentile(99)) .. ',"p99.9":' .. num(latency:percentile(99.9)) ..
         ',"max":' .. num(latency.max) .. '}',
   }
   io.write("BENCH_RESULT {" .. table.concat(parts, ",") .. "}\n")
   io.flush()
end

-- Write back where each session rests, so the next run (and the next workload) alternates from
-- the right side. Requests still in flight when wrk stopped were sent, so the server applies
-- them: what we last sent is where the session is.
function save_sessions()
   if #threads == 0 then return end
   local path = threads[1]:get("session_file")
   local tmp = path .. ".tmp"
   local f = assert(io.open(tmp, "w"))
   for _, t in ipairs(threads) do
      local tids = t:get("ids")
      local tlarge = t:get("large")
      for i = 1, #tids do
         f:write(tids[i], " ", tlarge[i] and "large" or "medium", "\n")
      end
   end
   f:close()
   assert(os.rename(tmp, path))
end

-- A workload that moves each session between its two detents: `down` from large to medium,
-- `up` from medium to large (drag.lua sends {"to"}, gesture.lua a released gesture). Defines
-- wrk's init/request/done. Sessions never have two requests in flight (pick), so the side each
-- one rests on is known, and every request changes state.
function alternating_workload(down_body, up_body)
   local down, up = {}, {}

   function init(args)
      load_sessions(args)
      for i = 1, n do
         local path = "/sessions/" .. ids[i] .. "/drag"
         down[i] = wrk.format("POST", path, json_headers, down_body)
         up[i] = wrk.format("POST", path, json_headers, up_body)
      end
   end

   function request()
      if verify_pending then
         verify_pending = false
         return down[1]
      end
      local s = pick()
      if large[s] then
         large[s] = false
         return down[s]
      else
         large[s] = true
         return up[s]
      end
   end

   function done(summary, latency, requests)
      report(summary, latency)
      save_sessions()
   end
end
