import HTTPServer
import SessionStore
import SheetCore
import SheetJSON
import Synchronization
import Timekeeping

/// A presenter's Server-Sent Events stream of one session: every event as `id`, `event`, `data`,
/// a comment every 15 s so proxies keep it open, and a bounded backlog so a stalled reader is
/// dropped (it resumes with `Last-Event-ID`) instead of growing memory or holding anyone up.
final class EventStream: EventSubscriber {
    private let stream: HTTPStream
    private let untilDismissed: Bool
    private let backlogLimit: Int
    /// The seq of the last event handed to the stream, for the reconnect hint when it is dropped.
    private let lastQueued: Atomic<UInt64>

    private init(stream: HTTPStream, untilDismissed: Bool, backlogLimit: Int, resumeFrom: UInt64) {
        self.stream = stream
        self.untilDismissed = untilDismissed
        self.backlogLimit = backlogLimit
        self.lastQueued = Atomic(resumeFrom)
    }

    func receive(_ events: [SheetEvent]) -> Bool {
        guard !stream.isClosed else { return false }
        for event in events {
            if stream.pendingWrites > backlogLimit {
                let resume = lastQueued.load(ordering: .relaxed)
                stream.write(Array(": dropped: this reader is more than \(backlogLimit) events behind; reconnect with Last-Event-ID (at most \(resume))\n\n".utf8))
                stream.finish()
                return false
            }
            stream.write(Self.frame(event))
            lastQueued.store(event.seq, ordering: .relaxed)
            if untilDismissed, case .dismissed = event.kind {
                stream.finish()
                return false
            }
        }
        return true
    }

    func ended(_ reason: SubscriptionEnd) {
        let comment = switch reason {
        case .sessionDeleted: ": the session was deleted\n\n"
        case .shuttingDown: ": the server is shutting down; reconnect with Last-Event-ID\n\n"
        }
        stream.write(Array(comment.utf8))
        stream.finish()
    }

    /// One SSE message: `id`, `event`, `data` (the event's JSON on one line), blank line.
    static func frame(_ event: SheetEvent) -> [UInt8] {
        var writer = JSONWriter(capacity: 192)
        Rendering.event(event, into: &writer)
        let json = writer.bytes
        var bytes: [UInt8] = []
        bytes.reserveCapacity(json.count + 48)
        bytes += Array("id: \(event.seq)\nevent: \(event.kind.type.rawValue)\ndata: ".utf8)
        bytes += json
        bytes += [0x0A, 0x0A]
        return bytes
    }

    /// Opens a stream on `GET /sessions/{id}/events` with `Accept: text/event-stream`. It starts
    /// after `Last-Event-ID` (or `?after=`), or with the next new event when neither is given.
    static func open(service: SheetService, session id: SessionID, of tenant: Tenant, head: HTTPRequestHead,
                     requestID: String) async throws(APIError) -> HTTPResponse {
        let resume: UInt64?
        let resumeField: String
        if let header = head.headers["Last-Event-ID"] {
            resumeField = "Last-Event-ID"
            resume = try SheetService.wholeNumber(header.trimmingASCIIWhitespace(), field: resumeField)
        } else {
            resumeField = "after"
            resume = try SheetService.wholeNumber(head.queryValue("after"), field: resumeField)
        }
        let untilDismissed: Bool
        switch head.queryValue("until") {
        case nil: untilDismissed = false
        case "dismissed": untilDismissed = true
        case let other?:
            throw APIError.invalidField("until", "\"until\" can only be \"dismissed\", not \"\(other)\".")
        }
        let stream = HTTPStream()
        let subscriber = EventStream(
            stream: stream, untilDismissed: untilDismissed,
            backlogLimit: service.configuration.streamBacklogLimit, resumeFrom: resume ?? 0)
        stream.write(Array(": sheetd events of session \(id)\n\n".utf8))
        let store = service.store
        let token: SubscriptionToken
        do {
            token = try await service.storeCall { () async throws(StoreError) in
                try await store.subscribe(subscriber, to: id, of: tenant, after: resume)
            }
        } catch {
            // The store speaks of "after"; name the field the client actually used.
            var error = error
            if error.field == "after" { error.field = resumeField }
            throw error
        }
        let interval = service.configuration.streamKeepAlive
        let clock = service.configuration.clock
        let keepAlive = Task {
            while !stream.isClosed {
                do { try await clock.sleep(until: clock.now + interval) } catch { break }   // cancelled: closed
                if Task.isCancelled || !stream.write(Array(": keep-alive\n\n".utf8)) { break }
            }
        }
        stream.onClose {
            keepAlive.cancel()
            Task { await store.unsubscribe(token) }
        }
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/event-stream")
        headers.add("Cache-Control", "no-store")
        headers.add("X-Request-Id", requestID)
        return HTTPResponse(status: 200, headers: headers, body: .stream(stream))
    }
}
