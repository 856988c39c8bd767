@testable import HTTPServer
#if canImport(Glibc)
import Glibc
#endif
import Testing
import Timekeeping

/// The server's timing rules on a `ManualClock`: each is checked just before and just after its
/// limit, exactly, however slowly the machine runs. libmicrohttpd's own real-time inactivity
/// timeout is set far out of the way.
@Suite("Timing rules on the server's clock", .serialized)
struct ClockedRulesTests {
    static func configure(_ clock: ManualClock) -> (inout HTTPServerConfiguration) -> Void {
        { configuration in
            configuration.clock = clock
            configuration.connectionTimeout = .seconds(2)
            configuration.suspendedRequestDeadline = .seconds(4)
            configuration.inactivityTimeout = .seconds(3600)
        }
    }

    /// Returns once a sweep that started after this call has finished (20 s only ends a failure).
    static func nextSweep(of server: HTTPServer) async -> Bool {
        let seen = server.completedSweeps
        return await Probe().wait(for: .seconds(20)) { _ in server.completedSweeps >= seen + 2 }
    }

    /// Moves the clock to 1 ms before `remaining` has passed: the connection survives a sweep;
    /// then 1 ms past it: the server cuts it.
    static func expectKept(_ box: ClientBox, for remaining: Duration, then server: HTTPServer, cuts clock: ManualClock) async throws {
        clock.advance(by: remaining - .milliseconds(1))
        #expect(await nextSweep(of: server))
        #expect(box.client.isOpen(), "cut before the timeout")
        clock.advance(by: .milliseconds(2))
        let closed = try await onThread { box.client.waitForClose() }
        #expect(closed)
    }

    @Test("an idle keep-alive connection stays until the timeout has passed on the server's clock, then is cut")
    func idleTimeout() async throws {
        let clock = ManualClock()
        try await withServer(Self.configure(clock)) { server, port, probe in
            let box = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 20)
                _ = try client.roundTrip("GET", "/echo")
                return ClientBox(client)
            }
            // The exchange is complete once the server recorded it: the idle time counts from there.
            #expect(await probe.wait(for: .seconds(20)) { $0.records.count == 1 })
            try await Self.expectKept(box, for: .seconds(2), then: server, cuts: clock)
        }
    }

    @Test("a peer trickling its head is kept while the timeout has not passed on the server's clock, then cut")
    func slowlorisCutOff() async throws {
        let clock = ManualClock()
        try await withServer(Self.configure(clock)) { server, port, _ in
            let box = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 20)
                try client.send("GET /echo HTTP/1.1\r\nHost: x\r\n")
                return ClientBox(client)
            }
            // The timeout counts from when the server took the connection (after connect returned).
            #expect(await Probe().wait(for: .seconds(20)) { _ in server.openConnections == 1 })
            // Bytes keep coming (each would reset an inactivity timer), the request never completes.
            for step in 0..<3 {
                clock.advance(by: .milliseconds(600))
                try await onThread { try box.client.send("X-Step-\(step): y\r\n") }
                #expect(await Self.nextSweep(of: server))
                #expect(box.client.isOpen(), "cut after \(600 * (step + 1)) ms of 2000")
            }
            try await Self.expectKept(box, for: .milliseconds(200), then: server, cuts: clock)
        }
    }

    @Test("a responder past suspendedRequestDeadline on the server's clock gets 503, not before")
    func suspendedRequestDeadline() async throws {
        let clock = ManualClock()
        try await withServer(Self.configure(clock)) { server, port, probe in
            // Far longer than the test: only the deadline can answer it.
            async let answer = onThread { try RawHTTPClient(port: port, receiveTimeout: 20).roundTrip("GET", "/slow?ms=600000") }
            #expect(await probe.wait(for: .seconds(20)) { $0.respondCalls == 1 })
            #expect(await probe.wait(for: .seconds(20)) { _ in server.requestsInProgress == 1 })
            clock.advance(by: .milliseconds(3999))
            #expect(await Self.nextSweep(of: server))
            #expect(probe.records.isEmpty, "answered before the deadline")
            clock.advance(by: .milliseconds(2))
            let status = try await answer.status
            #expect(status == 503)
        }
    }

    @Test("shutdown's grace runs on the server's clock: it ends when the clock passes it, with 503 for what is left")
    func shutdownGrace() async throws {
        let clock = ManualClock()
        var configuration = HTTPServerConfiguration()
        Self.configure(clock)(&configuration)
        configuration.port = 0
        configuration.errorLog = { _ in }
        let probe = Probe()
        let server = HTTPServer(configuration: configuration, responder: TestResponder(probe: probe))
        let port = try server.start()
        async let answer = onThread { try RawHTTPClient(port: port, receiveTimeout: 20).roundTrip("GET", "/slow?ms=600000") }
        #expect(await probe.wait(for: .seconds(20)) { $0.respondCalls == 1 })
        let finished = Counter()
        let shutdown = Task {
            await server.shutdown(grace: .seconds(10))
            finished.increment()
        }
        // The grace's timer is the one sleeper; until the clock reaches it, nothing else can end
        // the wait (the request sleeps for ten minutes).
        #expect(await Probe().wait(for: .seconds(20)) { _ in clock.sleeperCount == 1 })
        clock.advance(by: .milliseconds(9999))
        #expect(clock.sleeperCount == 1)
        #expect(finished.value == 0)
        clock.advance(by: .milliseconds(1))
        await shutdown.value
        #expect(finished.value == 1)
        let status = try await answer.status
        #expect(status == 503)
    }

    /// The stall behind flaky runs: every thread of Swift's cooperative pool busy (here with
    /// spinning tasks; in the suite, CPU-heavy tests of other targets in the same process). The
    /// server's deadlines must hold anyway: slow peers are cut by a sweeper that needs no pool
    /// thread. (With the sweeper as a task, nothing was cut until the pool freed up.)
    @Test("slow peers are cut while every thread of the cooperative pool is busy")
    func deadlinesHoldWhileThePoolIsSaturated() async throws {
        let clock = ManualClock()
        try await withServer(Self.configure(clock)) { server, port, _ in
            let release = Counter()
            let box = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 20)
                try client.send("GET /echo HTTP/1.1\r\nHost: x\r\n")
                return ClientBox(client)
            }
            #expect(await Probe().wait(for: .seconds(20)) { _ in server.openConnections == 1 })
            // More spinners than the pool has threads: every pool thread is taken until release.
            let spinners = 2 * Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) + 2
            let started = Counter()
            for _ in 0..<spinners {
                Task.detached {
                    started.increment()
                    while release.value == 0 {}
                }
            }
            // From here on the test runs on a plain thread; it releases the pool whatever happens.
            let (saturated, closed) = try await onThread {
                defer { release.increment() }
                // The pool is saturated once no more spinners get to start (its width is below `spinners`).
                var last = -1
                while started.value != last {
                    last = started.value
                    usleep(200_000)
                }
                let saturated = last < spinners
                clock.advance(by: .seconds(3))
                // 20 s (the client's receive timeout) only ends a failure.
                return (saturated, box.client.waitForClose())
            }
            #expect(saturated, "the pool ran every spinner: it was not saturated, so this proved nothing")
            #expect(closed, "the slow peer was not cut while the pool was busy")
        }
    }
}
