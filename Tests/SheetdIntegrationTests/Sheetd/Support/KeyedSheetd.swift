import AccessControl
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Polling

/// A real sheetd started with `--auth-keys`, and the keys its file lists (made here, as
/// `sheetd keys new` makes them), so tests can call it as each tenant and role.
final class KeyedSheetd: @unchecked Sendable {
    // @unchecked Sendable: `keys` is fixed after init; the file is rewritten only by the test
    // that owns this server.
    let server: SheetdProcess
    let directory: URL
    let keysFile: URL
    /// Key of each holder, e.g. "acme/app".
    private(set) var keys: [String: String] = [:]
    private var lines: [String: String] = [:]

    /// `holders`: "tenant/role" each.
    init(_ holders: [String], arguments: [String] = []) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("sheetd-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        keysFile = directory.appendingPathComponent("keys")
        var keys: [String: String] = [:]
        var lines: [String: String] = [:]
        for holder in holders {
            let parts = holder.split(separator: "/").map(String.init)
            let key = NewKey(tenant: parts[0], role: Role(rawValue: parts[1])!)
            keys[holder] = key.key
            lines[holder] = key.line
        }
        self.keys = keys
        self.lines = lines
        try Self.fileText(holders.compactMap { lines[$0] }).write(to: keysFile, atomically: true, encoding: .utf8)
        server = try SheetdProcess(["--auth-keys", keysFile.path] + arguments)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// Rewrites the keys file with the lines of `holders` only (and a comment and a blank line).
    func write(_ holders: [String], extra: String = "") throws {
        try (Self.fileText(holders.compactMap { lines[$0] }) + extra).write(to: keysFile, atomically: true, encoding: .utf8)
    }

    private static func fileText(_ lines: [String]) -> String {
        "# written by a test\n\n" + lines.joined(separator: "\n") + "\n"
    }

    /// Sends SIGHUP and waits for the reload's log line (`loaded` or `not loaded`).
    func reload(expecting marker: String) throws {
        let before = server.stderr.components(separatedBy: marker).count
        kill(server.process.processIdentifier, SIGHUP)
        guard eventuallyBlocking(within: .seconds(20), every: .milliseconds(10), {
            server.stderr.components(separatedBy: marker).count > before
        }) else {
            throw TestClientError(description: "no \"\(marker)\" after SIGHUP: \(server.stderr)")
        }
    }

    /// One request on a fresh connection (a refusal at the head closes its connection), as `holder`
    /// ("acme/app"), or with no key for nil.
    func call(_ holder: String?, _ method: String, _ path: String, body: String? = nil,
              headers: [(String, String)] = []) throws -> TestResponse {
        var headers = headers
        if let holder { headers.append(("Authorization", "Bearer \(keys[holder]!)")) }
        return try server.client().request(method, path, body: body, headers: headers)
    }

    /// A session created by `holder`; its id.
    func createSession(_ holder: String) throws -> String {
        let created = try call(holder, "POST", "/sessions", body: #"{"detents":["large","medium"],"thresholdDetent":"height:300"}"#)
        guard created.status == 201, let id = created.json["id"] as? String else {
            throw TestClientError(description: "create as \(holder) answered \(created.status) \(created.text)")
        }
        return id
    }
}

/// Runs the sheetd binary to its end (start-up failures, `keys new`): exit status and output.
func runSheetd(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, stdout: String, stderr: String) {
    try runToEnd(SheetdProcess.binary, arguments, environment: environment)
}
