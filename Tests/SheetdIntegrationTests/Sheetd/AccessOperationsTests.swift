import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Running sheetd with keys: rotation on SIGHUP, a keys file with a mistake, `keys new`, rate
/// limits, protected mode, browsers (CORS), and what the log says of a caller.
@Suite("Operating with keys")
struct AccessOperationsTests {
    @Test func aKeyRemovedAndSIGHUPStopsAtOnceWhileOthersKeepWorking() async throws {
        try await offPool {
            let server = try KeyedSheetd(["acme/app", "globex/app"])
            let acme = try server.createSession("acme/app")
            let globex = try server.createSession("globex/app")
            try server.write(["globex/app"])
            try server.reload(expecting: "1 API keys loaded")
            let refused = try server.call("acme/app", "GET", "/sessions/\(acme)")
            #expect(refused.status == 401)
            #expect(refused.errorCode == "unauthorized")
            #expect(try server.call("globex/app", "GET", "/sessions/\(globex)").status == 200)
            #expect(try server.call("globex/app", "POST", "/sessions/\(globex)/drag", body: #"{"to":"medium"}"#).status == 200)

            // A reload with a mistake keeps the keys in use and names the line.
            try server.write(["globex/app"], extra: "acme app not-a-digest\n")
            try server.reload(expecting: "not loaded")
            #expect(server.server.stderr.contains("line 4"), "\(server.server.stderr)")
            #expect(try server.call("globex/app", "GET", "/sessions/\(globex)").status == 200)
            #expect(try server.call("acme/app", "GET", "/sessions/\(acme)").status == 401)

            // The key comes back with its line, and its tenant's session is still there.
            try server.write(["acme/app", "globex/app"])
            try server.reload(expecting: "2 API keys loaded")
            #expect(try server.call("acme/app", "GET", "/sessions/\(acme)").status == 200)
            #expect(server.server.stop() == 0)
        }
    }

    @Test(arguments: [
        ("acme app 0123\n", 1),
        ("# fine\n\nacme app \(String(repeating: "ab", count: 32))\nglobex root \(String(repeating: "cd", count: 32))\n", 4),
        ("acme app \(String(repeating: "ab", count: 32)) extra\n", 1),
    ])
    func aKeysFileWithAMistakeStopsStartUpNamingTheLine(text: String, line: Int) throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sheetd-bad-keys-\(UUID().uuidString)")
        try text.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try runSheetd(["--auth-keys", file.path, "--port", "0", "--memory"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("line \(line):"), "\(run.stderr)")
        #expect(!run.stderr.contains("listening on"))
        let fromEnvironment = try runSheetd(["--port", "0", "--memory"], environment: ["SHEETD_AUTH_KEYS": file.path])
        #expect(fromEnvironment.status == 2)
        #expect(fromEnvironment.stderr.contains("line \(line):"))
    }

    @Test func keysNewPrintsAKeyTheLineAccepts() async throws {
        try await offPool {
            let made = try runSheetd(["keys", "new", "--tenant", "acme", "--role", "app"])
            #expect(made.status == 0)
            let lines = made.stdout.split(separator: "\n")
            let key = try #require(lines.first { $0.hasPrefix("key: ") }?.dropFirst("key: ".count))
            let line = try #require(lines.first { $0.hasPrefix("keys-file line: ") }?.dropFirst("keys-file line: ".count))
            #expect(key.count >= 7 + 22, "at least 128 bits")
            #expect(!line.contains(key), "the line holds a digest, not the key")
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("sheetd-keys-\(UUID().uuidString)")
            try (String(line) + "\n").write(to: file, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(at: file) }
            let server = try SheetdProcess(["--auth-keys", file.path])
            let created = try server.client().request("POST", "/sessions", body: "{}", headers: [("Authorization", "Bearer \(key)")])
            #expect(created.status == 201)
            let bad = try runSheetd(["keys", "new", "--tenant", "acme", "--role", "root"])
            #expect(bad.status == 2)
            #expect(server.stop() == 0)
            // The log names the tenant and never the key.
            #expect(server.stderr.contains("tenant=acme"))
            #expect(!server.stderr.contains(String(key)))
        }
    }

