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
    /// The other sessions of its chain that the action changed (a cascade), each with the events
    /// it recorded: not part of the answer, which lists the target's events only, but counted.
    public let chain: [ChainChange]

    public init(session: SessionSnapshot, outcome: SheetOutcome, chain: [ChainChange] = []) {
        self.session = session
        self.outcome = outcome
        self.chain = chain
    }

    /// The events the action recorded on other sessions of the chain.
    public var chainEvents: [SheetEvent] { chain.flatMap(\.events) }

    var companions: [CommittedWith] { chain.map(CommittedWith.init) }
}

/// What a delete removed, and what it recorded on the sheet below.
public struct DeletedSessions: Sendable {
    /// The session and its descendants.
    public let count: Int
    /// Events recorded on the sheet below (`uncovered {reason: deleted}`).
    public let events: [SheetEvent]

    public init(count: Int, events: [SheetEvent]) {
        self.count = count
        self.events = events
    }
}

/// Another session whose change is in the same commit as a request's own session: it is made
/// durable, and its events published, together with the request's.
struct CommittedWith: Sendable {
    let id: SessionID
    let previousVersion: UInt64
    let version: UInt64

    init(id: SessionID, previousVersion: UInt64, version: UInt64) {
        self.id = id
        self.previousVersion = previousVersion
        self.version = version
    }

    init(_ change: ChainChange) {
        self.init(id: change.id, previousVersion: change.sheet.version - UInt64(change.events.count),
                  version: change.sheet.version)
    }
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

    public init(sessions: [SessionSnapshot], next: UInt64?) {
        self.sessions = sessions
        self.next = next
    }
}

/// An answer to an idempotent request: the first one, or a replay of it.
public struct IdempotentAnswer: Sendable {
    public let answer: StoredAnswer
    public let replayed: Bool

    public init(answer: StoredAnswer, replayed: Bool) {
        self.answer = answer
        self.replayed = replayed
    }
}

/// The request an `Idempotency-Key` was sent with, hashed so the store keeps no bodies.
public struct IdempotencyRequest: Sendable {
    public let key: String
    let fingerprint: IdempotencyLedger.Fingerprint

    public init(key: String, method: String, path: String, body: [UInt8]) {
        self.key = key
        self.fingerprint = IdempotencyLedger.fingerprint(method: method, path: path, body: body)
    }

    /// The two halves of the request's fingerprint, for a store that keeps keys itself: the
    /// same request has the same pair, another request (almost surely) another.
    public var fingerprintHalves: (value: UInt64, check: UInt64) { (fingerprint.value, fingerprint.check) }

    private init(key: String, fingerprint: IdempotencyLedger.Fingerprint) {
        self.key = key
        self.fingerprint = fingerprint
    }

    /// The same request with its key in `tenant`'s own space: `"<tenant> <key>"` (a key has no
    /// space, so two tenants' keys never meet, not even on a session id another tenant guessed).
    public func scoped(to tenant: Tenant) -> IdempotencyRequest {
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
