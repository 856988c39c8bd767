#!/usr/bin/env python3
"""Scale-out benchmark: drag throughput of 1, 2 and 3 sheetd instances on one PostgreSQL
(`--database`) against one sheetd on SQLite (`--data-dir`), in the same run, in alternating
rounds; where the time goes; and the cross-instance wake latency (a long-poll on instance B
answered by a drag through instance A). Run by `bench/run --scaleout` (`make bench-scaleout`)
and at the end of `make bench`; writes its section of bench/RESULTS.md and bench/out/scaleout.json.

  BENCH_SECONDS=6          each measured wrk run        SCALE_ROUNDS=3     rounds (medians)
  BENCH_CONNECTIONS=64     connections in all, split evenly over the instances of a configuration
  SCALE_SESSIONS=3000      sessions the drags spread over (each instance's wrk gets its share)
  SCALE_WAKE_SAMPLES=400   long-poll wake-ups measured, idle and under load each
  BENCH_PG_SETTINGS=       extra PostgreSQL settings, "name=value ..." (default: PostgreSQL's own)

Drags are bench/lua/drag.lua's (each moves its session, one event, one committed change).
Instance k of a configuration gets its own wrk (-t1) with 64/n connections and its own sessions.
"""
import http.client
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (Server, sessions, machine facts, formatting)
from postgres import Postgres  # noqa: E402

SECONDS = bench.SECONDS
ROUNDS = bench.env_int("SCALE_ROUNDS", 3)
CONNS = bench.CONNS
SESSIONS = bench.env_int("SCALE_SESSIONS", 3000)
WAKE_SAMPLES = bench.env_int("SCALE_WAKE_SAMPLES", 400)
CLK_TCK = bench.CLK_TCK
MARK_BEGIN, MARK_END = "<!-- scale-out: written by bench/scaleout.py -->", "<!-- /scale-out -->"


def sheetd(name, store_args, level):
    argv = [bench.SHEETD, "--host", "127.0.0.1", "--port", "0", "--threads", str(bench.THREADS),
            "--log-level", level] + store_args
    return bench.Server(name, argv).start()


def split(path, parts):
    """The session file cut into `parts` files (every parts-th line each)."""
    with open(path) as f:
        lines = [line for line in f if line.strip()]
    paths = []
    for k in range(parts):
        p = f"{path}.{parts}.{k}"
        with open(p, "w") as f:
            f.writelines(lines[k::parts])
        paths.append(p)
    return paths


def run_config(servers, files, postgres, record):
    """One wrk per instance at once; returns the configuration's figures for this round."""
    n = len(servers)
    procs = []
    pg0 = postgres.counters() if postgres else None
    cpu0 = [sum(s.cpu_ticks()) for s in servers]
    w0, m0 = bench.children_cpu_s(), bench.machine_busy_ticks()
    for srv, path in zip(servers, files):
        cmd = ["wrk", "-t1", f"-c{max(1, CONNS // n)}", f"-d{SECONDS}s", "--latency", "--timeout", "10s",
               "-s", os.path.join(bench.LUA, "drag.lua"), srv.url, "--", path, "1"]
        if record:
            bench.commands.append("wrk: " + shlex.join(cmd))
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate() for p in procs]
    w1, m1 = bench.children_cpu_s(), bench.machine_busy_ticks()
    cpu1 = [sum(s.cpu_ticks()) for s in servers]
    pg1 = postgres.counters() if postgres else None
    results = []
    for (out, err), p in zip(outs, procs):
        m = re.search(r"^BENCH_RESULT (\{.*\})$", out, re.M)
        if p.returncode != 0 or not m:
            raise RuntimeError(f"wrk failed ({p.returncode}): {out}\n{err}")
        results.append(json.loads(m.group(1)))
    for s in servers:
        s.check_alive()
    secs = max(r["duration_us"] for r in results) / 1e6
    reqs = max(1, sum(r["requests"] for r in results))
    sheetd_s = (sum(cpu1) - sum(cpu0)) / CLK_TCK
    row = {
        "rps": reqs / secs,
        "p50": statistics.median(r["latency_us"]["p50"] for r in results),
        "p99": max(r["latency_us"]["p99"] for r in results),
        "errors": sum(sum(r["errors"].values()) for r in results),
        "sheetd_us": sheetd_s * 1e6 / reqs,
        "wrk_us": (w1 - w0) * 1e6 / reqs,
        "busy_cores": (m1 - m0) / CLK_TCK / secs,
    }
    ours = sheetd_s + (w1 - w0)
    if postgres:
        ours += (pg1["cpu_ticks"] - pg0["cpu_ticks"]) / CLK_TCK
        row["pg_us"] = (pg1["cpu_ticks"] - pg0["cpu_ticks"]) / CLK_TCK * 1e6 / reqs
        row["drags_per_commit"] = reqs / max(1, pg1["commits"] - pg0["commits"])
        row["syncs_per_1000"] = (pg1["wal_syncs"] - pg0["wal_syncs"]) * 1000 / reqs
        row["wal_records_per_drag"] = (pg1["wal_records"] - pg0["wal_records"]) / reqs
    # CPU the rest of the machine used meanwhile (other jobs): not ~0, the round competed for the cores.
    row["other_cores"] = max(0.0, row["busy_cores"] - ours / secs)
    return row


