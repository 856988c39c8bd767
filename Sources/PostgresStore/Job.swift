import SessionStore
import SheetCore

/// One request to the database, queued for a committer. Its continuation is resumed exactly
/// once: after the transaction that served it committed, or with the failure that ended it.
struct Job: Sendable {
    let request: Request
    let continuation: UnsafeContinuation<Reply, Never>

    func finish(_ reply: Reply) { continuation.resume(returning: reply) }
}

/// An idempotency key sent with a change, and how the change's answer is rendered for storing.
struct Once<Value: Sendable>: Sendable {
    /// Scoped to the tenant already.
    let request: IdempotencyRequest
    let render: @Sendable (Result<Value, StoreError>) -> StoredAnswer
}

/// What a job asks for. Everything but `sweep` is served inside a committer's batch.
enum Request: Sendable {
    case create(SheetConfiguration, over: SessionID?, Tenant, id: SessionID, once: Once<SessionSnapshot>?)
    case read(SessionID, Tenant)
    case apply(SheetAction, SessionID, Tenant, ifMatch: AcceptedVersions?, once: Once<ActionResult>?)
    case delete(SessionID, Tenant, ifMatch: AcceptedVersions?)
    /// Events after `after`; nil: none, only the session's current version.
    case events(SessionID, Tenant, after: UInt64?)
    case list(Tenant, Phase?, after: UInt64, limit: Int)
    case statistics
    case sweep(Sweep)

    /// The session whose chain the batch must lock (`SELECT … FOR UPDATE`) before serving this.
    var lockedSession: SessionID? {
        switch self {
        case .apply(_, let id, _, _, _), .delete(let id, _, _): id
        case .create(_, let parent?, _, _, _): parent
        default: nil
        }
    }

    /// The session whose row the batch reads (committed state, no lock) to serve this.
    var readSession: SessionID? {
        switch self {
        case .read(let id, _), .events(let id, _, _): id
        default: nil
        }
    }

    /// Whether serving this takes the `counters` row (creates and deletes change the count).
    var countsSessions: Bool {
        switch self {
        case .create, .delete: true
        default: false
        }
    }
}

/// The idle sweep's work: last reads to save, and what is past its time.
struct Sweep: Sendable {
    /// Sessions read (or watched) since the last sweep, and when.
    var touched: [SessionID: Int64]
    /// Sessions idle since before this instant (milliseconds since 1970) are removed.
    var idleBefore: Int64
    /// Idempotency keys first used before this instant are forgotten.
    var keysBefore: Int64
    /// Keys kept in all, the newest; older ones beyond this are forgotten.
    var keyCapacity: Int
}

/// What a job got.
enum Reply: Sendable {
    case snapshot(SessionSnapshot)
    case action(ActionResult)
    case answer(IdempotentAnswer)
    case deleted(DeletedSessions)
    case events(EventsPage)
    case page(SessionPage)
    case statistics(phases: [Phase: Int], tenants: [Tenant: Int])
    case swept(removed: [SessionID])
    case failed(StoreError)
}
