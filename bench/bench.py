#!/usr/bin/env python3
"""sheetd benchmark: sheetd against a bare libmicrohttpd baseline, A B A B.

Run through bench/run (which builds both binaries); configuration comes from the environment:

  BENCH_SECONDS=6         length of each measured wrk run
  BENCH_ROUNDS=5          A B rounds per workload (medians over rounds; more, shorter rounds
                          pair A and B better when other jobs come and go on the machine)
  BENCH_WARMUP=2          seconds of unmeasured warm-up per server and workload
  BENCH_THREADS=2         server threads: sheetd --threads and the baseline's pool
  BENCH_CONNECTIONS=64    connections of the "c64" workloads (wrk -t2)
  BENCH_PACE_MS=2         drag-c64-paced: mean milliseconds each connection waits between an
                          answer and its next request (uniform 0 to 2 × this)
  BENCH_SESSIONS=10000    pre-created sessions the drag/get/gesture workloads spread over
  BENCH_WORKLOADS=drag-c1,drag-c64,drag-c64-paced,gesture-c64,get-c64,create-c64   (subset allowed)
  BENCH_MEMORY=1          run the memory phase (0: skip)
  BENCH_MEMORY_SESSIONS=100000,1000000   session counts at which RSS is read
  BENCH_DURABLE=auto      durable (--data-dir) vs --memory drag comparison: auto = when
                          `sheetd --help` mentions --data-dir; 1 = always; 0 = never
  BENCH_CALIBRATE=1       after drag-c64, run it again as "baseline + burn" (the baseline with
                          --burn-ns = sheetd's median extra user CPU µs per drag) against the
                          baseline: how much of the gap CPU per request alone explains (0: skip)
  BENCH_CALIBRATE_BURN_US=  burn this many µs per request instead of the measured gap (to test
                          the phase, e.g. in --self-test where the gap is ~0; 0 skips it)
  BENCH_LOG_LEVEL=        value for sheetd --log-level (default: the quietest level its --help
                          names, when it has the flag)
  BENCH_SHEETD_ARGS=      extra sheetd arguments (split on spaces)
  BENCH_MAX_SESSIONS=10000000   --max-sessions of the sheetd that serves the workloads
  BENCH_RESTART_SESSIONS=1000000   the restart phase: a durable sheetd filled with this many
                          sessions over HTTP, stopped and started again: time to the first
                          answer, time until every session is served, VmRSS before and after (0: skip)
  BENCH_CALLGRIND=1       instructions per drag under callgrind, sheetd against the baseline
                          (bench/callgrind.py; needs valgrind; 0: skip)
  BENCH_MEMORY_LIMIT=12288   the baseline's connection memory: sheetd's (HTTPServerConfiguration)
  BENCH_SELFTEST=1        no sheetd: the baseline plays both sides (tests the harness)
  BENCH_RESULTS=bench/RESULTS.md   (a self-test's default: bench/out/selftest/RESULTS.md)

Every figure comes from wrk (a done() callback prints percentiles incl. p99.9) and from
/proc/PID/stat (server CPU) and /proc/PID/status (VmRSS).
"""
import datetime
import http.client
import json
import os
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
LUA = os.path.join(HERE, "lua")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


SECONDS = env_int("BENCH_SECONDS", 6)
ROUNDS = env_int("BENCH_ROUNDS", 5)
WARMUP = env_int("BENCH_WARMUP", 2)
THREADS = env_int("BENCH_THREADS", 2)
CONNS = env_int("BENCH_CONNECTIONS", 64)
PACE_MS = env_int("BENCH_PACE_MS", 2)
NSESSIONS = env_int("BENCH_SESSIONS", 10000)
MAX_SESSIONS = env_int("BENCH_MAX_SESSIONS", 10_000_000)
SELFTEST = os.environ.get("BENCH_SELFTEST", "0") == "1"
RESTART_SESSIONS = env_int("BENCH_RESTART_SESSIONS", 1_000_000)
RUN_CALLGRIND = os.environ.get("BENCH_CALLGRIND", "1") != "0"
MEMORY_LIMIT = env_int("BENCH_MEMORY_LIMIT", 12 * 1024)
# sheetd gives its heap's free memory back every 10 s (HeapTrimming, Sources/sheetd/main.swift).
# An idle RSS is read once that has certainly run since the last request: read sooner, it fell
# at a random point of the cycle (the same code measured 380 and 420 B per durable session).
IDLE_SETTLE_S = 11
DURABLE = os.environ.get("BENCH_DURABLE", "auto").strip().lower() or "auto"
RUN_MEMORY = os.environ.get("BENCH_MEMORY", "1") != "0"
CALIBRATE = os.environ.get("BENCH_CALIBRATE", "1") != "0"
CALIBRATE_BURN_US = os.environ.get("BENCH_CALIBRATE_BURN_US", "").strip()
CALIBRATE_BURN_US = float(CALIBRATE_BURN_US) if CALIBRATE_BURN_US else None
MEMORY_COUNTS = [int(x) for x in os.environ.get("BENCH_MEMORY_SESSIONS", "100000,1000000").split(",") if x.strip()]
# A self-test writes apart from the committed figures (RESULTS.md, results.png) and the raw
# results.json of the last real run, which its figures would otherwise replace.
SELFTEST_OUT = os.path.join(OUT, "selftest")
RESULTS = os.environ.get("BENCH_RESULTS", os.path.join(SELFTEST_OUT if SELFTEST else HERE, "RESULTS.md"))
RESULTS_JSON = os.path.join(SELFTEST_OUT if SELFTEST else OUT, "results.json")
# Beside the results file, which links it by that name: a run with BENCH_RESULTS elsewhere (a
# partial one, say) leaves the committed picture alone.
PNG = os.path.join(os.path.dirname(os.path.abspath(RESULTS)), "results.png")
# Absolute: callgrind.py starts the servers in a directory of their own.
SHEETD = os.path.abspath(os.environ.get("BENCH_SHEETD", os.path.join(ROOT, ".build", "release", "sheetd")))
BASELINE = os.path.abspath(os.environ.get("BENCH_BASELINE", os.path.join(HERE, "baseline-server")))
SELFTEST_SIZES = (env_int("BENCH_BODY_SIZE", 480), env_int("BENCH_GET_SIZE", 390), env_int("BENCH_CREATE_SIZE", 390))

ALL_WORKLOADS = {
    # name: (script, connections, wrk threads, stateful, description[, extra script arguments])
    "drag-c1": ("drag.lua", 1, 1, True, "POST /sessions/{id}/drag {\"to\"} alternating medium/large, 1 connection"),
    "drag-c64": ("drag.lua", CONNS, 2, True, f"POST /sessions/{{id}}/drag {{\"to\"}} alternating medium/large, {CONNS} connections"),
    "drag-c64-paced": ("drag-paced.lua", CONNS, 2, True,
                       f"drag-c64, paced: each of the {CONNS} connections waits a random 0 to {2 * PACE_MS} ms between an answer "
                       f"and its next request, so both servers get about the same load, far below saturation (p99 = the tail a "
                       f"server adds, not the queue of a saturated closed loop)", (PACE_MS,)),
    "gesture-c64": ("gesture.lua", CONNS, 2, True, f"POST /sessions/{{id}}/drag {{\"translation\":±400,\"velocity\":0}}, {CONNS} connections"),
    "get-c64": ("get.lua", CONNS, 2, False, f"GET /sessions/{{id}}, {CONNS} connections"),
    "create-c64": ("create.lua", CONNS, 2, False, f"POST /sessions {{\"detents\":[\"medium\",\"large\"]}}, {CONNS} connections"),
}
WORKLOADS = [w.strip() for w in os.environ.get("BENCH_WORKLOADS", ",".join(ALL_WORKLOADS)).split(",") if w.strip()]
for w in WORKLOADS:
    if w not in ALL_WORKLOADS:
        sys.exit(f"bench: unknown workload {w!r} (known: {', '.join(ALL_WORKLOADS)})")

