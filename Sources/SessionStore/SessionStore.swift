import Locking
import SheetCore
import Synchronization
import Timekeeping

/// All sessions of the service. Sessions are spread over several `SessionShard` actors by id,
/// so unrelated sessions never wait for each other; each session has exactly one writer.
/// Changes are made durable through a `SessionArchive` before they are answered.
public final class SessionStore: Sendable {
    public struct Configuration: Sendable {
        public var maxSessions = 1_000_000
        /// Sessions one tenant may hold; nil: only `maxSessions` applies.
        public var maxSessionsPerTenant: Int?
        /// 64, not fewer: a shard's dictionary doubles in one step, blocking that shard (and the
        /// thread running it) while it rehashes; smaller shards keep those pauses short (creating
        /// ~900,000 sessions: p99.9 6 ms with 64 shards, 26 ms with 16).
        public var shardCount = 64
        /// Idempotency keys remembered in all, oldest forgotten first past this number.
        public var idempotencyCapacity = 100_000
        /// Sessions nobody has named for this long are removed by the sweep.
        public var sessionTTL: Duration = .seconds(24 * 3600)
        public var clock = StoreClock.system
        /// The clock the store's timers run on: long-poll deadlines and the idle sweep's pace
        /// (a `ManualClock` in tests, so those rules are checked exactly whatever the load).
        public var timerClock: any ServiceClock = SystemClock()

        public init() {}
    }

    private let shards: [SessionShard]
    private let creations: CreationLedger
    private let count = Atomic<Int>(0)
    /// Sessions held per tenant, for `maxSessionsPerTenant`.
    private let tenantCounts = LockedValue<[Tenant: Int]>([:])
    private let ordinals = Atomic<UInt64>(0)
    private let archive: any SessionArchive
    public let configuration: Configuration

    /// Closed until the store holds what its archive had (see `awaitingRestore`).
    private let restoring: RestoreGate

    /// A store that carries on from `contents` (what `archive.load()` returned) and commits every
    /// change to `archive` before answering. The defaults keep everything in memory only.
    public convenience init(configuration: Configuration = Configuration(), archive: any SessionArchive = VolatileArchive(),
                            restoring contents: ArchiveContents = ArchiveContents()) {
        let parts = Self.partition(contents, configuration)
        self.init(configuration: configuration, archive: archive, parts: parts, restoring: RestoreGate(open: true))
    }

    private init(configuration: Configuration, archive: any SessionArchive, parts: Partition, restoring: RestoreGate) {
        self.configuration = configuration
        self.archive = archive
        self.restoring = restoring
        let perShardKeys = max(1, configuration.idempotencyCapacity / parts.sessions.count)
        shards = parts.sessions.indices.map { index in
            SessionShard(clock: configuration.clock, idempotencyCapacity: perShardKeys, archive: archive,
                         restoring: parts.sessions[index], keys: parts.keys[index])
        }
        creations = CreationLedger(capacity: configuration.idempotencyCapacity, clock: configuration.clock,
                                   archive: archive, restoring: parts.globalKeys)
        count.store(parts.count, ordering: .relaxed)
        tenantCounts.withLock { $0 = parts.tenantCounts }
        ordinals.store(parts.highestOrdinal, ordering: .relaxed)
    }

    /// A store that answers before it holds its sessions: start-up reads a large archive while
    /// the server already runs, then hands the contents over with `restore(_:)`. Until then,
    /// every call that names, creates, counts or lists sessions waits (none fails or is counted
    /// short for a session not read yet), and the in-place calls return nil.
    public static func awaitingRestore(configuration: Configuration = Configuration(), archive: any SessionArchive) -> SessionStore {
        SessionStore(configuration: configuration, archive: archive, parts: partition(ArchiveContents(), configuration),
                     restoring: RestoreGate(open: false))
    }

