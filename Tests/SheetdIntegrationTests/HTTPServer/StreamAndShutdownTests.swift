@testable import HTTPServer
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
import Timekeeping

@Suite("Streams and shutdown", .serialized)
struct StreamAndShutdownTests {
    /// Each line is written only after the client received the one before, so the lines
    /// provably travel one by one while the stream is open (no clock involved).
    @Test("a stream delivers each chunk as it is written, ends, and the connection is reused")
    func streamDelivers() async throws {
        try await withServer { _, port, probe in
            let (status, chunks, next) = try await onThread {
                let client = try RawHTTPClient(port: port)
                try client.send(RawHTTPClient.request("GET", "/held-stream?id=stream"))
                guard let (status, headers) = try client.readHead() else { throw ClientError("no head") }
                guard headers.contains(where: { $0.0.lowercased() == "transfer-encoding" && $0.1.lowercased() == "chunked" })
                else { throw ClientError("not chunked: \(headers)") }
                // The responder stored the stream before its answer (whose head we just read) was queued.
                guard let stream = probe.heldStream("stream") else { throw ClientError("no held stream") }
                var chunks: [String] = []
                for i in 0..<5 {
                    guard stream.write(Array("line \(i)\n".utf8)) else { throw ClientError("write \(i) refused") }
                    guard let chunk = try client.readChunk() else { throw ClientError("stream ended after \(i) lines") }
                    chunks.append(String(decoding: chunk, as: UTF8.self))
                }
                stream.finish()
                if let extra = try client.readChunk() { throw ClientError("a chunk after finish: \(extra)") }
                let next = try client.roundTrip("GET", "/echo")
                return (status, chunks, next)
            }
            #expect(status == 200)
            #expect(chunks == (0..<5).map { "line \($0)\n" })
            #expect(next.status == 200)
            #expect(await probe.wait { $0.streamsClosed == ["stream"] })
            #expect(await probe.wait { $0.records.contains { $0.head.path == "/held-stream" && $0.bytesOut == 35 && $0.completedNormally } })
        }
    }

    @Test("a stream whose client disconnects fires onClose and refuses further writes")
    func streamClientGone() async throws {
        try await withServer { _, port, probe in
            let received = try await onThread {
                let client = try RawHTTPClient(port: port)
                try client.send(RawHTTPClient.request("GET", "/forever?ms=20&id=gone"))
                _ = try client.readHead()
                var received = 0
                for _ in 0..<3 { if try client.readChunk() != nil { received += 1 } }
                client.abort()
                return received
            }
            #expect(received == 3)
            #expect(await probe.wait(for: .seconds(3)) { $0.streamsClosed.contains("gone") })
        }
    }

    /// The stream waits (suspended) when its client leaves; another client, idle on a keep-alive
    /// connection opened before it, is the oldest connection the server has. The stream's
    /// connection must close at once: nothing else happens on the server that could free it
    /// later. The exchange is recorded as not completed normally. The bound only ends a failure.
    @Test("a waiting stream whose client leaves frees its connection, though an idle client is older")
    func waitingStreamClientGoneFreesItsConnection() async throws {
        try await withServer { server, port, probe in
            let clients = try await onThread {
                let idle = try RawHTTPClient(port: port)
                guard try idle.roundTrip("GET", "/echo").status == 200 else { throw ClientError("echo failed") }
                let client = try RawHTTPClient(port: port)
                try client.send(RawHTTPClient.request("GET", "/idle-stream?id=left"))
                guard try client.readHead() != nil, try client.readChunk() != nil else { throw ClientError("no stream") }
                client.abort()   // its end only (FIN): the socket stays open until the test ends
                return [ClientBox(idle), ClientBox(client)]
            }
            #expect(await probe.wait(for: .seconds(20)) { $0.streamsClosed.contains("left") })
            let freed = await probe.wait(for: .seconds(20)) { _ in server.openConnections == 1 }
            let open = server.openConnections
            #expect(freed, "\(open) connections open; only the idle client's should be")
            #expect(await probe.wait { $0.records.contains { $0.head.path == "/idle-stream" && !$0.completedNormally } })
            withExtendedLifetime(clients) {}
        }
    }

