#!/usr/bin/env python3
"""Where sheetd's time per request goes, in numbers. Run by bench/profile.

Starts sheetd (--memory) and the baseline on the same threads as the benchmark, pre-creates
BENCH_SESSIONS sessions, and runs with wrk -t2 -c64, each for BENCH_SECONDS, rotating through
PROFILE_ROUNDS rounds (medians are printed):

  sheetd drag      POST /sessions/{id}/drag, bench/lua/drag.lua (the benchmark's workload)
  sheetd healthz   GET /healthz: the HTTP layer, the request's task and a small answer, no store
  baseline drag    the bare libmicrohttpd server's fixed answer of the drag's size

For each: requests/s, server user and system CPU per request (/proc/PID/stat), voluntary and
involuntary context switches per request (/proc/PID/task/*/status). For sheetd's drag also the
share of requests that waited on a suspended connection (sheetd_request_suspensions_total) and,
with PROFILE_MALLOC=1 (needs perf and root), malloc calls per request (a perf probe on libc's
malloc). PROFILE_PERF=1 adds the 25 hottest user-space symbols of sheetd's drag (perf record).
PROFILE_PLACES=1 adds, for sheetd's drag and the baseline's, CPU per request by where it was
spent, kernel included: per object (the kernel, sheetd, libc, libmicrohttpd, the Swift runtime)
and the kernel's hottest symbols (perf record of the cpu-clock, both need perf and root).
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the benchmark's own server and session helpers)

SECONDS = bench.env_int("BENCH_SECONDS", 5)
ROUNDS = bench.env_int("PROFILE_ROUNDS", 3)
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def suspensions(server):
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    m = re.search(r"^sheetd_request_suspensions_total (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def wrk(server, path=None, script=None, args=()):
    cmd = ["wrk", "-t2", f"-c{bench.CONNS}", f"-d{SECONDS}s"]
    if script:
        cmd += ["-s", os.path.join(bench.LUA, script), server.url, "--", *map(str, args)]
    else:
        cmd += [server.url + path]
    return cmd


def measure(server, cmd, extra=None):
    (u0, s0), (v0, i0) = server.cpu_ticks(), server.context_switches()
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    elapsed = time.monotonic() - start
    (u1, s1), (v1, i1) = server.cpu_ticks(), server.context_switches()
    server.check_alive()
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise RuntimeError(f"{server.name}: {non2xx.group(1)} answers were not 2xx: {' '.join(cmd)}")
    per = 1e6 / bench.CLK_TCK / requests
    return {
        "rps": requests / elapsed,
        "user_us": (u1 - u0) * per,
        "sys_us": (s1 - s0) * per,
        "voluntary": (v1 - v0) / requests,
        "involuntary": (i1 - i0) / requests,
        "requests": requests,
    }


def perf_usable():
    return os.geteuid() == 0 and subprocess.run(["which", "perf"], capture_output=True).returncode == 0


def malloc_calls(server, cmd):
    """malloc calls per request of `server` under `cmd`, from a perf probe (None if unavailable)."""
    if not perf_usable():
        return None
    subprocess.run(["perf", "probe", "-q", "-x", LIBC, "malloc"], capture_output=True)
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as stat:
        perf = subprocess.Popen(["perf", "stat", "-x", ",", "-e", "probe_libc:malloc", "-p", str(server.proc.pid),
                                 "-o", stat.name, "--", "sleep", str(SECONDS)])
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        perf.wait()
        text = stat.read()
    m = re.search(r"^(\d+),", text, re.M)
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    return int(m.group(1)) / requests if m else None


def hottest_symbols(server, cmd, count=25):
    """The `count` hottest user-space symbols of `server` under `cmd` (None without perf)."""
    if not perf_usable():
        return None
    data = os.path.join(bench.OUT, "profile.perf.data")
    perf = subprocess.Popen(["perf", "record", "--all-user", "-F", "2000", "-g", "-o", data, "-p", str(server.proc.pid),
                             "--", "sleep", str(SECONDS)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(cmd, capture_output=True, check=True)
    perf.wait()
    report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "-g", "none",
                             "--percent-limit", "0.5"], capture_output=True, text=True).stdout
    lines = [line for line in report.splitlines() if line.strip() and not line.startswith("#")]
    return lines[:count]


PLACES_HZ = 4999


def cpu_by_place(server, cmd, kernel_symbols=8):
    """CPU µs per request of `server` under `cmd`, by object and by the kernel's hottest symbols,
    from cpu-clock samples (the kernel turns the frequency into a fixed period, so each sample
    stands for 1/PLACES_HZ s of CPU); None without perf."""
    if not perf_usable():
        return None
    data = os.path.join(bench.OUT, f"places.{server.name}.perf.data")
    perf = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", str(PLACES_HZ), "-o", data,
                             "-p", str(server.proc.pid), "--", "sleep", str(SECONDS + 1)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)   # perf attached before the first request
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    perf.wait()
    requests = int(re.search(r"(\d+) requests in", out).group(1))

    def rows(*options):
        report = subprocess.run(["perf", "report", "-i", data, "--no-children", "-g", "none", "-n", "--stdio",
                                 *options], capture_output=True, text=True).stdout
        found = []
        for line in report.splitlines():
            fields = line.split()
            if len(fields) >= 3 and not line.startswith("#") and fields[1].isdigit():
                found.append((int(fields[1]) * 1e6 / PLACES_HZ / requests, fields[-1]))
        return found

    return {"objects": rows("--sort", "dso")[:6],
            "kernel": rows("--sort", "sym", "--dsos", "[kernel.kallsyms]")[:kernel_symbols]}


def main():
    os.makedirs(bench.OUT, exist_ok=True)
    help_text = bench.sheetd_help()
    sheetd = bench.Server("profile-sheetd", bench.sheetd_argv(help_text)).start()
    try:
        probed = bench.probe_sizes(sheetd)
        sizes = (probed["drag"], probed["get"], probed["create"])
        baseline = bench.Server("profile-baseline", bench.baseline_argv(sizes)).start()
        try:
            files = {}
            for server in (sheetd, baseline):
                files[server.name] = os.path.join(bench.OUT, f"sessions.{server.name}.txt")
                bench.write_sessions(files[server.name], bench.create_sessions(server, bench.NSESSIONS))
            runs = {
                "sheetd drag": (sheetd, wrk(sheetd, script="drag.lua", args=(files[sheetd.name], 2))),
                "sheetd healthz": (sheetd, wrk(sheetd, path="/healthz")),
                "baseline drag": (baseline, wrk(baseline, script="drag.lua", args=(files[baseline.name], 2))),
            }
            for server, cmd in runs.values():  # warm-up
                subprocess.run(cmd[:3] + ["-d2s"] + cmd[4:], capture_output=True, check=True)
            results = {name: [] for name in runs}
            suspended = []
            for _ in range(ROUNDS):
                for name, (server, cmd) in runs.items():
                    before = suspensions(sheetd) if name == "sheetd drag" else 0
                    results[name].append(measure(server, cmd))
                    if name == "sheetd drag":
                        suspended.append((suspensions(sheetd) - before) / results[name][-1]["requests"])
            print(f"wrk -t2 -c{bench.CONNS}, {SECONDS} s runs, {ROUNDS} rounds, server threads {bench.THREADS}; medians per request")
            print(f"{'':16} {'req/s':>9} {'user µs':>8} {'sys µs':>8} {'vol. cs':>8} {'invol. cs':>9}")
            for name, rows in results.items():
                med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
                print(f"{name:16} {med['rps']:9,.0f} {med['user_us']:8.2f} {med['sys_us']:8.2f} "
                      f"{med['voluntary']:8.3f} {med['involuntary']:9.3f}")
            print(f"sheetd drag: {statistics.median(suspended) * 100:.2f}% of requests waited on a suspended connection")
            if os.environ.get("PROFILE_MALLOC") == "1":
                calls = malloc_calls(sheetd, runs["sheetd drag"][1])
                print(f"sheetd drag: {calls:.1f} malloc calls per request" if calls else "malloc count: needs perf and root")
            if os.environ.get("PROFILE_PERF") == "1":
                lines = hottest_symbols(sheetd, runs["sheetd drag"][1])
                if lines is None:
                    print("hottest symbols: needs perf and root")
                else:
                    print("sheetd drag, hottest user-space symbols (perf record --all-user):")
                    for line in lines:
                        print("  " + line[:150])
            if os.environ.get("PROFILE_PLACES") == "1":
                for name in ("sheetd drag", "baseline drag"):
                    server, cmd = runs[name]
                    places = cpu_by_place(server, cmd)
                    if places is None:
                        print("CPU by place: needs perf and root")
                        break
                    print(f"{name}, CPU µs per request by place (perf record -e cpu-clock):")
                    print("  objects: " + ", ".join(f"{where} {us:.2f}" for us, where in places["objects"]))
                    print("  kernel:  " + ", ".join(f"{where} {us:.2f}" for us, where in places["kernel"]))
        finally:
            baseline.stop()
    finally:
        sheetd.stop()


if __name__ == "__main__":
    main()