CREATE_BODY = b'{"detents":["medium","large"]}'
ID_RE = re.compile(r"^[A-Za-z0-9_-]{22}$")
commands = []  # every server and wrk command line, for RESULTS.md


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Servers
def stat_cpu_ticks(path):
    """(user, system) CPU ticks from a `/proc/.../stat` file: fields 14 and 15, counted after the
    command name, which may itself hold spaces and parentheses."""
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


class Server:
    def __init__(self, name, argv, cwd=None, env=None):
        self.name, self.argv, self.cwd = name, argv, cwd
        self.env = env  # variables added to the server's environment (LD_PRELOAD in bench/ab.py)
        self.proc = None
        self.port = None
        self.logpath = os.path.join(OUT, f"{name}.stderr.log")
        self.first_lines = ""

    def start(self, timeout=60):
        added = "".join(f"{k}={shlex.quote(v)} " for k, v in (self.env or {}).items())
        commands.append(f"{self.name}: {added}{shlex.join(self.argv)}")
        self.logf = open(self.logpath, "ab")
        self.logf.truncate(0)
        self.proc = subprocess.Popen(self.argv, stdout=self.logf, stderr=self.logf,
                                     stdin=subprocess.DEVNULL, cwd=self.cwd,
                                     env={**os.environ, **self.env} if self.env else None)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.logpath, "rb") as f:
                head = f.read(65536).decode("utf-8", "replace")
            m = re.search(r"listening on https?://[^\s:/]+:(\d+)", head)
            if m:
                self.port = int(m.group(1))
                self.first_lines = head[: m.end()]
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} before listening:\n{head[-2000:]}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not log 'listening on http://HOST:PORT' within {timeout}s")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self):
        if not self.alive():
            raise RuntimeError(f"{self.name} died (exit {self.proc.returncode}); stderr tail:\n{self.tail()}")

    def tail(self, n=4000):
        try:
            with open(self.logpath, "rb") as f:
                f.seek(max(0, os.path.getsize(self.logpath) - n))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def trim_log(self, limit=64 << 20):
        # A request log on stderr would fill the disk over a run: keep it bounded (the file is
        # opened O_APPEND, so the server keeps writing at the new end).
        try:
            if os.path.getsize(self.logpath) > limit:
                os.truncate(self.logpath, 0)
        except OSError:
            pass

    def log_bytes(self):
        try:
            return os.path.getsize(self.logpath)
        except OSError:
            return 0

    def cpu_ticks(self):
        """(user, system) CPU ticks of the server so far."""
        return stat_cpu_ticks(f"/proc/{self.proc.pid}/stat")

    def thread_ticks(self):
        """CPU ticks (user + system) so far by thread name (`/proc/PID/task/*/comm`): threads
        that share a name (libmicrohttpd's workers) are summed; a thread that ended meanwhile is
        missing from the later reading, so only the difference of two readings is meaningful."""
        ticks = {}
        base = f"/proc/{self.proc.pid}/task"
        try:
            tids = os.listdir(base)
        except OSError:
            return ticks
        for tid in tids:
            try:
                with open(f"{base}/{tid}/comm") as f:
                    name = f.read().strip()
                user, system = stat_cpu_ticks(f"{base}/{tid}/stat")
            except OSError:
                continue   # the thread ended between the listing and the reading
            ticks[name] = ticks.get(name, 0) + user + system
        return ticks

    def context_switches(self):
        """(voluntary, involuntary) context switches so far, summed over the server's threads
        (`/proc/PID/task/*/status`). Involuntary ones are the scheduler preempting a thread that
        still had work, which leaves it to find its caches refilled by whatever ran meanwhile. A
        thread that ended meanwhile is missing from the later reading, as in `thread_ticks`."""
        voluntary = involuntary = 0
        base = f"/proc/{self.proc.pid}/task"
        try:
            tids = os.listdir(base)
        except OSError:
            return voluntary, involuntary
        for tid in tids:
            try:
                with open(f"{base}/{tid}/status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches:"):
                            voluntary += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches:"):
                            involuntary += int(line.split()[1])
            except OSError:
                continue   # the thread ended between the listing and the reading
        return voluntary, involuntary

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                log(f"bench: {self.name} ignored SIGTERM for 20 s; killing it")
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "logf", None):
            self.logf.close()
            self.logf = None


def sheetd_help():
    try:
        p = subprocess.run([SHEETD, "--help"], capture_output=True, text=True, timeout=20)
        return p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired):
        return ""


def quiet_level(help_text):
    if os.environ.get("BENCH_LOG_LEVEL"):
        return os.environ["BENCH_LOG_LEVEL"]
    if "--log-level" not in help_text:
        return None
    # The quietest level the help names, from the usual vocabularies, looking only at the
    # option's own description (its line and the indented lines up to the next option).
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if "--log-level" in line)
    own = [lines[start][lines[start].index("--log-level"):]]
    for line in lines[start + 1:]:
        if not line.strip() or line.lstrip().startswith("-"):
            break
        own.append(line)
    around = " ".join(own).lower()
    for level in ("none", "off", "silent", "critical", "error", "warning", "warn"):
        if re.search(r"\b" + level + r"\b", around):
            return level
    return "error"


def sheetd_argv(help_text, *, data_dir=None, max_sessions=MAX_SESSIONS):
    argv = [SHEETD, "--host", "127.0.0.1", "--port", "0", "--threads", str(THREADS)]
    if data_dir:
        argv += ["--data-dir", data_dir]
    elif "--memory" in help_text or not help_text:
        argv += ["--memory"]
    argv += ["--max-sessions", str(max_sessions)]
    level = quiet_level(help_text)
    if level:
        argv += ["--log-level", level]
    argv += shlex.split(os.environ.get("BENCH_SHEETD_ARGS", ""))
    return argv


# The baseline's arguments to make each drag's response the way sheetd does (its own response
# object, a copy of the body, sheetd's four header fields): what libmicrohttpd charges for a
# response per request, which the target's baseline, sharing one answer, never pays.
FRESH_ANSWERS_ARGS = ["--fresh-answers", "1"]


def baseline_argv(sizes):
    body, get, create = sizes
    return [BASELINE, "--host", "127.0.0.1", "--port", "0", "--threads", str(THREADS),
            "--body-size", str(body), "--get-size", str(get), "--create-size", str(create),
            "--memory-limit", str(MEMORY_LIMIT)]


