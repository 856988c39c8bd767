#if canImport(Glibc)
import Glibc
#endif
import Dispatch
@testable import HTTPServer
import Locking
import Polling
import Synchronization
import Testing
import Timekeeping

/// What the test responder saw (streams closed, exchanges completed).
final class Probe: Sendable {
    struct State {
        var streamsClosed: [String] = []
        var records: [HTTPExchangeRecord] = []
        var respondCalls = 0
        /// Streams of `/held-stream`, by id: the test writes and finishes them itself.
        var heldStreams: [String: HTTPStream] = [:]
        /// `/flood` streams whose writes backed up (the client does not read).
        var streamsBackedUp: Set<String> = []
        /// Answers of `/deferred-held`, by id: the test gives them itself.
        var heldAnswers: [String: DeferredAnswer] = [:]
    }

    /// Holds `completed` for an exchange on `/held-record` until signalled (or 10 s, which only
    /// ends a failure): the libmicrohttpd thread that reports it stays inside the callback.
    let recordGate = DispatchSemaphore(value: 0)

    let state = LockedValue(State())

    var streamsClosed: [String] { state.withLock { $0.streamsClosed } }
    var records: [HTTPExchangeRecord] { state.withLock { $0.records } }
    var respondCalls: Int { state.withLock { $0.respondCalls } }
    var streamsBackedUp: Set<String> { state.withLock { $0.streamsBackedUp } }
    func heldStream(_ id: String) -> HTTPStream? { state.withLock { $0.heldStreams[id] } }
    func heldAnswer(_ id: String) -> DeferredAnswer? { state.withLock { $0.heldAnswers[id] } }

    /// Polls `condition` for up to `timeout` (`eventually`, every 10 ms).
    func wait(for timeout: Duration = .seconds(5), _ condition: (Probe) -> Bool) async -> Bool {
        await eventually(within: timeout, every: .milliseconds(10)) { condition(self) }
    }
}

/// Routes:
/// - `/echo`: 200, the request body back; X-Method, X-Path, X-Query, X-Client, X-Header-Count.
/// - `/slow?ms=N`: answers after N ms.
/// - `/stream?n=K&ms=M`: a stream of K lines written every M ms, then the end.
/// - `/forever?ms=M&id=ID`: a stream written every M ms until the client goes (onClose records ID).
/// - `/idle-stream?id=ID`: a stream that never writes (held until shutdown).
/// - `/held-stream?id=ID`: a stream the test itself writes and finishes (`Probe.heldStream`).
/// - `/early`: refused by preflight with 404 (before the body).
/// - `/deferred-now`: taken on in place and answered (200, the body back) before
///   `respondInPlace(to:later:)` returns.
/// - `/deferred?ms=N`: taken on in place and answered from a Dispatch thread, after N ms.
/// - `/deferred-held?id=ID`: taken on in place and never answered by the server (`Probe.heldAnswer`).
/// - `/held-record`: its exchange record is reported, then `completed` waits for `Probe.recordGate`.
struct TestResponder: HTTPResponder {
    let probe: Probe