    @Test func aBurstFromOneKeyIsLimitedWhileAnotherKeysRequestsAllSucceed() async throws {
        try await offPool {
            let server = try KeyedSheetd(["acme/app", "globex/app"], arguments: ["--rate-limit", "10"])
            let id = try server.createSession("acme/app")
            var limited: TestResponse?
            for _ in 0..<500 {
                let answer = try server.call("acme/app", "GET", "/sessions/\(id)")
                if answer.status == 429 { limited = answer; break }
                #expect(answer.status == 200)
            }
            let refusal = try #require(limited, "500 requests in a row never hit a limit of 10 per second")
            #expect(refusal.errorCode == "rate_limited")
            #expect((Int(refusal.header("Retry-After") ?? "") ?? 0) >= 1)
            // globex has its own bucket: a whole burst of it goes through while acme is over its limit.
            let other = try server.createSession("globex/app")
            for _ in 0..<9 {
                #expect(try server.call("globex/app", "GET", "/sessions/\(other)").status == 200)
            }
            #expect(server.server.stop() == 0)
        }
    }

    @Test func withoutKeysTheLimitIsPerClientAddress() async throws {
        try await offPool {
            let server = try SheetdProcess(["--rate-limit", "5"])
            var statuses: [Int] = []
            for _ in 0..<300 {
                let status = try server.client().request("GET", "/sessions").status
                statuses.append(status)
                if status == 429 { break }
            }
            #expect(statuses.last == 429)
            #expect(try server.client().request("GET", "/healthz").status == 200, "health checks are never limited")
            #expect(server.stop() == 0)
        }
    }

