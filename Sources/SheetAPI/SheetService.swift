import HTTPServer
import SessionStore
import SheetCore
import SheetJSON
import SheetObservability
import Timekeeping

/// The sheetd application: turns HTTP requests into store calls and store results into JSON
/// answers. It holds no session state of its own.
public final class SheetService: HTTPResponder {
    public struct Configuration: Sendable {
        /// Longest long-poll a client may ask for.
        public var maximumWait: Double = 30
        /// How often an idle event stream gets a keep-alive comment.
        public var streamKeepAlive: Duration = .seconds(15)
        /// The clock the keep-alive comments are paced by (a `ManualClock` in tests).
        public var clock: any ServiceClock = SystemClock()
        /// A stream further behind than this many events is dropped (the client resumes with Last-Event-ID).
        public var streamBacklogLimit = 256
        public init() {}
    }

    let store: any SessionStoring
    let configuration: Configuration
    let requestIDs = RequestIDSource()
    public let observer: ServiceObserver
    /// Who may make requests (keys, protected mode), rate limits and CORS origins.
    let access: AccessPolicy

    public init(store: any SessionStoring, configuration: Configuration = Configuration(), observer: ServiceObserver = ServiceObserver(),
                access: AccessPolicy = AccessPolicy()) {
        self.store = store
        self.configuration = configuration
        self.observer = observer
        self.access = access
    }

    // MARK: HTTPResponder

    /// Request entry, before any body byte is read: CORS preflights, unknown routes and methods,
    /// and `admit` (key, the role the route table asks for, protected mode, rate limit) are all
    /// answered here.
    public func preflight(_ head: HTTPRequestHead, tag: inout Int) -> HTTPResponse? {
        if let answer = corsPreflight(head) { return answer }
        let refusal: HTTPResponse?
        do throws(APIError) {
            let route = try route(of: head)
            tag = route.index   // later calls and the exchange record find the route by it
            refusal = admit(head, route: route)
        } catch {
            refusal = errorResponse(error, head: head)
        }
        return refusal.map { withCORS($0, for: head) }
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
        guard access.corsOrigins.isEmpty else { return withCORS(await answer(request), for: request.head) }
        return await answer(request)
    }

    @inline(never)
    private func answer(_ request: HTTPRequest) async -> HTTPResponse {
        let plan = self.plan(request)
        guard case .apply(let id, let tenant, let action, let ifMatch) = plan else { return await respond(plan, to: request) }
        // The hot path: one async frame (this one) between the task and the store. The request
        // id is made after the store call, so that it is not kept across it.
        let result: ActionResult
        do {
            result = try await store.apply(action, to: id, of: tenant, ifMatch: ifMatch)
        } catch {
            return errorResponse(APIError(error), head: request.head)
        }
        return actionAnswer(result, action: action, requestID: requestIDs.id(for: request.head))
    }

    /// Answers without a task when it can: a request refused before the store is asked, and an
    /// action (no Idempotency-Key), a session's GET or a create over no parent (no
    /// Idempotency-Key) whose shard is idle, done right here on the calling thread. With a
    /// durable store its answer, rendered now, is given through `later` once its commit is done
    /// and its events are published (on the archive's writer thread, as a rule): no task, and no
    /// thread but the writer's between the two. Declined otherwise (a busy shard, every other
    /// route): `respond(to:)` then plans the request again, which the rare busy-shard case pays
    /// twice, and a create over a parent, whose body is read here to find the parent.
    public func respondInPlace(to request: HTTPRequest, later: DeferredAnswer) -> InPlaceAnswer {
        switch plan(request) {
        case .answer(let response):
            return .answered(withCORSIfAsked(response, for: request.head))
        case .apply(let id, let tenant, let action, let ifMatch):
            return applyInPlace(action, to: id, of: tenant, ifMatch: ifMatch, request: request, later: later)
        case .route(let route, let tenant):
            // The handler's answers carry their CORS headers already, deferred ones included.
            guard let inPlace = route.entry.handler(for: effectiveMethod(request.head))?.respondInPlace else { return .declined }
            return inPlace(self)(request, route, tenant, later)
        case .applyOnce, .refuse:
            return .declined
        }
    }

