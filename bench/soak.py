#!/usr/bin/env python3
"""make soak: a durable sheetd under churn for SOAK_SECONDS (600).

Six threads create a session, drag it and delete it, over and over (keep-alive); one thread
opens long-polls (`/events?wait=1`) and one opens Server-Sent Events streams, each on a fresh
connection that it drops (a long-poll after its answer, a stream right after its head).
VmRSS is read every 5 s. Met when VmRSS at the end is within 10% of VmRSS after the first
minute, and when, the load stopped, `sheetd_open_connections` comes back to zero (not counting
the connection asking). Exits 1 when a target is not met.

  SOAK_SECONDS=600 SHEETD=.build/release/sheetd python3 bench/soak.py
"""
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

SECONDS = int(os.environ.get("SOAK_SECONDS", "600"))
SHEETD = os.environ.get("SHEETD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".build", "release", "sheetd"))


def main():
    data = tempfile.mkdtemp(prefix="sheetd-soak-")
    proc = subprocess.Popen([SHEETD, "--host", "127.0.0.1", "--port", "0", "--data-dir", data, "--log-level", "off"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = None
    for line in proc.stderr:
        m = re.search(r"listening on http://[^\s:/]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        sys.exit("soak: sheetd did not start")

    def rss():
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    stop = threading.Event()
    counts = {"cycles": 0, "polls": 0, "streams": 0, "errors": 0}
    lock = threading.Lock()

    def count(key):
        with lock:
            counts[key] += 1

    def create(conn):
        conn.request("POST", "/sessions", body=b'{"detents":["medium","large"]}')
        answer = conn.getresponse()
        body = answer.read()
        if answer.status != 201:
            raise RuntimeError(f"create answered {answer.status}")
        return json.loads(body)["id"]

    def churn():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while not stop.is_set():
            try:
                sid = create(conn)
                conn.request("POST", f"/sessions/{sid}/drag", body=b'{"to":"medium"}')
                conn.getresponse().read()
                conn.request("DELETE", f"/sessions/{sid}")
                conn.getresponse().read()
                count("cycles")
            except Exception:  # noqa: BLE001 - counted, and the connection starts over
                count("errors")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def waiters(kind):
        setup = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        sid = create(setup)
        setup.close()
        while not stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                if kind == "polls":
                    s.sendall(f"GET /sessions/{sid}/events?after=1&wait=1 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                else:
                    s.sendall(f"GET /sessions/{sid}/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n".encode())
                s.recv(4096)
                s.close()
                count(kind)
            except Exception:  # noqa: BLE001
                count("errors")

    threads = [threading.Thread(target=churn) for _ in range(6)]
    threads += [threading.Thread(target=waiters, args=("polls",)), threading.Thread(target=waiters, args=("streams",))]
    for t in threads:
        t.start()
    started = time.monotonic()
    first_minute = None
    samples = []
    while time.monotonic() - started < SECONDS:
        time.sleep(5)
        samples.append((time.monotonic() - started, rss()))
        if first_minute is None and samples[-1][0] >= 60:
            first_minute = samples[-1][1]
        print(f"soak: {samples[-1][0]:5.0f} s  VmRSS {samples[-1][1]:6.1f} MiB  {counts}", flush=True)
    stop.set()
    for t in threads:
        t.join()
    end = rss()
    first_minute = first_minute or samples[0][1]
    open_connections = None
    for _ in range(100):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        m = re.search(r"^sheetd_open_connections (\S+)$", text, re.M)
        open_connections = float(m.group(1)) - 1 if m else None   # not counting this request's own
        if open_connections == 0:
            break
        time.sleep(0.1)
    proc.terminate()
    proc.wait(30)
    shutil.rmtree(data, ignore_errors=True)
    rss_ok = end <= first_minute * 1.10
    conn_ok = open_connections == 0
    print(f"soak: {SECONDS} s, {counts['cycles']:,} create/drag/delete cycles, {counts['polls']:,} long-polls, "
          f"{counts['streams']:,} streams dropped, {counts['errors']} errors")
    print(f"soak: VmRSS after the first minute {first_minute:.1f} MiB, at the end {end:.1f} MiB ({end / first_minute:.3f}x): "
          f"{'met' if rss_ok else 'NOT MET'} (within 10%)")
    print(f"soak: open connections once the load stopped: {open_connections}: {'met' if conn_ok else 'NOT MET'} (zero)")
    sys.exit(0 if rss_ok and conn_ok else 1)


if __name__ == "__main__":
    main()