    func respondInPlace(to request: HTTPRequest, later: DeferredAnswer) -> InPlaceAnswer {
        let head = request.head
        let answer = HTTPResponse(status: 200, headers: ["X-Deferred": head.path], body: .bytes(request.body))
        switch head.path {
        case "/deferred-now":
            later.give(answer)
        case "/deferred":
            let ms = head.queryValue("ms").flatMap { Int($0) } ?? 0
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(ms)) { later.give(answer) }
        case "/deferred-held":
            let id = head.queryValue("id") ?? "held"
            probe.state.withLock { $0.heldAnswers[id] = later }
        default:
            return .declined
        }
        return .deferred
    }

    func preflight(_ head: HTTPRequestHead, tag: inout Int) -> HTTPResponse? {
        if head.path == "/early" {
            return HTTPResponse(status: 404, headers: ["X-Early": "yes"], body: .bytes(Array("no such route\n".utf8)))
        }
        return nil
    }

    func respond(to request: HTTPRequest) async -> HTTPResponse {
        probe.state.withLock { $0.respondCalls += 1 }
        let head = request.head
        let ms = head.queryValue("ms").flatMap { Int($0) } ?? 0
        switch head.path {
        case "/echo":
            var headers = HTTPHeaders()
            headers.add("Content-Type", "application/octet-stream")
            headers.add("X-Method", head.method.rawValue)
            headers.add("X-Path", head.path)
            headers.add("X-Query", head.query.map { "\($0.0)=\($0.1)" }.joined(separator: "&"))
            headers.add("X-Client", head.clientAddress)
            headers.add("X-Header-Count", String(head.headers.count))
            if let value = head.headers["x-custom"] { headers.add("X-Custom-Echo", value) }
            return HTTPResponse(status: 200, headers: headers, body: .bytes(request.body))
        case "/slow":
            try? await Task.sleep(for: .milliseconds(ms))
            return HTTPResponse(status: 200, body: .bytes(Array("slow \(ms)\n".utf8)))
        case "/stream":
            let count = head.queryValue("n").flatMap { Int($0) } ?? 3
            let stream = HTTPStream()
            let probe = self.probe
            stream.onClose { probe.state.withLock { $0.streamsClosed.append("stream") } }
            Task {
                for i in 0..<count {
                    if ms > 0 { try? await Task.sleep(for: .milliseconds(ms)) }
                    stream.write(Array("line \(i)\n".utf8))
                }
                stream.finish()
            }
            return HTTPResponse(status: 200, headers: ["Content-Type": "text/plain"], body: .stream(stream))
        case "/forever":
            let id = head.queryValue("id") ?? "forever"
            let stream = HTTPStream()
            let probe = self.probe
            stream.onClose { probe.state.withLock { $0.streamsClosed.append(id) } }
            Task {
                var i = 0
                while stream.write(Array("tick \(i)\n".utf8)) {
                    i += 1
                    try? await Task.sleep(for: .milliseconds(max(1, ms)))
                }
            }
            return HTTPResponse(status: 200, headers: ["Content-Type": "text/event-stream"], body: .stream(stream))
        case "/flood":
            // Writes 64 KiB chunks as fast as libmicrohttpd takes them (at most 16 queued).
            let id = head.queryValue("id") ?? "flood"
            let stream = HTTPStream()
            let probe = self.probe
            stream.onClose { probe.state.withLock { $0.streamsClosed.append(id) } }
            let chunk = [UInt8](repeating: UInt8(ascii: "f"), count: 64 * 1024)
            Task {
                while !stream.isClosed {
                    if stream.pendingWrites < 16 {
                        stream.write(chunk)
                    } else {
                        probe.state.withLock { _ = $0.streamsBackedUp.insert(id) }
                        try? await Task.sleep(for: .milliseconds(2))
                    }
                }
            }
            return HTTPResponse(status: 200, body: .stream(stream))
        case "/held-stream":
            let id = head.queryValue("id") ?? "held"
            let stream = HTTPStream()
            let probe = self.probe
            stream.onClose { probe.state.withLock { $0.streamsClosed.append(id) } }
            probe.state.withLock { $0.heldStreams[id] = stream }
            return HTTPResponse(status: 200, headers: ["Content-Type": "text/plain"], body: .stream(stream))
        case "/idle-stream":
            let id = head.queryValue("id") ?? "idle"
            let stream = HTTPStream()
            let probe = self.probe
            stream.onClose { probe.state.withLock { $0.streamsClosed.append(id) } }
            stream.write(Array(": hello\n\n".utf8))
            return HTTPResponse(status: 200, headers: ["Content-Type": "text/event-stream"], body: .stream(stream))
        default:
            return HTTPResponse(status: 404, body: .bytes(Array("not found\n".utf8)))
        }
    }

    func completed(_ record: HTTPExchangeRecord) {
        probe.state.withLock { $0.records.append(record) }
        if record.head.path == "/held-record" { _ = probe.recordGate.wait(timeout: .now() + .seconds(10)) }
    }
}

