import Foundation
import Testing

/// Who may touch a session: every role against every route, and tenants that cannot see,
/// change or even detect each other's sessions. Real sheetd, real keys file, over loopback.
@Suite("Keys, roles and tenants")
struct AccessTests {
    /// One server for the tables: acme has each role, globex an app and an observer.
    static let server = Result { try KeyedSheetd(["acme/app", "acme/observer", "acme/operator", "globex/app", "globex/observer"]) }

    enum Holder: String, CaseIterable, Sendable {
        case nobody, app, observer, `operator`
        var name: String? { self == .nobody ? nil : "acme/\(rawValue)" }
    }

    /// A request of each route; `{id}` is a fresh session of acme's.
    struct Case: Sendable, CustomTestStringConvertible {
        let method: String
        let path: String
        let body: String?
        /// Who may make it; nil: anyone, without a key.
        let allowed: Set<Holder>?
        var testDescription: String { "\(method) \(path)" }
    }

    static let routes: [Case] = [
        Case(method: "GET", path: "/healthz", body: nil, allowed: nil),
        Case(method: "GET", path: "/openapi.yaml", body: nil, allowed: nil),
        Case(method: "GET", path: "/metrics", body: nil, allowed: [.operator]),
        Case(method: "GET", path: "/sessions", body: nil, allowed: [.app, .observer]),
        Case(method: "POST", path: "/sessions", body: "{}", allowed: [.app]),
        Case(method: "GET", path: "/sessions/{id}", body: nil, allowed: [.app, .observer]),
        Case(method: "DELETE", path: "/sessions/{id}", body: nil, allowed: [.app]),
        Case(method: "POST", path: "/sessions/{id}/drag", body: #"{"to":"medium"}"#, allowed: [.app]),
        Case(method: "POST", path: "/sessions/{id}/confirm", body: #"{"action":"cancel"}"#, allowed: [.app]),
        Case(method: "POST", path: "/sessions/{id}/dismiss", body: #"{"reason":"done"}"#, allowed: [.app]),
        Case(method: "POST", path: "/sessions/{id}/present", body: nil, allowed: [.app]),
        Case(method: "GET", path: "/sessions/{id}/events", body: nil, allowed: [.app, .observer]),
        Case(method: "GET", path: "/sessions/{id}/events?after=0&wait=1", body: nil, allowed: [.app, .observer]),
    ]

    @Test(arguments: Holder.allCases, routes)
    func eachRoleAgainstEachRoute(holder: Holder, route: Case) async throws {
        try await offPool {
            let server = try Self.server.get()
            let id = try server.createSession("acme/app")
            let path = route.path.replacingOccurrences(of: "{id}", with: id)
            let answer = try server.call(holder.name, route.method, path, body: route.body)
            let after = try server.call("acme/app", "GET", "/sessions/\(id)")
            if route.allowed == nil || route.allowed!.contains(holder) {
                #expect(![401, 403].contains(answer.status) && answer.status < 500, "\(answer.status) \(answer.text)")
                return
            }
            if holder == .nobody {
                #expect(answer.status == 401)
                #expect(answer.errorCode == "unauthorized")
                #expect(answer.header("WWW-Authenticate") == #"Bearer realm="sheetd""#)
            } else {
                #expect(answer.status == 403)
                #expect(answer.errorCode == "forbidden")
            }
            // A refusal changes nothing.
            #expect(after.status == 200)
            #expect(after.json["version"] as? Int == 1)
        }
    }

    @Test(arguments: [
        ("Bearer sheetd_not-a-key-anyone-has", "unknown_key"),
        ("Basic YWNtZTpzZWNyZXQ=", "invalid_header"),
        ("Bearer", "invalid_header"),
    ])
    func unknownOrMalformedKeysAre401(header: String, reason: String) async throws {
        try await offPool {
            let server = try Self.server.get()
            let answer = try server.call(nil, "GET", "/sessions", headers: [("Authorization", header)])
            #expect(answer.status == 401)
            #expect(answer.errorCode == "unauthorized")
            #expect(answer.header("WWW-Authenticate") == #"Bearer realm="sheetd""#)
            _ = try server.createSession("acme/app")
            let metrics = try server.call("acme/operator", "GET", "/metrics").text
            #expect(metrics.contains("sheetd_tenant_sessions{tenant=\"acme\"}"))
            #expect(!metrics.contains("sheetd_not-a-key") && !metrics.contains(server.keys["acme/app"]!))
            let line = metrics.split(separator: "\n").first { $0.hasPrefix("sheetd_auth_failures_total{reason=\"\(reason)\"}") }
            #expect((line?.split(separator: " ").last.flatMap { Double($0) } ?? 0) >= 1, "\(line ?? "no line")")
        }
    }

    /// Every way another tenant could touch a session answers exactly what a missing id answers.
    @Test(arguments: [
        ("GET", "", nil, [(String, String)]()),
        ("DELETE", "", nil, []),
        ("POST", "/drag", #"{"to":"medium"}"#, []),
        ("POST", "/drag", #"{"to":"medium"}"#, [("Idempotency-Key", "k-1")]),
        ("POST", "/confirm", #"{"action":"discard"}"#, []),
        ("POST", "/dismiss", "", []),
        ("POST", "/present", nil, []),
        ("GET", "/events", nil, []),
        ("GET", "/events?after=0&wait=5", nil, []),
        ("GET", "/events", nil, [("Accept", "text/event-stream")]),
        ("DELETE", "", nil, [("If-Match", "\"1\"")]),
    ] as [(String, String, String?, [(String, String)])])
    func anotherTenantsSessionIsNotFoundAndUntouched(method: String, tail: String, body: String?, headers: [(String, String)]) async throws {
        try await offPool {
            let server = try Self.server.get()
            let id = try server.createSession("acme/app")
            let missing = "AAAAAAAAAAAAAAAAAAAAAA"
            for holder in ["globex/app", "globex/observer"] {
                let theirs = try server.call(holder, method, "/sessions/\(id)\(tail)", body: body, headers: headers)
                let nobodys = try server.call(holder, method, "/sessions/\(missing)\(tail)", body: body, headers: headers)
                let expected = holder == "globex/observer" && method != "GET" ? 403 : 404
                #expect(theirs.status == expected, "\(holder): \(theirs.status) \(theirs.text)")
                #expect(theirs.status == nobodys.status)
                #expect(theirs.errorCode == nobodys.errorCode)
                #expect((theirs.json["error"] as? [String: Any])?["message"] as? String
                        == (nobodys.json["error"] as? [String: Any])?["message"] as? String)
                #expect(theirs.header("ETag") == nil)
            }
            let after = try server.call("acme/app", "GET", "/sessions/\(id)")
            #expect(after.status == 200)
            #expect(after.json["version"] as? Int == 1)
            #expect(after.json["detent"] as? String == "large")
            let events = try server.call("acme/observer", "GET", "/sessions/\(id)/events")
            #expect((events.json["events"] as? [Any])?.count == 1)
        }
    }

    @Test func theListShowsOnlyTheCallersSessions() async throws {
        try await offPool {
            let server = try Self.server.get()
            let acme = try server.createSession("acme/app")
            let globex = try server.createSession("globex/app")
            func listed(_ holder: String) throws -> [String] {
                var ids: [String] = []
                var after: String?
                repeat {
                    let page = try server.call(holder, "GET", "/sessions?limit=1000" + (after.map { "&after=\($0)" } ?? ""))
                    #expect(page.status == 200)
                    ids += (page.json["sessions"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                    after = page.json["next"] as? String
                } while after != nil
                return ids
            }
            let seenByAcme = try listed("acme/observer")
            let seenByGlobex = try listed("globex/observer")
            #expect(seenByAcme.contains(acme) && !seenByAcme.contains(globex))
            #expect(seenByGlobex.contains(globex) && !seenByGlobex.contains(acme))
            #expect(Set(seenByAcme).isDisjoint(with: seenByGlobex))
        }
    }

    @Test func idempotencyKeysAreScopedPerTenant() async throws {
        try await offPool {
            let server = try Self.server.get()
            let key = [("Idempotency-Key", "create-\(UUID().uuidString)")]
            let body = #"{"detents":["large","medium"]}"#
            let first = try server.call("acme/app", "POST", "/sessions", body: body, headers: key)
            let other = try server.call("globex/app", "POST", "/sessions", body: body, headers: key)
            let again = try server.call("acme/app", "POST", "/sessions", body: body, headers: key)
            #expect(first.status == 201 && other.status == 201 && again.status == 201)
            #expect(other.header("Idempotent-Replayed") == nil)
            #expect(other.json["id"] as? String != first.json["id"] as? String)
            #expect(again.header("Idempotent-Replayed") == "true")
            #expect(again.json["id"] as? String == first.json["id"] as? String)
            // On a session: globex cannot replay (or learn) acme's answer under the same key.
            let id = try #require(first.json["id"] as? String)
            let drag = [("Idempotency-Key", "drag-1")]
            let acmeDrag = try server.call("acme/app", "POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#, headers: drag)
            let globexDrag = try server.call("globex/app", "POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#, headers: drag)
            #expect(acmeDrag.status == 200)
            #expect(globexDrag.status == 404)
            #expect(globexDrag.header("Idempotent-Replayed") == nil)
        }
    }

    @Test func anObserverCanFollowItsTenantsStream() async throws {
        try await offPool {
            let server = try Self.server.get()
            let id = try server.createSession("acme/app")
            let client = try server.server.client()
            try client.sendRaw(Array("GET /sessions/\(id)/events?after=0 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer \(server.keys["acme/observer"]!)\r\n\r\n".utf8))
            let head = try client.readResponseHead()
            #expect(head.status == 200)
            #expect(head.header("Content-Type")?.hasPrefix("text/event-stream") == true)
        }
    }
}