    /// Hands a store made by `awaitingRestore` what its archive holds, and lets the calls waiting
    /// for it go on. Nothing reaches the shards before this (every such call waits), so each
    /// shard takes its sessions as if it had started with them. Call it once.
    public func restore(_ contents: ArchiveContents) async {
        precondition(!restoring.isOpen, "SessionStore.restore called on a store that holds its sessions already")
        var parts = Self.partition(contents, configuration)
        for index in shards.indices {
            await shards[index].adopt(parts.sessions[index], keys: parts.keys[index])
            parts.sessions[index] = []   // freed shard by shard, so the load's peak memory falls
        }
        await creations.adopt(parts.globalKeys)
        count.store(parts.count, ordering: .relaxed)
        tenantCounts.withLock { $0 = parts.tenantCounts }
        ordinals.store(parts.highestOrdinal, ordering: .relaxed)
        restoring.openNow()
    }

    /// Whether the store holds every session its archive had (always, unless made by `awaitingRestore`).
    public var isRestored: Bool { restoring.isOpen }

    /// Calls waiting for `restore` now.
    package var callsAwaitingRestore: Int { restoring.waiting }

    /// Configurations in use, so sessions created alike share one (immutable) storage object
    /// instead of each holding its own copy of the detent tables: most clients create every
    /// session with the same configuration, and this is most of an idle session's memory.
    private let configurations = LockedValue<[SheetConfiguration: SheetConfiguration]>([:])
    private static let internedConfigurationLimit = 4096

    private func interned(_ configuration: SheetConfiguration) -> SheetConfiguration {
        configurations.withLock { table in
            if let shared = table[configuration] { return shared }
            if table.count < Self.internedConfigurationLimit { table[configuration] = configuration }
            return configuration
        }
    }

    func shard(for id: SessionID) -> SessionShard { shards[id.shardIndex(of: shards.count)] }

    public var sessionCount: Int { count.load(ordering: .relaxed) }

    // MARK: Sessions

    /// Creates a session of `tenant` presented at its default detent, unless `--max-sessions`
    /// (or the tenant's share) is reached.
    public func create(_ configuration: SheetConfiguration, for tenant: Tenant) async throws(StoreError) -> SessionSnapshot {
        try await create(configuration, over: nil, for: tenant)
    }

    /// Creates a session of `tenant`, presented over `parent` when one is named (which must be a
    /// presented, uncovered session of the same tenant: `SheetChain.present`). The new session
    /// lives on its parent's shard (see `SessionShard`'s chains), so both change in one commit.
    public func create(_ configuration: SheetConfiguration, over parent: SessionID?, for tenant: Tenant) async throws(StoreError) -> SessionSnapshot {
        if !restoring.isOpen { await restoring.wait() }
        try reservePlace(for: tenant)
        if let parent {
            let id = SessionID.random(inChainOf: parent)
            let ordinal = ordinals.add(1, ordering: .relaxed).newValue
            let (result, _) = await shard(for: parent).insert(interned(configuration), id: id, over: parent, ordinal: ordinal,
                                                                tenant: tenant, recording: nil)
            if case .failure = result { released([tenant]) }
            return try result.get()
        }
        let id = SessionID.random()
        let ordinal = ordinals.add(1, ordering: .relaxed).newValue
        let sheet = Sheet(configuration: interned(configuration), now: self.configuration.clock.now())
        try await shard(for: id).insert(sheet, id: id, ordinal: ordinal, tenant: tenant, key: nil)
        return SessionSnapshot(id: id, sheet: sheet)
    }

