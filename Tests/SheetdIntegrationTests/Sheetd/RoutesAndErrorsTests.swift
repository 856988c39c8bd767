import Foundation
import Testing

/// Every route, and every error status and code, against the real binary.
@Suite("Routes and errors over HTTP")
struct RoutesAndErrorsTests {
    /// One server for the whole table: each case creates its own session.
    static let server = Result { try SheetdProcess() }

    static func client() throws -> TestHTTPClient { try server.get().client() }

    static func createSession(_ client: TestHTTPClient, _ body: String = SeedScenarioTests.seedConfiguration) throws -> String {
        let created = try client.request("POST", "/sessions", body: body)
        #expect(created.status == 201, "create answered \(created.status) \(created.text)")
        return try #require(created.json["id"] as? String)
    }

    @Test func healthAndSpec() async throws {
        try await offPool {
            let client = try Self.client()
            let health = try client.request("GET", "/healthz")
            #expect(health.status == 200)
            #expect(health.text == #"{"status":"ok"}"#)
            #expect(health.header("X-Request-Id") != nil)
            let spec = try client.request("GET", "/openapi.yaml")
            #expect(spec.status == 200)
            #expect(spec.header("Content-Type") == "application/yaml")
            let onDisk = try Data(contentsOf: URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("openapi.yaml"))
            #expect(spec.body == Array(onDisk), "the served spec is byte-for-byte the repository's openapi.yaml")
        }
    }

    @Test func emptyBodyCreatesAllDefaults() async throws {
        try await offPool {
            let client = try Self.client()
            let created = try client.request("POST", "/sessions")
            #expect(created.status == 201)
            let config = try #require(created.json["config"] as? [String: Any])
            #expect(config["detents"] as? [String] == ["large"])
            #expect(config["defaultDetent"] as? String == "large")
            #expect(config["thresholdDetent"] is NSNull)
            #expect(config["dismissPolicy"] as? String == "allow")
            #expect(config["interceptAction"] as? String == "confirm")
            #expect(config["decelerationRate"] as? String == "normal")
        }
    }

    @Test func getAndDeleteSession() async throws {
        try await offPool {
            let client = try Self.client()
            let id = try Self.createSession(client)
            let fetched = try client.request("GET", "/sessions/\(id)")
            #expect(fetched.status == 200)
            #expect(fetched.header("ETag") == "\"1\"")
            #expect(fetched.json["id"] as? String == id)
            let deleted = try client.request("DELETE", "/sessions/\(id)")
            #expect(deleted.status == 204)
            #expect(deleted.body.isEmpty)
            #expect(try client.request("GET", "/sessions/\(id)").errorCode == "session_not_found")
            #expect(try client.request("DELETE", "/sessions/\(id)").status == 404)
        }
    }