# ---------------------------------------------------------------------------------------------
# HTTP helpers (stdlib, keep-alive)
def request(conn, method, path, body=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    return r.status, data, r


def create_sessions(server, count, workers=8):
    """POST /sessions `count` times over `workers` keep-alive connections; returns [(id, detent)]."""
    results = [None] * count
    errors = []

    def work(k):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            for i in range(k, count, workers):
                status, data, _ = request(conn, "POST", "/sessions", CREATE_BODY)
                if status != 201:
                    errors.append(f"POST /sessions -> {status}: {data[:200]!r}")
                    return
                doc = json.loads(data)
                sid = doc.get("id")
                if not isinstance(sid, str) or not ID_RE.match(sid):
                    errors.append(f"POST /sessions answered no 22-char base64url id: {data[:200]!r}")
                    return
                results[i] = (sid, doc.get("detent") or "large")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"POST /sessions failed: {e!r}")
        finally:
            conn.close()

    ts = [threading.Thread(target=work, args=(k,)) for k in range(workers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(f"creating sessions on {server.name}: {errors[0]}")
    ids = [r[0] for r in results]
    if len(set(ids)) != len(ids):
        raise RuntimeError(f"{server.name} gave duplicate session ids")
    return results


def write_sessions(path, sessions):
    with open(path, "w") as f:
        for sid, detent in sessions:
            f.write(f"{sid} {detent}\n")


def probe_sizes(server):
    """Sizes of sheetd's real answers, for the baseline: (drag, get, create), plus samples."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    s, create, _ = request(conn, "POST", "/sessions", CREATE_BODY)
    if s != 201:
        raise RuntimeError(f"probe: POST /sessions -> {s}: {create[:300]!r}")
    doc = json.loads(create)
    sid, detent = doc["id"], doc.get("detent")
    if detent != "large" and not SELFTEST:
        raise RuntimeError(f"probe: a new session with detents medium,large rests at {detent!r}, the harness expects 'large'")
    s, get, _ = request(conn, "GET", f"/sessions/{sid}")
    if s != 200:
        raise RuntimeError(f"probe: GET /sessions/{{id}} -> {s}: {get[:300]!r}")
    s, drag, _ = request(conn, "POST", f"/sessions/{sid}/drag", b'{"to":"medium"}')
    if s != 200:
        raise RuntimeError(f"probe: drag to medium -> {s}: {drag[:300]!r}")
    d = json.loads(drag)
    if not SELFTEST and (d.get("session", {}).get("detent") != "medium" or not d.get("events")):
        raise RuntimeError(f"probe: drag to medium did not move the sheet: {drag[:300]!r}")
    s, drag_back, _ = request(conn, "POST", f"/sessions/{sid}/drag", b'{"to":"large"}')
    s2, gesture, _ = request(conn, "POST", f"/sessions/{sid}/drag", b'{"translation":400,"velocity":0}')
    s3, gesture_back, _ = request(conn, "POST", f"/sessions/{sid}/drag", b'{"translation":-400,"velocity":0}')
    gesture_ok = s2 == 200 and s3 == 200 and json.loads(gesture).get("session", {}).get("detent") == "medium" \
        and json.loads(gesture_back).get("session", {}).get("detent") == "large"
    conn.close()
    return {
        "drag": len(drag), "get": len(get), "create": len(create),
        "gesture": len(gesture) if s2 == 200 else None, "gesture_ok": gesture_ok,
        "gesture_answers": f"{s2} {gesture[:300]!r} / {s3} {gesture_back[:300]!r}",
        "sample_drag": drag.decode("utf-8", "replace"),
    }


def reconcile_sessions(server, path):
    """Reads every session back and rewrites the session file with where each one rests. A
    request wrk generated as it stopped may or may not have reached the server, so the script's
    idea of a few sessions' side can be wrong afterwards; left alone, a gesture sent to the
    wrong side closes its session and every later request on it is a 409. A closed session is
    presented again. Returns (sessions read, not where the file said, presented again)."""
    with open(path) as f:
        rows = [line.split() for line in f if line.strip()]
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    out, wrong, presented = [], 0, 0
    for sid, detent in rows:
        s, data, _ = request(conn, "GET", f"/sessions/{sid}")
        if s != 200:
            raise RuntimeError(f"reconcile: GET /sessions/{sid} on {server.name} -> {s}: {data[:200]!r}")
        doc = json.loads(data)
        if doc.get("phase") != "presented":
            s, data, _ = request(conn, "POST", f"/sessions/{sid}/present", b"{}")
            if s != 200:
                raise RuntimeError(f"reconcile: present {sid} on {server.name} -> {s}: {data[:200]!r}")
            doc = json.loads(data)["session"]
            presented += 1
        if doc.get("detent") != detent:
            wrong += 1
        out.append((sid, doc.get("detent")))
    conn.close()
    write_sessions(path, out)
    return len(rows), wrong, presented


# ---------------------------------------------------------------------------------------------
# wrk
def machine_busy_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)  # user nice system irq softirq steal


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_wrk(server, script, conns, wrk_threads, seconds, args, record=True):
    cmd = ["wrk", f"-t{wrk_threads}", f"-c{conns}", f"-d{seconds}s", "--latency", "--timeout", "10s",
           "-s", os.path.join(LUA, script), server.url, "--", *[str(a) for a in args]]
    if record:
        commands.append("wrk: " + shlex.join(cmd))
    server.trim_log()
    log0 = server.log_bytes()
    t0, c0 = server.thread_ticks(), server.context_switches()
    m0, w0, (u0, s0) = machine_busy_ticks(), children_cpu_s(), server.cpu_ticks()
    p = subprocess.run(cmd, capture_output=True, text=True)
    (u1, s1), w1, m1 = server.cpu_ticks(), children_cpu_s(), machine_busy_ticks()
    t1, c1 = server.thread_ticks(), server.context_switches()
    server.check_alive()
    m = re.search(r"^BENCH_RESULT (\{.*\})$", p.stdout, re.M)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"wrk failed ({p.returncode}): {shlex.join(cmd)}\n{p.stdout}\n{p.stderr}")
    r = json.loads(m.group(1))
    secs = r["duration_us"] / 1e6
    reqs = max(1, r["requests"])
    e = r["errors"]
    r["rps"] = r["requests"] / secs
    r["cpu_s"] = (u1 - u0 + s1 - s0) / CLK_TCK
    r["cpu_us_per_req"] = r["cpu_s"] * 1e6 / reqs
    r["user_us_per_req"] = (u1 - u0) / CLK_TCK * 1e6 / reqs
    # wrk's own CPU per request: on cores it shares with the server, it grows with the server's.
    r["wrk_us_per_req"] = (w1 - w0) * 1e6 / reqs
    # By thread name: which threads a durable drag's extra CPU runs on (request threads, the
    # archive's writer, its checkpointer). Threads that used nothing in the run are left out.
    r["thread_us_per_req"] = {name: (t1[name] - t0.get(name, 0)) / CLK_TCK * 1e6 / reqs
                              for name in t1 if t1[name] > t0.get(name, 0)}
    r["voluntary_switches_per_req"] = (c1[0] - c0[0]) / reqs
    r["involuntary_switches_per_req"] = (c1[1] - c0[1]) / reqs
    r["cpu_cores"] = r["cpu_s"] / secs
    r["wrk_cores"] = (w1 - w0) / secs
    # CPU the rest of the machine used meanwhile (other jobs): when it is not ~0 the round
    # competed for the cores and its figures say less.
    r["other_cores"] = max(0.0, (m1 - m0) / CLK_TCK - r["cpu_s"] - (w1 - w0)) / secs
    r["error_count"] = e["connect"] + e["read"] + e["write"] + e["status"] + e["timeout"]
    r["stderr_bytes_per_req"] = max(0, server.log_bytes() - log0) / reqs
    if p.stderr.strip():
        r["wrk_stderr"] = p.stderr.strip()[:500]
    return r


def fill(server, total, marker_dir, timeout=600):
    """Create exactly `total` sessions (wrk -t2 -c64 with fill.lua); returns wrk's result."""
    shutil.rmtree(marker_dir, ignore_errors=True)
    os.makedirs(marker_dir)
    wrk_threads = 2
    per = total // wrk_threads
    cmd = ["wrk", f"-t{wrk_threads}", "-c64", f"-d{timeout}s", "--timeout", "10s",
           "-s", os.path.join(LUA, "fill.lua"), server.url, "--", str(per), marker_dir]
    commands.append("wrk: " + shlex.join(cmd))
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while p.poll() is None:
        if len(os.listdir(marker_dir)) >= wrk_threads:
            break
        server.check_alive()
        time.sleep(0.05)
    elapsed = time.monotonic() - t0
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
    out, err = p.communicate()
    m = re.search(r"^BENCH_RESULT (\{.*\})$", out, re.M)
    r = json.loads(m.group(1)) if m else {"errors": {}, "requests": 0}
    r["created"] = per * wrk_threads if len(os.listdir(marker_dir)) >= wrk_threads else None
    r["seconds"] = elapsed
    r["error_count"] = sum(r.get("errors", {}).values())
    return r


# ---------------------------------------------------------------------------------------------
def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# The in-memory drag-c64 target: sheetd's req/s at least this share of the baseline's.
DRAG_TARGET = 0.75


def cores_split(w, side, nproc):
    """Medians over a workload's rounds of one side's CPU per request, the server's and wrk's, and
    the req/s that `nproc` cores (less other jobs') would give at their sum; None without wrk's CPU."""
    rounds = [r[side] for r in w.get("rounds", []) if r[side].get("wrk_us_per_req") is not None and r[side]["rps"] > 0]
    if not rounds:
        return None
    wrk = [x["wrk_us_per_req"] for x in rounds]
    sums = [x["cpu_us_per_req"] + y for x, y in zip(rounds, wrk)]
    return {"rps": median(x["rps"] for x in rounds),
            "server_us": median(x["cpu_us_per_req"] for x in rounds),
            "wrk_us": median(wrk),
            "sum_us": median(sums),
            "busy": median(x["cpu_cores"] + x["wrk_cores"] + x["other_cores"] for x in rounds),
            "predicted": median((nproc - x["other_cores"]) * 1e6 / t for x, t in zip(rounds, sums))}


def machine():
    def sh(cmd):
        try:
            return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60).stdout.strip()
        except Exception:  # noqa: BLE001
            return "?"
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {
        "nproc": sh("nproc"),
        "cpu": model,
        "memory": mem,
        "kernel": sh("uname -sr"),
        "os": sh(". /etc/os-release 2>/dev/null && echo \"$PRETTY_NAME\""),
        "libmicrohttpd": sh("pkg-config --modversion libmicrohttpd"),
        "swift": sh("swift --version 2>&1 | head -1") if not SELFTEST else "(not used: self-test)",
        "wrk": sh("wrk -v 2>&1 | head -1"),
        # The run's own outputs do not make the tree dirty: the scale-out phase reads this after
        # the main phase has rewritten both.
        "commit": sh(f"git -C {shlex.quote(ROOT)} rev-parse --short HEAD") + (" (dirty)" if sh(f"git -C {shlex.quote(ROOT)} status --porcelain -- . ':!bench/RESULTS.md' ':!bench/results.png'") else ""),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def fmt_rps(x):
    return "-" if x is None else f"{x:,.0f}"


def fmt_us(x):
    if x is None:
        return "-"
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.0f} µs"


def fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}×"