    /// `create` without a task, for a session over nothing: made and submitted on the calling
    /// thread when its shard is idle, the result saying what its answer waits for (its commit).
    /// nil, with nothing made or counted, while the sessions are still being read in or when the
    /// shard is busy: use `create`. A session over a parent changes the parent too, on the
    /// parent's shard, so it always goes through `create`.
    public func createInPlace(_ configuration: SheetConfiguration, for tenant: Tenant) -> InPlace<SessionSnapshot>? {
        guard restoring.isOpen else { return nil }
        do { try reservePlace(for: tenant) } catch { return InPlace(result: .failure(error)) }
        let id = SessionID.random()
        // Taken before the shard is tried: a create declined here leaves a gap in the ordinals,
        // as a deleted session does.
        let ordinal = ordinals.add(1, ordering: .relaxed).newValue
        let sheet = Sheet(configuration: interned(configuration), now: self.configuration.clock.now())
        guard let pending = shard(for: id).insertInPlace(sheet, id: id, ordinal: ordinal, tenant: tenant) else {
            released([tenant])
            return nil
        }
        return InPlace(result: .success(SessionSnapshot(id: id, sheet: sheet)), pending: pending)
    }

    /// Counts a new session in, unless that would pass `--max-sessions` or the tenant's limit.
    /// Reserving first means concurrent creates can never overshoot either limit.
    private func reservePlace(for tenant: Tenant) throws(StoreError) {
        let limit = self.configuration.maxSessions
        var current = count.load(ordering: .relaxed)
        while true {
            guard current < limit else { throw StoreError(.capacityExceeded(limit: limit)) }
            let (exchanged, original) = count.compareExchange(
                expected: current, desired: current + 1, ordering: .relaxed)
            if exchanged { break }
            current = original
        }
        let tenantLimit = configuration.maxSessionsPerTenant ?? Int.max
        let admitted = tenantCounts.withLock { counts in
            guard counts[tenant, default: 0] < tenantLimit else { return false }
            counts[tenant, default: 0] += 1
            return true
        }
        if !admitted {
            count.subtract(1, ordering: .relaxed)
            throw StoreError(.tenantCapacityExceeded(limit: tenantLimit))
        }
    }

    /// Counts removed sessions out.
    private func released(_ tenants: [Tenant]) {
        guard !tenants.isEmpty else { return }
        count.subtract(tenants.count, ordering: .relaxed)
        tenantCounts.withLock { counts in
            for tenant in tenants {
                let left = counts[tenant, default: 1] - 1
                counts[tenant] = left > 0 ? left : nil
            }
        }
    }