    @Test("HTTPStream alone: writes queue, finish closes, onClose runs once")
    func streamUnit() {
        let stream = HTTPStream()
        let closes = Counter()
        #expect(stream.write([1, 2, 3]))
        #expect(stream.write([]))
        #expect(stream.write([4]))
        #expect(stream.pendingWrites == 2)
        #expect(stream.unsentSocketBytes == 0)
        #expect(!stream.isClosed)
        stream.onClose { closes.increment() }
        stream.finish()
        #expect(stream.isClosed)
        #expect(!stream.write([5]))
        stream.abandon()
        stream.abandon()
        #expect(closes.value == 1)
        let late = Counter()
        stream.onClose { late.increment() }
        #expect(late.value == 1)
    }

    /// A started server the test shuts down itself (`withServer` would do it after the body).
    /// A server whose shutdown grace runs on `clock`: the tests never move it, so a shutdown
    /// that returns did so without waiting out its grace. Its port is unshared: the tests connect
    /// to it after shutdown, and a port 0 pick, once freed, can go to another test's server.
    static func startServer(clock: ManualClock) throws -> (HTTPServer, Int, Probe) {
        var configuration = HTTPServerConfiguration()
        configuration.clock = clock
        configuration.inactivityTimeout = .seconds(3600)
        configuration.port = try LoopbackPorts.unshared()
        configuration.errorLog = { _ in }
        let probe = Probe()
        let server = HTTPServer(configuration: configuration, responder: TestResponder(probe: probe))
        return (server, try server.start(), probe)
    }

    /// A client that sends one GET and never reads its answer (a small receive buffer, so the
    /// server's writes back up soon).
    static func nonReadingClient(port: Int, path: String) async throws -> ClientBox {
        try await onThread {
            let client = try RawHTTPClient(port: port, receiveBuffer: 4096)
            try client.send(RawHTTPClient.request("GET", path))
            return ClientBox(client)
        }
    }