# ---------------------------------------------------------------------------------------------
def main():
    os.makedirs(OUT, exist_ok=True)
    started = time.monotonic()
    a_label = "sheetd" if not SELFTEST else "sheetd (stand-in: baseline)"
    servers = []
    results = {"workloads": {}, "memory": None, "durable": None, "calibration": None, "notes": [], "skipped": {}}
    help_text = "" if SELFTEST else sheetd_help()
    try:
        # --- A: sheetd (or the baseline standing in for it) -----------------------------------
        if SELFTEST:
            a = Server("sheetd", baseline_argv(SELFTEST_SIZES)).start()
        else:
            argv = sheetd_argv(help_text)
            try:
                a = Server("sheetd", argv).start()
            except RuntimeError as e:
                if "--log-level" not in argv:
                    raise
                # the guessed level was refused: run with sheetd's default logging instead
                i = argv.index("--log-level")
                results["notes"].append(f"sheetd refused --log-level {argv[i + 1]} ({str(e)[-200:]}); ran with its default logging")
                os.environ["BENCH_LOG_LEVEL"] = ""
                help_text = help_text.replace("--log-level", "--log_level_refused")
                a = Server("sheetd", sheetd_argv(help_text)).start()
        servers.append(a)
        log(f"bench: {a_label} listening on {a.url}")
        sizes = probe_sizes(a)
        results["sizes"] = sizes
        log(f"bench: answer sizes: drag {sizes['drag']} B, GET {sizes['get']} B, create {sizes['create']} B, gesture {sizes['gesture']} B")

        # --- B: the baseline, answering bodies of sheetd's sizes ------------------------------
        b = Server("baseline", baseline_argv((sizes["drag"], sizes["get"], sizes["create"]))).start()
        servers.append(b)
        log(f"bench: baseline listening on {b.url}")

        # --- sessions ---------------------------------------------------------------------
        session_files = {}
        for srv in (a, b):
            t0 = time.monotonic()
            sessions = create_sessions(srv, NSESSIONS)
            path = os.path.join(OUT, f"sessions.{srv.name}.txt")
            write_sessions(path, sessions)
            session_files[srv.name] = path
            log(f"bench: {NSESSIONS} sessions created on {srv.name} in {time.monotonic() - t0:.1f} s")
        real_a = not SELFTEST  # the state check needs real sessions

        durable_mode = DURABLE
        durable_supported = "--data-dir" in help_text
        run_durable = durable_mode in ("1", "yes", "true") or (durable_mode == "auto" and durable_supported)

        def run_workload(name, servers_ab, labels, files, key, check_state=True):
            script, conns, wrk_threads, stateful, desc, *extra = ALL_WORKLOADS[name]
            extra = list(extra[0]) if extra else []
            rounds = []
            reconciled = {"checked": 0, "mismatches": 0, "presented": 0}

            def reconcile(srv):
                # Only a sheetd keeps the sessions' state; a baseline answers whatever it is sent.
                if not (stateful and real_a and not srv.name.startswith("baseline")):
                    return
                checked, wrong, presented = reconcile_sessions(srv, files[srv.name])
                reconciled["checked"] += checked
                reconciled["mismatches"] += wrong
                reconciled["presented"] += presented

            log(f"bench: {key}: warm-up {WARMUP} s each")
            for srv in servers_ab:
                if WARMUP > 0:
                    run_wrk(srv, script, conns, wrk_threads, WARMUP, [files[srv.name], wrk_threads, *extra], record=False)
                    reconcile(srv)
            for rnd in range(ROUNDS):
                row = {}
                for srv, label in zip(servers_ab, ("a", "b")):
                    r = run_wrk(srv, script, conns, wrk_threads, SECONDS, [files[srv.name], wrk_threads, *extra], record=(rnd == 0))
                    reconcile(srv)
                    row[label] = r
                    log(f"bench: {key} round {rnd + 1} {labels[label]}: {r['rps']:,.0f} req/s, p99 {fmt_us(r['latency_us']['p99'])}, "
                        f"{r['cpu_us_per_req']:.1f} µs CPU/req, errors {r['error_count']}, other jobs {r['other_cores']:.2f} cores")
                row["ratio_rps"] = row["a"]["rps"] / row["b"]["rps"] if row["b"]["rps"] else None
                row["ratio_p99"] = row["a"]["latency_us"]["p99"] / row["b"]["latency_us"]["p99"] if row["b"]["latency_us"]["p99"] else None
                row["ratio_cpu"] = row["a"]["cpu_us_per_req"] / row["b"]["cpu_us_per_req"] if row["b"]["cpu_us_per_req"] else None
                rounds.append(row)
            summary = {"description": desc, "labels": labels, "rounds": rounds}
            for side in ("a", "b"):
                rs = [row[side] for row in rounds]
                summary[side] = {
                    "rps": median(r["rps"] for r in rs),
                    "p50": median(r["latency_us"]["p50"] for r in rs),
                    "p99": median(r["latency_us"]["p99"] for r in rs),
                    "p999": median(r["latency_us"]["p99.9"] for r in rs),
                    "cpu_us_per_req": median(r["cpu_us_per_req"] for r in rs),
                    "user_us_per_req": median(r["user_us_per_req"] for r in rs),
                    "cpu_cores": median(r["cpu_cores"] for r in rs),
                    "errors": sum(r["error_count"] for r in rs),
                    "stderr_bytes_per_req": median(r["stderr_bytes_per_req"] for r in rs),
                    "other_cores": median(r["other_cores"] for r in rs),
                    # Medians by thread name; a name missing from a round counts as 0 there.
                    "thread_us_per_req": {name: median(r["thread_us_per_req"].get(name, 0.0) for r in rs)
                                          for name in sorted({n for r in rs for n in r["thread_us_per_req"]})},
                }
            summary["ratio_rps"] = median(row["ratio_rps"] for row in rounds)
            summary["ratio_p99"] = median(row["ratio_p99"] for row in rounds)
            summary["ratio_cpu"] = median(row["ratio_cpu"] for row in rounds)
            if stateful and real_a and check_state and reconciled["checked"]:
                summary["state_check"] = reconciled
                if reconciled["presented"]:
                    log(f"bench: {key}: {reconciled['presented']} sessions had been closed by a request on the wrong side")
            return summary

        def drag_against(extra, other, labels, key, check_state=True):
            """drag-c64 with a third server (started, stopped here) as A against `other` as B; the
            extra server gets sessions of its own, like the others. `check_state`: A is a sheetd
            whose sessions can be read back."""
            servers.append(extra)
            try:
                t0 = time.monotonic()
                path = os.path.join(OUT, f"sessions.{extra.name}.txt")
                write_sessions(path, create_sessions(extra, NSESSIONS))
                log(f"bench: {NSESSIONS} sessions created on {extra.name} in {time.monotonic() - t0:.1f} s")
                files = dict(session_files)
                files[extra.name] = path
                return run_workload("drag-c64", (extra, other), labels, files, key, check_state)
            finally:
                extra.stop()
                servers.remove(extra)

        def run_durable_phase():
            data_dir = os.path.join(OUT, "durable-data")
            shutil.rmtree(data_dir, ignore_errors=True)
            os.makedirs(data_dir)
            if SELFTEST:
                d = Server("sheetd-durable", baseline_argv(SELFTEST_SIZES)).start()
            else:
                d = Server("sheetd-durable", sheetd_argv(help_text, data_dir=data_dir)).start()
            results["durable"] = drag_against(d, a, {"a": "sheetd --data-dir", "b": "sheetd --memory"}, "durable drag-c64")
            if "create-c64" in WORKLOADS:
                shutil.rmtree(data_dir, ignore_errors=True)
                os.makedirs(data_dir)
                dc = Server("sheetd-durable", d.argv).start()
                servers.append(dc)
                try:
                    results["durable_create"] = run_workload("create-c64", (dc, a), {"a": "sheetd --data-dir", "b": "sheetd --memory"},
                                                             {dc.name: session_files[a.name], a.name: session_files[a.name]},
                                                             "durable create-c64")
                finally:
                    dc.stop()
                    servers.remove(dc)

        def run_calibration_phase(d64):
            # sheetd's extra user-space CPU per drag, burnt in an arithmetic loop by the baseline
            # itself: how a C server doing that much more work per request does against the plain
            # baseline. (User time, not all CPU: the extra kernel time of a saturated server is an
            # effect of the work, and the burning server pays it as sheetd does.)
            gap_us = d64["a"]["user_us_per_req"] - d64["b"]["user_us_per_req"]
            burn_us = gap_us if CALIBRATE_BURN_US is None else CALIBRATE_BURN_US
            cal = {"gap_us": gap_us, "burn_us": burn_us, "burn_forced": CALIBRATE_BURN_US is not None}
            burn_ns = round(burn_us * 1000)
            if burn_ns <= 0:
                cal["skipped"] = (f"the median user CPU per drag-c64 request of {a_label} ({d64['a']['user_us_per_req']:.1f} µs) "
                                  f"is not above the baseline's ({d64['b']['user_us_per_req']:.1f} µs): nothing to burn"
                                  if CALIBRATE_BURN_US is None else f"BENCH_CALIBRATE_BURN_US={CALIBRATE_BURN_US:g}: nothing to burn")
                log("bench: calibration skipped: " + cal["skipped"])
                results["calibration"] = cal
                return
            cal["burn_us"] = burn_ns / 1000
            log(f"bench: calibration: the baseline burning {burn_ns} ns of user CPU per request (median user-CPU gap {gap_us:.2f} µs)")
            burn = Server("baseline-burn", b.argv + ["--burn-ns", str(burn_ns)]).start()
            cal.update(drag_against(burn, b, {"a": "baseline + burn", "b": "baseline"}, "calibration drag-c64", check_state=False))
            results["calibration"] = cal

        durable_done = not run_durable
        for name in WORKLOADS:
            if name == "create-c64" and not durable_done:
                # before create-c64, which grows the in-memory store the comparison runs against
                run_durable_phase()
                durable_done = True
            if name == "gesture-c64" and not SELFTEST and not sizes["gesture_ok"]:
                # A gesture that does not settle as the gesture rule says could close sessions (dismissed:
                # every later drag on them would be a 409), so it is not run at all.
                results["skipped"]["gesture-c64"] = "the probe gesture (+400 from large, -400 from medium) did not answer 200 " \
                    "with medium then large: " + sizes["gesture_answers"]
                log("bench: gesture-c64 skipped: " + results["skipped"]["gesture-c64"])
                continue
            results["workloads"][name] = run_workload(name, (a, b), {"a": a_label, "b": "baseline"}, session_files, name)
            if name == "drag-c64" and CALIBRATE:
                run_calibration_phase(results["workloads"][name])
        if not durable_done:
            run_durable_phase()
        if not run_durable and durable_mode == "auto":
            results["notes"].append("durable comparison skipped: `sheetd --help` does not mention --data-dir (BENCH_DURABLE=1 forces it)")

        for srv in list(servers):
            srv.stop()
            servers.remove(srv)

        # --- memory ---------------------------------------------------------------------
        if RUN_MEMORY and MEMORY_COUNTS:
            if SELFTEST:
                m = Server("sheetd-memory", baseline_argv(SELFTEST_SIZES)).start()
            else:
                m = Server("sheetd-memory", sheetd_argv(help_text, max_sessions=max(2_000_000, max(MEMORY_COUNTS)))).start()
            servers.append(m)
            conn = http.client.HTTPConnection("127.0.0.1", m.port, timeout=30)
            request(conn, "GET", "/healthz")
            conn.close()
            time.sleep(0.5)
            mem = {"rss0": m.rss_bytes(), "points": []}
            have = 0
            for target in sorted(MEMORY_COUNTS):
                fr = fill(m, target - have, os.path.join(OUT, "fill-markers"))
                if fr["created"] is None:
                    raise RuntimeError(f"memory phase: creating {target - have} sessions did not finish in time")
                have += fr["created"]
                time.sleep(IDLE_SETTLE_S)
                rss = m.rss_bytes()
                mem["points"].append({"sessions": have, "rss": rss, "seconds": fr["seconds"],
                                      "errors": fr["error_count"], "per_session": rss / have,
                                      "marginal_per_session": (rss - mem["rss0"]) / have})
                log(f"bench: memory: {have:,} sessions, VmRSS {rss / 2**20:.1f} MiB, {rss / have:.0f} B/session "
                    f"({fr['seconds']:.1f} s to create, errors {fr['error_count']})")
            results["memory"] = mem
            m.stop()
            servers.remove(m)
    finally:
        for srv in servers:
            srv.stop()

    if RESTART_SESSIONS > 0 and not SELFTEST and "--data-dir" in help_text:
        results["restart"] = restart_phase(help_text)
    if RUN_CALLGRIND and shutil.which("valgrind") and not SELFTEST:
        import callgrind
        sheetd_ir = callgrind.measure("sheetd", sheetd_argv(help_text))
        base_argv = baseline_argv((results["sizes"]["drag"], results["sizes"]["get"], results["sizes"]["create"]))
        base_ir = callgrind.measure("baseline", base_argv)
        fresh_ir = callgrind.measure("baseline-fresh", base_argv + FRESH_ANSWERS_ARGS)
        results["callgrind"] = {"sheetd": sheetd_ir, "baseline": base_ir, "baseline_fresh": fresh_ir,
                                "requests": callgrind.REQUESTS}
        log(f"bench: callgrind: {sheetd_ir:,.0f} instructions per drag for sheetd, {base_ir:,.0f} for the baseline, "
            f"{fresh_ir:,.0f} for the baseline making a response per drag")
    results["elapsed_s"] = time.monotonic() - started
    results["machine"] = machine()
    results["commands"] = commands
    os.makedirs(os.path.dirname(RESULTS_JSON), exist_ok=True)
    with open(RESULTS_JSON, "w") as f:
        json.dump(results, f, indent=1)
    png_error = plot(results, PNG)
    if png_error:
        results["notes"].append(f"{os.path.relpath(PNG, ROOT)} not drawn: " + png_error)
    text = report(results, a_label)
    print(text)
    os.makedirs(os.path.dirname(os.path.abspath(RESULTS)), exist_ok=True)
    with open(RESULTS, "w") as f:
        f.write(text)
    log(f"bench: wrote {os.path.relpath(RESULTS, ROOT)} and {os.path.relpath(RESULTS_JSON, ROOT)} in {results['elapsed_s']:.0f} s")


