import SheetCore

/// Why the store refused an operation. One error type for this layer; the API layer maps
/// each code to an HTTP status in one place.
public struct StoreError: Error, Sendable {
    /// A struct around the package's enum (as SheetCore's errors): a client compares codes, so a
    /// new one never breaks its `switch`; the API layer switches over `base` exhaustively.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        package enum Base: Sendable, Hashable {
            case sessionNotFound
            case capacityExceeded(limit: Int)
            /// The tenant already holds `--max-sessions-per-tenant` sessions.
            case tenantCapacityExceeded(limit: Int)
            /// `If-Match` named another version; `current` is the session as it is.
            case versionMismatch
            /// The sheet refused the action (phase conflict or unknown detent).
            case sheet(SheetError)
            /// An `Idempotency-Key` was used before for a different request.
            case idempotencyKeyReused
            /// Events after the resume point were dropped from the bounded log.
            case eventsExpired
            /// The resume point is past the session's current version.
            case resumePointAhead(version: UInt64)
            case shuttingDown
            /// The store's database cannot be reached, or did not confirm a commit; `reason` says
            /// why, for the operator. Nothing half-done is visible; a retry may succeed.
            case unavailable(reason: String)
        }

        package let base: Base
        package init(_ base: Base) { self.base = base }
        public var description: String { String(describing: base) }

        public static let sessionNotFound = Code(.sessionNotFound)
        public static func capacityExceeded(limit: Int) -> Code { Code(.capacityExceeded(limit: limit)) }
        public static func tenantCapacityExceeded(limit: Int) -> Code { Code(.tenantCapacityExceeded(limit: limit)) }
        public static let versionMismatch = Code(.versionMismatch)
        public static func sheet(_ error: SheetError) -> Code { Code(.sheet(error)) }
        public static let idempotencyKeyReused = Code(.idempotencyKeyReused)
        public static let eventsExpired = Code(.eventsExpired)
        public static func resumePointAhead(version: UInt64) -> Code { Code(.resumePointAhead(version: version)) }
        public static let shuttingDown = Code(.shuttingDown)
        public static func unavailable(reason: String) -> Code { Code(.unavailable(reason: reason)) }
    }

    /// The fields live in one immutable box, so a `StoreError` is a pointer wide: typed throws
    /// give each async function that may pass it on a frame slot per copy, and the store's
    /// frames are on every request's path (see `APIError` in SheetAPI for the measured cost).
    private final class Box: Sendable {
        let code: Code
        let current: SessionSnapshot?
        init(code: Code, current: SessionSnapshot?) {
            self.code = code
            self.current = current
        }
    }

    private var box: Box

    public var code: Code {
        get { box.code }
        set { box = Box(code: newValue, current: box.current) }
    }
    /// The session as it stands, where the error is about it (412 carries it).
    public var current: SessionSnapshot? {
        get { box.current }
        set { box = Box(code: box.code, current: newValue) }
    }

    public init(_ code: Code, current: SessionSnapshot? = nil) {
        box = Box(code: code, current: current)
    }
}
