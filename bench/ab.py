#!/usr/bin/env python3
"""Alternating rounds of one workload against two or more servers, for measuring one change.

    python3 bench/ab.py LABEL=KIND[,bin=PATH][,preload=LIB][,args=ARGS][,sessions=N] ...

KIND is `memory` (sheetd --memory), `durable` (sheetd on a fresh data directory) or `baseline`
(bench/baseline-server answering bodies of sheetd's sizes, measured from the first sheetd given,
else bench.py's self-test sizes). `bin` replaces the binary (another build of sheetd), `preload`
sets LD_PRELOAD (another allocator), `args` adds arguments (`args=--fresh-answers 1`),
`sessions` sets how many sessions the drags spread over (AB_SESSIONS, 1,000, by default).

Every server gets its sessions and the same wrk run (bench/lua/drag.lua, or AB_SCRIPT: e.g.
drag-paced.lua for the latency a server adds; `wrk -t2 -c64`, AB_SECONDS each) in AB_ROUNDS rounds
(6), the order rotating each round so that no server always runs first. It prints each run (req/s,
p99, server CPU and user CPU per request, wrk's CPU per request, how often the scheduler preempted
the server's threads) and at the end the medians and, per round, each server's req/s and p99
against the first one's with the medians of those ratios: within a round the machine's other load
is about the same, so the ratio drifts less than either figure.
"""
import os
import shlex
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the benchmark's servers, sessions and wrk runs)

ROUNDS = bench.env_int("AB_ROUNDS", 6)
SECONDS = bench.env_int("AB_SECONDS", 6)
SESSIONS = bench.env_int("AB_SESSIONS", 1000)
CONNECTIONS = bench.env_int("AB_CONNECTIONS", 64)
SCRIPT = os.environ.get("AB_SCRIPT", "drag.lua")
KINDS = ("memory", "durable", "baseline")


def parse(spec):
    """`LABEL=KIND[,key=value...]` → (label, kind, {key: value})."""
    label, sep, rest = spec.partition("=")
    if not sep or not label or not rest:
        sys.exit(f"ab: {spec!r} is not LABEL=KIND[,bin=PATH][,preload=LIB][,args=ARGS][,sessions=N]")
    kind, *options = rest.split(",")
    if kind not in KINDS:
        sys.exit(f"ab: {spec!r}: the kind is one of {', '.join(KINDS)}")
    settings = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or key not in ("bin", "preload", "args", "sessions") or \
                (key == "sessions" and not (value.isdigit() and int(value) > 0)):
            sys.exit(f"ab: {spec!r}: {option!r} is not bin=PATH, preload=LIB, args=ARGS or sessions=N (N > 0)")
        settings[key] = value
    return label, kind, settings


def main():
    specs = [parse(a) for a in sys.argv[1:]]
    if len(specs) < 2 or len({label for label, _, _ in specs}) != len(specs):
        sys.exit(__doc__)
    os.makedirs(bench.OUT, exist_ok=True)
    help_text = bench.sheetd_help()
    servers, session_files, data_dirs = {}, {}, []
    sizes = None
    try:
        # sheetd first: the baseline answers bodies of the size sheetd's drag answers have
        for label, kind, settings in sorted(specs, key=lambda s: s[1] == "baseline"):
            env = {"LD_PRELOAD": settings["preload"]} if "preload" in settings else None
            if kind == "baseline":
                drag, get, create = (sizes["drag"], sizes["get"], sizes["create"]) if sizes else bench.SELFTEST_SIZES
                argv = bench.baseline_argv((drag, get, create))
            else:
                data_dir = None
                if kind == "durable":
                    data_dir = tempfile.mkdtemp(prefix=f"ab-{label}-", dir=bench.OUT)
                    data_dirs.append(data_dir)
                argv = bench.sheetd_argv(help_text, data_dir=data_dir)
            if "bin" in settings:
                argv[0] = os.path.abspath(settings["bin"])
            argv += shlex.split(settings.get("args", ""))
            server = bench.Server(f"ab-{label}", argv, env=env).start()
            servers[label] = server
            if kind != "baseline" and sizes is None:
                sizes = bench.probe_sizes(server)
            path = os.path.join(bench.OUT, f"ab-{label}.sessions")
            bench.write_sessions(path, bench.create_sessions(server, int(settings.get("sessions", SESSIONS))))
            session_files[label] = path
            print(f"{label}: {bench.commands[-1]}", flush=True)

        def run(label, seconds):
            server, path = servers[label], session_files[label]
            result = bench.run_wrk(server, SCRIPT, CONNECTIONS, 2, seconds, [path, 2], record=False)
            bench.reconcile_sessions(server, path)
            return result

        labels = [label for label, _, _ in specs]
        for label in labels:
            run(label, 2)  # warm-up: caches, the allocator's arenas, the writer's pacing
        runs = {label: [] for label in labels}
        for r in range(ROUNDS):
            for label in labels[r % len(labels):] + labels[:r % len(labels)]:
                x = run(label, SECONDS)
                runs[label].append(x)
                print(f"round {r + 1} {label}: {x['rps']:,.0f} req/s, "
                      f"p99 {bench.fmt_us(x['latency_us']['p99'])}, {x['cpu_us_per_req']:.2f} µs CPU "
                      f"(user {x['user_us_per_req']:.2f}) per request, wrk {x['wrk_us_per_req']:.2f} µs, "
                      f"preempted {x['involuntary_switches_per_req']:.3f} times per request, "
                      f"other load {x['other_cores']:.2f} cores", flush=True)
        print()
        for label in labels:
            xs = runs[label]
            print(f"{label}: median {statistics.median(x['rps'] for x in xs):,.0f} req/s, "
                  f"p99 {bench.fmt_us(statistics.median(x['latency_us']['p99'] for x in xs))}, "
                  f"{statistics.median(x['cpu_us_per_req'] for x in xs):.2f} µs CPU "
                  f"(user {statistics.median(x['user_us_per_req'] for x in xs):.2f}) per request, "
                  f"wrk {statistics.median(x['wrk_us_per_req'] for x in xs):.2f} µs, "
                  f"preempted {statistics.median(x['involuntary_switches_per_req'] for x in xs):.3f} "
                  f"and asleep {statistics.median(x['voluntary_switches_per_req'] for x in xs):.3f} "
                  f"times per request")
        first = labels[0]
        for label in labels[1:]:
            for figure, value in (("", lambda x: x["rps"]), ("p99 ", lambda x: x["latency_us"]["p99"])):
                ratios = [value(a) / value(b) for a, b in zip(runs[label], runs[first])]
                print(f"{label} / {first}, {figure}per round: {' '.join(f'{x:.3f}' for x in ratios)}; "
                      f"median {statistics.median(ratios):.3f}")
    finally:
        for server in servers.values():
            server.stop()
        for data_dir in data_dirs:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