def restart_phase(help_text):
    """A durable sheetd filled with RESTART_SESSIONS sessions over HTTP, stopped (SIGTERM) and
    started again on the same directory: seconds to the first /healthz answer, seconds until a
    sample of the sessions answers 200, and VmRSS before the stop and after the restart."""
    data_dir = os.path.join(OUT, "restart-data")
    shutil.rmtree(data_dir, ignore_errors=True)
    os.makedirs(data_dir)
    argv = sheetd_argv(help_text, data_dir=data_dir, max_sessions=max(2_000_000, RESTART_SESSIONS))
    s = Server("sheetd-restart", argv).start()
    markers = os.path.join(OUT, "restart-markers")
    try:
        fr = fill(s, RESTART_SESSIONS, markers, timeout=1800)
        if fr["created"] is None:
            raise RuntimeError(f"restart phase: creating {RESTART_SESSIONS} sessions did not finish in time")
        sample = create_sessions(s, 50)   # a sample to read back after the restart (also counted)
        time.sleep(IDLE_SETTLE_S)
        before = s.rss_bytes()
    finally:
        s.stop()
    total = fr["created"] + len(sample)
    t0 = time.monotonic()
    r = Server("sheetd-restart", argv)
    r.start(timeout=600)
    first = None
    while first is None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", r.port, timeout=600)
            request(conn, "GET", "/healthz")
            conn.close()
            first = time.monotonic() - t0
        except OSError:
            r.check_alive()
            time.sleep(0.01)
    conn = http.client.HTTPConnection("127.0.0.1", r.port, timeout=600)
    missing = 0
    for sid, _ in sample:
        status, _, _ = request(conn, "GET", f"/sessions/{sid}")
        missing += status != 200
    conn.close()
    all_loaded = time.monotonic() - t0
    time.sleep(IDLE_SETTLE_S)
    after = r.rss_bytes()
    r.stop()
    res = {"sessions": total, "rss_before": before, "rss_after": after, "first_answer_s": first,
           "all_loaded_s": all_loaded, "missing": missing, "sampled": len(sample), "fill_s": fr["seconds"]}
    log(f"bench: restart of {total:,} sessions: first answer {first:.1f} s, sample served {all_loaded:.1f} s, "
        f"VmRSS {before / 2**20:.0f} -> {after / 2**20:.0f} MiB, {missing} of {len(sample)} sampled sessions missing")
    return res


