import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The real `sheetd` binary, started on an ephemeral loopback port for one test.
final class SheetdProcess: @unchecked Sendable {
    // @unchecked Sendable: `process` and the pipe are only touched from the test that owns this
    // object; the stderr collector appends under `lock`.
    let process = Process()
    let port: Int
    private let errors: FileHandle
    private let lock = NSLock()
    private var stderrText = ""

    /// The binary next to the test bundle: `swift test` builds it into the same folder.
    static var binary: URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("sheetd")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/sheetd")
    }

    init(_ arguments: [String] = [], environment: [String: String] = [:]) throws {
        process.executableURL = Self.binary
        var arguments = arguments
        if !arguments.contains("--port") { arguments += ["--port", "0"] }
        if !arguments.contains("--data-dir") && !arguments.contains("--memory") { arguments += ["--memory"] }
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SHEETD_") }
        env.merge(environment) { $1 }
        process.environment = env
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.runTiedToTestProcess()
        SheetdProcess.register(process.processIdentifier)
        let handle = errors.fileHandleForReading
        // Read stderr until the "listening on" line gives the port, then keep collecting in the background.
        var collected = ""
        var port: Int?
        let deadline = Date().addingTimeInterval(20)
        while port == nil, Date() < deadline {
            let data = handle.availableData
            if data.isEmpty { break }
            collected += String(decoding: data, as: UTF8.self)
            if let range = collected.range(of: #"listening on https?://[^\s]+:(\d+)"#, options: .regularExpression) {
                let match = String(collected[range])
                port = Int(match.split(separator: ":").last ?? "")
            }
        }
        guard let port else {
            process.terminate()
            throw TestClientError(description: "sheetd did not start: \(collected)")
        }
        self.port = port
        self.errors = handle
        stderrText = collected
        handle.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.lock()
            self.stderrText += String(decoding: data, as: UTF8.self)
            self.lock.unlock()
        }
    }

    /// Every sheetd a test started, killed when the test process exits so none outlives the run
    /// (suites share one server in a static, which is never deinitialised).
    private static let running = NSLock()
    // nonisolated(unsafe): only read or written while holding `running`.
    nonisolated(unsafe) private static var pids: [pid_t] = []
    private static let installExitHook: Void = {
        atexit {
            SheetdProcess.running.lock()
            for pid in SheetdProcess.pids { kill(pid, SIGKILL) }
            SheetdProcess.running.unlock()
        }
    }()

    private static func register(_ pid: pid_t) {
        _ = installExitHook
        running.lock()
        pids.append(pid)
        running.unlock()
    }

    var stderr: String {
        lock.lock()
        defer { lock.unlock() }
        return stderrText
    }

    func client(receiveTimeout: Double = 10) throws -> TestHTTPClient {
        try TestHTTPClient(port: port, receiveTimeout: receiveTimeout)
    }

    /// Sends a signal and waits for the exit; returns the exit status.
    @discardableResult
    func stop(signal: Int32 = SIGTERM, timeout: Double = 15) -> Int32 {
        if process.isRunning { kill(process.processIdentifier, signal) }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return -1
        }
        // Let Foundation observe the exit itself: a Process whose end was only seen through
        // isRunning stays in a retain cycle with its run-loop source (LeakSanitizer reports it).
        process.waitUntilExit()
        // Collect what is still in the pipe, so `stderr` is complete once the process is gone.
        // Not readDataToEndOfFile: another sheetd started concurrently by another test may have
        // inherited this pipe's write end, so EOF can be arbitrarily late. The process has exited,
        // so everything it wrote is already in the pipe: read until it is empty.
        errors.readabilityHandler = nil
        let fd = errors.fileDescriptor
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var chunk = [UInt8](repeating: 0, count: 65536)
        var rest: [UInt8] = []
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            rest += chunk[0..<count]
        }
        lock.lock()
        stderrText += String(decoding: rest, as: UTF8.self)
        lock.unlock()
        return process.terminationStatus
    }

    deinit {
        // Stop watching the pipe before it is closed: a descriptor closed under libdispatch's
        // watch can crash its event loop.
        errors.readabilityHandler = nil
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
