import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Polling

/// A private PostgreSQL server for one test (or one suite): its own cluster made by `initdb` in a
/// temporary directory, its own free port on 127.0.0.1 only, and a database `sheetd` owned by the
/// role `sheetd` (trust authentication: nothing but this machine can reach it).
///
/// PostgreSQL refuses to run as root, and CI runs the tests as root: then the directory belongs
/// to `postgres` and every server program runs as that account. The postmaster is a child of the
/// test process, tied to it (`ReapedChild`): a test run that is killed leaves no postgres behind,
/// and its backends end when they see the postmaster gone.
///
/// Blocking (initdb and start take a second or more): call it inside `offPool { }`.
final class PostgresServer: @unchecked Sendable {
    // @unchecked Sendable: `postmaster` is only touched with `lock` held; the rest is fixed.
    let directory: String
    let port: Int
    private let account: String?
    private let lock = NSLock()
    private var postmaster: ReapedChild?

    /// `postgresql://sheetd@127.0.0.1:PORT/sheetd`, what `sheetd --database` takes.
    var url: String { "postgresql://sheetd@127.0.0.1:\(port)/sheetd" }

    var dataDirectory: String { directory + "/data" }
    var logFile: String { directory + "/postgres.log" }

    /// The newest `/usr/lib/postgresql/<major>/bin` (Debian's layout; not on PATH).
    static let binaries: String? = {
        let root = "/usr/lib/postgresql"
        let majors = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return majors.last.map { "\(root)/\($0)/bin" }.flatMap {
            FileManager.default.isExecutableFile(atPath: $0 + "/postgres") ? $0 : nil
        }
    }()

    /// Settings every test server gets. `fsync=off`: the tests kill processes, never the machine,
    /// and a committed transaction's WAL is written to the kernel before the commit returns
    /// (`synchronous_commit` stays on), so an immediate stop or a killed postmaster loses
    /// nothing acknowledged; what fsync would add is only the disk flush, slow on a busy machine.
    static let testSettings = ["fsync": "off", "full_page_writes": "off", "shared_buffers": "32MB", "max_connections": "100"]

    /// Makes the cluster, starts it and creates the database `sheetd`. `settings` are extra
    /// `-c name=value` server settings (they win over `testSettings`).
    init(settings: [String: String] = [:]) throws {
        guard let binaries = Self.binaries else {
            throw ReapedChild.Failure(description: "no PostgreSQL server under /usr/lib/postgresql (make deps installs it)")
        }
        directory = NSTemporaryDirectory() + "sheetd-pg-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        Self.register(directory)
        account = geteuid() == 0 ? "postgres" : nil
        if let account {
            guard let entry = getpwnam(account) else {
                throw ReapedChild.Failure(description: "running as root, and there is no user \(account) to run PostgreSQL as")
            }
            chown(directory, entry.pointee.pw_uid, entry.pointee.pw_gid)
        }
        port = try LoopbackPorts.unshared()   // bound after initdb, seconds later, and again on each `start`
        self.settings = Self.testSettings.merging(settings) { $1 }
        self.binaries = binaries
        try ReapedChild.run(binaries + "/initdb", [
            "-D", dataDirectory, "-A", "trust", "-U", "sheetd", "-E", "UTF8", "--no-locale", "--no-sync",
        ], user: account, directory: directory)
        try start()
        try ReapedChild.run(binaries + "/createdb", ["-h", "127.0.0.1", "-p", String(port), "-U", "sheetd", "sheetd"],
                            user: account, directory: directory)
    }

    private let settings: [String: String]
    private let binaries: String