def plot(res, path):
    """results.png (`PNG`) with gnuplot: req/s and p99 per workload, sheetd beside the baseline
    (and durable beside memory), titled with the run's date. Skipped without gnuplot."""
    if not shutil.which("gnuplot"):
        return "gnuplot not found (Debian: apt-get install gnuplot-nox)"
    rows = [(name, w) for name, w in res["workloads"].items()]
    if res.get("durable"):
        rows.append(("durable drag", res["durable"]))
    if res.get("durable_create"):
        rows.append(("durable create", res["durable_create"]))
    data = os.path.join(OUT, "results.dat")
    with open(data, "w") as f:
        for name, w in rows:
            f.write(f"\"{name}\\n({w['labels']['a']} / {w['labels']['b']})\" {w['a']['rps'] or 0:.0f} {w['b']['rps'] or 0:.0f} "
                    f"{(w['a']['p99'] or 0) / 1000:.3f} {(w['b']['p99'] or 0) / 1000:.3f}\n")
    date = res["machine"]["date"]
    script = f"""
set terminal pngcairo size 1400,900 font ",10"
set output "{path}"
set multiplot layout 2,1 title "sheetd benchmark, {date} (left bar: first server named, right bar: second)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -20 nomirror
set grid ytics
set yrange [0:*]
set key outside top center horizontal
set ylabel "requests/s"
set title "throughput (median over rounds)"
plot "{data}" using 2:xtic(1) title "sheetd (or durable)", "" using 3 title "baseline (or in memory)"
set ylabel "p99 latency, ms"
set title "p99 latency (median over rounds)"
plot "{data}" using 4:xtic(1) title "sheetd (or durable)", "" using 5 title "baseline (or in memory)"
unset multiplot
"""
    p = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
    return None if p.returncode == 0 else f"gnuplot failed: {p.stderr[:300]}"


