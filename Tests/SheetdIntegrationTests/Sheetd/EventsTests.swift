import Foundation
import Polling
import Synchronization
import Testing

/// The presenter's side: long-polls and Server-Sent Events, against the real binary.
@Suite("Waiting for events")
struct EventsTests {
    static let seed = SeedScenarioTests.seedConfiguration

    static func create(_ client: TestHTTPClient, _ body: String = seed) throws -> String {
        let created = try client.request("POST", "/sessions", body: body)
        return try #require(created.json["id"] as? String)
    }

    static func processFigures(_ pid: Int32) -> (threads: Int, residentKiB: Int) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func value(_ key: String) -> Int {
            status.split(separator: "\n").first { $0.hasPrefix(key) }
                .flatMap { Int($0.split(whereSeparator: { $0 == " " || $0 == "\t" })[1]) } ?? -1
        }
        return (value("Threads:"), value("VmRSS:"))
    }

    /// sheetd's count of requests it suspended (a long-poll with nothing to answer yet is one).
    static func suspensions(_ server: SheetdProcess) throws -> Int {
        let metrics = try context("GET /metrics", of: server) { try server.client().request("GET", "/metrics").text }
        let line = metrics.split(separator: "\n").first { $0.hasPrefix("sheetd_request_suspensions_total ") }
        return line.flatMap { Double($0.split(separator: " ")[1]) }.map { Int($0) } ?? -1
    }

    /// `body`, its error prefixed with what it was doing (a receive timeout says which wait ran
    /// out) and followed by the end of sheetd's log (whether it answered, and when).
    static func context<T>(_ what: String, of server: SheetdProcess? = nil, _ body: () throws -> T) throws -> T {
        do { return try body() } catch {
            let log = server.map { "; sheetd's log ends: \($0.stderr.suffix(2500))" } ?? ""
            throw TestClientError(description: "\(what): \(error)\(log)")
        }
    }

    /// Waits until sheetd has suspended at least `count` requests in all: the long-polls sent
    /// before are parked, so what follows releases a waiting poll rather than meeting one that
    /// has yet to arrive. 20 s only end a failure.
    static func waitForSuspensions(_ server: SheetdProcess, atLeast count: Int) throws -> Bool {
        try eventuallyBlocking(within: .seconds(20), every: .milliseconds(10)) { try suspensions(server) >= count }
    }

    @Test func longPollIsAnsweredByADragFromAnotherClient() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let id = try Self.create(try server.client())
            let waiter = try server.client()
            let before = try Self.suspensions(server)
            try waiter.sendRaw(Array("GET /sessions/\(id)/events?after=1&wait=30 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            #expect(try Self.waitForSuspensions(server, atLeast: before + 1))
            let drag = try Self.context("the drag") { try server.client().request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#) }
            #expect(drag.status == 200)
            // A timeout would answer no events: only the drag can have released it with its event.
            let answer = try Self.context("the long-poll's answer", of: server) { try waiter.readResponse() }
            #expect(answer.status == 200)
            let events = try #require(answer.json["events"] as? [[String: Any]])
            #expect(events.map { $0["seq"] as? Int } == [2])
            #expect(events.first?["type"] as? String == "detentChanged")
            #expect(answer.json["version"] as? Int == 2)
            #expect(server.stop() == 0)
        }
    }

    @Test func longPollTimesOutEmpty() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            let id = try Self.create(client)
            // When it times out is checked on a manual clock (SessionStore's tests); here, what.
            let answer = try client.request("GET", "/sessions/\(id)/events?after=1&wait=0.5")
            #expect(answer.status == 200)
            #expect(answer.text == #"{"events":[],"version":1}"#)
            // Events that already exist are answered at once, whatever the wait.
            let immediate = try client.request("GET", "/sessions/\(id)/events?after=0&wait=30")
            #expect((immediate.json["events"] as? [[String: Any]])?.count == 1)
            #expect(server.stop() == 0)
        }
    }

    /// A thousand presenters wait on one session: each costs memory only (no thread), and one
    /// drag releases every one of them.
    @Test func thousandLongPollsReleasedByOneDrag() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let id = try Self.create(try server.client())
            let pid = server.process.processIdentifier
            let before = Self.processFigures(pid)
            let suspendedBefore = try Self.suspensions(server)
            var waiters: [TestHTTPClient] = []
            for _ in 0..<1000 {
                let waiter = try TestHTTPClient(port: server.port, receiveTimeout: 20)
                try waiter.sendRaw(Array("GET /sessions/\(id)/events?after=1&wait=30 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
                waiters.append(waiter)
            }
            // Every request has reached the server and waits before the drag.
            #expect(try Self.waitForSuspensions(server, atLeast: suspendedBefore + 1000))
            let waiting = Self.processFigures(pid)
            let drag = try server.client().request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#)
            #expect(drag.status == 200)
            var released = 0
            for waiter in waiters {
                let answer = try waiter.readResponse()
                if answer.status == 200, (answer.json["events"] as? [[String: Any]])?.first?["seq"] as? Int == 2 { released += 1 }
            }
            #expect(released == 1000)
            // No thread per waiter: the pool may start its few threads lazily, so compare with a bound, not equality.
            #expect(waiting.threads <= before.threads + 4, "waiting holds no thread: \(before.threads) → \(waiting.threads)")
            let perWaiter = Double(waiting.residentKiB - before.residentKiB) * 1024 / 1000
            print("1000 long-polls: threads \(before.threads) → \(waiting.threads); RSS \(before.residentKiB) KiB → \(waiting.residentKiB) KiB (\(Int(perWaiter)) bytes per waiting presenter)")
            #expect(server.stop() == 0)
        }
    }

    @Test func deletedSessionReleasesWaitersWith404() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let id = try Self.create(try server.client())
            let waiter = try server.client()
            let before = try Self.suspensions(server)
            try waiter.sendRaw(Array("GET /sessions/\(id)/events?after=1&wait=30 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            #expect(try Self.waitForSuspensions(server, atLeast: before + 1))
            #expect(try Self.context("the DELETE") { try server.client().request("DELETE", "/sessions/\(id)") }.status == 204)
            let answer = try Self.context("the long-poll's answer", of: server) { try waiter.readResponse() }
            #expect(answer.status == 404)
            #expect(answer.errorCode == "session_not_found")
            #expect(server.stop() == 0)
        }
    }

    // MARK: Server-Sent Events

    /// Reads SSE messages (id, event, data) until `count` arrived or the stream ended. Decodes the
    /// chunked framing itself, so the end of the answer (the zero-size chunk) is seen even though
    /// the connection stays open for the next request.
    final class SSEReader {
        let client: TestHTTPClient
        private var raw: [UInt8] = []
        private var text = ""
        var comments: [String] = []
        var ended = false

        init(_ client: TestHTTPClient) { self.client = client }

        struct Message { var id: Int; var event: String; var data: [String: Any] }

        func next(_ count: Int) throws -> [Message] {
            var messages: [Message] = []
            while messages.count < count {
                while let range = text.range(of: "\n\n") {
                    let block = String(text[..<range.lowerBound])
                    text = String(text[range.upperBound...])
                    var message = Message(id: -1, event: "", data: [:])
                    for line in block.split(separator: "\n") {
                        let line = String(line)
                        if line.hasPrefix(":") { comments.append(line) }
                        if line.hasPrefix("id: ") { message.id = Int(line.dropFirst(4)) ?? -1 }
                        if line.hasPrefix("event: ") { message.event = String(line.dropFirst(7)) }
                        if line.hasPrefix("data: ") {
                            message.data = (try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8))) as? [String: Any] ?? [:]
                        }
                    }
                    if message.id >= 0 { messages.append(message) }
                    if messages.count == count { return messages }
                }
                if ended { return messages }
                guard let bytes = try client.readAvailable() else { ended = true; return messages }
                raw += bytes
                decodeChunks()
            }
            return messages
        }

        /// Moves complete chunks from `raw` to `text`; a zero-size chunk ends the stream.
        private func decodeChunks() {
            while let lineEnd = findCRLF(in: raw, from: 0) {
                let sizeText = String(decoding: raw[0..<lineEnd], as: UTF8.self)
                guard let size = Int(sizeText, radix: 16) else { ended = true; return }
                guard raw.count >= lineEnd + 2 + size + 2 else { return }
                text += String(decoding: raw[(lineEnd + 2)..<(lineEnd + 2 + size)], as: UTF8.self)
                raw.removeFirst(lineEnd + 2 + size + 2)
                if size == 0 { ended = true; return }
            }
        }

        private func findCRLF(in bytes: [UInt8], from start: Int) -> Int? {
            guard bytes.count >= 2 else { return nil }
            for index in start..<(bytes.count - 1) where bytes[index] == 13 && bytes[index + 1] == 10 { return index }
            return nil
        }
    }

    static func openStream(_ server: SheetdProcess, _ id: String, headers: String = "", query: String = "") throws -> SSEReader {
        let client = try TestHTTPClient(port: server.port, receiveTimeout: 10)
        try client.sendRaw(Array("GET /sessions/\(id)/events\(query) HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\(headers)\r\n".utf8))
        let head = try client.readResponseHead()
        #expect(head.status == 200)
        #expect(head.header("Content-Type") == "text/event-stream")
        return SSEReader(client)
    }

    @Test func streamFollowsTheSeedScenarioAndResumesWithLastEventID() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let actor = try server.client()
            let id = try Self.create(actor)
            let stream = try Self.openStream(server, id, query: "?after=0")
            let first = try stream.next(1)
            #expect(first.map(\.event) == ["presented"])

            _ = try actor.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#)
            _ = try actor.request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#)
            let live = try stream.next(2)
            #expect(live.map(\.id) == [2, 3])
            #expect(live.map(\.event) == ["detentChanged", "intercepted"])
            #expect(live[1].data["restoredTo"] as? String == "medium")

            // The presenter goes away; meanwhile the user cancels, tries again and discards.
            stream.client.shutdownConnection()
            _ = try actor.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"cancel"}"#)
            _ = try actor.request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#)
            _ = try actor.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"discard"}"#)

            // It comes back with Last-Event-ID: nothing lost, nothing repeated; until=dismissed ends the stream.
            let resumed = try Self.openStream(server, id, headers: "Last-Event-ID: 3\r\n", query: "?until=dismissed")
            let rest = try resumed.next(10)
            #expect(rest.map(\.id) == [4, 5, 6])
            #expect(rest.map(\.event) == ["confirmationCancelled", "intercepted", "dismissed"])
            #expect(rest.last?.data["reason"] as? String == "discarded")
            #expect(resumed.ended, "until=dismissed ends the stream after the dismissed event")
            #expect(server.stop() == 0)
        }
    }

    @Test func streamWithoutResumePointStartsWithTheNextEventAndSurvivesRepresentation() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let actor = try server.client()
            let id = try Self.create(actor, #"{"detents":["medium","large"]}"#)
            _ = try actor.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#)
            // The head comes once the stream is subscribed: what follows is new to it.
            let stream = try Self.openStream(server, id)
            _ = try actor.request("POST", "/sessions/\(id)/dismiss", body: #"{"reason":"done"}"#)
            _ = try actor.request("POST", "/sessions/\(id)/present")
            let messages = try stream.next(2)
            #expect(messages.map(\.id) == [3, 4])
            #expect(messages.map(\.event) == ["dismissed", "presented"])
            // Deleting the session ends the stream.
            _ = try actor.request("DELETE", "/sessions/\(id)")
            _ = try stream.next(1)
            #expect(stream.ended)
            #expect(stream.comments.contains { $0.contains("deleted") })
            #expect(server.stop() == 0)
        }
    }

    /// 1,900 presenters on one session close their streams after one event; a stream that is
    /// never written to again must still free its slot at once, or the same 1,900 reconnecting
    /// from the same address would meet `--max-connections-per-client` (2,000) and be reset.
    /// The keep-alive comment and the idle cut-off come only after an hour here, so only noticing
    /// the close itself, not a failed keep-alive write or a timeout, can free the slots; the 120 s
    /// bound only ends a failure.
    @Test func closedStreamsFreeTheirSlotsForAReconnectStorm() async throws {
        try await offPool {
            let server = try SheetdProcess(["--max-connections-per-client", "2000", "--stream-keepalive", "1h", "--idle-timeout", "1h",
                                            "--log-level", "error"])
            let client = try server.client()
            let id = try Self.create(client)
            func openConnections() throws -> Double {
                try SheetStoriesTests.metrics(client)["sheetd_open_connections"] ?? -1
            }
            for round in 1...2 {
                var streams: [SSEReader] = []
                for _ in 0..<1900 { streams.append(try Self.openStream(server, id)) }
                #expect(try openConnections() >= 1901, "round \(round): every stream is open")
                let drag = try client.request("POST", "/sessions/\(id)/drag", body: round == 1 ? #"{"to":"medium"}"# : #"{"to":"large"}"#)
                #expect(drag.status == 200)
                var delivered = 0
                for stream in streams {
                    if try stream.next(1).map(\.id) == [round + 1] { delivered += 1 }
                }
                #expect(delivered == 1900, "round \(round)")
                streams.removeAll()   // each socket closed (FIN); sheetd writes to none of them again
                _ = try eventuallyBlocking(within: .seconds(120), every: .milliseconds(20)) { try openConnections() <= 1 }
                #expect(try openConnections() == 1, "round \(round): only the metrics client is left")
            }
            #expect(server.stop() == 0)
        }
    }

    /// Presenters that leave while their streams wait, with another client idle on a keep-alive
    /// connection opened before them: each stream's connection closes at once. (Nothing on the
    /// server would free them later but that idle client's timeout, an hour here.) The 60 s bound
    /// only ends a failure.
    @Test func presentersThatLeaveFreeTheirConnectionsThoughAnIdleClientIsOlder() async throws {
        try await offPool {
            let server = try SheetdProcess(["--idle-timeout", "1h", "--stream-keepalive", "1h"])
            let idle = try server.client()
            let id = try Self.create(idle)   // then idle: the oldest open connection
            let metrics = try server.client()
            func openConnections() throws -> Double {
                try SheetStoriesTests.metrics(metrics)["sheetd_open_connections"] ?? -1
            }
            for _ in 0..<20 {
                // The session's first event, then the stream waits; closed (FIN) at the loop's end.
                let stream = try Self.openStream(server, id, query: "?after=0")
                #expect(try stream.next(1).count == 1)
            }
            _ = try eventuallyBlocking(within: .seconds(60), every: .milliseconds(20)) { try openConnections() <= 2 }
            #expect(try openConnections() == 2, "only the idle client and the metrics client are left")
            withExtendedLifetime(idle) {}
            #expect(server.stop() == 0)
        }
    }

    @Test func resumePointErrors() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            let id = try Self.create(client)
            for (headers, code) in [("Last-Event-ID: 9\r\n", "invalid_field"), ("Last-Event-ID: x\r\n", "invalid_field")] {
                let raw = try TestHTTPClient(port: server.port)
                try raw.sendRaw(Array("GET /sessions/\(id)/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\(headers)\r\n".utf8))
                let answer = try raw.readResponse()
                #expect(answer.status == 400)
                #expect(answer.errorCode == code)
                #expect(answer.errorField == "Last-Event-ID")
            }
            #expect(server.stop() == 0)
        }
    }

    /// A reader that stops reading is dropped once it is more than 256 events behind; another
    /// reader of the same session is not held up.
    @Test func stalledReaderIsDroppedWhileOthersCarryOn() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let actor = try server.client()
            let id = try Self.create(actor, #"{"detents":["medium","large"]}"#)
            // A small receive buffer, so the kernel holds little on the stalled side.
            let stalled = try TestHTTPClient(port: server.port, receiveTimeout: 10, receiveBuffer: 4096)
            try stalled.sendRaw(Array("GET /sessions/\(id)/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n".utf8))
            // Each head comes once its stream is subscribed; then the stalled one stops reading.
            _ = try stalled.readResponseHead()
            let healthy = try Self.openStream(server, id)
            var received = 0
            for index in 0..<1500 {
                _ = try actor.request("POST", "/sessions/\(id)/drag", body: index % 2 == 0 ? #"{"to":"medium"}"# : #"{"to":"large"}"#)
                received += try healthy.next(1).count
            }
            #expect(received == 1500, "the reading presenter got every event")
            // The stalled reader now drains: it must find the drop notice and the end of the stream.
            let drained = SSEReader(stalled)
            let got = try drained.next(2000)
            #expect(drained.ended, "the stream was ended")
            #expect(drained.comments.contains { $0.hasPrefix(": dropped") }, "a final comment says why")
            let seqs = got.map(\.id)
            #expect(seqs.count < 1500)
            #expect(seqs == Array(2..<(2 + seqs.count)), "what it got before the drop is in order and without gaps")
            #expect(server.stop() == 0)
        }
    }

    @Test func shutdownEndsStreamsAndWaitersPromptly() async throws {
        try await offPool {
            // A grace of an hour: a stop within the minute `stop` waits did not wait it out.
            let server = try SheetdProcess(["--shutdown-grace", "1h"])
            let id = try Self.create(try server.client())
            let stream = try Self.openStream(server, id)
            let waiter = try server.client()
            let before = try Self.suspensions(server)
            try waiter.sendRaw(Array("GET /sessions/\(id)/events?after=1&wait=30 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            #expect(try Self.waitForSuspensions(server, atLeast: before + 1))
            kill(server.process.processIdentifier, SIGTERM)
            _ = try stream.next(1)
            #expect(stream.ended)
            let answer = try? waiter.readResponse()
            #expect(answer == nil || answer?.status == 503)
            #expect(server.stop(timeout: 60) == 0)
        }
    }
}
