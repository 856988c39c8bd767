import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Every sheetd a test starts dies with the test process, however that process ends: here a
/// child test process starts one, then is killed with SIGKILL (or crashes), and the sheetd it
/// started must be gone.
@Suite("No sheetd outlives its test process", .serialized)
struct OrphanTests {
    /// Where the child test process writes the pid of the sheetd it started (set only there).
    static let probeFile = ProcessInfo.processInfo.environment["SHEETD_ORPHAN_PROBE"]
    static let ending = ProcessInfo.processInfo.environment["SHEETD_ORPHAN_ENDING"] ?? "kill"

    /// The child's part (runs only in the child test process `sheetdDiesWithItsTestProcess`
    /// starts): start a sheetd, say its pid, then wait to be killed, or crash.
    @Test(.enabled(if: probeFile != nil))
    func startSheetdThenEnd() async throws {
        try await offPool {
            let server = try SheetdProcess()
            try "\(server.process.processIdentifier)".write(toFile: Self.probeFile!, atomically: true, encoding: .utf8)
            if Self.ending == "crash" { abort() }
            while true { sleep(1) }
        }
    }

    @Test(arguments: ["kill", "crash"])
    func sheetdDiesWithItsTestProcess(ending: String) async throws {
        try await offPool {
            let probe = NSTemporaryDirectory() + "sheetd-orphan-\(getpid())-\(ending)"
            unlink(probe)
            var environment = ProcessInfo.processInfo.environment
            environment["SHEETD_ORPHAN_PROBE"] = probe
            environment["SHEETD_ORPHAN_ENDING"] = ending
            environment["SWIFT_BACKTRACE"] = "enable=no"
            let child = try ChildProcess(
                CommandLine.arguments[0], ["--testing-library", "swift-testing", "--filter", "OrphanTests/startSheetdThenEnd"],
                environment: environment)
            // 60 s only ends a failure.
            func writtenPID() -> pid_t { (try? String(contentsOfFile: probe, encoding: .utf8)).flatMap { pid_t($0) } ?? 0 }
            var pid: pid_t = 0
            let started = ContinuousClock.now
            while pid == 0 && child.isRunning && milliseconds(since: started) < 60_000 {
                pid = writtenPID()
                usleep(20_000)
            }
            // A crashing child may write the pid and end between two looks.
            if pid == 0 { pid = writtenPID() }
            // Killed here, or crashing by itself.
            if ending == "kill" || child.waitForExit(within: 30) == nil { _ = child.stop(signal: SIGKILL) }
            unlink(probe)
            try #require(pid > 0, "the child test process did not start a sheetd")
            let gone = Self.waitUntilGone(pid)
            if !gone { kill(pid, SIGKILL) }
            #expect(gone, "sheetd \(pid) outlived its test process (\(ending))")
        }
    }

    /// True once `pid` no longer runs sheetd (gone, a zombie nobody reaps, or the pid reused);
    /// 20 s only ends a failure.
    static func waitUntilGone(_ pid: pid_t) -> Bool {
        let started = ContinuousClock.now
        while milliseconds(since: started) < 20_000 {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return true }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            let name = stat[stat.index(after: stat.firstIndex(of: "(")!)..<close]
            if fields.first == "Z" || name != "sheetd" { return true }
            usleep(20_000)
        }
        return false
    }
}