    /// An action applied right here (`changeInPlace`); its answer, rendered now, is given once
    /// what the store says it waits for is done, or the error that says it never will be.
    @inline(never)
    private func applyInPlace(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?,
                              request: HTTPRequest, later: DeferredAnswer) -> InPlaceAnswer {
        guard let (result, pending) = store.changeInPlace(action, to: id, of: tenant, ifMatch: ifMatch)?.parts() else { return .declined }
        let head = request.head
        let response = switch result {
        case .success(let result): actionAnswer(result, action: action, requestID: requestIDs.id(for: head))
        case .failure(let error): errorResponse(APIError(error), head: head)
        }
        let answer = withCORSIfAsked(response, for: head)
        guard let pending else { return .answered(answer) }
        return giveOnceSettled(answer, pending, later)
    }

    /// An answer made in place, given through `later` once what it waits for is done: the
    /// in-place answers of drags, reads and creates all wait this way. Only `later` is captured:
    /// the answer waits in the request, and the closure needs no allocation of its own (one made
    /// on the request thread would be freed on the thread that completes the commit). A commit
    /// that failed (the store is closing) answers the 503 that `rejection(.serviceUnavailable)`
    /// renders, as the task path's error does.
    func giveOnceSettled(_ answer: HTTPResponse, _ pending: PendingCommit, _ later: DeferredAnswer) -> InPlaceAnswer {
        later.hold(answer)
        pending.whenSettled { committed in
            if committed { later.giveHeld() } else { later.giveUnavailable() }
        }
        return .deferred
    }

    @inline(__always)
    func withCORSIfAsked(_ response: HTTPResponse, for head: HTTPRequestHead) -> HTTPResponse {
        access.corsOrigins.isEmpty ? response : withCORS(response, for: head)
    }