    /// The first address of this machine that is not loopback, if it has one.
    static let outsideAddress: String? = {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return nil }
        defer { freeifaddrs(list) }
        var cursor = list
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            var text = [CChar](repeating: 0, count: 64)
            address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { _ = inet_ntop(AF_INET, &$0.pointee.sin_addr, &text, 64) }
            let string = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if !string.hasPrefix("127.") { return string }
        }
        return nil
    }()

    @Test(.enabled(if: outsideAddress != nil, "this machine has no address besides loopback"))
    func protectedModeServesLoopbackOnlyUnlessTold() async throws {
        try await offPool {
            let outside = try #require(Self.outsideAddress)
            let protected = try SheetdProcess(["--host", "0.0.0.0"])
            let refused = try TestHTTPClient(port: protected.port, host: outside).request("POST", "/sessions", body: "{}")
            #expect(refused.status == 403)
            #expect(refused.errorCode == "auth_required")
            let message = (refused.json["error"] as? [String: Any])?["message"] as? String ?? ""
            #expect(message.contains("--auth-keys") && message.contains("--allow-unauthenticated"))
            #expect(try TestHTTPClient(port: protected.port, host: outside).request("GET", "/healthz").status == 200)
            #expect(try protected.client().request("POST", "/sessions", body: "{}").status == 201)
            let list = try protected.client().request("GET", "/sessions")
            #expect((list.json["sessions"] as? [Any])?.count == 1)

            let open = try SheetdProcess(["--host", "0.0.0.0", "--allow-unauthenticated"])
            #expect(try TestHTTPClient(port: open.port, host: outside).request("POST", "/sessions", body: "{}").status == 201)
            #expect(protected.stop() == 0)
            #expect(open.stop() == 0)
        }
    }

    @Test func browsersFromListedOriginsOnly() async throws {
        try await offPool {
            let server = try KeyedSheetd(["acme/app"], arguments: ["--cors-origin", "https://app.example", "--cors-origin", "http://localhost:3000"])
            let preflight = try server.call(nil, "OPTIONS", "/sessions", headers: [
                ("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST"),
                ("Access-Control-Request-Headers", "authorization, content-type"),
            ])
            #expect(preflight.status == 204)
            #expect(preflight.header("Access-Control-Allow-Origin") == "https://app.example")
            #expect(preflight.header("Access-Control-Allow-Headers")?.contains("Authorization") == true)
            #expect(preflight.header("Access-Control-Allow-Methods")?.contains("POST") == true)
            let stranger = try server.call(nil, "OPTIONS", "/sessions", headers: [
                ("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST"),
            ])
            #expect(stranger.header("Access-Control-Allow-Origin") == nil)
            #expect(stranger.status == 405)
            let created = try server.call("acme/app", "POST", "/sessions", body: "{}", headers: [("Origin", "http://localhost:3000")])
            #expect(created.status == 201)
            #expect(created.header("Access-Control-Allow-Origin") == "http://localhost:3000")
            #expect(created.header("Access-Control-Expose-Headers")?.contains("ETag") == true)
            let refused = try server.call(nil, "GET", "/sessions", headers: [("Origin", "http://localhost:3000")])
            #expect(refused.status == 401)
            #expect(refused.header("Access-Control-Allow-Origin") == "http://localhost:3000")
            let other = try server.call("acme/app", "GET", "/sessions", headers: [("Origin", "https://evil.example")])
            #expect(other.header("Access-Control-Allow-Origin") == nil)
            #expect(!(created.header("Access-Control-Allow-Origin") ?? "").contains("*"))
            #expect(server.server.stop() == 0)
        }
    }

    @Test(arguments: [
        (["--tls-cert", "/nonexistent.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-key", "/nonexistent.pem"], "--tls-cert and --tls-key go together"),
        (["--auth-keys", "/k", "--allow-unauthenticated"], "cannot be combined"),
        (["--cors-origin", "*"], "--cors-origin must be an origin"),
        (["--rate-limit", "-1"], "--rate-limit must be"),
        (["--stream-keepalive", "0s"], "--stream-keepalive must be at least 100ms"),
        (["--stream-keepalive", "soon"], "--stream-keepalive must be a duration"),
        (["--shutdown-grace", "1e20s"], "--shutdown-grace must be at most 36500d"),
        (["--database", "postgresql://sheetd@127.0.0.1:1/sheetd", "--memory"], "cannot be combined with --memory"),
        (["--database", "postgresql://sheetd@127.0.0.1:1/sheetd", "--data-dir", "/nonexistent"], "cannot be combined with --data-dir"),
    ])
    func usageErrors(arguments: [String], words: String) throws {
        // A usage error stops start-up before any store opens; the store flag is the test's own
        // where it names one, --memory otherwise.
        let storeGiven = arguments.contains { ["--memory", "--data-dir", "--database"].contains($0) }
        let run = try runSheetd(arguments + ["--port", "0"] + (storeGiven ? [] : ["--memory"]))
        #expect(run.status == 2)
        #expect(run.stderr.contains(words), "\(run.stderr)")
    }
}

@Suite("Sessions per tenant")
struct TenantCapacityTests {
    @Test func aTenantAtItsLimitIsRefusedWhileOthersCreate() async throws {
        try await offPool {
            let server = try KeyedSheetd(["acme/app", "globex/app"], arguments: ["--max-sessions-per-tenant", "2"])
            let first = try server.createSession("acme/app")
            _ = try server.createSession("acme/app")
            let refused = try server.call("acme/app", "POST", "/sessions", body: "{}")
            #expect(refused.status == 503)
            #expect(refused.errorCode == "capacity_exceeded")
            _ = try server.createSession("globex/app")
            _ = try server.createSession("globex/app")
            #expect(try server.call("acme/app", "DELETE", "/sessions/\(first)").status == 204)
            #expect(try server.call("acme/app", "POST", "/sessions", body: "{}").status == 201)
            #expect(server.server.stop() == 0)
        }
    }
}