def wake_latency(a, b, samples, servers, postgres):
    """A long-poll on B, then (once it waits) a drag through A: seconds from sending the drag to
    B's answer, and from A's answer (the commit) to B's answer; and the cores other jobs used."""
    ours0 = sum(sum(s.cpu_ticks()) for s in servers) + postgres.cpu_ticks()
    m0, w0, t_start = bench.machine_busy_ticks(), bench.children_cpu_s(), time.monotonic()
    conn_a = http.client.HTTPConnection("127.0.0.1", a.port, timeout=30)
    status, data, _ = bench.request(conn_a, "POST", "/sessions", bench.CREATE_BODY)
    sid = json.loads(data)["id"]
    conn_b = http.client.HTTPConnection("127.0.0.1", b.port, timeout=40)
    version, detent = 1, "large"
    from_send, from_answer, wrong = [], [], 0
    for _ in range(samples):
        answered = {}

        def poll():
            s, body, _ = bench.request(conn_b, "GET", f"/sessions/{sid}/events?after={version}&wait=30")
            answered["t"], answered["body"] = time.monotonic(), body

        waiter = threading.Thread(target=poll)
        waiter.start()
        time.sleep(0.01 + random.random() * 0.01)  # the poll reaches B and waits
        detent = "medium" if detent == "large" else "large"
        t0 = time.monotonic()
        s, _, _ = bench.request(conn_a, "POST", f"/sessions/{sid}/drag", json.dumps({"to": detent}).encode())
        t1 = time.monotonic()
        waiter.join()
        version += 1
        events = json.loads(answered["body"]).get("events", [])
        if s != 200 or [e.get("seq") for e in events] != [version]:
            wrong += 1
        from_send.append(answered["t"] - t0)
        from_answer.append(max(0.0, answered["t"] - t1))
    conn_a.close()
    conn_b.close()
    ours = (sum(sum(s.cpu_ticks()) for s in servers) + postgres.cpu_ticks() - ours0) / CLK_TCK + bench.children_cpu_s() - w0
    other = max(0.0, ((bench.machine_busy_ticks() - m0) / CLK_TCK - ours) / (time.monotonic() - t_start))

    def pct(xs, p):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1000
    return {"samples": samples, "wrong": wrong, "other_cores": other,
            **{f"send_p{p}": pct(from_send, p) for p in (50, 90, 99)}, "send_max": max(from_send) * 1000,
            **{f"commit_p{p}": pct(from_answer, p) for p in (50, 90, 99)}, "commit_max": max(from_answer) * 1000}


