#!/usr/bin/env python3
"""Writes a sheetd data directory holding N idle sessions, fast (about 10 s per million).

  python3 bench/make-sessions.py SHEETD DATA_DIR N

sheetd itself creates the file (its own schema and migrations: it is started once on the empty
directory, creates one session over HTTP and is stopped), so the file is exactly what this sheetd
writes; then that session's rows are copied N-1 times with fresh ids, ordinals and creation times
in one transaction (Python's sqlite3, no sheetd involved). Every session is what
`POST /sessions {"detents":["medium","large"]}` leaves: presented at large, one event.
"""
import base64
import http.client
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time


def start(sheetd, data_dir):
    proc = subprocess.Popen([sheetd, "--host", "127.0.0.1", "--port", "0", "--data-dir", data_dir, "--log-level", "off"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    for line in proc.stderr:
        m = re.search(r"listening on http://[^\s:/]+:(\d+)", line)
        if m:
            return proc, int(m.group(1))
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError(f"{sheetd} did not start on {data_dir}")


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: make-sessions.py SHEETD DATA_DIR N")
    sheetd, data_dir, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, "sheetd.sqlite3")
    if os.path.exists(path):
        sys.exit(f"{path} exists already")
    proc, port = start(sheetd, data_dir)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/sessions", body=b'{"detents":["medium","large"]}')
        answer = conn.getresponse()
        body = answer.read()
        if answer.status != 201:
            raise RuntimeError(f"POST /sessions answered {answer.status}: {body[:200]!r}")
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)

    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("PRAGMA cache_size = -262144")
    (config, created, last_access) = db.execute("SELECT configuration, created_at, last_access FROM sessions").fetchone()
    (seq, event, phase, detent, presentation) = db.execute(
        "SELECT seq, body, phase, detent, presentation FROM event_log ORDER BY id LIMIT 1").fetchone()
    first = json.loads(event)
    db.execute("BEGIN")
    t0 = time.monotonic()
    batch = 50_000
    for start_ordinal in range(2, total + 1, batch):
        ordinals = range(start_ordinal, min(total, start_ordinal + batch - 1) + 1)
        ids = [base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode() for _ in ordinals]
        db.executemany("INSERT INTO sessions (id, ordinal, configuration, created_at, last_access) VALUES (?, ?, ?, ?, ?)",
                       ((sid, n, config, created, last_access) for sid, n in zip(ids, ordinals)))
        db.executemany("INSERT INTO event_log (session, seq, body, phase, detent, presentation, dismiss_reason) "
                       "VALUES (?, ?, ?, ?, ?, ?, NULL)",
                       ((n, seq, event, phase, detent, presentation) for n in ordinals))
    db.execute("INSERT INTO meta (name, value) VALUES ('highest_ordinal', ?) "
               "ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)", (total,))
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    print(f"make-sessions: {total:,} sessions in {path} ({os.path.getsize(path) / 2**20:.0f} MiB, "
          f"{time.monotonic() - t0:.1f} s; first event {first.get('type')})", file=sys.stderr)


if __name__ == "__main__":
    main()
