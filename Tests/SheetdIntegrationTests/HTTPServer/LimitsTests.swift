@testable import HTTPServer
#if canImport(Glibc)
import Glibc
#endif
import Testing

@Suite("Slow peers and connection limits", .serialized)
struct LimitsTests {
    /// The accept loop counts each connection it hands over until libmicrohttpd reports it
    /// closed: a slot that never came back would shrink `maxConnections` for good.
    @Test("every connection's slot comes back once it closes, however it ends")
    func connectionSlotsComeBack() async throws {
        try await withServer({ $0.maxConnections = 8; $0.threads = 2 }) { server, port, _ in
            for round in 0..<3 {
                try await onThread {
                    // 8 at once: the limit. Closed three ways: after an answer, reset, and idle.
                    let clients = try (0..<8).map { _ in try RawHTTPClient(port: port) }
                    for (i, client) in clients.enumerated() where i % 3 != 2 {
                        #expect(try client.roundTrip("GET", "/echo").status == 200)
                    }
                    for (i, client) in clients.enumerated() where i % 3 == 1 { client.abort() }
                }
                #expect(await Probe().wait(for: .seconds(20)) { _ in server.admittedConnections == 0 && server.openConnections == 0 },
                        "round \(round): \(server.admittedConnections) admitted, \(server.openConnections) open")
            }
        }
    }

    @Test("slowloris peers (trickled head, trickled body) are cut at the timeout while others are served")
    func slowloris() async throws {
        let log = Locked<[String]>([])
        try await withServer({ c in c.connectionTimeout = .seconds(1); c.errorLog = { l in log.withLock { $0.append(l) } } }) { server, port, _ in
            // 20 peers trickling the head, 5 trickling a body, a byte every 150 ms (each byte resets
            // an inactivity timer: only a deadline on the whole request cuts them).
            async let heads = withThrowingTaskGroup(of: Double.self) { group in
                for i in 0..<25 {
                    group.addTask {
                        try await onThread {
                            let client = try RawHTTPClient(port: port, receiveTimeout: 0.05)
                            let opening = i < 20
                                ? "GET /echo HTTP/1.1\r\nHost: x\r\n"
                                : "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
                            try client.send(opening)
                            let begin = ContinuousClock.now
                            // 30 s only ends a failure: the cut comes about a second in.
                            while milliseconds(since: begin) < 30_000 {
                                do { try client.send("X") } catch { return milliseconds(since: begin) }
                                if client.waitForClose() { return milliseconds(since: begin) }
                                usleep(100_000)
                            }
                            return -1
                        }
                    }
                }
                var times: [Double] = []
                for try await t in group { times.append(t) }
                return times
            }
            // Meanwhile a normal client is served. A connection of its own per request: one it
            // leaves idle for a second (a slow test thread) is rightly cut, which is not the point.
            let latencies = try await onThread {
                var latencies: [Double] = []
                for i in 0..<20 {
                    let t = ContinuousClock.now
                    let r: RawResponse
                    do { r = try RawHTTPClient(port: port).roundTrip("GET", "/echo") } catch {
                        throw ClientError("request \(i) failed after \(milliseconds(since: t)) ms: \(error); server log: \(log.withLock { $0 })")
                    }
                    guard r.status == 200 else { return [Double]() }
                    latencies.append(milliseconds(since: t))
                    usleep(50_000)
                }
                return latencies
            }
            let cutTimes = try await heads
            // Outcomes only (when a cut happens is tested on a manual clock): every slow peer
            // was cut, and the normal client got every answer while they trickled.
            #expect(latencies.count == 20)
            #expect(cutTimes.count == 25 && cutTimes.allSatisfy { $0 >= 0 }, "cut after \(cutTimes) ms (-1: never cut)")
            #expect(await Probe().wait(for: .seconds(20)) { _ in server.openConnections == 0 })
        }
    }

    @Test("an idle keep-alive connection is closed after the timeout")
    func idleKeepAlive() async throws {
        try await withServer({ $0.connectionTimeout = .seconds(1) }) { _, port, _ in
            let (status, closed) = try await onThread {
                // 20 s only ends a failure; when the cut comes is tested on a manual clock.
                let client = try RawHTTPClient(port: port, receiveTimeout: 20)
                let status = try client.roundTrip("GET", "/echo").status
                return (status, client.waitForClose())
            }
            #expect(status == 200)
            #expect(closed)
        }
    }

    @Test("answers and streams that take longer than the connection timeout are not cut")
    func busyIsNotCut() async throws {
        try await withServer({ $0.connectionTimeout = .seconds(1) }) { _, port, _ in
            let (slow, lines) = try await onThread {
                let client = try RawHTTPClient(port: port)
                let slow = try client.roundTrip("GET", "/slow?ms=1600")
                let lines = try client.roundTrip("GET", "/stream?n=4&ms=450").text
                return (slow, lines)
            }
            #expect(slow.status == 200)
            #expect(lines == (0..<4).map { "line \($0)\n" }.joined())
        }
    }

    @Test("per-client connection limit")
    func perClientLimit() async throws {
        try await withServer({ $0.maxConnectionsPerClient = 4; $0.threads = 1 }) { server, port, _ in
            let (allowed, refused, afterClose) = try await onThread {
                var clients = try (0..<4).map { _ in try RawHTTPClient(port: port, receiveTimeout: 20) }
                let allowed = try clients.map { try $0.roundTrip("GET", "/echo").status }
                let fifth = try RawHTTPClient(port: port, receiveTimeout: 20)
                let refused = (try? fifth.roundTrip("GET", "/echo")) == nil
                clients.removeLast()
                // The server frees the place once it has seen the close: try until it has
                // (20 s only ends a failure).
                var afterClose = 0
                let begin = ContinuousClock.now
                while afterClose == 0 && milliseconds(since: begin) < 20_000 {
                    if let answer = try? RawHTTPClient(port: port, receiveTimeout: 20).roundTrip("GET", "/echo") {
                        afterClose = answer.status
                    } else {
                        usleep(20_000)
                    }
                }
                return (allowed, refused, afterClose)
            }
            #expect(allowed == [200, 200, 200, 200])
            #expect(refused)
            #expect(afterClose == 200)
            _ = server
        }
    }

    @Test("openConnections counts open sockets")
    func openConnectionCount() async throws {
        try await withServer { server, port, _ in
            let clients = try await onThread {
                try (0..<3).map { _ in
                    let client = try RawHTTPClient(port: port)
                    _ = try client.roundTrip("GET", "/echo")
                    return ClientBox(client)
                }
            }
            #expect(server.openConnections == 3)
            for box in clients { box.client.abort() }
            #expect(await Probe().wait { _ in server.openConnections == 0 })
        }
    }
}

/// Carries a test client between threads (it is only used by one thread at a time).
// @unchecked Sendable: handed from the thread that made it to the test, never used concurrently.
final class ClientBox: @unchecked Sendable {
    let client: RawHTTPClient
    init(_ client: RawHTTPClient) { self.client = client }
}