def main():
    os.makedirs(bench.OUT, exist_ok=True)
    started = time.monotonic()
    help_text = bench.sheetd_help()
    if "--database" not in help_text:
        bench.log(f"bench: scale-out skipped: {bench.SHEETD} has no --database")
        return
    level = bench.quiet_level(help_text) or "off"
    servers, postgres = [], None
    res = {"machine": bench.machine(), "rounds": {}, "wake": {}, "load_average": os.getloadavg()}
    try:
        postgres = Postgres(bench.OUT, bench.commands).start()
        res["pg_settings"] = postgres.show("server_version", "synchronous_commit", "fsync", "wal_sync_method",
                                           "shared_buffers", "max_connections")
        sqlite_dir = os.path.join(bench.OUT, "scaleout-sqlite")
        subprocess.run(["rm", "-rf", sqlite_dir], check=True)
        lite = sheetd("sqlite", ["--data-dir", sqlite_dir], level)
        pgs = [sheetd(f"pg-{k + 1}", ["--database", postgres.url], level) for k in range(3)]
        servers = [lite] + pgs
        files = {}
        for name, srv in (("sqlite", lite), ("pg", pgs[0])):
            path = os.path.join(bench.OUT, f"scaleout-sessions.{name}.txt")
            bench.write_sessions(path, bench.create_sessions(srv, SESSIONS))
            files[name] = path
        configs = {"SQLite, 1 instance": ([lite], [files["sqlite"]], None)}
        for n in (1, 2, 3):
            configs[f"PostgreSQL, {n} instance{'s' if n > 1 else ''}"] = (pgs[:n], split(files["pg"], n), postgres)
        bench.log(f"bench: scale-out: {len(configs)} configurations × {ROUNDS} rounds × {SECONDS} s")
        for name, (srvs, paths, pg) in configs.items():  # warm-up, unrecorded
            run_config(srvs, paths, pg, record=False)
        for rnd in range(ROUNDS):
            for name, (srvs, paths, pg) in configs.items():
                row = run_config(srvs, paths, pg, record=(rnd == 0))
                res["rounds"].setdefault(name, []).append(row)
                bench.log(f"bench: scale-out round {rnd + 1} {name}: {row['rps']:,.0f} drags/s, p99 {bench.fmt_us(row['p99'])}, "
                          f"other jobs {row['other_cores']:.2f} cores")
        bench.log(f"bench: wake latency, idle ({WAKE_SAMPLES} samples)")
        res["wake"]["idle"] = wake_latency(pgs[0], pgs[1], WAKE_SAMPLES, servers, postgres)
        load_cmd = ["wrk", "-t1", "-c16", "-d600s", "--timeout", "10s", "-s", os.path.join(bench.LUA, "drag.lua"),
                    pgs[2].url, "--", split(files["pg"], 3)[2], "1"]
        bench.commands.append("load during the second wake measurement: " + shlex.join(load_cmd))
        load = subprocess.Popen(load_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1)
            bench.log(f"bench: wake latency, under load ({WAKE_SAMPLES} samples)")
            res["wake"]["load"] = wake_latency(pgs[0], pgs[1], WAKE_SAMPLES, servers, postgres)
        finally:
            load.terminate()
            load.wait()
    finally:
        for s in servers:
            s.stop()
        if postgres:
            postgres.stop()
    res["elapsed_s"] = time.monotonic() - started
    res["commands"] = bench.commands
    with open(os.path.join(bench.OUT, "scaleout.json"), "w") as f:
        json.dump(res, f, indent=1)
    write_section(report(res))
    bench.log(f"bench: scale-out written to {os.path.relpath(bench.RESULTS, bench.ROOT)} in {res['elapsed_s']:.0f} s")


