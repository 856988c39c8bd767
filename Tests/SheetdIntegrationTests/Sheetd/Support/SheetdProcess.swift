import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The real `sheetd` binary, started on an ephemeral loopback port for one test (a
/// `ChildProcess`: tied to the test process, reaped here, every wait bounded).
final class SheetdProcess: Sendable {
    let process: ChildProcess
    let port: Int

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
        var arguments = arguments
        if !arguments.contains("--port") { arguments += ["--port", "0"] }
        if !["--data-dir", "--memory", "--database"].contains(where: arguments.contains) { arguments += ["--memory"] }
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SHEETD_") }
        env.merge(environment) { $1 }
        process = try ChildProcess(Self.binary.path, arguments, environment: env, standardError: .collect)
        let (port, text) = Self.listeningPort(of: process)
        guard let port else {
            _ = process.stop(signal: SIGKILL)
            throw TestClientError(description: "sheetd did not start: \(text)")
        }
        self.port = port
    }

    /// The port a started sheetd's "listening on" line gives, or nil when its standard error
    /// closed (it exited) without one; with what it wrote so far. 20 s only end a failure.
    static func listeningPort(of process: ChildProcess) -> (port: Int?, standardError: String) {
        let pattern = #"listening on https?://[^\s]+:(\d+)"#
        let text = process.waitForStandardError(within: 20) { $0.range(of: pattern, options: .regularExpression) != nil }
        guard let range = text.range(of: pattern, options: .regularExpression) else { return (nil, text) }
        return (Int(text[range].split(separator: ":").last ?? ""), text)
    }

    /// sheetd's soft open-file limit as /proc says it ("1024", or "unlimited"); nil when /proc
    /// has no "Max open files" line.
    func softOpenFileLimit() throws -> String? {
        let limits = try String(contentsOfFile: "/proc/\(process.processIdentifier)/limits", encoding: .utf8)
        guard let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }) else { return nil }
        return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).first.map(String.init)
    }

    /// Everything sheetd wrote to its standard error so far (all of it once `stop` returned).
    var stderr: String { process.standardErrorText }

    func client(receiveTimeout: Double = 10) throws -> TestHTTPClient {
        try TestHTTPClient(port: port, receiveTimeout: receiveTimeout)
    }

    /// Sends a signal and waits for the exit (at most `timeout` seconds, then SIGKILL): the exit
    /// status, or -1 if it had to be killed.
    @discardableResult
    func stop(signal: Int32 = SIGTERM, timeout: Double = 15) -> Int32 {
        process.stop(signal: signal, within: timeout) ?? -1
    }
}
