import Foundation
import Testing

/// Requests that mean one thing to a proxy and another to a lax server, against the real
/// binary over raw sockets: each is refused with the JSON error shape, or read exactly as a
/// proxy would, and none changes a session it should not.
@Suite("HTTP at its edges, against sheetd")
struct HTTPEdgeTests {
    static let server = Result { try SheetdProcess(["--log-level", "off"]) }

    static func port() throws -> Int { try server.get().port }

    /// Exactly one answer on a fresh connection, then (if `closes`) the end of the connection.
    static func one(_ request: String, closes: Bool) throws -> WireAnswer {
        let connection = try #require(WireConnection(port: try port(), receiveTimeout: 10))
        guard case .answered(let answer) = connection.exchange(Array(request.utf8)) else {
            throw TestClientError(description: "no well-formed answer to \(request.prefix(60))")
        }
        if closes {
            let (rest, closed) = connection.readToEnd()
            #expect(rest.isEmpty, "one answer only; then: \(StrictHTTP.describe(rest))")
            #expect(closed)
        }
        return answer
    }

    static func session() throws -> (id: String, body: [UInt8]) {
        let client = try server.get().client()
        let id = try RobustnessTests.create(client)
        return (id, try client.request("GET", "/sessions/\(id)").body)
    }

    static func unchanged(_ session: (id: String, body: [UInt8])) throws {
        let now = try server.get().client().request("GET", "/sessions/\(session.id)")
        #expect(now.status == 200)
        #expect(now.body == session.body, "the session changed: \(now.text)")
    }

    @Test("a field name with whitespace before the colon cannot smuggle a DELETE in a dismiss's body")
    func smugglingByWhitespaceBeforeColon() async throws {
        try await offPool {
            let session = try Self.session()
            let smuggled = "DELETE /sessions/\(session.id) HTTP/1.1\r\nHost: x\r\n\r\n"
            let answer = try Self.one(
                "POST /sessions/\(session.id)/dismiss HTTP/1.1\r\nHost: x\r\nContent-Length : \(smuggled.utf8.count)\r\n\r\n\(smuggled)",
                closes: true)
            #expect(answer.status == 400)
            #expect(answer.errorCode == "invalid_header")
            #expect((answer.json["error"] as? [String: Any])?["field"] as? String == "Content-Length ")
            #expect(answer.header("X-Request-Id") != nil)
            try Self.unchanged(session)
        }
    }

    @Test("an escaped NUL or slash in an id names no session and changes nothing", arguments: [
        ("GET", "/sessions/{id}%00junk", 404), ("DELETE", "/sessions/{id}%00x", 404), ("GET", "/sessions/{id}%2Fdrag", 404),
        ("POST", "/sessions/{id}%2Fdrag", 405), ("POST", "/sessions/{id}%00/drag", 404), ("DELETE", "/sessions/{id}%2F", 404),
    ])
    func escapedSeparatorsInIDs(method: String, template: String, status: Int) async throws {
        try await offPool {
            let session = try Self.session()
            let path = template.replacingOccurrences(of: "{id}", with: session.id)
            let body = #"{"to":"closed"}"#
            let answer = try Self.one(
                "\(method) \(path) HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)", closes: false)
            #expect(answer.status == status, "\(method) \(path): \(String(decoding: answer.body, as: UTF8.self))")
            #expect(answer.errorCode != nil)
            try Self.unchanged(session)
        }
    }

    @Test("a Content-Length that is not digits, or too large, gets one JSON answer and changes nothing", arguments: [
        ("-1", 400, "invalid_header"), ("+15", 400, "invalid_header"), ("0xf", 400, "invalid_header"),
        ("15x", 400, "invalid_header"), ("1 5", 400, "invalid_header"), ("99999999999999999999999", 413, "payload_too_large"),
    ])
    func badContentLength(value: String, status: Int, code: String) async throws {
        try await offPool {
            let session = try Self.session()
            let answer = try Self.one(
                "POST /sessions/\(session.id)/dismiss HTTP/1.1\r\nHost: x\r\nX-Request-Id: bad-length\r\nContent-Length: \(value)\r\n\r\n{\"reason\":\"done\"}",
                closes: true)
            #expect(answer.status == status)
            #expect(answer.errorCode == code)
            #expect(answer.header("X-Request-Id") == "bad-length")
            #expect(answer.header("Connection")?.lowercased() == "close")
            try Self.unchanged(session)
        }
    }

    @Test("bad Content-Lengths among ordinary requests on many threads: one JSON answer each, and sheetd keeps serving")
    func badContentLengthsUnderLoad() async throws {
        try await offPool {
            let port = try Self.port()
            let problems = Locked<[String]>([])
            let count = 400
            onThreads(8) { worker in
                for index in stride(from: worker, to: count, by: 8) {
                    func report(_ problem: String) { problems.withLock { $0.append("#\(index): \(problem)") } }
                    guard index % 2 == 0 else {
                        // An ordinary request on a keep-alive connection, between the refused ones.
                        do {
                            let client = try TestHTTPClient(port: port)
                            let status = try client.request("POST", "/sessions", body: "{}").status
                            if status != 201 { report("create answered \(status)") }
                            if try client.request("GET", "/healthz").status != 200 { report("healthz failed") }
                        } catch {
                            report("ordinary request failed: \(error)")
                        }
                        continue
                    }
                    guard let connection = WireConnection(port: port, receiveTimeout: 10) else {
                        report("connect failed")
                        continue
                    }
                    let value = ["-1", "+15", "0xf", "15x", "99999999999999999999999"][(index / 2) % 5]
                    connection.send(Array("POST /sessions HTTP/1.1\r\nHost: x\r\nX-Request-Id: load-\(index)\r\nContent-Length: \(value)\r\n\r\n{}".utf8))
                    let (bytes, closed) = connection.readToEnd()
                    let (answers, problem, defects) = StrictHTTP.parseAll(bytes)
                    if let problem { report(problem) }
                    if defects > 0 || answers.count != 1 { report("\(answers.count) answer(s), \(defects) doubled head(s)") }
                    if let answer = answers.first, answer.header("X-Request-Id") != "load-\(index)" || answer.errorCode == nil {
                        report("not sheetd's JSON answer: \(StrictHTTP.describe(bytes.prefix(200)))")
                    }
                    if !closed { report("not closed") }
                }
            }
            let found = problems.withLock { $0 }
            #expect(found.isEmpty, "\(found.count) problem(s): \(found.prefix(5))")
            #expect(try Self.server.get().process.isRunning)
        }
    }

    @Test("HTTP/1.1 without Host, and a NUL in a field value: 400 invalid_header", arguments: [
        ("GET /healthz HTTP/1.1\r\n\r\n", "Host"),
        ("GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "Host"),
        ("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\u{0}b\r\n\r\n", "X-Request-Id"),
    ])
    func hostAndNUL(request: String, field: String) async throws {
        try await offPool {
            let answer = try Self.one(request, closes: true)
            #expect(answer.status == 400)
            #expect(answer.errorCode == "invalid_header")
            #expect((answer.json["error"] as? [String: Any])?["field"] as? String == field)
        }
    }

    @Test("an absolute-form target is served like its origin form")
    func absoluteForm() async throws {
        try await offPool {
            let session = try Self.session()
            let answer = try Self.one("GET http://sheetd.example/sessions/\(session.id) HTTP/1.1\r\nHost: sheetd.example\r\n\r\n",
                                      closes: false)
            #expect(answer.status == 200)
            #expect(answer.body == session.body)
        }
    }
}