def report(res):
    med = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for name, rows in res["rounds"].items()}
    lite = med["SQLite, 1 instance"]
    one = med["PostgreSQL, 1 instance"]
    m, s = res["machine"], res["pg_settings"]
    out = [MARK_BEGIN, "## Scale-out: PostgreSQL (`--database`) with 1, 2 and 3 instances against SQLite", "",
           f"{m['date']}, commit {m['commit']}, {m['nproc']} cores ({m['cpu']}). Command: `make bench-scaleout` "
           f"(`bench/run --scaleout`): {ROUNDS} rounds × {SECONDS} s per configuration, {CONNS} connections in all "
           f"(split over the instances, one wrk -t1 each), {SESSIONS:,} sessions, drags as drag.lua; every process "
           f"(wrk, sheetd instances, PostgreSQL) on this one machine. PostgreSQL {s['server_version']}, "
           f"synchronous_commit={s['synchronous_commit']}, fsync={s['fsync']} ({s['wal_sync_method']}), "
           f"shared_buffers={s['shared_buffers']}. Medians over rounds. Load average at the start: "
           f"{' '.join(f'{x:.1f}' for x in res['load_average'])}; \"other jobs\" is the CPU the rest of the machine used "
           f"meanwhile (not ~0: the figures competed for the cores).", "",
           "| configuration | drags/s | × SQLite | × 1 PG instance | p50 | p99 | sheetd CPU µs/drag | PostgreSQL CPU µs/drag "
           "| wrk CPU µs/drag | drags per commit | WAL syncs per 1,000 drags | other jobs (cores) | errors |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in med.items():
        pg = "pg_us" in r
        cells = [name, bench.fmt_rps(r["rps"]), f"{r['rps'] / lite['rps']:.2f}×", f"{r['rps'] / one['rps']:.2f}×",
                 bench.fmt_us(r["p50"]), bench.fmt_us(r["p99"]), f"{r['sheetd_us']:.0f}",
                 f"{r['pg_us']:.0f}" if pg else "-", f"{r['wrk_us']:.0f}",
                 f"{r['drags_per_commit']:.1f}" if pg else "-", f"{r['syncs_per_1000']:.0f}" if pg else "-",
                 f"{r['other_cores']:.2f}", f"{r['errors']:.0f}"]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "Cross-instance wake: a long-poll on instance B, then a drag through instance A; time until B "
            "answers, from sending the drag (includes its commit) and from A's answer (the commit is done). "
            "Target: a change committed through A wakes B within 100 ms at p99, so it is judged from A's answer; "
            "the time from the drag adds the drag's own commit, which is shown beside it.", "",
            "| condition | samples | from the drag: p50 | p90 | p99 | max | from its answer: p50 | p99 | max | wrong answers | other jobs (cores) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for cond, label in (("idle", "idle"), ("load", "while wrk -c16 drags through instance C")):
        w = res["wake"][cond]
        out.append(f"| {label} | {w['samples']} | {w['send_p50']:.1f} ms | {w['send_p90']:.1f} ms | {w['send_p99']:.1f} ms | "
                   f"{w['send_max']:.1f} ms | {w['commit_p50']:.1f} ms | {w['commit_p99']:.1f} ms | {w['commit_max']:.1f} ms | {w['wrong']} | "
                   f"{w['other_cores']:.2f} |")
    worst = max(res["wake"][c]["commit_p99"] for c in res["wake"])
    worst_send = max(res["wake"][c]["send_p99"] for c in res["wake"])
    out += ["", f"Wake target (p99 ≤ 100 ms after the commit): {'met' if worst <= 100 else 'NOT MET'} "
            f"(worst p99 {worst:.1f} ms after A's answer; {worst_send:.1f} ms from sending the drag).", "",
            "Commands:", "", "```"] + res["commands"] + ["```", MARK_END, ""]
    return "\n".join(out)


def write_section(text):
    try:
        with open(bench.RESULTS) as f:
            old = f.read()
    except OSError:
        old = ""
    if MARK_BEGIN in old and MARK_END in old:
        head, rest = old.split(MARK_BEGIN, 1)
        new = head + text.rstrip("\n") + rest.split(MARK_END, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n" + text
    with open(bench.RESULTS, "w") as f:
        f.write(new)


if __name__ == "__main__":
    main()
