"""A private PostgreSQL for the benchmark (bench/scaleout.py): initdb in a directory of its own,
the postmaster on a free loopback port as a child of this process (tied to it with setpriv
--pdeathsig, and run as `postgres` when we are root, since PostgreSQL refuses root), and
the counters that say where a run's time went (transactions, WAL writes and syncs, CPU of the
server's processes).

Settings are PostgreSQL's defaults (fsync and synchronous_commit on) unless BENCH_PG_SETTINGS
("name=value name=value") adds some: the benchmark measures what a deployment would run.
"""
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def binaries():
    root = "/usr/lib/postgresql"
    majors = sorted((int(d) for d in os.listdir(root) if d.isdigit()), reverse=True) if os.path.isdir(root) else []
    for major in majors:
        path = f"{root}/{major}/bin"
        if os.access(f"{path}/postgres", os.X_OK):
            return path
    raise RuntimeError("no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    def __init__(self, parent, commands):
        self.bin = binaries()
        self.dir = tempfile.mkdtemp(prefix="sheetd-bench-pg-", dir=parent)
        self.root = os.geteuid() == 0
        self.as_user = ["setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups"] if self.root else ["setpriv"]
        if self.root:
            entry = pwd.getpwnam("postgres")
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self.port = free_port()
        self.url = f"postgresql://sheetd@127.0.0.1:{self.port}/sheetd"
        self.commands = commands
        self.proc = None
        self.settings = [("listen_addresses", "127.0.0.1"), ("unix_socket_directories", "")]
        self.settings += [tuple(kv.split("=", 1)) for kv in shlex.split(os.environ.get("BENCH_PG_SETTINGS", ""))]
        self.logpath = os.path.join(self.dir, "postgres.log")

    def start(self):
        data = os.path.join(self.dir, "data")
        subprocess.run(self.as_user + ["--", f"{self.bin}/initdb", "-D", data, "-A", "trust", "-U", "sheetd",
                                       "-E", "UTF8", "--no-locale"], check=True, capture_output=True, cwd=self.dir)
        argv = [f"{self.bin}/postgres", "-D", data, "-p", str(self.port)]
        for name, value in self.settings:
            argv += ["-c", f"{name}={value}"]
        self.commands.append("postgres: " + shlex.join(argv))
        with open(self.logpath, "ab") as log:
            self.proc = subprocess.Popen(self.as_user + ["--pdeathsig", "KILL", "--"] + argv, stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL, cwd=self.dir)
        deadline = time.monotonic() + 60
        while subprocess.run([f"{self.bin}/pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port)]).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start: {open(self.logpath).read()[-2000:]}")
            time.sleep(0.1)
        self.psql("create database sheetd", database="postgres")
        return self

    def psql(self, sql, database="sheetd"):
        p = subprocess.run([f"{self.bin}/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                            "-p", str(self.port), "-U", "sheetd", "-d", database, "-c", sql],
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {p.stderr}")
        return p.stdout.strip()

    def show(self, *names):
        return {n: self.psql(f"show {n}") for n in names}

    def counters(self):
        """Transactions committed in `sheetd`, WAL records, writes and syncs, and the CPU ticks of
        the postmaster and its children (backends, WAL writer, checkpointer) so far."""
        commits = int(self.psql("select xact_commit from pg_stat_database where datname = 'sheetd'"))
        wal = self.psql("select wal_records, wal_write, wal_sync from pg_stat_wal").split("|")
        return {"commits": commits, "wal_records": int(wal[0]), "wal_writes": int(wal[1]), "wal_syncs": int(wal[2]),
                "cpu_ticks": self.cpu_ticks()}

    def cpu_ticks(self):
        total = 0
        for pid in [d for d in os.listdir("/proc") if d.isdigit()]:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(pid) == self.proc.pid or int(fields[1]) == self.proc.pid:
                total += int(fields[11]) + int(fields[12])
        return total

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