/// A test server, not started yet: 127.0.0.1 port 0, a 5 s connection timeout and no error log,
/// then whatever `configure` changes; it answers with `TestResponder`.
func makeTestServer(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in }, probe: Probe = Probe()) -> HTTPServer {
    var configuration = HTTPServerConfiguration()
    configuration.host = "127.0.0.1"
    configuration.port = 0
    configuration.connectionTimeout = .seconds(5)
    configuration.errorLog = { _ in }
    configure(&configuration)
    return HTTPServer(configuration: configuration, responder: TestResponder(probe: probe))
}

/// Starts a server on 127.0.0.1 port 0, runs `body`, shuts it down.
func withServer(
    _ configure: (inout HTTPServerConfiguration) -> Void = { _ in },
    probe: Probe = Probe(),
    _ body: (HTTPServer, Int, Probe) async throws -> Void
) async throws {
    let server = makeTestServer(configure, probe: probe)
    let port = try server.start()
    #expect(port > 0)
    #expect(server.boundPort == port)
    do {
        try await body(server, port, probe)
    } catch {
        await shutdown(server, grace: .milliseconds(100), clock: server.configuration.clock)
        throw error
    }
    await shutdown(server, grace: .seconds(1), clock: server.configuration.clock)
}

/// Shuts `server` down. On a `ManualClock` nothing ends the grace by itself, so a shutdown that
/// waits for it would wait forever: one still running after 20 s (real time, which only ends a
/// failure) gets the clock moved past each deadline it sleeps on until it returns. `byItself`:
/// it returned without that (what a test of "shutdown does not wait its grace" expects).
@discardableResult
func shutdown(_ server: HTTPServer, grace: Duration, clock: any ServiceClock) async -> (stopped: Bool, byItself: Bool) {
    guard let manual = clock as? ManualClock else { return (await server.shutdown(grace: grace), true) }
    let returned = Counter()
    let stopping = Task {
        let stopped = await server.shutdown(grace: grace)
        returned.increment()
        return stopped
    }
    let byItself = await Probe().wait(for: .seconds(20)) { _ in returned.value == 1 }
    while returned.value == 0 {
        manual.advance(by: grace + .seconds(10))
        try? await Task.sleep(for: .milliseconds(10))
    }
    return (await stopping.value, byItself)
}

/// True when a connection to `port` on loopback is refused (nothing listens there).
func connectionRefused(port: Int) -> Bool {
    do {
        _ = try RawHTTPClient(port: port)
        return false
    } catch {
        return errno == ECONNREFUSED  // RawHTTPClient keeps the errno of its failed connect
    }
}

final class Counter: Sendable {
    private let storage = Atomic<Int>(0)
    func increment() { storage.add(1, ordering: .relaxed) }
    var value: Int { storage.load(ordering: .relaxed) }
}

/// 16 connections × 50 POSTs of their own bodies, each on a thread of its own, to `target(i)`
/// for request i: how many answers were not a 200 echoing their own body.
func echoFromSixteenConnections(port: Int, target: @escaping @Sendable (Int) -> String) async throws -> Int {
    let failures = Counter()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for c in 0..<16 {
            group.addTask {
                try await onThread {
                    let client = try RawHTTPClient(port: port)
                    for i in 0..<50 {
                        let body = Array("c\(c) r\(i)".utf8)
                        let response = try client.roundTrip("POST", target(i), body: body)
                        if response.status != 200 || response.body != body { failures.increment() }
                    }
                }
            }
        }
        try await group.waitForAll()
    }
    return failures.value
}
