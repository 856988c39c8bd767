import AccessControl
import HTTPServer
import SessionStore
import SheetJSON
import SheetObservability

/// Who may make a request: the one check at request entry (`admit`, from `preflight`, before any
/// body byte is read), the tenant a route works for (`tenant(of:)`), and CORS.
extension SheetService {
    /// nil when the request may go on to its route; else the refusal (401, 403 or 429), which
    /// changes nothing. Every route declares what it needs (`Route.requiredAccess`).
    func admit(_ head: HTTPRequestHead, route: Route) -> HTTPResponse? {
        let method = effectiveMethod(head)
        let required = route.withEntry { $0.requiredAccess(for: method) }
        if required == .open { return nil }
        let bucket: RateLimiter.BucketName
        switch access.callers {
        case .keys(let ring):
            switch ring.caller(authorization: head.headers["Authorization"]) {
            case .failure(let refusal):
                return refuse(AccessRefusal(refusal), head: head)
            case .success(let caller):
                guard caller.role.allows(required) else { return refuse(.forbidden, head: head) }
                bucket = .key(caller.keyTag)
            }
        case .loopback:
            guard Self.isLoopback(head.clientAddress) else { return refuse(.authRequired, head: head) }
            bucket = .address(head.clientAddress)
        case .anyone:
            bucket = .address(head.clientAddress)
        }
        if let limiter = access.rateLimiter, case .limited(let seconds) = limiter.take(bucket) {
            var response = refuse(.rateLimited, head: head)
            response.headers.add("Retry-After", String(seconds))
            return response
        }
        return nil
    }

    /// The tenant whose sessions the request may see. Without keys every caller is the default
    /// tenant. With keys the caller was admitted at entry; its key is looked up again here (a
    /// key removed by a reload since then is refused now).
    func tenant(of head: HTTPRequestHead, route: Route) throws(APIError) -> Tenant {
        guard case .keys(let ring) = access.callers else { return .default }
        let method = effectiveMethod(head)
        guard route.withEntry({ $0.requiredAccess(for: method) }) != .open else { return .default }
        switch ring.caller(authorization: head.headers["Authorization"]) {
        case .success(let caller): return Tenant(caller.tenant)
        case .failure(let refusal): throw Self.error(for: AccessRefusal(refusal))
        }
    }

    /// The tenant for the request log: never the key, never the header.
    func tenantForLog(_ head: HTTPRequestHead) -> String {
        guard case .keys(let ring) = access.callers else { return Tenant.default.name }
        guard case .success(let caller) = ring.caller(authorization: head.headers["Authorization"]) else { return "-" }
        return caller.tenant
    }

    private func refuse(_ refusal: AccessRefusal, head: HTTPRequestHead) -> HTTPResponse {
        observer.metrics.recordRefusal(refusal)
        return errorResponse(Self.error(for: refusal), head: head)
    }

    static func error(for refusal: AccessRefusal) -> APIError {
        switch refusal {
        case .missingKey:
            APIError(.unauthorized, "This request needs an API key: send Authorization: Bearer <key>.", field: "Authorization")
        case .invalidHeader:
            APIError(.unauthorized, "The Authorization header must be Bearer <key>.", field: "Authorization")
        case .unknownKey:
            APIError(.unauthorized, "This API key is not accepted.", field: "Authorization")
        case .forbidden:
            APIError(.forbidden, "This API key's role does not allow this request; nothing was changed.")
        case .authRequired:
            APIError(.authRequired, """
                sheetd serves only loopback clients because it was started without API keys (protected mode). \
                Configure keys: run `sheetd keys new --tenant TENANT --role app`, put the printed line in a file, \
                and start sheetd with --auth-keys FILE (or SHEETD_AUTH_KEYS=FILE); clients then send \
                Authorization: Bearer <key>. Or, on a network you trust, start it with --allow-unauthenticated.
                """)
        case .rateLimited:
            APIError(.rateLimited, "Too many requests for this key (or address); retry after the number of seconds in Retry-After.")
        }
    }

    /// 127.0.0.0/8 and ::1 (IPv4 clients of a dual-stack socket arrive as IPv4).
    static func isLoopback(_ address: String) -> Bool {
        // Bytes, not `hasPrefix`: this runs on every request of a server without keys, and
        // `hasPrefix` costs more than the rest of the admission.
        var address = address
        return address.withUTF8 { bytes in
            (bytes.count >= 4 && bytes[0] == UInt8(ascii: "1") && bytes[1] == UInt8(ascii: "2") && bytes[2] == UInt8(ascii: "7")
                && bytes[3] == UInt8(ascii: ".")) || (bytes.count == 3 && bytes[0] == UInt8(ascii: ":") && bytes[1] == UInt8(ascii: ":")
                && bytes[2] == UInt8(ascii: "1"))
        }
    }

    // MARK: CORS

    /// The answer to a CORS preflight (`OPTIONS` with `Access-Control-Request-Method`) from an
    /// allowed origin on a route that exists; nil for anything else.
    func corsPreflight(_ head: HTTPRequestHead) -> HTTPResponse? {
        guard head.method == .options, let origin = allowedOrigin(head),
              head.headers["Access-Control-Request-Method"] != nil,
              let route = Route(path: head.path) else { return nil }
        let methods = route.entry.allowedMethods
        var headers = HTTPHeaders()
        headers.add("Access-Control-Allow-Origin", origin)
        headers.add("Vary", "Origin")
        headers.add("Access-Control-Allow-Methods", methods.joined(separator: ", "))
        headers.add("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match, Idempotency-Key, Last-Event-ID")
        headers.add("Access-Control-Max-Age", "600")
        headers.add("X-Request-Id", requestIDs.id(for: head))
        return HTTPResponse(status: 204, headers: headers)
    }

    /// `response` with the CORS headers its request's origin gets (none for an origin not listed).
    func withCORS(_ response: HTTPResponse, for head: HTTPRequestHead) -> HTTPResponse {
        guard let origin = allowedOrigin(head) else { return response }
        var response = response
        response.headers.add("Access-Control-Allow-Origin", origin)
        response.headers.add("Vary", "Origin")
        response.headers.add("Access-Control-Expose-Headers", "ETag, Location, Retry-After, X-Request-Id, Idempotent-Replayed, WWW-Authenticate")
        return response
    }

    /// The request's `Origin` when `--cors-origin` lists it exactly; never `*`.
    private func allowedOrigin(_ head: HTTPRequestHead) -> String? {
        guard !access.corsOrigins.isEmpty, let origin = head.headers["Origin"],
              access.corsOrigins.contains(origin) else { return nil }
        return origin
    }
}