    @Test("shutdown lets requests in flight finish, then stops accepting")
    func shutdownInFlight() async throws {
        let clock = ManualClock()
        let (server, port, probe) = try Self.startServer(clock: clock)
        let results = Locked<[Int]>([])
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let status = try await onThread { try RawHTTPClient(port: port).roundTrip("GET", "/slow?ms=400").status }
                    results.withLock { $0.append(status) }
                }
            }
            #expect(await probe.wait(for: .seconds(20)) { $0.respondCalls == 8 })
            // The grace never passes (manual clock): shutdown returns once the requests are done.
            let (stopped, byItself) = await shutdown(server, grace: .seconds(3), clock: clock)
            #expect(stopped)
            #expect(byItself, "shutdown waited for its grace to pass")
            try await group.waitForAll()
        }
        #expect(results.withLock { $0 } == Array(repeating: 200, count: 8))
        let refused = await (try? onThread { try RawHTTPClient(port: port).roundTrip("GET", "/echo") }) == nil
        #expect(refused)
    }

    /// The listening socket closes as shutdown begins: a client that connects during the drain
    /// is refused at once (and may try another instance) instead of waiting in the backlog until
    /// the daemon stops, while the request in flight is still answered.
    @Test("a connection made while shutdown drains is refused; the request in flight is still answered")
    func shutdownRefusesNewConnections() async throws {
        let clock = ManualClock()
        let (server, port, probe) = try Self.startServer(clock: clock)
        async let inFlight = onThread {
            try RawHTTPClient(port: port, receiveTimeout: 30).roundTrip("POST", "/deferred-held?id=drain", body: [7])
        }
        #expect(await probe.wait(for: .seconds(20)) { $0.heldAnswer("drain") != nil })
        // The grace runs on the manual clock: only the answer below ends the drain.
        let stopping = Task { await server.shutdown(grace: .seconds(3)) }
        let refused = await Probe().wait(for: .seconds(20)) { _ in connectionRefused(port: port) }
        #expect(refused, "connections were still taken while shutdown drained")
        #expect(try #require(probe.heldAnswer("drain")).give(HTTPResponse(status: 200, body: .bytes([8]))))
        let answer = try await inFlight
        #expect(answer.status == 200 && answer.body == [8])
        #expect(await stopping.value)
    }

    /// Connections come and go on four threads while the server stops, ten times over: every
    /// stop ends cleanly, and each request got a 200, a 503 or a refused or closed connection.
    @Test("shutdown while connections arrive and leave on every thread")
    func shutdownUnderConnectionChurn() async throws {
        for _ in 0..<10 {
            var configuration = HTTPServerConfiguration()
            configuration.port = try LoopbackPorts.unshared()   // its clients connect until it is gone
            configuration.threads = 4
            configuration.errorLog = { _ in }
            let server = HTTPServer(configuration: configuration, responder: TestResponder(probe: Probe()))
            let port = try server.start()
            let served = Counter(), unexpected = Locked<[String]>([])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        try await onThread {
                            // Until the server is gone: a fresh connection, two requests on it.
                            while let client = try? RawHTTPClient(port: port, receiveTimeout: 10) {
                                for _ in 0..<2 {
                                    guard let status = try? client.roundTrip("GET", "/echo").status else { break }
                                    if status == 200 { served.increment() } else if status != 503 {
                                        unexpected.withLock { $0.append("status \(status)") }
                                    }
                                }
                            }
                        }
                    }
                }
                #expect(await Probe().wait(for: .seconds(20)) { _ in served.value >= 50 })
                #expect(await server.shutdown(grace: .seconds(5)))
                try await group.waitForAll()
            }
            #expect(unexpected.withLock { $0 }.isEmpty)
        }
    }

    /// libmicrohttpd 0.9.75 refuses some heads by itself (`transmit_error_response`), and once
    /// `MHD_stop_daemon` has begun, its `MHD_queue_response` there returns success without
    /// queueing anything and the head is then built from no response: the process crashes. So
    /// shutdown closes every connection, and waits for libmicrohttpd to finish with each, before
    /// it stops the daemon. Here the server's thread is held inside the refusal (the exchange
    /// record of a Content-Length it cannot parse) until shutdown is seen waiting.
    @Test("shutdown waits for a connection libmicrohttpd is still refusing before it stops the daemon")
    func shutdownWaitsForARefusalInProgress() async throws {
        let probe = Probe()
        let server = makeTestServer(probe: probe)
        let port = try server.start()
        // An idle keep-alive connection beside it: shutdown closes that one too.
        let idleServed = Counter()
        async let idleEnd = onThread { () -> [UInt8]? in
            let idle = try RawHTTPClient(port: port, receiveTimeout: 30)
            _ = try idle.roundTrip("GET", "/echo")
            idleServed.increment()
            return idle.readToEnd()
        }
        #expect(await Probe().wait(for: .seconds(20)) { _ in idleServed.value == 1 })
        let status = try await onThread { () -> Int in
            let client = try RawHTTPClient(port: port, receiveTimeout: 10)
            try client.send("POST /held-record HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n")
            return try client.readResponse().status
        }
        #expect(status == 400)
        #expect(await probe.wait(for: .seconds(20)) { $0.records.contains { $0.head.path == "/held-record" } })
        let stopping = Task { await server.shutdown(grace: .seconds(1)) }
        #expect(await Probe().wait(for: .seconds(20)) { _ in server.parkedShutdownWaits == 1 },
                "shutdown went on to stop the daemon while a connection was still being refused")
        probe.recordGate.signal()
        #expect(await stopping.value)
        #expect(server.openConnections == 0)
        #expect(try await idleEnd == [], "the idle connection was closed, not reset")
    }

    /// The same crash cannot come one step later: a connection accepted and handed to
    /// libmicrohttpd's only thread while that thread is busy is started after shutdown closed
    /// the open ones. It is shut as it starts (`ConnectionTracker.opened`), and libmicrohttpd,
    /// seeing the hang-up first, closes it without reading its head: it is never refused, so it
    /// cannot be inside a refusal when the daemon stops. The thread is held inside the first
    /// connection's refusal until the second one is handed over and shutdown is waiting.
    @Test("a connection libmicrohttpd starts during shutdown is closed unread, never refused")
    func connectionStartedDuringShutdownIsClosedUnread() async throws {
        let probe = Probe()
        let server = makeTestServer({ $0.threads = 1 }, probe: probe)
        let port = try server.start()
        func refused() -> Int { probe.records.filter { $0.head.path == "/held-record" }.count }
        /// A connection whose head libmicrohttpd refuses by itself (a Content-Length it cannot parse).
        func refusedClient() async throws -> ClientBox {
            try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 30)
                try client.send("POST /held-record HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n")
                return ClientBox(client)
            }
        }
        let first = try await refusedClient()
        #expect(await probe.wait(for: .seconds(20)) { _ in refused() == 1 })   // its thread is held now
        let second = try await refusedClient()
        #expect(await Probe().wait(for: .seconds(20)) { _ in server.admittedConnections == 2 && server.openConnections == 1 },
                "the second connection is handed over, not started")
        let stopping = Task { await server.shutdown(grace: .seconds(1)) }
        #expect(await Probe().wait(for: .seconds(20)) { _ in server.parkedShutdownWaits == 1 })
        probe.recordGate.signal()   // the first refusal ends; the thread goes on to the second connection
        #expect(await stopping.value)
        #expect(refused() == 1, "the second connection's head was read and refused")
        let answer = try await onThread { second.client.readToEnd() }
        #expect(answer == nil || answer == [], "the second connection was answered")
        withExtendedLifetime(first) {}
    }

    @Test("shutdown answers 503 to requests still suspended after the grace")
    func shutdownPastGrace() async throws {
        let clock = ManualClock()
        let (server, port, probe) = try Self.startServer(clock: clock)
        // Ten minutes: only the end of the grace can answer it.
        async let slow = onThread { try RawHTTPClient(port: port, receiveTimeout: 30).roundTrip("GET", "/slow?ms=600000") }
        #expect(await probe.wait(for: .seconds(20)) { $0.respondCalls == 1 })
        async let stopped = shutdown(server, grace: .milliseconds(200), clock: clock)
        #expect(await Probe().wait(for: .seconds(20)) { _ in clock.sleeperCount == 1 })
        clock.advance(by: .milliseconds(200))
        #expect(await stopped.byItself, "shutdown did not end when its grace had passed")
        let response = try await slow
        #expect(response.status == 503)
        #expect(response.header("Connection")?.lowercased() == "close")
    }

    @Test("shutdown ends open streams (clients see the final chunk) and runs onClose")
    func shutdownStreams() async throws {
        let clock = ManualClock()
        let (server, port, probe) = try Self.startServer(clock: clock)
        let ready = Counter()
        async let idle = onThread {
            let client = try RawHTTPClient(port: port)
            try client.send(RawHTTPClient.request("GET", "/idle-stream?id=idle"))
            _ = try client.readHead()
            var text = ""
            var first = true
            while let chunk = try client.readChunk() {
                text += String(decoding: chunk, as: UTF8.self)
                if first { ready.increment(); first = false }
            }
            return text
        }
        async let busy = onThread {
            let client = try RawHTTPClient(port: port)
            try client.send(RawHTTPClient.request("GET", "/forever?ms=10&id=busy"))
            _ = try client.readHead()
            var chunks = 0
            while try client.readChunk() != nil {
                chunks += 1
                if chunks == 3 { ready.increment() }
            }
            return chunks
        }
        #expect(await Probe().wait(for: .seconds(20)) { _ in ready.value == 2 })
        // The grace never passes (manual clock): shutdown returns once it has ended the streams.
        #expect(await shutdown(server, grace: .seconds(5), clock: clock).byItself, "shutdown waited for its grace to pass")
        #expect(try await idle == ": hello\n\n")
        #expect(try await busy >= 3)
        #expect(await probe.wait { Set($0.streamsClosed) == ["idle", "busy"] })
    }

    @Test("shutdown does not wait its grace for a stream whose client stopped reading")
    func shutdownStalledStream() async throws {
        let clock = ManualClock()
        let (server, port, probe) = try Self.startServer(clock: clock)
        let box = try await Self.nonReadingClient(port: port, path: "/flood?id=stalled")
        // The client never reads: wait until the writes back up (16 queued).
        #expect(await probe.wait(for: .seconds(20)) { $0.streamsBackedUp.contains("stalled") })
        // The grace never passes (manual clock): shutdown returns without waiting it out.
        #expect(await shutdown(server, grace: .seconds(5), clock: clock).byItself, "shutdown waited for its grace to pass")
        #expect(await probe.wait { $0.streamsClosed.contains("stalled") })
        _ = box
    }

    /// The request in flight becomes a stream only after shutdown began to wait out its grace
    /// for it: the stream is ended at once, and the wait, which does not cover streams, must
    /// end then too, not when the grace has passed.
    @Test("shutdown does not wait its grace for a request that became a stream while it waited")
    func shutdownRequestBecomesStream() async throws {
        let clock = ManualClock()
        let (server, port, probe) = try Self.startServer(clock: clock)
        let box = try await Self.nonReadingClient(port: port, path: "/deferred-held?id=late-stream")
        #expect(await probe.wait(for: .seconds(20)) { $0.heldAnswer("late-stream") != nil })
        // The grace never passes (manual clock): only the wait's own wake-up can end it.
        async let stopped = shutdown(server, grace: .seconds(5), clock: clock)
        #expect(await Probe().wait(for: .seconds(20)) { _ in server.parkedShutdownWaits == 1 })
        // The answer is a stream holding far more than the client, which never reads, takes.
        let stream = HTTPStream()
        for _ in 0..<16 { stream.write([UInt8](repeating: UInt8(ascii: "f"), count: 64 * 1024)) }
        probe.heldAnswer("late-stream")?.give(HTTPResponse(status: 200, body: .stream(stream)))
        #expect(await stopped.byItself, "shutdown waited for its grace to pass")
        _ = box
    }

    @Test("shutdown is idempotent and safe before start")
    func shutdownIdempotent() async throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let never = HTTPServer(configuration: configuration, responder: TestResponder(probe: Probe()))
        await never.shutdown(grace: .zero)
        await never.shutdown(grace: .zero)
        #expect(throws: HTTPServerError.self) { _ = try never.start() }

        let server = HTTPServer(configuration: configuration, responder: TestResponder(probe: Probe()))
        _ = try server.start()
        async let a = server.shutdown(grace: .milliseconds(100))
        async let b = server.shutdown(grace: .milliseconds(100))
        #expect(await (a, b) == (true, true))
        #expect(await server.shutdown(grace: .zero))
    }

    @Test("start fails clearly for a bad address or a taken port")
    func startErrors() async throws {
        var bad = HTTPServerConfiguration()
        bad.host = "not-an-address"
        bad.port = 0
        let badServer = HTTPServer(configuration: bad, responder: TestResponder(probe: Probe()))
        #expect { _ = try badServer.start() } throws: { ($0 as? HTTPServerError)?.code == .invalidAddress }

        try await withServer { _, port, _ in
            var taken = HTTPServerConfiguration()
            taken.port = port
            let second = HTTPServer(configuration: taken, responder: TestResponder(probe: Probe()))
            #expect { _ = try second.start() } throws: { ($0 as? HTTPServerError)?.code == .bindFailed }
        }
    }
}
