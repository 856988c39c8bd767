#!/usr/bin/env python3
"""Instructions per request under callgrind: the figure that does not drift on a shared machine.

Starts a server under `valgrind --tool=callgrind` (all threads, user space), creates sessions,
warms up, zeroes the counters (`callgrind_control -z`), sends CALLGRIND_REQUESTS requests over
ONE keep-alive connection, dumps (`callgrind_control -d`) and divides the dump's total
instructions by the requests. The client is this Python process, outside valgrind.

  python3 bench/callgrind.py [sheetd|durable|baseline|baseline-fresh|baseline:BYTES ...]   (default: sheetd baseline)

Settings: CALLGRIND_REQUESTS (2000), CALLGRIND_SESSIONS (300), CALLGRIND_WORKLOAD (drag|create|get),
BENCH_SHEETD, BENCH_BASELINE, BENCH_SHEETD_ARGS (as in bench.py). bench.py imports `measure`.
CALLGRIND_CACHE=1 adds callgrind's cache simulation (`--cache-sim=yes`, caches as the CPU reports
them) and prints, per request, the first-level instruction and data cache misses, the former by
object: how much distinct code a request runs, which no instruction count shows.
"""
import glob
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

REQUESTS = bench.env_int("CALLGRIND_REQUESTS", 2000)
SESSIONS = bench.env_int("CALLGRIND_SESSIONS", 300)
WORKLOAD = os.environ.get("CALLGRIND_WORKLOAD", "drag")
CACHE = os.environ.get("CALLGRIND_CACHE") == "1"


def totals(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def cache_misses(path, requests):
    """Per request: (I1 misses, D1 misses, {object: I1 misses}) of a dump made with --cache-sim=yes.

    Costs are summed from the dump's cost lines: each line after a `calls=` line is the call's
    inclusive cost and is skipped, so every cost counts once, in the object whose code it is."""
    objects, events, by_object, current, after_call = {}, None, {}, None, False
    with open(path) as dump:
        for line in dump:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("ob=", "cob=")):
                number, _, name = line.split("=", 1)[1].strip().partition(" ")
                if name:
                    objects[number] = os.path.basename(name)
                if line.startswith("ob="):
                    current = objects.get(number, number)
            elif line.startswith("calls="):
                after_call = True
            elif line[:1] and (line[:1].isdigit() or line[:1] in "+-*"):
                if after_call:
                    after_call = False
                    continue
                fields = line.split()[1:]
                costs = by_object.setdefault(current, [0] * len(events))
                for i, value in enumerate(fields):
                    costs[i] += int(value)
    if events is None or "I1mr" not in events:
        raise RuntimeError(f"{path} has no cache simulation")
    total = [sum(c[i] for c in by_object.values()) for i in range(len(events))]
    i1, d1r, d1w = events.index("I1mr"), events.index("D1mr"), events.index("D1mw")
    per_object = {ob: c[i1] / requests for ob, c in by_object.items()}
    return total[i1] / requests, (total[d1r] + total[d1w]) / requests, per_object


def drive(port, workload, count, sessions, state):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    for i in range(count):
        if workload == "drag":
            k = state["next"] % len(sessions)
            state["next"] += 1
            sid = sessions[k]
            to = "medium" if state["at"][k] == "large" else "large"
            status, data, _ = bench.request(conn, "POST", f"/sessions/{sid}/drag", json.dumps({"to": to}).encode())
            state["at"][k] = to
            ok = status == 200
        elif workload == "get":
            sid = sessions[i % len(sessions)]
            status, data, _ = bench.request(conn, "GET", f"/sessions/{sid}")
            ok = status == 200
        else:
            status, data, _ = bench.request(conn, "POST", "/sessions", bench.CREATE_BODY)
            ok = status == 201
        if not ok:
            raise RuntimeError(f"{workload} answered {status}: {data[:200]!r}")
    conn.close()


def measure(name, argv, workload=WORKLOAD, requests=REQUESTS, sessions=SESSIONS):
    """Instructions per `workload` request of the server started by `argv` under callgrind."""
    work = tempfile.mkdtemp(prefix=f"callgrind-{name}-", dir=bench.OUT)
    out = os.path.join(work, "callgrind.out")
    vg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no",
          "--vgdb=yes", "--vgdb-error=999999"] + (["--cache-sim=yes"] if CACHE else [])
    server = bench.Server(f"callgrind-{name}", vg + argv, cwd=work).start(timeout=300)
    try:
        made = bench.create_sessions(server, sessions, workers=1)
        ids = [sid for sid, _ in made]
        state = {"next": 0, "at": ["large"] * len(ids)}
        drive(server.port, workload, max(200, requests // 5), ids, state)   # warm-up
        time.sleep(1)
        subprocess.run(["callgrind_control", "-z", str(server.proc.pid)], check=True, capture_output=True)
        drive(server.port, workload, requests, ids, state)
        subprocess.run(["callgrind_control", "-d", str(server.proc.pid)], check=True, capture_output=True)
        dumps = sorted(glob.glob(out + ".*"), key=os.path.getmtime)
        if not dumps:
            raise RuntimeError(f"callgrind wrote no dump in {work}")
        per = totals(dumps[-1]) / requests
        if CACHE:
            i1, d1, by_object = cache_misses(dumps[-1], requests)
            top = sorted(by_object.items(), key=lambda kv: -kv[1])[:4]
            print(f"callgrind: {name}: {i1:,.0f} I1 misses per request ("
                  + ", ".join(f"{ob} {n:,.0f}" for ob, n in top) + f"), {d1:,.0f} D1 misses", file=sys.stderr)
        if os.environ.get("CALLGRIND_KEEP") == "1":
            print(f"callgrind: kept {dumps[-1]} (callgrind_annotate --inclusive=yes it)", file=sys.stderr)
    finally:
        server.stop()
    if os.environ.get("CALLGRIND_KEEP") != "1":
        shutil.rmtree(work, ignore_errors=True)
    return per


def main():
    names = sys.argv[1:] or ["sheetd", "baseline"]
    os.makedirs(bench.OUT, exist_ok=True)
    help_text = bench.sheetd_help()
    for name in names:
        if name.startswith("baseline"):   # baseline, baseline-fresh, or either :BYTES (its --memory-limit)
            argv = bench.baseline_argv((503, 385, 385))
            if name.split(":", 1)[0] == "baseline-fresh":   # a response made per request, as sheetd does
                argv += bench.FRESH_ANSWERS_ARGS
            if ":" in name:
                argv += ["--memory-limit", name.split(":", 1)[1]]
        elif name == "durable":
            data = tempfile.mkdtemp(prefix="callgrind-data-", dir=bench.OUT)
            argv = bench.sheetd_argv(help_text, data_dir=data)
        else:
            argv = bench.sheetd_argv(help_text)
        per = measure(name, argv)
        print(f"{name:10} {WORKLOAD}: {per:,.0f} instructions per request ({REQUESTS} requests, one keep-alive connection)", flush=True)


if __name__ == "__main__":
    main()
