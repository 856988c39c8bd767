@testable import HTTPServer
import Testing

/// Answers a responder takes on in place and gives later (`DeferredAnswer`), over real sockets:
/// the connection is suspended until the answer comes, from whatever thread, and whichever of
/// the answer and the suspension comes first, the answer reaches its own request exactly once.
@Suite("HTTPServer: deferred answers over real sockets", .serialized)
struct DeferredAnswerServerTests {
    @Test("an answer given in place, from another thread, or later still comes back on a kept-alive connection",
          arguments: ["/deferred-now", "/deferred", "/deferred?ms=5"])
    func keptAlive(target: String) async throws {
        try await withServer { _, port, probe in
            let answers = try await onThread {
                let client = try RawHTTPClient(port: port)
                return try (0..<20).map { i in try client.roundTrip("POST", target, body: Array("r\(i)".utf8)) }
            }
            #expect(answers.map(\.status) == Array(repeating: 200, count: 20))
            #expect(answers.map(\.text) == (0..<20).map { "r\($0)" })
            #expect(answers.allSatisfy { $0.header("X-Deferred") != nil })
            #expect(probe.respondCalls == 0, "no request went to respond(to:)")
        }
    }

    @Test("16 connections × 50 requests answered from other threads: each answer reaches its own request")
    func concurrency() async throws {
        try await withServer({ $0.threads = 2 }) { server, port, probe in
            let failures = try await echoFromSixteenConnections(port: port, target: { $0 % 2 == 0 ? "/deferred" : "/deferred-now" })
            #expect(failures == 0)
            #expect(await probe.wait { $0.records.count == 800 })
            #expect(server.openConnections <= 16)
            // Each request leaves the registry as it completes (its record comes after that).
            #expect(server.registeredRequests == 0)
            #expect(server.requestSuspensions > 0, "some requests were suspended")
        }
    }

    @Test("an answer never given gets 503 at the suspended-request deadline; given after that it is dropped")
    func deadline() async throws {
        try await withServer({ $0.suspendedRequestDeadline = .milliseconds(300) }) { _, port, probe in
            let (late, next) = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 30)
                let late = try client.roundTrip("POST", "/deferred-held?id=late", body: [1])
                let next = try client.roundTrip("POST", "/deferred-now", body: [2])
                return (late, next)
            }
            #expect(late.status == 503)
            #expect(next.status == 200 && next.body == [2], "the connection stays usable")
            let held = try #require(probe.heldAnswer("late"))
            #expect(!held.give(HTTPResponse(status: 200)), "the deadline answered first")
        }
    }
}
