import SessionStore
import SheetCore

/// Every error an API answer can carry. The code is the stable, documented string clients
/// switch on; `Code.status` below is the one place a code becomes an HTTP status.
public struct APIError: Error, Sendable {
    /// The codes the service names itself: its checks of a request, access, the store and the
    /// transport. The sheet's refusals are not listed here but taken from SheetCore.
    public enum ServiceCode: String, Sendable, CaseIterable {
        case invalidJSON = "invalid_json"
        case unknownField = "unknown_field"
        case invalidDetent = "invalid_detent"
        case invalidIdempotencyKey = "invalid_idempotency_key"
        case sessionNotFound = "session_not_found"
        case routeNotFound = "route_not_found"
        case methodNotAllowed = "method_not_allowed"
        case eventsExpired = "events_expired"
        case versionMismatch = "version_mismatch"
        case payloadTooLarge = "payload_too_large"
        case idempotencyKeyReused = "idempotency_key_reused"
        case headersTooLarge = "headers_too_large"
        case ambiguousLength = "ambiguous_length"
        case invalidHeader = "invalid_header"
        case capacityExceeded = "capacity_exceeded"
        case shuttingDown = "shutting_down"
        case storeUnavailable = "store_unavailable"
        case unauthorized
        case forbidden
        case authRequired = "auth_required"
        case rateLimited = "rate_limited"
    }

    /// Every code an answer can carry: SheetCore's (the sheet's refusals, and the field errors
    /// `invalid_field` and `unknown_detent` that request checks give too) and the service's own.
    public enum Code: Hashable, Sendable, CaseIterable {
        case sheet(SheetError.Code)
        case service(ServiceCode)

        public static let allCases = SheetError.Code.allCases.map(Code.sheet) + ServiceCode.allCases.map(Code.service)

        /// The code as answers spell it, e.g. `sheet_dismissed`.
        public var rawValue: String {
            switch self {
            case .sheet(let code): code.rawValue
            case .service(let code): code.rawValue
            }
        }

        /// The code a string names, if any (answers are read back by the fuzzers and tests).
        public init?(rawValue: String) {
            guard let code = Self.allCases.first(where: { $0.rawValue == rawValue }) else { return nil }
            self = code
        }

        /// The HTTP status of each code: the only mapping from errors to statuses in sheetd.
        public var status: Int {
            switch self {
            case .sheet(let code):
                switch code.base {
                case .unknownDetent, .invalidField: 400
                case .confirmationPending, .sheetDismissed, .noPendingConfirmation, .sheetPresented, .sheetCovered,
                     .thresholdInactive, .stackFull, .cannotPop, .tooDeep, .parentUnavailable: 409
                }
            case .service(let code):
                switch code {
                case .invalidJSON, .unknownField, .invalidDetent, .invalidIdempotencyKey,
                     .ambiguousLength, .invalidHeader: 400
                case .sessionNotFound, .routeNotFound: 404
                case .unauthorized: 401
                case .forbidden, .authRequired: 403
                case .methodNotAllowed: 405
                case .eventsExpired: 410
                case .versionMismatch: 412
                case .payloadTooLarge: 413
                case .idempotencyKeyReused: 422
                case .rateLimited: 429
                case .headersTooLarge: 431
                case .capacityExceeded, .shuttingDown, .storeUnavailable: 503
                }
            }
        }
    }

    /// The fields live in one immutable box, so an `APIError` is a pointer wide. Typed throws
    /// give every async function on a request's path a frame slot per copy of the error it
    /// might pass on; at 120 bytes inline that made each frame hundreds of bytes larger, and
    /// frames past the task's first slab cost a malloc each, on every request, failed or not.
    private struct Fields: Sendable {
        var code: Code
        var message: String
        var field: String?
        var session: SessionSnapshot?
        var allowed: [String] = []
    }

    private final class Box: Sendable {
        let fields: Fields
        package init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box

    public var code: Code {
        get { box.fields.code }
        set { update { $0.code = newValue } }
    }
    public var message: String {
        get { box.fields.message }
        set { update { $0.message = newValue } }
    }
    public var field: String? {
        get { box.fields.field }
        set { update { $0.field = newValue } }
    }
    /// The session as it stands, sent with 412 so the client can rebase without another GET.
    public var session: SessionSnapshot? {
        get { box.fields.session }
        set { update { $0.session = newValue } }
    }
    /// Methods the route allows, for 405's `Allow` header.
    public var allowed: [String] {
        get { box.fields.allowed }
        set { update { $0.allowed = newValue } }
    }

    public init(code: Code, _ message: String, field: String? = nil) {
        box = Box(Fields(code: code, message: message, field: field))
    }

    public init(_ code: ServiceCode, _ message: String, field: String? = nil) {
        self.init(code: .service(code), message, field: field)
    }

    /// A field error spelled as SheetCore spells it (`invalid_field`, `unknown_detent`).
    public init(_ code: SheetError.Code, _ message: String, field: String? = nil) {
        self.init(code: .sheet(code), message, field: field)
    }

    private mutating func update(_ change: (inout Fields) -> Void) {
        var fields = box.fields
        change(&fields)
        box = Box(fields)
    }

    package static func invalidField(_ field: String, _ message: String) -> APIError {
        APIError(.invalidField, message, field: field)
    }
}

extension APIError {
    /// Translates the store's refusals into API errors. Not inlined: its messages would swell
    /// the async frames of every request that can fail (see `SheetService.respond`).
    @inline(never)
    package init(_ error: StoreError) {
        switch error.code.base {
        case .sessionNotFound:
            self.init(.sessionNotFound, "No session has this id; it may have been deleted or expired.")
        case .capacityExceeded(let limit):
            self.init(.capacityExceeded, "The server already holds its maximum of \(limit) sessions; delete some or try later.")
        case .tenantCapacityExceeded(let limit):
            self.init(.capacityExceeded, "This tenant already holds its maximum of \(limit) sessions; delete some or try later.")
        case .versionMismatch:
            let version = error.current.map { String($0.sheet.version) } ?? "another"
            self.init(.versionMismatch, "The session is at version \(version), not the one If-Match names; nothing was changed.")
            session = error.current
        case .sheet(let sheetError):
            self.init(sheetError)
        case .idempotencyKeyReused:
            self.init(.idempotencyKeyReused, "This Idempotency-Key was already used for a different request (method, path or body).",
                      field: "Idempotency-Key")
        case .eventsExpired:
            self.init(.eventsExpired, "Events after the resume point were dropped (only the newest \(Sheet.retainedEvents) are kept); read the session and resume from its version.",
                      field: "after")
        case .resumePointAhead(let version):
            self.init(.invalidField, "The resume point is past the session's current version \(version).", field: "after")
        case .shuttingDown:
            self.init(.shuttingDown, "The server is shutting down; retry against another instance or after it restarts.")
        case .unavailable(let reason):
            self.init(.storeUnavailable, "The session store cannot serve this now (\(reason)); retry after the seconds in Retry-After, with the same Idempotency-Key for a change.")
        }
    }

    /// SheetCore's codes are the API's: the code carries over as it is.
    package init(_ error: SheetError) {
        self.init(error.code, error.message, field: error.field)
    }
}