# ---------------------------------------------------------------------------------------------
def report(res, a_label):
    L = []
    mach = res["machine"]
    nproc = int(mach.get("nproc") or os.cpu_count() or 1)
    L.append("# sheetd benchmark\n")
    if SELFTEST:
        L.append("> **SELF-TEST**: sheetd was not used. The baseline played both sides to test the harness; "
                 "every \"sheetd\" figure below is the baseline's. Run `make bench` for real figures.\n")
    L.append("## Machine\n")
    L.append("| | |\n|---|---|")
    for k in ("date", "nproc", "cpu", "memory", "os", "kernel", "libmicrohttpd", "swift", "wrk", "commit"):
        L.append(f"| {k} | {mach.get(k, '?')} |")
    env_used = {k: v for k, v in os.environ.items() if k.startswith("BENCH_")}
    cmd = "make bench" if not env_used else " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env_used.items())) + " make bench"
    L.append("")
    L.append(f"Command: `{cmd}` ({ROUNDS} rounds × {SECONDS} s per side and workload, {WARMUP} s warm-up, "
             f"server threads {THREADS}, {NSESSIONS:,} pre-created sessions; total {res['elapsed_s'] / 60:.1f} min).")
    sz = res.get("sizes", {})
    L.append(f"The baseline answers bodies of sheetd's sizes: drag {sz.get('drag')} B (also used for gesture drags, "
             f"whose answer is {sz.get('gesture')} B), GET {sz.get('get')} B, POST /sessions {sz.get('create')} B.\n")

    L.append("## Throughput and latency (medians over rounds; ratio = sheetd ÷ baseline in the same round, median)\n")
    L.append("| workload | side | req/s | p50 | p99 | p99.9 | CPU µs/req | CPU cores | errors | req/s ratio | p99 ratio | CPU ratio |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    sections = list(res["workloads"].items())
    if res.get("durable"):
        sections.append(("durable drag-c64", res["durable"]))
    if res.get("durable_create"):
        sections.append(("durable create-c64", res["durable_create"]))
    for name, w in sections:
        for side in ("a", "b"):
            s = w[side]
            ratio = (fmt_ratio(w["ratio_rps"]), fmt_ratio(w["ratio_p99"]), fmt_ratio(w["ratio_cpu"])) if side == "a" else ("", "", "")
            L.append(f"| {name if side == 'a' else ''} | {w['labels'][side]} | {fmt_rps(s['rps'])} | {fmt_us(s['p50'])} | "
                     f"{fmt_us(s['p99'])} | {fmt_us(s['p999'])} | {s['cpu_us_per_req']:.1f} | {s['cpu_cores']:.2f} | {s['errors']} | "
                     f"{ratio[0]} | {ratio[1]} | {ratio[2]} |")
    L.append("")
    for name, w in sections:
        L.append(f"- **{name}**: {w['description']}.")
        sc = w.get("state_check")
        if sc:
            L.append(f"  State check: after each run every session was read back ({sc['checked']:,} reads); {sc['mismatches']} were not "
                     f"on the side the script last sent (its last requests, cut off when wrk stopped), {sc['presented']} had been "
                     "closed and were presented again; each run went on from where the sessions were.")
        logb = w["a"].get("stderr_bytes_per_req")
        if logb:
            L.append(f"  {w['labels']['a']} wrote {logb:.0f} bytes of stderr per request.")
    L.append("")

    busy = median(r[side]["other_cores"] for _, w in sections for r in w["rounds"] for side in ("a", "b"))
    if busy is not None:
        L.append(f"Other jobs on the machine used {busy:.2f} cores (median over runs) while wrk ran"
                 + (": the machine was shared, so single rounds are noisy; trust the medians and the CPU per request more than any one round."
                    if busy > 0.1 else "."))
        L.append("")
    L.append("### Rounds\n")
    L.append("| workload | round | A req/s | B req/s | ratio | A p99 | B p99 | A p99.9 | B p99.9 | A µs/req | B µs/req | errors A/B | other jobs (cores) A/B |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for name, w in sections:
        for i, row in enumerate(w["rounds"]):
            A, B = row["a"], row["b"]
            L.append(f"| {name} | {i + 1} | {fmt_rps(A['rps'])} | {fmt_rps(B['rps'])} | {fmt_ratio(row['ratio_rps'])} | "
                     f"{fmt_us(A['latency_us']['p99'])} | {fmt_us(B['latency_us']['p99'])} | {fmt_us(A['latency_us']['p99.9'])} | "
                     f"{fmt_us(B['latency_us']['p99.9'])} | {A['cpu_us_per_req']:.1f} | {B['cpu_us_per_req']:.1f} | "
                     f"{A['error_count']}/{B['error_count']} | {A['other_cores']:.2f}/{B['other_cores']:.2f} |")
    L.append("")

    # Saturated workloads only: drag-c1 and the paced drag leave the cores idle by design.
    saturated = [(name, w) for name, w in sections if name not in ("drag-c1", "drag-c64-paced")]
    if res.get("calibration") and res["calibration"].get("rounds"):
        saturated.append(("calibration", res["calibration"]))
    split = [(name, w, side, cores_split(w, side, nproc)) for name, w in saturated for side in ("a", "b")]
    split = [row for row in split if row[3]]
    if split:
        L.append("### Where the cores go\n")
        L.append(f"wrk and the server share the {nproc} cores. When they keep them busy (\"cores busy\"), req/s is the "
                 "cores left by other jobs ÷ (the server's CPU + wrk's CPU per request), the last column. A slower "
                 "server also costs wrk more per request: its threads go to sleep between answers more often and "
                 "are woken again. Medians over rounds.\n")
        L.append("| workload | side | req/s | server µs/req | wrk µs/req | sum | cores busy | cores ÷ sum |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|")
        for name, w, side, c in split:
            L.append(f"| {name if side == 'a' else ''} | {w['labels'][side]} | {fmt_rps(c['rps'])} | {c['server_us']:.2f} | "
                     f"{c['wrk_us']:.2f} | {c['sum_us']:.2f} | {c['busy']:.2f} of {nproc} | {fmt_rps(c['predicted'])} |")
        L.append("")
        d64s = {side: c for name, w, side, c in split if name == "drag-c64"}
        if len(d64s) == 2:
            need = d64s["b"]["sum_us"] / DRAG_TARGET
            line = (f"At {DRAG_TARGET}× the baseline's drag-c64 req/s, {res['workloads']['drag-c64']['labels']['a']}'s "
                    f"server + wrk CPU per drag would be at most {need:.2f} µs (the baseline's {d64s['b']['sum_us']:.2f} ÷ {DRAG_TARGET}), "
                    f"against {d64s['a']['sum_us']:.2f} µs in this run.")
            cals = {side: c for name, w, side, c in split if name == "calibration"}
            extra = cals["a"]["server_us"] - cals["b"]["server_us"] if len(cals) == 2 else 0
            if extra > 0.5 and d64s["a"]["sum_us"] > need:
                # wrk's share of a server µs, from the baseline burning a known amount more
                slope = (cals["a"]["wrk_us"] - cals["b"]["wrk_us"]) / extra
                line += (f" In the calibration each µs more of server CPU also cost wrk {slope:.2f} µs, so that is about "
                         f"{(d64s['a']['sum_us'] - need) / (1 + slope):.2f} µs less server CPU per drag.")
            L.append(line + "\n")

    dur = res.get("durable")
    if dur and dur["a"].get("thread_us_per_req") is not None:
        L.append("## Durable drag-c64: CPU per request by thread (medians over rounds)\n")
        L.append("From `/proc/PID/task/*/stat` before and after each run, summed by thread name, ÷ requests. "
                 "`MHD-worker` are libmicrohttpd's request threads (routing, the change in place, rendering; "
                 "for a durable drag also suspending the connection and answering it once resumed); "
                 "`sheetd-archive` is the durable store's writer (SQLite's inserts and commits, then resuming "
                 "each suspended connection of the group); `sheetd-checkpoi` copies the WAL back; the rest are "
                 "the main thread and Swift's concurrency pool. Names are cut to 15 characters, as the kernel keeps them.\n")
        L.append(f"| thread | {dur['labels']['a']} µs/req | {dur['labels']['b']} µs/req | difference |")
        L.append("|---|---:|---:|---:|")
        ta, tb = dur["a"]["thread_us_per_req"], dur["b"]["thread_us_per_req"]
        for name in sorted(set(ta) | set(tb), key=lambda n: -max(ta.get(n, 0.0), tb.get(n, 0.0))):
            x, y = ta.get(name, 0.0), tb.get(name, 0.0)
            if max(x, y) < 0.05:
                continue
            L.append(f"| {name} | {x:.2f} | {y:.2f} | {x - y:+.2f} |")
        L.append(f"| all | {dur['a']['cpu_us_per_req']:.2f} | {dur['b']['cpu_us_per_req']:.2f} | "
                 f"{dur['a']['cpu_us_per_req'] - dur['b']['cpu_us_per_req']:+.2f} |")
        L.append("")

    cal = res.get("calibration")
    d64 = res["workloads"].get("drag-c64")
    if cal and d64:
        L.append("## Calibration: CPU per request alone\n")
        if cal.get("skipped"):
            L.append(f"Not run: {cal['skipped']}.\n")
        else:
            why = (f"set by BENCH_CALIBRATE_BURN_US; the median user-CPU gap between {a_label} and the baseline in drag-c64 was {cal['gap_us']:.1f} µs"
                   if cal["burn_forced"] else f"the median gap in user CPU per request between {a_label} and the baseline in drag-c64")
            L.append(f"drag-c64 was run once more, A B as above, with \"baseline + burn\" against the baseline: the baseline spending "
                     f"{cal['burn_us']:.1f} µs more user CPU per request in an arithmetic loop (`--burn-ns`, calibrated at its start; {why}).\n")
            L.append("| server | req/s ratio to the baseline | p99 ratio to the baseline | user µs/req | CPU µs/req |")
            L.append("|---|---:|---:|---:|---:|")
            L.append(f"| {a_label} (drag-c64) | {fmt_ratio(d64['ratio_rps'])} | {fmt_ratio(d64['ratio_p99'])} | {d64['a']['user_us_per_req']:.1f} | {d64['a']['cpu_us_per_req']:.1f} |")
            L.append(f"| baseline + burn | {fmt_ratio(cal['ratio_rps'])} | {fmt_ratio(cal['ratio_p99'])} | {cal['a']['user_us_per_req']:.1f} | {cal['a']['cpu_us_per_req']:.1f} |")
            L.append(f"| baseline | 1.00× | 1.00× | {d64['b']['user_us_per_req']:.1f} | {d64['b']['cpu_us_per_req']:.1f} |")
            L.append("")
            errs = cal["a"]["errors"] + cal["b"]["errors"]
            L.append("If the first two rows are close, the gap to the targets is the work sheetd does per request (and the kernel "
                     "time a saturated server pays for it on these cores), not the way sheetd waits or schedules."
                     + (f" The calibration runs had {errs} errors." if errs else ""))
            L.append("")

    mem = res.get("memory")
    if mem:
        L.append("## Memory (a fresh sheetd, idle sessions created with POST /sessions)\n")
        L.append(f"VmRSS before: {mem['rss0'] / 2**20:.1f} MiB.\n")
        L.append("| sessions | VmRSS | bytes/session (RSS ÷ sessions) | bytes/session (growth ÷ sessions) | time to create | errors |")
        L.append("|---:|---:|---:|---:|---:|---:|")
        for p in mem["points"]:
            L.append(f"| {p['sessions']:,} | {p['rss'] / 2**20:.1f} MiB | {p['per_session']:.0f} | {p['marginal_per_session']:.0f} | "
                     f"{p['seconds']:.1f} s | {p['errors']} |")
        L.append("")

    rs = res.get("restart")
    if rs:
        L.append("## Restart (a durable sheetd filled over HTTP, SIGTERM, started again)\n")
        L.append("| sessions | fill | first answer | sampled sessions served | VmRSS before | VmRSS after |")
        L.append("|---:|---:|---:|---:|---:|---:|")
        L.append(f"| {rs['sessions']:,} | {rs['fill_s']:.0f} s | {rs['first_answer_s']:.1f} s | {rs['all_loaded_s']:.1f} s "
                 f"({rs['sampled'] - rs['missing']} of {rs['sampled']}) | {rs['rss_before'] / 2**20:.0f} MiB | {rs['rss_after'] / 2**20:.0f} MiB |")
        L.append("")
    if os.path.exists(PNG):
        L.append(f"![requests/s and p99 per workload, {mach.get('date', '?')}](results.png)\n")

    # Targets
    L.append("## Targets\n")
    targets = []
    d64 = res["workloads"].get("drag-c64")
    if d64:
        r = d64["ratio_rps"]
        targets.append((f"drag at 64 connections, in memory ≥ {DRAG_TARGET} × baseline req/s", r is not None and r >= DRAG_TARGET,
                        f"{fmt_ratio(r)} ({fmt_rps(d64['a']['rps'])} vs {fmt_rps(d64['b']['rps'])} req/s)"))
        r = d64["ratio_p99"]
        targets.append(("p99 at 64 connections, saturated (drag-c64) ≤ 2 × baseline's", r is not None and r <= 2.0,
                        f"{fmt_ratio(r)} ({fmt_us(d64['a']['p99'])} vs {fmt_us(d64['b']['p99'])})"))
    paced = res["workloads"].get("drag-c64-paced")
    if paced:
        r = paced["ratio_p99"]
        targets.append(("p99 at 64 connections, paced (drag-c64-paced) ≤ 2 × baseline's", r is not None and r <= 2.0,
                        f"{fmt_ratio(r)} ({fmt_us(paced['a']['p99'])} vs {fmt_us(paced['b']['p99'])} "
                        f"at {fmt_rps(paced['a']['rps'])} vs {fmt_rps(paced['b']['rps'])} req/s)"))
    if mem and mem["points"]:
        p = mem["points"][-1]
        targets.append((f"≤ 400 B RSS per idle session, in memory, at {p['sessions']:,} sessions", p["per_session"] <= 400,
                        f"{p['per_session']:.0f} B/session ({p['rss'] / 2**20:.1f} MiB)"))
    errs = sum(w["a"]["errors"] + w["b"]["errors"] for _, w in sections)
    errs += sum(p["errors"] for p in (mem["points"] if mem else []))
    closed = sum(w.get("state_check", {}).get("presented", 0) for _, w in sections)
    targets.append(("no errors / non-2xx in any workload", errs == 0 and closed == 0,
                    f"{errs} errors (socket errors, timeouts, status ≥ 400)" + (f"; {closed} sessions closed by a request on the wrong side" if closed else "")))
    for name, why in res.get("skipped", {}).items():
        targets.append((f"workload {name} runs", False, "skipped: " + why))
    if res.get("durable"):
        r = res["durable"]["ratio_rps"]
        targets.append(("durable drag ≥ 0.9 × in-memory req/s at 64 connections", r is not None and r >= 0.9, fmt_ratio(r)))
        r = res["durable"]["ratio_p99"]
        targets.append(("durable drag p99 ≤ 2 × in-memory p99", r is not None and r <= 2.0,
                        f"{fmt_ratio(r)} ({fmt_us(res['durable']['a']['p99'])} vs {fmt_us(res['durable']['b']['p99'])})"))
    if res.get("durable_create"):
        r = res["durable_create"]["ratio_rps"]
        targets.append(("durable create ≥ 0.7 × in-memory create req/s", r is not None and r >= 0.7,
                        f"{fmt_ratio(r)}; p99 {fmt_us(res['durable_create']['a']['p99'])} vs {fmt_us(res['durable_create']['b']['p99'])}"))
    cg = res.get("callgrind")
    if cg:
        r = cg["sheetd"] / cg["baseline"]
        targets.append((f"callgrind instructions per drag ≤ 1.3 × the baseline's (both at {MEMORY_LIMIT} B connection memory)", r <= 1.3,
                        f"{r:.2f}× ({cg['sheetd']:,.0f} vs {cg['baseline']:,.0f}, {cg['requests']} drags on one keep-alive connection)"
                        + (f"; the baseline making sheetd's response per drag: {cg['baseline_fresh']:,.0f} "
                           f"({cg['baseline_fresh'] / cg['baseline']:.2f}× the baseline, sheetd {cg['sheetd'] / cg['baseline_fresh']:.2f}× it)"
                           if cg.get("baseline_fresh") else "")))
    rs = res.get("restart")
    if rs:
        targets.append((f"restart with {rs['sessions']:,} sessions: first answer within 5 s", rs["first_answer_s"] <= 5.0,
                        f"{rs['first_answer_s']:.1f} s (every sampled session served after {rs['all_loaded_s']:.1f} s, "
                        f"{rs['missing']} of {rs['sampled']} missing)"))
        ratio = rs["rss_after"] / rs["rss_before"]
        targets.append(("RSS after the restart within 10% of before", ratio <= 1.10,
                        f"{rs['rss_after'] / 2**20:.0f} vs {rs['rss_before'] / 2**20:.0f} MiB ({ratio:.2f}×)"))
        for label, rss in (("before", rs["rss_before"]), ("after", rs["rss_after"])):
            per = rss / rs["sessions"]
            targets.append((f"≤ 400 B RSS per idle session, durable, {label} the restart", per <= 400, f"{per:.0f} B/session"))
    L.append("| target | | measured |")
    L.append("|---|---|---|")
    for t, ok, m in targets:
        m = m.replace("|", "\\|").replace("\n", " ")
        L.append(f"| {t} | {'**met**' if ok else '**NOT MET**'} | {m} |")
    L.append("")
    for note in res.get("notes", []):
        L.append(f"- Note: {note}")
    if sz.get("sample_drag"):
        L.append("\nA drag answer as measured (its length sizes the baseline's body):\n")
        L.append("```json\n" + sz["sample_drag"][:2000] + "\n```")
    L.append("\n## Commands\n")
    L.append("```")
    L.extend(res["commands"])
    L.append("```")
    L.append("\nMethod: wrk with Lua scripts in bench/lua (percentiles from a done() callback); server CPU = utime+stime "
             "from /proc/PID/stat before and after each run ÷ requests completed; RSS = VmRSS from /proc/PID/status. "
             "Client and servers share the machine's cores.")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        log(f"bench: FAILED: {e}")
        sys.exit(1)
