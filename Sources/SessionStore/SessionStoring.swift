import SheetCore

/// What the API asks of the sessions, whoever keeps them: `SessionStore` (sessions in this
/// process's memory, made durable by a `SessionArchive`) or a store whose database is the
/// authority, shared by several processes. The API holds an `any SessionStoring` and never
/// knows which; the guarantees described on `SessionStore` hold for both.
public protocol SessionStoring: AnyObject, Sendable {
    /// A new session, presented over `parent` when one is named (which records `covered`).
    func create(_ configuration: SheetConfiguration, over parent: SessionID?, for tenant: Tenant) async throws(StoreError) -> SessionSnapshot
    func create(
        _ configuration: SheetConfiguration, over parent: SessionID?, for tenant: Tenant, idempotency: IdempotencyRequest,
        render: @escaping @Sendable (Result<SessionSnapshot, StoreError>) -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer
    /// A new session over nothing made on the calling thread, its answer perhaps waiting for a
    /// commit (`InPlace.pending`); nil (nothing made, nothing counted) when the store cannot make
    /// it without waiting.
    func createInPlace(_ configuration: SheetConfiguration, for tenant: Tenant) -> InPlace<SessionSnapshot>?
    func session(_ id: SessionID, of tenant: Tenant) async throws(StoreError) -> SessionSnapshot
    func apply(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) async throws(StoreError) -> ActionResult
    /// The change made on the calling thread, its answer perhaps waiting for a commit
    /// (`InPlace.pending`); nil (nothing applied) when the store cannot make it without waiting.
    func changeInPlace(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) -> InPlace<ActionResult>?
    /// The session read on the calling thread, its answer perhaps waiting for a commit; nil when
    /// the store cannot read it without waiting.
    func readInPlace(_ id: SessionID, of tenant: Tenant) -> InPlace<SessionSnapshot>?
    func apply(
        _ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?, idempotency: IdempotencyRequest,
        render: @escaping @Sendable (Result<ActionResult, StoreError>) -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer
    /// Deletes the session and every session presented over it, in one change.
    @discardableResult
    func delete(_ id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) async throws(StoreError) -> DeletedSessions
    func list(of tenant: Tenant, phase: Phase?, after: UInt64, limit: Int) async throws(StoreError) -> SessionPage
    func events(of id: SessionID, tenant: Tenant, after: UInt64) async throws(StoreError) -> EventsPage
    func waitForEvents(of id: SessionID, tenant: Tenant, after: UInt64, timeout: Duration) async throws(StoreError) -> WaitOutcome
    func subscribe(_ subscriber: any EventSubscriber, to id: SessionID, of tenant: Tenant, after: UInt64?) async throws(StoreError) -> SubscriptionToken
    func unsubscribe(_ token: SubscriptionToken) async

    /// Sessions per phase, for the metrics gauge.
    func phaseCounts() async -> [Phase: Int]
    /// Sessions held per tenant, for the metrics gauge (as of the last `phaseCounts` where the
    /// store has to ask a database for it).
    var sessionsPerTenant: [Tenant: Int] { get }
    /// Why the store cannot serve requests now (its database is unreachable, say); nil when it can.
    var unavailableReason: String? { get }

    /// Sweeps idle sessions (past the TTL) and idempotency keys (past their lifetime) now and
    /// then, until the task is cancelled; a pass in progress finishes first.
    func runIdleSweeps() async
    /// Releases every long-poll and stream, and refuses new ones; actions still go through.
    func shutdown() async
    /// After the last request: stores what is pending and lets go of the storage.
    func close() async throws(ArchiveError)
}

extension SessionStore: SessionStoring {
    public var unavailableReason: String? { nil }
}
