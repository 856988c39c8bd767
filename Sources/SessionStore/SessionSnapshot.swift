import SheetCore

/// A session as one request saw it: a copy-on-write value, safe to encode outside the actor.
public struct SessionSnapshot: Sendable {
    public let id: SessionID
    public let sheet: Sheet

    public init(id: SessionID, sheet: Sheet) {
        self.id = id
        self.sheet = sheet
    }
}

/// What an action did to a session.
public struct ActionResult: Sendable {
    public let session: SessionSnapshot
    public let outcome: SheetOutcome
}

/// Events after a resume point, and the version they bring the reader to.
public struct EventsPage: Sendable {
    public let events: [SheetEvent]
    public let version: UInt64

    public init(events: [SheetEvent], version: UInt64) {
        self.events = events
        self.version = version
    }
}

/// One page of `list`, oldest first.
public struct SessionPage: Sendable {
    public let sessions: [SessionSnapshot]
    /// The creation ordinal of the last session returned, when more may follow.
    public let next: UInt64?
}

/// An answer to an idempotent request: the first one, or a replay of it.
public struct IdempotentAnswer: Sendable {
    public let answer: StoredAnswer
    public let replayed: Bool
}

/// The request an `Idempotency-Key` was sent with, hashed so the store keeps no bodies.
public struct IdempotencyRequest: Sendable {
    public let key: String
    let fingerprint: IdempotencyLedger.Fingerprint

    public init(key: String, method: String, path: String, body: [UInt8]) {
        self.key = key
        self.fingerprint = IdempotencyLedger.fingerprint(method: method, path: path, body: body)
    }

    private init(key: String, fingerprint: IdempotencyLedger.Fingerprint) {
        self.key = key
        self.fingerprint = fingerprint
    }

    /// The same request with its key in `tenant`'s own space: `"<tenant> <key>"` (a key has no
    /// space, so two tenants' keys never meet, not even on a session id another tenant guessed).
    func scoped(to tenant: Tenant) -> IdempotencyRequest {
        IdempotencyRequest(key: tenant.name + " " + key, fingerprint: fingerprint)
    }
}

/// A stored answer replayed for a repeated `Idempotency-Key`. Opaque to the store.
public struct StoredAnswer: Sendable, Hashable {
    public let status: Int
    public let headers: [String: String]
    public let body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