    @Test func listPagesOldestFirstAndSurvivesDeletedCursor() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            var ids: [String] = []
            for _ in 0..<5 { ids.append(try Self.createSession(client)) }
            let first = try client.request("GET", "/sessions?limit=2")
            #expect(first.status == 200)
            let firstIDs = (first.json["sessions"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
            #expect(firstIDs == Array(ids[0..<2]))
            let cursor = try #require(first.json["next"] as? String)
            // The session the cursor came from is deleted: the cursor still works.
            #expect(try client.request("DELETE", "/sessions/\(ids[1])").status == 204)
            let second = try client.request("GET", "/sessions?limit=2&after=\(cursor)")
            #expect((second.json["sessions"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == Array(ids[2..<4]))
            let third = try client.request("GET", "/sessions?limit=2&after=\(try #require(second.json["next"] as? String))")
            #expect((third.json["sessions"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [ids[4]])
            #expect(third.json["next"] is NSNull)
            // Phase filter.
            _ = try client.request("POST", "/sessions/\(ids[0])/dismiss", body: #"{"reason":"done"}"#)
            let dismissed = try client.request("GET", "/sessions?phase=dismissed")
            #expect((dismissed.json["sessions"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [ids[0]])
            #expect(server.stop() == 0)
        }
    }

    @Test func dismissAndPresentRoutes() async throws {
        try await offPool {
            let client = try Self.client()
            let id = try Self.createSession(client)
            let dismissed = try client.request("POST", "/sessions/\(id)/dismiss")
            #expect(dismissed.status == 200)
            #expect((dismissed.json["events"] as? [[String: Any]])?.first?["reason"] as? String == "programmatic")
            let presented = try client.request("POST", "/sessions/\(id)/present", body: "{}")
            #expect(presented.status == 200)
            let done = try client.request("POST", "/sessions/\(id)/dismiss", body: #"{"reason":"done"}"#)
            #expect((done.json["events"] as? [[String: Any]])?.first?["reason"] as? String == "done")
        }
    }

    /// (method, path suffix after /sessions/{id} or a full path, body, status, code, field)
    struct ErrorCase: Sendable, CustomStringConvertible {
        let method: String
        let path: String
        let body: String?
        let status: Int
        let code: String
        let field: String?
        var description: String { "\(method) \(path) \(body ?? "") → \(status) \(code)" }
    }

    static let errorCases: [ErrorCase] = [
        ErrorCase(method: "POST", path: "/sessions", body: "{", status: 400, code: "invalid_json", field: nil),
        ErrorCase(method: "POST", path: "/sessions", body: "null", status: 400, code: "invalid_json", field: nil),
        ErrorCase(method: "POST", path: "/sessions", body: "[]", status: 400, code: "invalid_json", field: nil),
        ErrorCase(method: "POST", path: "/sessions", body: #""large""#, status: 400, code: "invalid_json", field: nil),
        ErrorCase(method: "POST", path: "/sessions", body: #"{"tresholdDetent":"height:300"}"#, status: 400, code: "unknown_field", field: "tresholdDetent"),
        ErrorCase(method: "POST", path: "/sessions", body: #"{"detents":"large"}"#, status: 400, code: "invalid_field", field: "detents"),
        ErrorCase(method: "POST", path: "/sessions", body: #"{"detents":[]}"#, status: 400, code: "invalid_field", field: "detents"),
        ErrorCase(method: "POST", path: "/sessions", body: #"{"detents":["tall"]}"#, status: 400, code: "invalid_detent", field: "detents"),
        ErrorCase(method: "POST", path: "/sessions", body: #"{"defaultDetent":"HEIGHT:300"}"#, status: 400, code: "invalid_detent", field: "defaultDetent"),
        ErrorCase(method: "POST", path: "/sessions", body: #"{"containerHeight":0}"#, status: 400, code: "invalid_field", field: "containerHeight"),
        ErrorCase(method: "POST", path: "/sessions", body: #"{"containerHeight":1e300}"#, status: 400, code: "invalid_field", field: "containerHeight"),
        ErrorCase(method: "POST", path: "/sessions", body: #"{"containerHeight":"844"}"#, status: 400, code: "invalid_field", field: "containerHeight"),
        ErrorCase(method: "POST", path: "/sessions", body: #"{"thresholdDetent":"height:300","dismissPolicy":"allow"}"#, status: 400, code: "invalid_field", field: "dismissPolicy"),
        ErrorCase(method: "POST", path: "/sessions", body: #"{"thresholdDetent":"large"}"#, status: 400, code: "invalid_field", field: "thresholdDetent"),
        ErrorCase(method: "POST", path: "/sessions", body: #"{"dismissPolicy":"sometimes"}"#, status: 400, code: "invalid_field", field: "dismissPolicy"),
        ErrorCase(method: "POST", path: "{id}/drag", body: #"{"to":"fraction:1.5"}"#, status: 400, code: "invalid_detent", field: "to"),
        ErrorCase(method: "POST", path: "{id}/drag", body: #"{"to":"fraction:0.3"}"#, status: 400, code: "unknown_detent", field: "to"),
        ErrorCase(method: "POST", path: "{id}/drag", body: #"{"to":5}"#, status: 400, code: "invalid_field", field: "to"),
        ErrorCase(method: "POST", path: "{id}/drag", body: "{}", status: 400, code: "invalid_field", field: "to"),
        ErrorCase(method: "POST", path: "{id}/drag", body: #"{"to":"medium","translation":3}"#, status: 400, code: "invalid_field", field: "to"),
        ErrorCase(method: "POST", path: "{id}/drag", body: #"{"translation":100001}"#, status: 400, code: "invalid_field", field: "translation"),
        ErrorCase(method: "POST", path: "{id}/drag", body: #"{"translation":1,"velocity":"fast"}"#, status: 400, code: "invalid_field", field: "velocity"),
        ErrorCase(method: "POST", path: "{id}/drag", body: #"{"to":"medium","extra":1}"#, status: 400, code: "unknown_field", field: "extra"),
        ErrorCase(method: "POST", path: "{id}/confirm", body: #"{"action":"discard"}"#, status: 409, code: "no_pending_confirmation", field: nil),
        ErrorCase(method: "POST", path: "{id}/confirm", body: #"{"action":"maybe"}"#, status: 400, code: "invalid_field", field: "action"),
        ErrorCase(method: "POST", path: "{id}/confirm", body: nil, status: 400, code: "invalid_field", field: "action"),
        ErrorCase(method: "POST", path: "{id}/dismiss", body: #"{"reason":"swipe"}"#, status: 400, code: "invalid_field", field: "reason"),
        ErrorCase(method: "POST", path: "{id}/present", body: nil, status: 409, code: "sheet_presented", field: nil),
        ErrorCase(method: "POST", path: "{id}/present", body: #"{"detent":"large"}"#, status: 400, code: "unknown_field", field: "detent"),
        ErrorCase(method: "POST", path: "{id}/changes", body: nil, status: 400, code: "invalid_field", field: "hasChanges"),
        ErrorCase(method: "POST", path: "{id}/changes", body: #"{"hasChanges":"yes"}"#, status: 400, code: "invalid_field", field: "hasChanges"),
        ErrorCase(method: "POST", path: "{id}/changes", body: #"{"hasChanges":true,"dirty":1}"#, status: 400, code: "unknown_field", field: "dirty"),
        ErrorCase(method: "POST", path: "{id}/select", body: "{}", status: 400, code: "invalid_field", field: "detent"),
        ErrorCase(method: "POST", path: "{id}/select", body: #"{"detent":"tall"}"#, status: 400, code: "invalid_detent", field: "detent"),
        ErrorCase(method: "POST", path: "{id}/select", body: #"{"detent":"fraction:0.3"}"#, status: 400, code: "unknown_detent", field: "detent"),
        ErrorCase(method: "POST", path: "{id}/resize", body: "{}", status: 400, code: "invalid_field", field: "containerHeight"),
        ErrorCase(method: "POST", path: "{id}/resize", body: #"{"containerHeight":0}"#, status: 400, code: "invalid_field", field: "containerHeight"),
        ErrorCase(method: "POST", path: "{id}/resize", body: #"{"containerHeight":10001}"#, status: 400, code: "invalid_field", field: "containerHeight"),
        ErrorCase(method: "POST", path: "{id}/resize", body: #"{"containerHeight":"844"}"#, status: 400, code: "invalid_field", field: "containerHeight"),
        ErrorCase(method: "POST", path: "{id}/navigate", body: "{}", status: 400, code: "invalid_field", field: "push"),
        ErrorCase(method: "POST", path: "{id}/navigate", body: #"{"push":"a","pop":1}"#, status: 400, code: "invalid_field", field: "pop"),
        ErrorCase(method: "POST", path: "{id}/navigate", body: #"{"push":""}"#, status: 400, code: "invalid_field", field: "push"),
        ErrorCase(method: "POST", path: "{id}/navigate", body: #"{"pop":0}"#, status: 400, code: "invalid_field", field: "pop"),
        ErrorCase(method: "POST", path: "{id}/navigate", body: #"{"pop":1.5}"#, status: 400, code: "invalid_field", field: "pop"),
        ErrorCase(method: "POST", path: "{id}/navigate", body: #"{"pop":"1"}"#, status: 400, code: "invalid_field", field: "pop"),
        ErrorCase(method: "POST", path: "{id}/navigate", body: #"{"back":1}"#, status: 400, code: "unknown_field", field: "back"),
        ErrorCase(method: "GET", path: "{id}/events?after=x", body: nil, status: 400, code: "invalid_field", field: "after"),
        ErrorCase(method: "GET", path: "{id}/events?after=-1", body: nil, status: 400, code: "invalid_field", field: "after"),
        ErrorCase(method: "GET", path: "{id}/events?after=2", body: nil, status: 400, code: "invalid_field", field: "after"),
        ErrorCase(method: "GET", path: "{id}/events?wait=31", body: nil, status: 400, code: "invalid_field", field: "wait"),
        ErrorCase(method: "GET", path: "/sessions?limit=0", body: nil, status: 400, code: "invalid_field", field: "limit"),
        ErrorCase(method: "GET", path: "/sessions?limit=1001", body: nil, status: 400, code: "invalid_field", field: "limit"),
        ErrorCase(method: "GET", path: "/sessions?phase=open", body: nil, status: 400, code: "invalid_field", field: "phase"),
        ErrorCase(method: "GET", path: "/sessions?after=bogus", body: nil, status: 400, code: "invalid_field", field: "after"),
        ErrorCase(method: "GET", path: "/sessions/AAAAAAAAAAAAAAAAAAAAAA", body: nil, status: 404, code: "session_not_found", field: nil),
        ErrorCase(method: "GET", path: "/sessions/not-an-id", body: nil, status: 404, code: "session_not_found", field: nil),
        ErrorCase(method: "POST", path: "/sessions/AAAAAAAAAAAAAAAAAAAAAA/drag", body: "{", status: 404, code: "session_not_found", field: nil),
        ErrorCase(method: "GET", path: "/nowhere", body: nil, status: 404, code: "route_not_found", field: nil),
        ErrorCase(method: "GET", path: "{id}/fly", body: nil, status: 404, code: "route_not_found", field: nil),
        ErrorCase(method: "PUT", path: "/sessions", body: "{}", status: 405, code: "method_not_allowed", field: nil),
        ErrorCase(method: "GET", path: "{id}/drag", body: nil, status: 405, code: "method_not_allowed", field: nil),
        ErrorCase(method: "POST", path: "/healthz", body: nil, status: 405, code: "method_not_allowed", field: nil),
    ]

    @Test(arguments: errorCases)
    func errorAnswers(_ item: ErrorCase) async throws {
        try await offPool {
            let client = try Self.client()
            let id = try Self.createSession(client)
            let path = item.path.hasPrefix("{id}") ? "/sessions/\(id)" + item.path.dropFirst(4) : item.path
            let before = try client.request("GET", "/sessions/\(id)")
            let response = try TestHTTPClient(port: try Self.server.get().port).request(item.method, path, body: item.body)
            #expect(response.status == item.status, "\(response.text)")
            #expect(response.errorCode == item.code, "\(response.text)")
            #expect(response.errorField == item.field, "\(response.text)")
            #expect(response.header("Content-Type") == "application/json; charset=utf-8")
            let error = try #require(response.json["error"] as? [String: Any])
            #expect((error["message"] as? String)?.isEmpty == false)
            #expect(error["requestId"] as? String == response.header("X-Request-Id"))
            if item.status == 405 { #expect(response.header("Allow") != nil) }
            // Nothing changed.
            let after = try client.request("GET", "/sessions/\(id)")
            #expect(after.body == before.body)
        }
    }

    @Test(arguments: [
        // (phase setup actions, action path, body, expected code)
        (["drag:height:300"], "drag", #"{"to":"medium"}"#, "confirmation_pending"),
        (["dismiss"], "drag", #"{"to":"medium"}"#, "sheet_dismissed"),
        (["dismiss"], "confirm", #"{"action":"save"}"#, "no_pending_confirmation"),
        (["dismiss"], "dismiss", "", "sheet_dismissed"),
        (["drag:height:300"], "present", "", "sheet_presented"),
    ])
    func phaseConflicts(setup: [String], action: String, body: String, code: String) async throws {
        try await offPool {
            let client = try Self.client()
            let id = try Self.createSession(client)
            for step in setup {
                if step.hasPrefix("drag:") {
                    _ = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"\#(step.dropFirst(5))"}"#)
                } else {
                    _ = try client.request("POST", "/sessions/\(id)/\(step)")
                }
            }
            let before = try client.request("GET", "/sessions/\(id)")
            let response = try client.request("POST", "/sessions/\(id)/\(action)", body: body)
            #expect(response.status == 409)
            #expect(response.errorCode == code)
            #expect(try client.request("GET", "/sessions/\(id)").body == before.body)
        }
    }

    @Test func oversizedBodyIsRefusedWithoutReadingIt() async throws {
        try await offPool {
            let client = try Self.client()
            // Only the head is sent: the server must answer 413 from Content-Length alone.
            try client.sendRaw(Array("POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n".utf8))
            let response = try client.readResponse()
            #expect(response.status == 413)
            #expect(response.errorCode == "payload_too_large")
        }
    }

    /// A request a proxy could frame differently (two lengths, or a length and chunked) changes
    /// nothing: 400 `ambiguous_length`, and the connection is closed so that what follows the
    /// body is never read as a request.
    @Test func ambiguousBodyLengthIsRefusedAndChangesNothing() async throws {
        try await offPool {
            let setup = try Self.client()
            let id = try Self.createSession(setup)
            let before = try setup.request("GET", "/sessions/\(id)")
            let body = #"{"to":"medium"}"#
            for framing in ["Content-Length: \(body.utf8.count)\r\nContent-Length: 4\r\n\r\n\(body)",
                            "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\nf\r\n\(body)\r\n0\r\n\r\n"] {
                let client = try Self.client()
                try client.sendRaw(Array("POST /sessions/\(id)/drag HTTP/1.1\r\nHost: x\r\n\(framing)".utf8))
                let response = try client.readResponse()
                #expect(response.status == 400)
                #expect(response.errorCode == "ambiguous_length")
                #expect((response.json["error"] as? [String: Any])?["field"] as? String == "Content-Length")
                #expect(response.header("X-Request-Id") != nil)
                #expect(client.serverClosed())
            }
            let after = try setup.request("GET", "/sessions/\(id)")
            #expect(after.text == before.text)
        }
    }

    @Test func chunkedOversizedBodyIsRefused() async throws {
        try await offPool {
            let client = try Self.client()
            var raw = Array("POST /sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
            let chunk = [UInt8](repeating: UInt8(ascii: " "), count: 16 * 1024)
            for _ in 0..<5 { raw += Array("4000\r\n".utf8) + chunk + Array("\r\n".utf8) }
            raw += Array("0\r\n\r\n".utf8)
            try? client.sendRaw(raw)
            let response = try client.readResponse()
            #expect(response.status == 413)
            #expect(response.errorCode == "payload_too_large")
        }
    }

    @Test func capacityExceeded() async throws {
        try await offPool {
            let server = try SheetdProcess(["--max-sessions", "2"])
            let client = try server.client()
            #expect(try client.request("POST", "/sessions").status == 201)
            #expect(try client.request("POST", "/sessions").status == 201)
            let third = try client.request("POST", "/sessions")
            #expect(third.status == 503)
            #expect(third.errorCode == "capacity_exceeded")
            #expect(server.stop() == 0)
        }
    }

    @Test func eventsExpireAfterTheNewest256() async throws {
        try await offPool {
            let client = try Self.client()
            let id = try Self.createSession(client, #"{"detents":["medium","large"]}"#)
            for index in 0..<300 {
                _ = try client.request("POST", "/sessions/\(id)/drag", body: index % 2 == 0 ? #"{"to":"medium"}"# : #"{"to":"large"}"#)
            }
            let expired = try client.request("GET", "/sessions/\(id)/events?after=3")
            #expect(expired.status == 410)
            #expect(expired.errorCode == "events_expired")
            let recent = try client.request("GET", "/sessions/\(id)/events?after=290")
            #expect(recent.status == 200)
            #expect((recent.json["events"] as? [[String: Any]])?.count == 11)
        }
    }

    @Test func keepAliveHoldsAcrossRequests() async throws {
        try await offPool {
            let client = try Self.client()
            for _ in 0..<20 { #expect(try client.request("GET", "/healthz").status == 200) }
            let id = try Self.createSession(client)
            for index in 0..<20 {
                let drag = try client.request("POST", "/sessions/\(id)/drag", body: index % 2 == 0 ? #"{"to":"medium"}"# : #"{"to":"large"}"#)
                #expect(drag.status == 200)
                #expect(drag.header("Connection")?.lowercased() != "close")
            }
        }
    }

    @Test func requestIDIsEchoedOrGenerated() async throws {
        try await offPool {
            let client = try Self.client()
            let given = try client.request("GET", "/healthz", headers: [("X-Request-Id", "trace-42")])
            #expect(given.header("X-Request-Id") == "trace-42")
            let tooLong = try client.request("GET", "/healthz", headers: [("X-Request-Id", String(repeating: "a", count: 129))])
            #expect(tooLong.header("X-Request-Id").map { $0.count <= 128 && $0 != String(repeating: "a", count: 129) } == true)
            let failing = try client.request("GET", "/nowhere", headers: [("X-Request-Id", "trace-43")])
            #expect((failing.json["error"] as? [String: Any])?["requestId"] as? String == "trace-43")
        }
    }
}
