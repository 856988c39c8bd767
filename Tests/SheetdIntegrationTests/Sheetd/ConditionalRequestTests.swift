import Foundation
import Testing

/// How answers may be cached, and conditional requests (RFC 9110 §13, RFC 9111 §5.2).
@Suite("Caching and conditional requests")
struct ConditionalRequestTests {
    static let server = Result { try SheetdProcess(["--log-level", "off"]) }

    static func client() throws -> TestHTTPClient { try server.get().client() }

    @Test("every answer says how it may be cached: no-cache with its ETag on a session's GET, no-store elsewhere")
    func cacheControl() async throws {
        try await offPool {
            let client = try Self.client()
            let created = try client.request("POST", "/sessions", body: #"{"detents":["large","medium"]}"#)
            let id = try #require(created.json["id"] as? String)
            let get = try client.request("GET", "/sessions/\(id)")
            #expect(get.header("Cache-Control") == "no-cache")
            #expect(get.header("ETag") == "\"1\"")
            let answers: [(String, TestResponse)] = [
                ("create", created),
                ("drag", try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#)),
                ("events", try client.request("GET", "/sessions/\(id)/events")),
                ("list", try client.request("GET", "/sessions")),
                ("healthz", try client.request("GET", "/healthz")),
                ("metrics", try client.request("GET", "/metrics")),
                ("error", try client.request("GET", "/sessions/AAAAAAAAAAAAAAAAAAAAAA")),
                ("delete", try client.request("DELETE", "/sessions/\(id)")),
            ]
            for (name, answer) in answers {
                #expect(answer.header("Cache-Control") == "no-store", "\(name) answered \(answer.status) with Cache-Control \(answer.header("Cache-Control") ?? "none")")
            }
        }
    }

    @Test("If-None-Match on a session's GET: 304 without a body when a tag names the current version (weak comparison)",
          arguments: [
              ("\"1\"", 304), ("W/\"1\"", 304), ("\"7\", \"1\"", 304), ("*", 304), ("\"2\"", 200), ("\"01\"", 200),
              ("\"abc\"", 200), ("1", 400), ("\"1", 400), (",", 400),
          ])
    func ifNoneMatch(value: String, status: Int) async throws {
        try await offPool {
            let client = try Self.client()
            let id = try RobustnessTests.create(client)
            let answer = try client.request("GET", "/sessions/\(id)", headers: [("If-None-Match", value)])
            #expect(answer.status == status, "\(answer.text)")
            switch status {
            case 304:
                #expect(answer.body.isEmpty)
                #expect(answer.header("ETag") == "\"1\"")
                #expect(answer.header("Cache-Control") == "no-cache")
                #expect(answer.header("X-Request-Id") != nil)
            case 200:
                #expect(answer.json["version"] as? Int == 1)
            default:
                #expect(answer.errorField == "If-None-Match")
            }
        }
    }

    @Test("a 304 is one well-formed answer on the wire, and the connection goes on")
    func notModifiedOnTheWire() async throws {
        try await offPool {
            let client = try Self.client()
            let id = try RobustnessTests.create(client)
            let connection = try #require(WireConnection(port: try Self.server.get().port))
            let request = Array("GET /sessions/\(id) HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"1\"\r\n\r\n".utf8)
            guard case .answered(let first) = connection.exchange(request) else { Issue.record("no 304"); return }
            #expect(first.status == 304)
            guard case .answered(let second) = connection.exchange(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)) else {
                Issue.record("no answer after the 304")
                return
            }
            #expect(second.status == 200)
        }
    }

    @Test("after a change, the old tag no longer matches: the full session with its new ETag")
    func ifNoneMatchAfterAChange() async throws {
        try await offPool {
            let client = try Self.client()
            let id = try RobustnessTests.create(client)
            _ = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#)
            let answer = try client.request("GET", "/sessions/\(id)", headers: [("If-None-Match", "\"1\"")])
            #expect(answer.status == 200)
            #expect(answer.header("ETag") == "\"2\"")
        }
    }

    @Test("If-Match is a list: any strong tag naming the current version applies the change", arguments: [
        "\"1\"", "\"5\", \"1\"", "\"1\", W/\"1\"", "\"abc\",\"1\"", "\"3\" ,, \"1\"",
    ])
    func ifMatchListApplies(value: String) async throws {
        try await offPool {
            let client = try Self.client()
            let id = try RobustnessTests.create(client)
            let drag = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#, headers: [("If-Match", value)])
            #expect(drag.status == 200, "\(drag.text)")
            let again = try client.request("DELETE", "/sessions/\(id)", headers: [("If-Match", value.replacingOccurrences(of: "\"1\"", with: "\"2\""))])
            #expect(again.status == 204, "\(again.text)")
        }
    }

    @Test("If-Match with only weak tags, or tags naming no current version: 412 with the session, nothing changes", arguments: [
        "W/\"1\"", "\"2\"", "\"abc\"", "\"\"", "\"01\"", "\"+1\"", "\"0x1\"", "\"18446744073709551616\"", "\"0\"", "W/\"1\", \"2\"",
    ])
    func ifMatchNeverMatching(value: String) async throws {
        try await offPool {
            let client = try Self.client()
            let id = try RobustnessTests.create(client)
            let drag = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#, headers: [("If-Match", value)])
            #expect(drag.status == 412, "\(drag.text)")
            #expect(drag.errorCode == "version_mismatch")
            #expect(drag.header("ETag") == "\"1\"")
            let delete = try client.request("DELETE", "/sessions/\(id)", headers: [("If-Match", value)])
            #expect(delete.status == 412)
            #expect(try RobustnessTests.version(client, id) == 1)
        }
    }
}