    /// Creates at most one session per `Idempotency-Key` of `tenant`; repeats get the first answer.
    public func create(
        _ configuration: SheetConfiguration, over parent: SessionID? = nil, for tenant: Tenant, idempotency unscoped: IdempotencyRequest,
        render: @escaping @Sendable (Result<SessionSnapshot, StoreError>) -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer {
        if !restoring.isOpen { await restoring.wait() }
        let idempotency = unscoped.scoped(to: tenant)
        return try await creations.perform(idempotency) {
            await self.create(configuration, over: parent, for: tenant, recording: idempotency, render: render)
        }
    }

    /// The create behind an idempotent `POST /sessions`: the answer is rendered before the session
    /// is inserted, so the session and its stored answer are committed in one transaction.
    private func create(
        _ configuration: SheetConfiguration, over parent: SessionID?, for tenant: Tenant, recording idempotency: IdempotencyRequest,
        render: @escaping @Sendable (Result<SessionSnapshot, StoreError>) -> StoredAnswer
    ) async -> StoredAnswer {
        let now = self.configuration.clock.now()
        do {
            try reservePlace(for: tenant)
        } catch {
            let answer = render(.failure(error))
            if answer.status < 500 {
                do {
                    try await archive.submit([.keyStored(ArchivedKey(scope: nil, request: idempotency, answer: answer, storedAt: now))]).wait()
                } catch {
                    return render(.failure(StoreError(.shuttingDown)))   // not stored: not acknowledged
                }
            }
            return answer
        }
        if let parent {
            let (result, answer) = await shard(for: parent).insert(
                interned(configuration), id: SessionID.random(inChainOf: parent), over: parent,
                ordinal: ordinals.add(1, ordering: .relaxed).newValue, tenant: tenant,
                recording: ChildRecording(request: idempotency, render: render))
            if case .failure = result { released([tenant]) }
            return answer ?? render(result)
        }
        let id = SessionID.random()
        let ordinal = ordinals.add(1, ordering: .relaxed).newValue
        let sheet = Sheet(configuration: interned(configuration), now: now)
        let answer = render(.success(SessionSnapshot(id: id, sheet: sheet)))
        let key = answer.status < 500 ? ArchivedKey(scope: nil, request: idempotency, answer: answer, storedAt: now) : nil
        do {
            try await shard(for: id).insert(sheet, id: id, ordinal: ordinal, tenant: tenant, key: key)
        } catch {
            return render(.failure(error))   // not stored: not acknowledged
        }
        return answer
    }

    // Every call below names the tenant asking: another tenant's session is `sessionNotFound`,
    // exactly as a missing one, and changes nothing.

    public func session(_ id: SessionID, of tenant: Tenant) async throws(StoreError) -> SessionSnapshot {
        if !restoring.isOpen { await restoring.wait() }
        return try await shard(for: id).snapshot(id, of: tenant)
    }

    public func apply(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions? = nil) async throws(StoreError) -> ActionResult {
        if !restoring.isOpen { await restoring.wait() }
        return try await shard(for: id).apply(action, to: id, of: tenant, ifMatch: ifMatch)
    }

    /// `apply` on the calling thread, whatever the archive: nil (nothing applied) when the
    /// session's shard is busy; otherwise the result, and the commit its answer waits for.
    public func changeInPlace(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions? = nil) -> InPlace<ActionResult>? {
        guard restoring.isOpen else { return nil }
        return shard(for: id).changeInPlace(action, to: id, of: tenant, ifMatch: ifMatch)
    }

    /// `session` on the calling thread, whatever the archive: nil when the session's shard is
    /// busy; otherwise the session, and the commit of a change it shows that its answer waits for.
    public func readInPlace(_ id: SessionID, of tenant: Tenant) -> InPlace<SessionSnapshot>? {
        guard restoring.isOpen else { return nil }
        return shard(for: id).readInPlace(id, of: tenant)
    }

    public func apply(
        _ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?, idempotency: IdempotencyRequest,
        render: @escaping @Sendable (Result<ActionResult, StoreError>) -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer {
        if !restoring.isOpen { await restoring.wait() }
        return try await shard(for: id).apply(action, to: id, of: tenant, ifMatch: ifMatch, idempotency: idempotency.scoped(to: tenant),
                                       render: render)
    }

    /// Deletes the session and every session presented over it; the sheet below, if the
    /// session covered it, records `uncovered {reason: deleted}`. All in one commit.
    @discardableResult
    public func delete(_ id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions? = nil) async throws(StoreError) -> DeletedSessions {
        if !restoring.isOpen { await restoring.wait() }
        let deleted = try await shard(for: id).delete(id, of: tenant, ifMatch: ifMatch)
        released(Array(repeating: tenant, count: deleted.count))
        return deleted
    }

    /// A page of `tenant`'s sessions created after the cursor `after` (a creation ordinal), oldest
    /// first. The cursor is an ordinal, not an id, so it still works after its session was deleted.
    public func list(of tenant: Tenant, phase: Phase?, after: UInt64, limit: Int) async throws(StoreError) -> SessionPage {
        if !restoring.isOpen { await restoring.wait() }
        var merged: [(ordinal: UInt64, session: SessionSnapshot)] = []
        var pending: [ArchiveCommit] = []
        // One more than the page from each shard: a shard holding the rest of the page and more
        // must be able to say "more", or `next` would wrongly end the listing.
        for shard in shards {
            let part = await shard.list(of: tenant, phase: phase, after: after, limit: limit + 1)
            merged += part.sessions
            pending += part.pending
        }
        // Show no session state that is not committed yet.
        for commit in pending {
            do { try await commit.wait() } catch { throw StoreError(.shuttingDown) }
        }
        merged.sort { $0.ordinal < $1.ordinal }
        let page = merged.prefix(limit)
        let more = merged.count > limit
        return SessionPage(sessions: page.map(\.session), next: more ? page.last?.ordinal : nil)
    }

    // MARK: Events

    public func events(of id: SessionID, tenant: Tenant, after: UInt64) async throws(StoreError) -> EventsPage {
        if !restoring.isOpen { await restoring.wait() }
        return try await shard(for: id).events(of: id, tenant: tenant, after: after)
    }

    /// Long-poll: events after `after`, waiting up to `timeout` for the first one.
    public func waitForEvents(of id: SessionID, tenant: Tenant, after: UInt64, timeout: Duration) async throws(StoreError) -> WaitOutcome {
        if !restoring.isOpen { await restoring.wait() }
        return try await shard(for: id).wait(on: id, of: tenant, after: after, timeout: timeout, clock: configuration.timerClock).get()
    }

    public func subscribe(_ subscriber: any EventSubscriber, to id: SessionID, of tenant: Tenant, after: UInt64?) async throws(StoreError) -> SubscriptionToken {
        if !restoring.isOpen { await restoring.wait() }
        return try await shard(for: id).subscribe(subscriber, to: id, of: tenant, after: after)
    }

    public func unsubscribe(_ token: SubscriptionToken) async {
        await shard(for: token.session).unsubscribe(token)
    }

    // MARK: Housekeeping

    /// One sweep over every shard in small slices (each slice is one short actor turn, so requests
    /// interleave with it). Returns how many idle sessions were removed.
    @discardableResult
    public func sweepIdleSessions(slice: Int = 2048) async -> Int {
        if !restoring.isOpen { await restoring.wait() }
        let ttlMilliseconds = Int64(configuration.sessionTTL.components.seconds) * 1000
            + configuration.sessionTTL.components.attoseconds / 1_000_000_000_000_000
        let cutoff = configuration.clock.now().millisecondsSince1970 - ttlMilliseconds
        var removed = 0
        for shard in shards {
            while true {
                let pass = await shard.sweep(idleBefore: cutoff, budget: slice)
                removed += pass.removed.count
                released(pass.removed)
                if pass.finished { break }
            }
        }
        await creations.expire()
        let lifetime = IdempotencyLedger(capacity: 1).lifetimeMilliseconds
        _ = archive.submit([.keysExpired(before: configuration.clock.now().millisecondsSince1970 - lifetime)])
        for shard in shards { _ = await shard.flushTouched() }
        return removed
    }

    /// Sessions held per tenant now, for the metrics gauge (tenants with none are left out).
    public var sessionsPerTenant: [Tenant: Int] { tenantCounts.withLock { $0 } }

    /// Sessions per phase, for the metrics gauge.
    public func phaseCounts() async -> [Phase: Int] {
        if !restoring.isOpen { await restoring.wait() }
        var total: [Phase: Int] = [:]
        for shard in shards {
            for (phase, value) in await shard.phaseCounts { total[phase, default: 0] += value }
        }
        return total
    }

    /// Releases every long-poll and stream, and refuses new ones; actions still go through.
    public func shutdown() async {
        for shard in shards { await shard.shutdown() }
    }

    /// After the last request: saves when each session was last read, commits everything queued
    /// and closes the archive. The store must not be used afterwards; what is submitted then
    /// fails its commit. Throws if the last reads could not be saved (the archive was closed
    /// already); the archive is closed either way.
    public func close() async throws(ArchiveError) {
        // The archive is still being read until the store is restored: closing waits for that.
        if !restoring.isOpen { await restoring.wait() }
        defer { archive.close() }
        for shard in shards {
            if let commit = await shard.flushTouched() { try await commit.wait() }
        }
    }
}
