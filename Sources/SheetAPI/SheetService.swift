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
        do throws(APIError) {
            _ = try route(of: head)
            return nil
        } catch {
            return errorResponse(error, head: head)
        }
    }

    // The request path keeps its synchronous work (routing, decoding, rendering) in functions
    // marked `@inline(never)`. An async function's locals, those of everything inlined into it
    // included, live in a frame the task allocates, and a frame that does not fit the task's
    // current slab costs a malloc of its own. Inlined, `respond` and `perform` took 1.5 KiB and
    // 3.2 KiB frames: four extra mallocs of 1 to 3 KiB per drag, each big enough to make glibc
    // consolidate its fast bins. Now a drag takes two 1 KiB slabs, both served from glibc's
    // thread cache.
    @inline(never)
    public func respond(to request: HTTPRequest) async -> HTTPResponse {
        let plan = self.plan(request)
        guard case .apply(let id, let action, let ifMatch) = plan else { return await respond(plan, to: request) }
        // The hot path: one async frame (this one) between the task and the store. The request
        // id is made after the store call, so that it is not kept across it.
        let result: ActionResult
        do {
            result = try await store.apply(action, to: id, ifMatch: ifMatch)
        } catch {
            return errorResponse(APIError(error), head: request.head)
        }
        return actionAnswer(result, action: action, requestID: requestIDs.id(for: request.head))
    }

    /// Answers without waiting when it can: a request refused before the store is asked, an
    /// action (no Idempotency-Key) and a session's GET whose shard is idle, done right here on
    /// the calling thread. nil otherwise (a busy shard, a durable store, every other route):
    /// `respond(to:)` then plans the request again, which only the rare busy-shard case pays twice.
    public func respondInPlace(to request: HTTPRequest) -> HTTPResponse? {
        switch plan(request) {
        case .answer(let response):
            return response
        case .apply(let id, let action, let ifMatch):
            guard let applied = store.applyInPlace(action, to: id, ifMatch: ifMatch) else { return nil }
            switch applied {
            case .success(let result):
                return actionAnswer(result, action: action, requestID: requestIDs.id(for: request.head))
            case .failure(let error):
                return errorResponse(APIError(error), head: request.head)
            }
        case .route(.session(let text)) where effectiveMethod(request.head) == "GET":
            // An id that cannot exist is refused by `respond(to:)`, as every other route error.
            guard let id = SessionID(text), let read = store.sessionInPlace(id) else { return nil }
            let requestID = requestIDs.id(for: request.head)
            switch read {
            case .success(let snapshot):
                return sessionAnswer(snapshot, requestID: requestID)
            case .failure(let error):
                return errorResponse(APIError(error), requestID: requestID)
            }
        case .applyOnce, .refuse, .route:
            return nil
        }
    }

    /// A session's GET answer.
    private func sessionAnswer(_ snapshot: SessionSnapshot, requestID: String) -> HTTPResponse {
        sessionResponse(200, Rendering.sessionBody(snapshot), version: snapshot.sheet.version, requestID: requestID)
    }

    /// Every plan but `.apply`.
    @inline(never)
    private func respond(_ plan: Plan, to request: HTTPRequest) async -> HTTPResponse {
        switch plan {
        case .answer(let response):
            return response
        case .apply:
            return await respond(to: request)
        case .applyOnce(let id, let action, let ifMatch, let key):
            return await performOnce(action, on: id, ifMatch: ifMatch, key: key, request: request)
        case .refuse(let id, let error):
            return await refuse(error, on: id, head: request.head)
        case .route(let route):
            let requestID = requestIDs.id(for: request.head)
            do throws(APIError) {
                return try await handle(route, method: effectiveMethod(request.head), request: request, requestID: requestID)
            } catch {
                return errorResponse(error, requestID: requestID)
            }
        }
    }

    /// What `respond` does with a request, decided without waiting for anything.
    private enum Plan {
        /// Answered already (refused, or an error known without the store).
        case answer(HTTPResponse)
        /// A well-formed action without an Idempotency-Key.
        case apply(SessionID, SheetAction, ifMatch: UInt64?)
        /// A well-formed action with an Idempotency-Key.
        case applyOnce(SessionID, SheetAction, ifMatch: UInt64?, key: String)
        /// An action with a bad body or header, on a session that may not exist.
        case refuse(SessionID, APIError)
        /// Every route but actions.
        case route(Route)
    }

    @inline(never)
    private func plan(_ request: HTTPRequest) -> Plan {
        do throws(APIError) {
            let route = try self.route(of: request.head)
            guard case .action(let text, let kind) = route else { return .route(route) }
            let id = try sessionID(text)
            let asked: ActionRequest
            do { asked = try actionRequest(kind, request) } catch { return .refuse(id, error) }
            if let key = asked.idempotencyKey { return .applyOnce(id, asked.action, ifMatch: asked.ifMatch, key: key) }
            return .apply(id, asked.action, ifMatch: asked.ifMatch)
        } catch {
            return .answer(errorResponse(error, head: request.head))
        }
    }

    /// The route of a request whose method it allows.
    @inline(never)
    private func route(of head: HTTPRequestHead) throws(APIError) -> Route {
        guard let route = Route(path: head.path) else {
            throw APIError(.routeNotFound, "There is no route \(head.path); see /openapi.yaml for the API.")
        }
        guard route.allowedMethods.contains(effectiveMethod(head)) else { throw methodNotAllowed(route, method: head.method.rawValue) }
        return route
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
            return sessionAnswer(snapshot, requestID: requestID)
        case (.session(let text), _):
            let id = try sessionID(text)
            let ifMatch = try await precondition(request.head, session: id)
            try await storeCall { () async throws(StoreError) in try await store.delete(id, ifMatch: ifMatch) }
            var headers = HTTPHeaders()
            headers.add("X-Request-Id", requestID)
            return HTTPResponse(status: 204, headers: headers)
        case (.action, _):
            // `plan` answers every action itself and never sends one here; should that change,
            // `respond(to:)` is still the right answer.
            return await respond(to: request)
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

    /// What an action request asks for, read from its body and headers.
    private struct ActionRequest {
        var action: SheetAction
        var ifMatch: UInt64?
        var idempotencyKey: String?
    }

    /// An action whose body or headers `plan` refused. An unknown session outranks a bad body,
    /// so look at the session before blaming the body.
    @inline(never)
    private func refuse(_ error: APIError, on id: SessionID, head: HTTPRequestHead) async -> HTTPResponse {
        do throws(APIError) {
            try await requireSession(id)
        } catch {
            return errorResponse(error, head: head)
        }
        return errorResponse(error, head: head)
    }

    @inline(never)
    private func actionRequest(_ kind: Route.Action, _ request: HTTPRequest) throws(APIError) -> ActionRequest {
        ActionRequest(
            action: try Self.decode(kind, request.body),
            ifMatch: try Self.ifMatch(request.head),
            idempotencyKey: try idempotencyKey(request.head))
    }

    @inline(never)
    private func actionAnswer(_ result: ActionResult, action: SheetAction, requestID: String) -> HTTPResponse {
        observer.metrics.recordOutcome(action, result.outcome)
        return sessionResponse(200, Rendering.actionBody(result), version: result.session.sheet.version, requestID: requestID)
    }

    /// An action sent with an `Idempotency-Key`: applied at most once, its answer replayed.
    @inline(never)
    private func performOnce(
        _ action: SheetAction, on id: SessionID, ifMatch: UInt64?, key: String, request: HTTPRequest
    ) async -> HTTPResponse {
        let requestID = requestIDs.id(for: request.head)
        let idempotency = IdempotencyRequest(key: key, method: "POST", path: request.head.path, body: request.body)
        do {
            let answer = try await store.apply(action, to: id, ifMatch: ifMatch, idempotency: idempotency) { result in
                switch result {
                case .success(let result):
                    return Self.stored(self.actionAnswer(result, action: action, requestID: requestID))
                case .failure(let error):
                    return Self.stored(self.errorResponse(APIError(error), requestID: requestID))
                }
            }
            return replayable(answer, requestID: requestID)
        } catch {
            return errorResponse(APIError(error), requestID: requestID)
        }
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
