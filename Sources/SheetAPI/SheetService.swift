import HTTPServer
import SessionStore
import SheetCore
import Synchronization

/// The sheetd application: turns HTTP requests into store calls and store results into JSON
/// answers. It holds no session state of its own.
public final class SheetService: HTTPResponder {
    public struct Configuration: Sendable {
        /// Longest long-poll a client may ask for.
        public var maximumWait: Double = 30
        /// How often an idle event stream gets a keep-alive comment.
        public var streamKeepAlive: Duration = .seconds(15)
        /// A stream further behind than this many events is dropped (the client resumes with Last-Event-ID).
        public var streamBacklogLimit = 256
        public init() {}
    }

    let store: SessionStore
    let configuration: Configuration
    let requestIDs = RequestIDSource()
    public let observer: ServiceObserver

    public init(store: SessionStore, configuration: Configuration = Configuration(), observer: ServiceObserver = ServiceObserver()) {
        self.store = store
        self.configuration = configuration
        self.observer = observer
    }

    // MARK: HTTPResponder

    public func preflight(_ head: HTTPRequestHead) -> HTTPResponse? {
        let method = effectiveMethod(head)
        guard let route = Route(path: head.path) else {
            return errorResponse(APIError(.routeNotFound, "There is no route \(head.path); see /openapi.yaml for the API."), head: head)
        }
        guard route.allowedMethods.contains(method) else {
            return errorResponse(methodNotAllowed(route, method: head.method.rawValue), head: head)
        }
        return nil
    }

    public func respond(to request: HTTPRequest) async -> HTTPResponse {
        let head = request.head
        let requestID = requestIDs.id(for: head)
        do throws(APIError) {
            guard let route = Route(path: head.path) else {
                throw APIError(.routeNotFound, "There is no route \(head.path); see /openapi.yaml for the API.")
            }
            let method = effectiveMethod(head)
            guard route.allowedMethods.contains(method) else { throw methodNotAllowed(route, method: head.method.rawValue) }
            if case .action(let text, let kind) = route {
                // The hot path, called directly: each async frame between here and the store is
                // one more allocation per request once the task's first slab is used up.
                return try await perform(kind, on: text, request: request, requestID: requestID)
            }
            return try await handle(route, method: method, request: request, requestID: requestID)
        } catch {
            return errorResponse(error, requestID: requestID)
        }
    }

    public func rejection(_ rejection: HTTPRejection, head: HTTPRequestHead) -> HTTPResponse {
        let error = switch rejection {
        case .payloadTooLarge(let limit):
            APIError(.payloadTooLarge, "The body is larger than \(limit / 1024) KiB; nothing was read or changed.")
        case .tooManyHeaders(let limit):
            APIError(.headersTooLarge, "The request has more than \(limit) header fields.")
        case .serviceUnavailable:
            APIError(.shuttingDown, "The server is shutting down; retry against another instance or after it restarts.")
        case .ambiguousLength:
            APIError(.ambiguousLength,
                     "Content-Length appears more than once, or together with Transfer-Encoding, so where the body ends is ambiguous; nothing was read or changed, and the connection is closed.",
                     field: "Content-Length")
        }
        return errorResponse(error, head: head)
    }

    public func completed(_ record: HTTPExchangeRecord) {
        observer.completed(record, route: Route(path: record.head.path))
    }

    // MARK: Routing

    /// HEAD is answered as GET; libmicrohttpd leaves out the body.
    private func effectiveMethod(_ head: HTTPRequestHead) -> String {
        head.method == .head ? "GET" : head.method.rawValue
    }

    func methodNotAllowed(_ route: Route, method: String) -> APIError {
        var error = APIError(.methodNotAllowed, "\(method) is not allowed on \(route.template); allowed: \(route.allowedMethods.joined(separator: ", ")).")
        error.allowed = route.allowedMethods
        return error
    }

