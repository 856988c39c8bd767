import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension Process {
    /// `run()`, with the child tied to this test process: it gets SIGKILL the moment the test
    /// process ends, however it ends (a failed expectation, a crash, `kill -9`), so no sheetd a
    /// test started outlives the run.
    ///
    /// The child goes through util-linux's `setpriv --pdeathsig KILL`, which sets
    /// PR_SET_PDEATHSIG in the child and then execs the real program (same pid). That signal
    /// fires when the *thread* that forked the child ends, not the process, and test code runs
    /// on threads that come and go (`offPool` makes one per job): so the fork happens on
    /// `ChildSpawner`'s thread, which lives as long as the test process.
    func runTiedToTestProcess() throws {
        if let program = executableURL, FileManager.default.isExecutableFile(atPath: ChildSpawner.setpriv) {
            arguments = ["--pdeathsig", "KILL", "--", program.path] + (arguments ?? [])
            executableURL = URL(fileURLWithPath: ChildSpawner.setpriv)
        }
        let process = UncheckedProcess(self)
        try ChildSpawner.shared.perform { try process.value.run() }
    }
}

/// A `Process` carried to the spawner thread.
// @unchecked Sendable: the caller waits for the spawner to finish with it before touching it again.
private struct UncheckedProcess: @unchecked Sendable {
    let value: Process
    init(_ value: Process) { self.value = value }
}

/// The one thread that forks this test process's children (see `runTiedToTestProcess`).
final class ChildSpawner: @unchecked Sendable {
    // @unchecked Sendable: `jobs` is only touched with `condition` locked.
    static let shared = ChildSpawner()
    static let setpriv = "/usr/bin/setpriv"

    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []

    private init() {
        let thread = Thread { [unowned self] in
            while true {
                condition.lock()
                while jobs.isEmpty { condition.wait() }
                let job = jobs.removeFirst()
                condition.unlock()
                job()
            }
        }
        thread.name = "child-spawner"
        thread.start()
    }

    /// Runs `body` on the spawner thread and waits for it (a fork is quick).
    func perform(_ body: @escaping @Sendable () throws -> Void) throws {
        let done = DispatchSemaphore(value: 0)
        let outcome = LockedOutcome()
        condition.lock()
        jobs.append {
            outcome.set(Result { try body() })
            done.signal()
        }
        condition.signal()
        condition.unlock()
        done.wait()
        try outcome.get()
    }
}

/// The spawner's result, handed back to the waiting thread.
private final class LockedOutcome: @unchecked Sendable {
    // @unchecked Sendable: `result` is only touched with `lock` held.
    private let lock = NSLock()
    private var result: Result<Void, any Error> = .success(())
    func set(_ value: Result<Void, any Error>) { lock.lock(); result = value; lock.unlock() }
    func get() throws { lock.lock(); defer { lock.unlock() }; try result.get() }
}