    /// Starts the postmaster on this directory and port (again, after `stop`), and returns once it
    /// accepts connections.
    func start(timeout: Double = 60) throws {
        lock.lock()
        defer { lock.unlock() }
        guard postmaster == nil else { return }
        var arguments = ["-D", dataDirectory, "-p", String(port), "-k", directory, "-c", "listen_addresses=127.0.0.1"]
        for (name, value) in settings.sorted(by: { $0.key < $1.key }) { arguments += ["-c", "\(name)=\(value)"] }
        let child = try ReapedChild.spawn(binaries + "/postgres", arguments, user: account, directory: directory, output: logFile)
        Self.track(child.pid)
        // pg_ctl's own test: the pid file's status line says "ready" once connections are accepted.
        let ready = try eventuallyBlocking(within: .seconds(timeout), every: .milliseconds(10)) {
            if let status = child.poll() {
                Self.untrack(child.pid)
                throw ReapedChild.Failure(description: "postgres exited with \(status): \(log)")
            }
            let lines = ((try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8)) ?? "")
                .split(separator: "\n", omittingEmptySubsequences: false)
            return lines.count > 7 && lines[0] == String(child.pid) && lines[7].trimmingCharacters(in: .whitespaces) == "ready"
        }
        if ready {
            postmaster = child
            return
        }
        kill(child.pid, SIGKILL)
        child.wait(timeout: 30)
        Self.untrack(child.pid)
        throw ReapedChild.Failure(description: "postgres not ready after \(timeout) s: \(log)")
    }

    /// Stops the postmaster and reaps it. `immediate`: as a crash (SIGQUIT, no checkpoint, the
    /// next start recovers from the WAL); otherwise a fast shutdown (SIGINT: clients are cut,
    /// a checkpoint is written).
    func stop(immediate: Bool = false, timeout: Double = 60) {
        lock.lock()
        defer { lock.unlock() }
        guard let child = postmaster else { return }
        kill(child.pid, immediate ? SIGQUIT : SIGINT)
        child.wait(timeout: timeout)
        Self.untrack(child.pid)
        postmaster = nil
    }

    /// The postmaster's process id while it runs (a test that freezes the server stops it).
    var postmasterPID: pid_t? {
        lock.lock()
        defer { lock.unlock() }
        return postmaster?.pid
    }

    var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        return postmaster != nil
    }

    /// Runs `sql` through psql against the `sheetd` database; its output, unaligned, tuples only.
    @discardableResult
    func psql(_ sql: String) throws -> String {
        try ReapedChild.run(Self.binaries! + "/psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                            directory: directory, timeout: 60)
    }

    var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    deinit {
        stop(immediate: true)
        Self.remove(directory)
    }

    // MARK: What the test process cleans up when it exits

    /// Servers held in statics are never deinitialised: at exit, their postmasters are killed
    /// (the death signal would do it too) and their directories removed.
    private static let registry = NSLock()
    // nonisolated(unsafe): only read or written while holding `registry`.
    nonisolated(unsafe) private static var pids: Set<pid_t> = []
    nonisolated(unsafe) private static var directories: Set<String> = []
    private static let installExitHook: Void = {
        atexit {
            PostgresServer.registry.lock()
            let pids = PostgresServer.pids, directories = PostgresServer.directories
            PostgresServer.registry.unlock()
            for pid in pids {
                kill(pid, SIGKILL)
                ReapedChild(pid: pid).wait(timeout: 10)
            }
            directories.forEach(PostgresServer.remove)
        }
    }()

    private static func register(_ directory: String) {
        _ = installExitHook
        registry.lock()
        directories.insert(directory)
        registry.unlock()
    }

    private static func track(_ pid: pid_t) {
        registry.lock()
        pids.insert(pid)
        registry.unlock()
    }

    private static func untrack(_ pid: pid_t) {
        registry.lock()
        pids.remove(pid)
        registry.unlock()
    }

    /// Removes the directory; again if a backend still finishing wrote into it meanwhile.
    private static func remove(_ directory: String) {
        for _ in 0..<5 {
            guard FileManager.default.fileExists(atPath: directory) else { break }
            try? FileManager.default.removeItem(atPath: directory)
            if FileManager.default.fileExists(atPath: directory) { usleep(50_000) }
        }
        registry.lock()
        directories.remove(directory)
        registry.unlock()
    }
}