    private func handle(_ route: Route, method: String, request: HTTPRequest, requestID: String) async throws(APIError) -> HTTPResponse {
        switch (route, method) {
        case (.health, _):
            return json(200, Array(#"{"status":"ok"}"#.utf8), requestID: requestID)
        case (.openAPI, _):
            var headers = HTTPHeaders()
            headers.add("Content-Type", "application/yaml")
            headers.add("X-Request-Id", requestID)
            return HTTPResponse(status: 200, headers: headers, body: .bytes(OpenAPIDocument.bytes))
        case (.metrics, _):
            let text = await observer.exposition(store: store)
            var headers = HTTPHeaders()
            headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            headers.add("X-Request-Id", requestID)
            return HTTPResponse(status: 200, headers: headers, body: .bytes(text))
        case (.sessions, "POST"):
            return try await createSession(request, requestID: requestID)
        case (.sessions, _):
            return try await listSessions(request.head, requestID: requestID)
        case (.session(let text), "GET"):
            let id = try sessionID(text)
            let snapshot = try await storeCall { () async throws(StoreError) in try await store.session(id) }
            return sessionResponse(200, Rendering.sessionBody(snapshot), version: snapshot.sheet.version, requestID: requestID)
        case (.session(let text), _):
            let id = try sessionID(text)
            let ifMatch = try await precondition(request.head, session: id)
            try await storeCall { () async throws(StoreError) in try await store.delete(id, ifMatch: ifMatch) }
            var headers = HTTPHeaders()
            headers.add("X-Request-Id", requestID)
            return HTTPResponse(status: 204, headers: headers)
        case (.action(let text, let kind), _):
            return try await perform(kind, on: text, request: request, requestID: requestID)
        case (.events(let text), _):
            return try await events(of: text, head: request.head, requestID: requestID)
        }
    }

    // MARK: Sessions

    private func createSession(_ request: HTTPRequest, requestID: String) async throws(APIError) -> HTTPResponse {
        let configuration = try RequestBodies.configuration(request.body)
        guard let key = try idempotencyKey(request.head) else {
            let snapshot = try await storeCall { () async throws(StoreError) in try await store.create(configuration) }
            observer.metrics.recordCreated()
            return created(snapshot, requestID: requestID)
        }
        let idempotency = IdempotencyRequest(key: key, method: "POST", path: request.head.path, body: request.body)
        let answer = try await storeCall { () async throws(StoreError) in
            try await store.create(configuration, idempotency: idempotency) { result in
                switch result {
                case .success(let snapshot):
                    self.observer.metrics.recordCreated()
                    return Self.stored(self.created(snapshot, requestID: requestID))
                case .failure(let error): return Self.stored(self.errorResponse(APIError(error), requestID: requestID))
                }
            }
        }
        return replayable(answer, requestID: requestID)
    }

    private func created(_ snapshot: SessionSnapshot, requestID: String) -> HTTPResponse {
        var response = sessionResponse(201, Rendering.sessionBody(snapshot), version: snapshot.sheet.version, requestID: requestID)
        response.headers.add("Location", "/sessions/\(snapshot.id)")
        return response
    }

    private func listSessions(_ head: HTTPRequestHead, requestID: String) async throws(APIError) -> HTTPResponse {
        var phase: Phase?
        if let text = head.queryValue("phase") {
            guard let value = Phase(rawValue: text) else {
                throw APIError.invalidField("phase", "\"phase\" must be one of \"presented\", \"confirming\", \"dismissed\", not \"\(text)\".")
            }
            phase = value
        }
        var limit = 100
        if let text = head.queryValue("limit") {
            guard let value = Int(text), (1...1000).contains(value), text.allSatisfy(\.isASCII) else {
                throw APIError.invalidField("limit", "\"limit\" must be a whole number from 1 to 1000, not \"\(text)\".")
            }
            limit = value
        }
        var after: UInt64 = 0
        if let text = head.queryValue("after") {
            guard let value = ListCursor.decode(text) else {
                throw APIError.invalidField("after", "\"after\" must be a cursor from a previous page's \"next\".")
            }
            after = value
        }
        let page = await store.list(phase: phase, after: after, limit: limit)
        return json(200, Rendering.listBody(page, cursor: ListCursor.encode), requestID: requestID)
    }

    // MARK: Actions

    private func perform(_ kind: Route.Action, on text: Substring, request: HTTPRequest, requestID: String) async throws(APIError) -> HTTPResponse {
        let id = try sessionID(text)
        let action: SheetAction
        let ifMatch: UInt64?
        let key: String?
        do {
            action = try Self.decode(kind, request.body)
            ifMatch = try Self.ifMatch(request.head)
            key = try idempotencyKey(request.head)
        } catch {
            // An unknown session outranks a bad body: look before blaming the body.
            _ = try await storeCall { () async throws(StoreError) in try await store.session(id) }
            throw error
        }
        guard let key else {
            let result = try await storeCall { () async throws(StoreError) in try await store.apply(action, to: id, ifMatch: ifMatch) }
            observer.metrics.recordOutcome(action, result.outcome)
            return sessionResponse(200, Rendering.actionBody(result), version: result.session.sheet.version, requestID: requestID)
        }
        let idempotency = IdempotencyRequest(key: key, method: "POST", path: request.head.path, body: request.body)
        let answer = try await storeCall { () async throws(StoreError) in
            try await store.apply(action, to: id, ifMatch: ifMatch, idempotency: idempotency) { result in
                switch result {
                case .success(let result):
                    self.observer.metrics.recordOutcome(action, result.outcome)
                    return Self.stored(self.sessionResponse(200, Rendering.actionBody(result), version: result.session.sheet.version, requestID: requestID))
                case .failure(let error):
                    return Self.stored(self.errorResponse(APIError(error), requestID: requestID))
                }
            }
        }
        return replayable(answer, requestID: requestID)
    }

    private static func decode(_ kind: Route.Action, _ body: [UInt8]) throws(APIError) -> SheetAction {
        switch kind {
        case .drag: try RequestBodies.drag(body)
        case .confirm: try RequestBodies.confirm(body)
        case .dismiss: try RequestBodies.dismiss(body)
        case .present: try RequestBodies.present(body)
        }
    }

    // MARK: Events

    private func events(of text: Substring, head: HTTPRequestHead, requestID: String) async throws(APIError) -> HTTPResponse {
        let id = try sessionID(text)
        if let accept = head.headers["Accept"], accept.contains("text/event-stream") {
            return try await EventStream.open(service: self, session: id, head: head, requestID: requestID)
        }
        let after = try Self.wholeNumber(head.queryValue("after"), field: "after") ?? 0
        var wait = 0.0
        if let text = head.queryValue("wait") {
            guard let value = Double(text), value.isFinite, value >= 0, value <= configuration.maximumWait,
                  text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: ".") })
            else {
                throw APIError.invalidField("wait", "\"wait\" must be a number of seconds from 0 to \(Int(configuration.maximumWait)), not \"\(text)\".")
            }
            wait = value
        }
        let page: EventsPage
        if wait > 0 {
            let outcome = try await storeCall { () async throws(StoreError) in
                try await store.waitForEvents(of: id, after: after, timeout: .milliseconds(Int64(wait * 1000)))
            }
            switch outcome {
            case .events(let events): page = events
            case .timedOut(let version): page = EventsPage(events: [], version: version)
            }
        } else {
            page = try await storeCall { () async throws(StoreError) in try await store.events(of: id, after: after) }
        }
        return json(200, Rendering.eventsBody(page), requestID: requestID)
    }

    /// A resume point: digits only, no sign, within 64 bits.
    static func wholeNumber(_ text: String?, field: String) throws(APIError) -> UInt64? {
        guard let text else { return nil }
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = UInt64(text) else {
            throw APIError.invalidField(field, "\"\(field)\" must be a whole number (an event seq), not \"\(text)\".")
        }
        return value
    }
}