    /// Every plan but `.apply`.
    @inline(never)
    private func respond(_ plan: Plan, to request: HTTPRequest) async -> HTTPResponse {
        switch plan {
        case .answer(let response):
            return response
        case .apply:
            return await respond(to: request)
        case .applyOnce(let id, let tenant, let action, let ifMatch, let key):
            return await performOnce(action, on: id, of: tenant, ifMatch: ifMatch, key: key, request: request)
        case .refuse(let id, let tenant, let error):
            return await refuse(error, on: id, of: tenant, head: request.head)
        case .route(let route, let tenant):
            let requestID = requestIDs.id(for: request.head)
            do throws(APIError) {
                return try await handle(RouteRequest(request: request, route: route, tenant: tenant, requestID: requestID))
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
        case apply(SessionID, Tenant, SheetAction, ifMatch: AcceptedVersions?)
        /// A well-formed action with an Idempotency-Key.
        case applyOnce(SessionID, Tenant, SheetAction, ifMatch: AcceptedVersions?, key: String)
        /// An action with a bad body or header, on a session that may not exist.
        case refuse(SessionID, Tenant, APIError)
        /// Every route but actions, and the tenant asking.
        case route(Route, Tenant)
    }

    @inline(never)
    private func plan(_ request: HTTPRequest) -> Plan {
        do throws(APIError) {
            let route = try self.route(of: request.head)
            let tenant = try self.tenant(of: request.head, route: route)
            guard case .action(let decode) = route.withEntry({ $0.answer }) else { return .route(route, tenant) }
            let id = try sessionID(route)
            let asked: ActionRequest
            do { asked = try actionRequest(decode, request) } catch { return .refuse(id, tenant, error) }
            if let key = asked.idempotencyKey { return .applyOnce(id, tenant, asked.action, ifMatch: asked.ifMatch, key: key) }
            return .apply(id, tenant, asked.action, ifMatch: asked.ifMatch)
        } catch {
            return .answer(errorResponse(error, head: request.head))
        }
    }

    /// The route of a request whose method it allows.
    @inline(never)
    private func route(of head: HTTPRequestHead) throws(APIError) -> Route {
        guard let route = Route(tag: head.tag, path: head.path) else {
            throw APIError(.routeNotFound, "There is no route \(head.path); see /openapi.yaml for the API.")
        }
        let method = effectiveMethod(head)
        guard route.withEntry({ $0.allowedMethods.contains(method) }) else { throw methodNotAllowed(route, method: head.method.rawValue) }
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
        case .invalidHeader(let name, let problem):
            APIError(.invalidHeader, Self.sentence(for: problem, name: name) + " Nothing was changed, and the connection is closed.",
                     field: name)
        case .headTooLarge:
            APIError(.headersTooLarge, "The request line and headers are larger than the server accepts; nothing was changed, and the connection is closed.")
        }
        return withCORS(errorResponse(error, head: head), for: head)
    }

    private static func sentence(for problem: HeaderProblem, name: String) -> String {
        switch problem {
        case .invalidName: "The header field name \"\(name)\" holds whitespace or a control character (no space may come before the colon)."
        case .controlCharacterInValue: "The value of \(name) holds a control character such as NUL."
        case .missing: "An HTTP/1.1 request must carry a \(name) header."
        case .invalidValue: "The value of \(name) is not valid (Content-Length must be a decimal number of bytes)."
        case .repeated: "The \(name) header appears more than once."
        }
    }

    public func completed(_ record: HTTPExchangeRecord) {
        // Only labels: the route `preflight` tagged this very head with is taken as it is (a
        // request's answer matches its tag against the path again; its metrics need not).
        let tag = record.head.tag
        let index = RouteTable.entries.indices.contains(tag) ? tag : Route(path: record.head.path)?.index
        observer.completed(record, route: index, template: index.map { RouteTable.withEntry(at: $0) { $0.template } }) {
            tenantForLog(record.head)
        }
    }

    // MARK: Routing

    /// HEAD is answered as GET; libmicrohttpd leaves out the body.
    func effectiveMethod(_ head: HTTPRequestHead) -> String {
        head.method == .head ? "GET" : head.method.rawValue
    }

    func methodNotAllowed(_ route: Route, method: String) -> APIError {
        let entry = route.entry
        var error = APIError(.methodNotAllowed, "\(method) is not allowed on \(entry.template); allowed: \(entry.allowedMethods.joined(separator: ", ")).")
        error.allowed = entry.allowedMethods
        return error
    }

    private func handle(_ request: RouteRequest) async throws(APIError) -> HTTPResponse {
        // `route(of:)` let only the route's own methods through; `plan` answers every action
        // itself and never sends one here, but should that change, `respond(to:)` is right.
        guard let handler = request.route.entry.handler(for: effectiveMethod(request.head)) else {
            return await respond(to: request.request)
        }
        return try await handler.respond(self)(request)
    }

    // MARK: Actions

    /// What an action request asks for, read from its body and headers.
    private struct ActionRequest {
        var action: SheetAction
        var ifMatch: AcceptedVersions?
        var idempotencyKey: String?
    }

    /// An action whose body or headers `plan` refused. An unknown session outranks a bad body,
    /// so look at the session before blaming the body.
    @inline(never)
    private func refuse(_ error: APIError, on id: SessionID, of tenant: Tenant, head: HTTPRequestHead) async -> HTTPResponse {
        do throws(APIError) {
            try await requireSession(id, of: tenant)
        } catch {
            return errorResponse(error, head: head)
        }
        return errorResponse(error, head: head)
    }

    @inline(never)
    private func actionRequest(
        _ decode: @Sendable ([UInt8]) throws(APIError) -> SheetAction, _ request: HTTPRequest
    ) throws(APIError) -> ActionRequest {
        ActionRequest(
            action: try decode(request.body),
            ifMatch: try Self.ifMatch(request.head),
            idempotencyKey: try idempotencyKey(request.head))
    }

    @inline(never)
    private func actionAnswer(_ result: ActionResult, action: SheetAction, requestID: String) -> HTTPResponse {
        observer.metrics.recordOutcome(action, result.outcome)
        observer.metrics.recordEvents(result.chainEvents)
        return sessionResponse(200, Rendering.actionBody(result), version: result.session.sheet.version, requestID: requestID)
    }

    /// An action sent with an `Idempotency-Key`: applied at most once, its answer replayed.
    @inline(never)
    private func performOnce(
        _ action: SheetAction, on id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?, key: String, request: HTTPRequest
    ) async -> HTTPResponse {
        let requestID = requestIDs.id(for: request.head)
        let idempotency = IdempotencyRequest(key: key, method: "POST", path: request.head.path, body: request.body)
        do {
            let answer = try await store.apply(action, to: id, of: tenant, ifMatch: ifMatch, idempotency: idempotency) { result in
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

    /// A resume point: digits only, no sign, within 64 bits.
    package static func wholeNumber(_ text: String?, field: String) throws(APIError) -> UInt64? {
        guard let text else { return nil }
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = UInt64(text) else {
            throw APIError.invalidField(field, "\"\(field)\" must be a whole number (an event seq), not \"\(text)\".")
        }
        return value
    }
}
