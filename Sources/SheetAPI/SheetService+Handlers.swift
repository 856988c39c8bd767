import HTTPServer
import SessionStore
import SheetCore
import SheetJSON
import SheetObservability

/// The handlers `RouteTable` names for every route but actions: one method per route and method.
extension SheetService {
    // MARK: Service

    /// 503 while the store cannot serve (its database is unreachable), with the reason.
    func health(_ request: RouteRequest) async throws(APIError) -> HTTPResponse {
        guard let reason = store.unavailableReason else { return json(200, Array(#"{"status":"ok"}"#.utf8), requestID: request.requestID) }
        var writer = JSONWriter(capacity: 128 + reason.utf8.count)
        writer.beginObject()
        writer.key("status"); writer.string("unavailable")
        writer.key("reason"); writer.string(reason)
        writer.endObject()
        var response = json(503, writer.bytes, requestID: request.requestID)
        response.headers.add("Retry-After", "1")
        return response
    }

    func openAPI(_ request: RouteRequest) async throws(APIError) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/yaml")
        headers.add("X-Request-Id", request.requestID)
        return HTTPResponse(status: 200, headers: headers, body: .bytes(OpenAPIDocument.bytes))
    }

    func metrics(_ request: RouteRequest) async throws(APIError) -> HTTPResponse {
        let text = await observer.exposition(store: store)
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        headers.add("Cache-Control", "no-store")
        headers.add("X-Request-Id", request.requestID)
        return HTTPResponse(status: 200, headers: headers, body: .bytes(text))
    }

    // MARK: Sessions

    func createSession(_ request: RouteRequest) async throws(APIError) -> HTTPResponse {
        let requestID = request.requestID
        let (configuration, parent) = try RequestBodies.creation(request.request.body)
        guard let key = try idempotencyKey(request.head) else {
            let snapshot = try await storeCall { () async throws(StoreError) in
                try await store.create(configuration, over: parent, for: request.tenant)
            }
            observer.metrics.recordCreated(snapshot.sheet)
            return created(snapshot, requestID: requestID)
        }
        let idempotency = IdempotencyRequest(key: key, method: "POST", path: request.head.path, body: request.request.body)
        let answer = try await storeCall { () async throws(StoreError) in
            try await store.create(configuration, over: parent, for: request.tenant, idempotency: idempotency) { result in
                switch result {
                case .success(let snapshot):
                    self.observer.metrics.recordCreated(snapshot.sheet)
                    return Self.stored(self.created(snapshot, requestID: requestID))
                case .failure(let error): return Self.stored(self.errorResponse(APIError(error), requestID: requestID))
                }
            }
        }
        return replayable(answer, requestID: requestID)
    }

    /// A session over nothing, without an Idempotency-Key, created on the calling thread when
    /// its shard is idle; answered through `later` once its commit is done. Everything else
    /// (a parent, a key, a body `createSession` refuses, a busy shard) is declined to
    /// `createSession`. Its answers carry their CORS headers.
    func createSessionInPlace(_ request: HTTPRequest, _ route: Route, _ tenant: Tenant, _ later: DeferredAnswer) -> InPlaceAnswer {
        let head = request.head
        guard head.headers["Idempotency-Key"] == nil,
              let (configuration, parent) = try? RequestBodies.creation(request.body), parent == nil,
              let (result, pending) = store.createInPlace(configuration, for: tenant)?.parts() else { return .declined }
        let requestID = requestIDs.id(for: head)
        switch result {
        case .success(let snapshot):
            let answer = withCORSIfAsked(created(snapshot, requestID: requestID), for: head)
            // Counted when made, as an action applied in place counts its events, so that the
            // answer's callback captures nothing but `later` (`giveOnceSettled`). A commit that
            // fails fails at once (the archive had closed) and counts nothing.
            guard let pending else {
                observer.metrics.recordCreated(snapshot.sheet)
                return .answered(answer)
            }
            if !pending.hasFailed { observer.metrics.recordCreated(snapshot.sheet) }
            return giveOnceSettled(answer, pending, later)
        case .failure(let error):
            return .answered(withCORSIfAsked(errorResponse(APIError(error), requestID: requestID), for: head))
        }
    }

    private func created(_ snapshot: SessionSnapshot, requestID: String) -> HTTPResponse {
        var response = sessionResponse(201, Rendering.sessionBody(snapshot), version: snapshot.sheet.version, requestID: requestID)
        response.headers.add("Location", "/sessions/\(snapshot.id)")
        return response
    }

    func listSessions(_ request: RouteRequest) async throws(APIError) -> HTTPResponse {
        let head = request.head
        var phase: Phase?
        if let text = head.queryValue("phase") {
            guard let value = Phase(rawValue: text) else {
                let options = Phase.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
                throw APIError.invalidField("phase", "\"phase\" must be one of \(options), not \"\(text)\".")
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
        let page = try await storeCall { () async throws(StoreError) in
            try await store.list(of: request.tenant, phase: phase, after: after, limit: limit)
        }
        return json(200, Rendering.listBody(page, cursor: ListCursor.encode), requestID: request.requestID)
    }

    func getSession(_ request: RouteRequest) async throws(APIError) -> HTTPResponse {
        let id = try sessionID(request.route)
        let snapshot = try await storeCall { () async throws(StoreError) in try await store.session(id, of: request.tenant) }
        return try sessionAnswer(snapshot, head: request.head, requestID: request.requestID)
    }

    /// A session's GET answered on the calling thread when its shard is idle, through `later`
    /// when the session shows a change still being committed (once it is). Its answers carry
    /// their CORS headers.
    func getSessionInPlace(_ request: HTTPRequest, _ route: Route, _ tenant: Tenant, _ later: DeferredAnswer) -> InPlaceAnswer {
        // An id that cannot exist is refused by `getSession`, as every other route error.
        guard let id = route.sessionID else { return .declined }
        guard let read = store.readInPlace(id, of: tenant) else { return .declined }
        let answer = sessionAnswer(read.result, head: request.head)
        guard let pending = read.pending else { return .answered(answer) }
        return giveOnceSettled(answer, pending, later)
    }

    /// A session's GET answer, or the error of a read that found none, with its CORS headers.
    private func sessionAnswer(_ read: Result<SessionSnapshot, StoreError>, head: HTTPRequestHead) -> HTTPResponse {
        let requestID = requestIDs.id(for: head)
        do throws(APIError) {
            switch read {
            case .success(let snapshot):
                return withCORSIfAsked(try sessionAnswer(snapshot, head: head, requestID: requestID), for: head)
            case .failure(let error):
                throw APIError(error)
            }
        } catch {
            return withCORSIfAsked(errorResponse(error, requestID: requestID), for: head)
        }
    }

    /// A session's GET answer: `no-cache` with its `ETag`, so a cache revalidates every time,
    /// and `304 Not Modified` (no body) when `If-None-Match` names the current version.
    private func sessionAnswer(_ snapshot: SessionSnapshot, head: HTTPRequestHead, requestID: String) throws(APIError) -> HTTPResponse {
        let version = snapshot.sheet.version
        if let condition = try Self.ifNoneMatch(head), condition.matchesWeakly(version) {
            var headers = HTTPHeaders()
            headers.addEntityTag(version: version)
            headers.add("Cache-Control", "no-cache")
            headers.add("X-Request-Id", requestID)
            return HTTPResponse(status: 304, headers: headers)
        }
        var response = sessionResponse(200, Rendering.sessionBody(snapshot), version: version, requestID: requestID)
        response.headers.replace("Cache-Control", "no-cache")
        return response
    }

    func deleteSession(_ request: RouteRequest) async throws(APIError) -> HTTPResponse {
        let id = try sessionID(request.route)
        let ifMatch = try await precondition(request.head, session: id, of: request.tenant)
        let deleted = try await storeCall { () async throws(StoreError) in try await store.delete(id, of: request.tenant, ifMatch: ifMatch) }
        observer.metrics.recordEvents(deleted.events)
        var headers = HTTPHeaders()
        headers.add("Cache-Control", "no-store")
        headers.add("X-Request-Id", request.requestID)
        return HTTPResponse(status: 204, headers: headers)
    }

    // MARK: Events

    func events(_ request: RouteRequest) async throws(APIError) -> HTTPResponse {
        let head = request.head
        let requestID = request.requestID
        let id = try sessionID(request.route)
        if let accept = head.headers["Accept"], accept.contains("text/event-stream") {
            return try await EventStream.open(service: self, session: id, of: request.tenant, head: head, requestID: requestID)
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
                try await store.waitForEvents(of: id, tenant: request.tenant, after: after, timeout: .milliseconds(Int64(wait * 1000)))
            }
            switch outcome {
            case .events(let events): page = events
            case .timedOut(let version): page = EventsPage(events: [], version: version)
            }
        } else {
            page = try await storeCall { () async throws(StoreError) in try await store.events(of: id, tenant: request.tenant, after: after) }
        }
        return json(200, Rendering.eventsBody(page), requestID: requestID)
    }
}
