import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Polling

/// A program this test process runs: started with `posix_spawn`, reaped with `waitpid`, its
/// output read by a thread of its own. Not Foundation's `Process`: that one reaps its children
/// from a SIGCHLD source of its own, and when it misses an exit, `waitUntilExit()` waits forever
/// on a zombie. Here every wait has a bound, and a child that outstays it is killed.
///
/// The child is tied to this test process: it gets SIGKILL the moment the test process ends,
/// however it ends (a failed expectation, a crash, `kill -9`), so nothing a test started
/// outlives the run. It is started through util-linux's `setpriv --pdeathsig KILL`, which sets
/// PR_SET_PDEATHSIG and then execs the real program (same pid). That signal fires when the
/// *thread* that spawned the child ends, not the process, and test code runs on threads that
/// come and go (`offPool` makes one per job): so the spawn happens on `ChildSpawner`'s thread,
/// which lives as long as the test process.
final class ChildProcess: @unchecked Sendable {
    // @unchecked Sendable: `status` is only touched with `lock` held; `output` locks itself;
    // the rest is fixed at init.

    /// Where a child's standard output or error goes.
    enum Output { case discard, collect }

    let processIdentifier: pid_t
    private let output = CollectedOutput()
    private let lock = NSLock()
    /// The raw `waitpid` status, once reaped.
    private var status: Int32?

    init(_ executable: String, _ arguments: [String], environment: [String: String],
         standardOutput: Output = .discard, standardError: Output = .discard) throws {
        var program = [executable] + arguments
        if FileManager.default.isExecutableFile(atPath: ChildSpawner.setpriv) {
            program = [ChildSpawner.setpriv, "--pdeathsig", "KILL", "--"] + program
        }
        let spawn = SpawnRequest(program: program, environment: environment.map { "\($0.key)=\($0.value)" },
                                 standardOutput: standardOutput == .collect ? .pipe : .null,
                                 standardError: standardError == .collect ? .pipe : .null)
        let (pid, readEnds) = try ChildSpawner.shared.perform { try spawn.run() }
        processIdentifier = pid
        output.startReading(readEnds, name: "child-\(pid)")
    }

    deinit {
        // Last resort for a test that ended without stopping its child.
        if lock.withLock({ status == nil }) {
            kill(processIdentifier, SIGKILL)
            _ = waitForExit(within: 10)
        }
    }

    /// What the child wrote to its standard output or error so far.
    var standardOutputText: String { output.text(of: 1) }
    var standardErrorText: String { output.text(of: 2) }

    /// Waits until the standard error so far satisfies `done` or is closed, at most `seconds`
    /// (which only end a failure); returns it.
    func waitForStandardError(within seconds: Double, until done: (String) -> Bool) -> String {
        output.wait(for: 2, within: seconds, until: done)
    }

    /// Reaps the child if it has ended; true while it runs.
    var isRunning: Bool { reap() == nil }

    /// The child's exit status once it has ended and its output is read to the end, or nil if it
    /// is still running after `seconds` (which only end a failure). Ended by signal N: 128 + N,
    /// as a shell says it.
    func waitForExit(within seconds: Double) -> Int32? {
        guard let raw = retriedBlocking(within: .seconds(seconds), every: .milliseconds(5), reap) else { return nil }
        // The pipes' write ends closed with the child: their readers reach the end at once.
        output.waitUntilClosed(within: 10)
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : 128 + signal
    }

    /// Sends `signal`, waits at most `seconds` for the exit, then kills; the exit status (nil
    /// if it had to be killed).
    func stop(signal: Int32 = SIGTERM, within seconds: Double = 15) -> Int32? {
        if isRunning { kill(processIdentifier, signal) }
        if let status = waitForExit(within: seconds) { return status }
        kill(processIdentifier, SIGKILL)
        _ = waitForExit(within: 10)
        return nil
    }

    /// `waitpid` on this child only, never blocking (nobody else reaps it): the raw status once
    /// it has ended.
    private func reap() -> Int32? {
        lock.lock()
        defer { lock.unlock() }
        if let status { return status }
        var raw: Int32 = 0
        var result: pid_t
        repeat { result = waitpid(processIdentifier, &raw, WNOHANG) } while result < 0 && errno == EINTR
        guard result == processIdentifier else { return nil }
        status = raw
        return raw
    }
}

/// A child's collected output, filled by one reader thread per pipe. A class of its own so the
/// reader threads do not keep the `ChildProcess` alive.
private final class CollectedOutput: @unchecked Sendable {
    // @unchecked Sendable: `bytes` and `open` are only touched with `condition` locked.
    private let condition = NSCondition()
    private var bytes: [Int32: [UInt8]] = [:]
    private var open: Set<Int32> = []

    /// `readEnds`: the child's descriptor (1, 2) to the pipe's read end here.
    func startReading(_ readEnds: [Int32: Int32], name: String) {
        condition.withLock { open = Set(readEnds.keys) }
        for (target, fd) in readEnds {
            let thread = Thread { [self] in read(fd, into: target) }
            thread.name = "\(name)-fd\(target)"
            thread.start()
        }
    }

    /// Reads `fd` to its end (the child's exit closes it), keeping what arrives.
    private func read(_ fd: Int32, into target: Int32) {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            condition.withLock {
                bytes[target, default: []] += chunk[0..<count]
                condition.broadcast()
            }
        }
        close(fd)
        condition.withLock {
            open.remove(target)
            condition.broadcast()
        }
    }

    func text(of target: Int32) -> String {
        condition.withLock { String(decoding: bytes[target] ?? [], as: UTF8.self) }
    }

    func wait(for target: Int32, within seconds: Double, until done: (String) -> Bool) -> String {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while true {
            let text = String(decoding: bytes[target] ?? [], as: UTF8.self)
            if done(text) || !open.contains(target) || Date() >= deadline { return text }
            _ = condition.wait(until: min(deadline, Date().addingTimeInterval(0.05)))
        }
    }

    func waitUntilClosed(within seconds: Double) {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while !open.isEmpty && Date() < deadline {
            _ = condition.wait(until: min(deadline, Date().addingTimeInterval(0.05)))
        }
    }
}

/// Runs a program to its end, at most `seconds` (which only end a failure): its exit status
/// and output.
func runToEnd(_ executable: URL, _ arguments: [String], environment: [String: String] = [:],
              within seconds: Double = 30) throws -> (status: Int32, stdout: String, stderr: String) {
    var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SHEETD_") }
    env.merge(environment) { $1 }
    let child = try ChildProcess(executable.path, arguments, environment: env, standardOutput: .collect, standardError: .collect)
    guard let status = child.waitForExit(within: seconds) else {
        _ = child.stop(signal: SIGKILL)
        throw TestClientError(description: "\(executable.lastPathComponent) \(arguments) did not end by itself within \(Int(seconds)) s")
    }
    return (status, child.standardOutputText, child.standardErrorText)
}
