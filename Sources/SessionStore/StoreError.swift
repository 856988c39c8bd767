import SheetCore

/// Why the store refused an operation. One error type for this layer; the API layer maps
/// each code to an HTTP status in one place.
public struct StoreError: Error, Sendable {
    public enum Code: Sendable, Hashable {
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
