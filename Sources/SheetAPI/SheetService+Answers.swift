import HTTPServer
import SessionStore
import SheetCore
import SheetJSON

/// Request headers read by every route, and the answers built from results and errors.
extension SheetService {
    // MARK: Headers

    func sessionID(_ route: Route) throws(APIError) -> SessionID {
        guard let id = route.sessionID else {
            throw APIError(.sessionNotFound, "No session has this id; it may have been deleted or expired.")
        }
        return id
    }

    /// `If-Match` (RFC 9110 §13.1.1): `*` or no field applies unconditionally; a list applies
    /// only at a version one of its strong tags names (a weak tag never matches: 412); only a
    /// malformed field is 400.
    static func ifMatch(_ head: HTTPRequestHead) throws(APIError) -> AcceptedVersions? {
        guard let raw = head.headers["If-Match"] else { return nil }
        guard let condition = EntityTagCondition(raw) else {
            throw APIError.invalidField("If-Match", "If-Match must be * or a list of entity tags such as \"3\" (quotes included).")
        }
        return condition.isAny ? nil : condition.strongVersions
    }

    /// `If-None-Match` (RFC 9110 §13.1.2): nil without the field; malformed is 400.
    static func ifNoneMatch(_ head: HTTPRequestHead) throws(APIError) -> EntityTagCondition? {
        guard let raw = head.headers["If-None-Match"] else { return nil }
        guard let condition = EntityTagCondition(raw) else {
            throw APIError.invalidField("If-None-Match", "If-None-Match must be * or a list of entity tags such as \"3\" (quotes included).")
        }
        return condition
    }

    /// The precondition of a request on an existing session; a malformed header still loses to 404.
    func precondition(_ head: HTTPRequestHead, session id: SessionID, of tenant: Tenant) async throws(APIError) -> AcceptedVersions? {
        do { return try Self.ifMatch(head) } catch {
            try await requireSession(id, of: tenant)
            throw error
        }
    }

    /// Throws `sessionNotFound` unless the session exists.
    @inline(never)
    func requireSession(_ id: SessionID, of tenant: Tenant) async throws(APIError) {
        _ = try await storeCall { () async throws(StoreError) in try await store.session(id, of: tenant) }
    }

    func idempotencyKey(_ head: HTTPRequestHead) throws(APIError) -> String? {
        guard let key = head.headers["Idempotency-Key"] else { return nil }
        guard (1...128).contains(key.utf8.count), key.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            throw APIError(.invalidIdempotencyKey, "Idempotency-Key must be 1 to 128 visible ASCII characters.", field: "Idempotency-Key")
        }
        return key
    }

    // MARK: Answers

    func storeCall<T>(_ body: () async throws(StoreError) -> T) async throws(APIError) -> T {
        do { return try await body() } catch { throw APIError(error) }
    }

    /// A JSON answer. Every answer describes state that changes, so none may be stored by a
    /// cache (`no-store`); a session's GET, which has a validator, relaxes that to `no-cache`.
    func json(_ status: Int, _ body: [UInt8], requestID: String) -> HTTPResponse {
        // Room for the request id, an ETag and one more (Location or Allow).
        var headers = HTTPHeaders(copying: Self.jsonFields, reservingBytes: 3 * 48)
        headers.add("X-Request-Id", requestID)
        return HTTPResponse(status: status, headers: headers, body: .bytes(body))
    }

    /// The fields every JSON answer starts with.
    private static let jsonFields: HTTPHeaders = [
        "Content-Type": "application/json; charset=utf-8",
        "Cache-Control": "no-store",
    ]

    func sessionResponse(_ status: Int, _ body: [UInt8], version: UInt64, requestID: String) -> HTTPResponse {
        var response = json(status, body, requestID: requestID)
        response.headers.addEntityTag(version: version)
        return response
    }

    @inline(never)  // keeps the error path's locals out of the async frames that call it
    func errorResponse(_ error: APIError, requestID: String) -> HTTPResponse {
        var response = json(error.code.status, Rendering.errorBody(error, requestID: requestID), requestID: requestID)
        if let session = error.session { response.headers.addEntityTag(version: session.sheet.version) }
        if !error.allowed.isEmpty { response.headers.add("Allow", error.allowed.joined(separator: ", ")) }
        if error.code == .service(.unauthorized) { response.headers.add("WWW-Authenticate", "Bearer realm=\"sheetd\"") }
        if error.code == .service(.storeUnavailable) { response.headers.add("Retry-After", "1") }
        return response
    }

    @inline(never)
    func errorResponse(_ error: APIError, head: HTTPRequestHead) -> HTTPResponse {
        errorResponse(error, requestID: requestIDs.id(for: head))
    }

    /// The parts of an answer a replay must repeat: status, body, and the headers that describe them.
    static func stored(_ response: HTTPResponse) -> StoredAnswer {
        var headers: [String: String] = [:]
        for name in ["Content-Type", "ETag", "Location", "Allow"] {
            if let value = response.headers[name] { headers[name] = value }
        }
        guard case .bytes(let body) = response.body else { return StoredAnswer(status: response.status, headers: headers, body: []) }
        return StoredAnswer(status: response.status, headers: headers, body: body)
    }

    func replayable(_ answer: IdempotentAnswer, requestID: String) -> HTTPResponse {
        var headers = HTTPHeaders()
        for name in ["Content-Type", "ETag", "Location", "Allow"] {
            if let value = answer.answer.headers[name] { headers.add(name, value) }
        }
        headers.add("Cache-Control", "no-store")
        headers.add("X-Request-Id", requestID)
        if answer.replayed { headers.add("Idempotent-Replayed", "true") }
        return HTTPResponse(status: answer.answer.status, headers: headers, body: .bytes(answer.answer.body))
    }
}

extension String {
    func trimmingASCIIWhitespace() -> String {
        let utf8 = self.utf8
        guard let start = utf8.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }),
              let end = utf8.lastIndex(where: { $0 != 0x20 && $0 != 0x09 })
        else { return "" }
        return String(self[start...end])
    }
}
