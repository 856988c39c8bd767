@testable import HTTPServer
import Polling
import SessionStore
import SheetAPI
import SheetJSON
import SheetObservability
import Testing
import Timekeeping

/// An idle event stream's keep-alive comments, paced by the service's clock: a `ManualClock`
/// here, so the interval is checked exactly (no socket: the stream's queued writes are read).
@Suite("Event-stream keep-alive on a manual clock")
struct KeepAliveTests {
    /// The text of what the stream has queued (taking it, as the HTTP layer would).
    static func take(_ stream: HTTPStream) -> String {
        var bytes: [UInt8] = []
        var buffer = [CChar](repeating: 0, count: 4096)
        while stream.pendingWrites > 0 {
            let count = buffer.withUnsafeMutableBufferPointer { stream.read(into: $0.baseAddress!, max: $0.count) }
            guard count > 0 else { break }
            bytes += buffer[0..<count].map { UInt8(bitPattern: $0) }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("an idle stream gets a keep-alive comment each time the interval has passed on the service's clock, not before")
    func keepAliveComments() async throws {
        let clock = ManualClock()
        var configuration = SheetService.Configuration()
        configuration.clock = clock
        configuration.streamKeepAlive = .seconds(15)
        let service = SheetService(store: SessionStore(), configuration: configuration,
                                   observer: ServiceObserver(level: .off, log: LogSink { _ in }))
        let created = await service.respond(to: HTTPRequest(
            head: HTTPRequestHead(method: .post, path: "/sessions"), body: Array(#"{"detents":["medium","large"]}"#.utf8)))
        guard case .bytes(let body) = created.body, case .object(let members)? = try? JSONParser.parse(body),
              case .string(let id)? = members.first(where: { $0.key == "id" })?.value else {
            Issue.record("no session: \(created.status)")
            return
        }
        let opened = await service.respond(to: HTTPRequest(
            head: HTTPRequestHead(method: .get, path: "/sessions/\(id)/events", headers: ["Accept": "text/event-stream"]), body: []))
        guard case .stream(let stream) = opened.body else {
            Issue.record("no stream: \(opened.status)")
            return
        }
        #expect(Self.take(stream).hasPrefix(": sheetd events of session"))
        #expect(await eventually { clock.sleeperCount == 1 })

        for round in 1...2 {
            clock.advance(by: .seconds(15) - .milliseconds(1))
            // Nothing was due: the keep-alive still sleeps and wrote nothing.
            #expect(clock.sleeperCount == 1)
            #expect(stream.pendingWrites == 0, "round \(round): written before the interval had passed")
            clock.advance(by: .milliseconds(1))
            #expect(await eventually { stream.pendingWrites == 1 && clock.sleeperCount == 1 })
            #expect(Self.take(stream) == ": keep-alive\n\n")
        }
        // The stream closes (its client went): the keep-alive stops sleeping on the clock.
        stream.abandon()
        #expect(await eventually { clock.sleeperCount == 0 })
    }
}
