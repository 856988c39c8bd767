import InlineExecution
import SheetCore

/// One actor's share of the sessions (picked by id), so requests on different sessions do not
/// queue behind one another. It is the single writer of each of its sessions.
///
/// Durability: a change is made in memory and submitted to the archive in the same actor turn
/// (so the archive sees each session's changes in order), then the request awaits the commit
/// before it answers. While it waits, other requests run on this actor. What they may see of a
/// change that is not committed yet:
/// - event readers (events, long-polls, streams) see only committed events: they read up to the
///   session's durable version, and new events are published only once committed;
/// - whole-state readers (GET, list, the `current` session of a 412/409, an idempotent replay)
///   take their answer, then wait for the session's newest commit before giving it.
/// So no answer ever shows state that a crash could still take back.
actor SessionShard {
    /// The shard's executor: like a default actor's, but a thread can run an uncontended change
    /// on it in place, without a task (`changeInPlace`, `readInPlace`).
    nonisolated let executor = InlineSerialExecutor()

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        executor.asUnownedSerialExecutor()
    }

    struct Entry {
        var sheet: Sheet
        let ordinal: UInt64
        /// Wall-clock milliseconds of the last request that named this session, for the idle sweep.
        var lastAccess: Int64
        /// Whose session it is: every lookup names a tenant, and another tenant's session is
        /// answered exactly as a missing one.
        let tenant: Tenant
    }

    /// A session with a change submitted whose events are not all published yet.
    ///
    /// An entry may outlive its commit: a change answered in place on a session that nobody
    /// reads events of is not published after its commit (that would take the shard from the
    /// archive's writer thread for nothing). Such an entry is settled lazily, by the next turn
    /// that needs it (`catchUp`): a reader of the session's events, its next change, the sweep.
    struct InFlight {
        /// The newest commit submitted for the session; commits complete in order, so once this
        /// one is done every earlier change of the session is too.
        var commit: ArchiveCommit
        /// The version that is committed and published: event readers see up to here.
        var durableVersion: UInt64
    }

    struct Waiter {
        let token: UInt64
        let after: UInt64
        let continuation: CheckedContinuation<Result<WaitOutcome, StoreError>, Never>
        let timer: Task<Void, Never>
    }

    struct Subscriber {
        let number: UInt64
        let subscriber: any EventSubscriber
    }

    var sessions = SessionTable<Entry>()
    /// Sessions per phase, kept as changes happen so the metrics gauge never scans.
    var phaseCounts: [Phase: Int] = [:]
    /// Creation order for listing; deleted sessions linger here until `compactOrder`.
    var order: [(ordinal: UInt64, id: SessionID)] = []
    var deadInOrder = 0
    var waiters: [SessionID: [Waiter]] = [:]
    var subscribers: [SessionID: [Subscriber]] = [:]
    var ledger: IdempotencyLedger
    var nextToken: UInt64 = 0
    /// Set by `shutdown`: long-polls and streams are refused from then on.
    var isShuttingDown = false
    /// Where the idle sweep resumes in `order`, so each pass does a bounded slice of work.
    var sweepCursor = 0
    let clock: StoreClock
    let archive: any SessionArchive
    /// `archive.keepsChanges`, read once: the volatile archive needs no change descriptions.
    let archiveKeepsChanges: Bool
    /// Only sessions with a commit outstanding are here; the map stays as small as the load.
    var inFlight: [SessionID: InFlight] = [:]
    /// Sessions created in place, oldest first, whose `inFlight` entries the shard's next create
    /// drops once their commits are done: as many as the creates still being committed.
    var createdUnsettled: [SessionID] = []
    /// Every session created over each session, presented or dismissed (a sheet itself names
    /// only its parent and the child covering it now), for cascading delete and chain expiry.
    /// Only sessions with children are here.
    var children: [SessionID: [SessionID]] = [:]
    /// Sessions read since their last write: their last access is saved by `flushTouched`.
    var touched: Set<SessionID> = []

    init(clock: StoreClock, idempotencyCapacity: Int, archive: any SessionArchive,
         restoring restored: [RestoredSession] = [], keys: [ArchivedKey] = []) {
        self.clock = clock
        self.archive = archive
        self.archiveKeepsChanges = archive.keepsChanges
        var ledger = IdempotencyLedger(capacity: idempotencyCapacity)
        let contents = Self.contents(restored, keys: keys, ledger: &ledger, archive: archive)
        self.ledger = ledger
        sessions = contents.sessions
        phaseCounts = contents.phaseCounts
        order = contents.order
        children = contents.children
    }

    var count: Int { sessions.count }

    // MARK: Sessions

    /// Adds a new session (and the idempotency answer it was created under, in the same commit),
    /// returning once both are committed.
    func insert(_ sheet: Sheet, id: SessionID, ordinal: UInt64, tenant: Tenant, key: ArchivedKey?) async throws(StoreError) {
        var changes = [admit(sheet, id: id, ordinal: ordinal, tenant: tenant)]
        if let key { changes.append(.keyStored(key)) }
        try await persist(changes, of: id, previousVersion: sheet.version, version: sheet.version)
    }

    /// Adds a new session to memory; returns what to store.
    func admit(_ sheet: Sheet, id: SessionID, ordinal: UInt64, tenant: Tenant) -> ArchiveChange {
        // Ordinals come from a shared counter; two creates can arrive here out of order, so keep `order` sorted.
        let now = clock.now().millisecondsSince1970
        sessions[id] = Entry(sheet: sheet, ordinal: ordinal, lastAccess: now, tenant: tenant)
        phaseCounts[sheet.phase, default: 0] += 1
        if let last = order.last, last.ordinal > ordinal {
            let index = insertionIndex(after: ordinal)
            order.insert((ordinal, id), at: index)
        } else {
            order.append((ordinal, id))
        }
        return .created(id, ordinal: ordinal, sheet: sheet, lastAccess: now, tenant: tenant)
    }

    /// The session `id` when `tenant` owns it; nil for a missing one and for another tenant's.
    func entry(_ id: SessionID, of tenant: Tenant) -> Entry? {
        guard let entry = sessions[id], entry.tenant == tenant else { return nil }
        return entry
    }

    func snapshot(_ id: SessionID, of tenant: Tenant) async throws(StoreError) -> SessionSnapshot {
        let snapshot = snapshotNow(id, of: tenant)
        try await settled(id)   // a change (or delete) that is not committed yet answers only once it is
        guard let snapshot else { throw StoreError(.sessionNotFound) }
        return snapshot
    }

    /// The session as it stands, its last access stamped; nil if there is none.
    func snapshotNow(_ id: SessionID, of tenant: Tenant) -> SessionSnapshot? {
        guard let index = sessions.index(forKey: id), sessions[at: index].tenant == tenant else { return nil }
        sessions[at: index].lastAccess = clock.now().millisecondsSince1970
        touched.insert(id)
        return SessionSnapshot(id: id, sheet: sessions[at: index].sheet)
    }

    /// The change itself, in one actor turn: the result, the version before it, and what to store.
    private func change(_ action: SheetAction, of id: SessionID, tenant: Tenant, ifMatch: AcceptedVersions?)
        -> (result: Result<ActionResult, StoreError>, previousVersion: UInt64, changes: [ArchiveChange]) {
        guard let index = sessions.index(forKey: id) else { return (.failure(StoreError(.sessionNotFound)), 0, []) }
        let now = clock.now()
        // One modifying access of the entry does the whole change of a session outside a chain: a
        // copy taken out of the table and written back would share the event log's storage,
        // so every append would copy the log, and each read of `sessions[at: index]` copies
        // the entry.
        switch Self.step(&sessions[at: index], id: id, action, tenant: tenant, ifMatch: ifMatch, now: now,
                         describing: archiveKeepsChanges) {
        case .notFound:
            return (.failure(StoreError(.sessionNotFound)), 0, [])
        case .refused(let error, let previous):
            touched.insert(id)
            return (.failure(error), previous, [])
        case .changed(let result, let previous, let phases, let change):
            if let phases {
                phaseCounts[phases.before, default: 0] -= 1
                phaseCounts[phases.after, default: 0] += 1
            }
            if result.outcome.events.isEmpty { touched.insert(id) }
            return (.success(result), previous, change.map { [$0] } ?? [])
        case .inChain(let previous, let before):
            return chainChange(action, of: id, at: index, tenant: tenant, previous: previous, before: before, now: now)
        }
    }

    /// What `step` did to an entry.
    private enum Step {
        /// Another tenant's session: as good as missing.
        case notFound
        case refused(StoreError, previous: UInt64)
        /// Applied; the phases when the phase changed; what to store (nil: nothing, or not asked).
        case changed(ActionResult, previous: UInt64, phases: (before: Phase, after: Phase)?, ArchiveChange?)
        /// The session is in a chain of sheets: `chainChange` applies the action (its last access is stamped).
        case inChain(previous: UInt64, before: Phase)
    }

    /// The change of one entry, made through one inout access of it.
    private static func step(_ entry: inout Entry, id: SessionID, _ action: SheetAction, tenant: Tenant,
                             ifMatch: AcceptedVersions?, now: Timestamp, describing: Bool) -> Step {
        guard entry.tenant == tenant else { return .notFound }
        entry.lastAccess = now.millisecondsSince1970
        let previous = entry.sheet.version
        let before = entry.sheet.phase
        // Body errors (an unknown detent) come before the version precondition, as the API's order says.
        if let ifMatch, !ifMatch.admits(previous) {
            if let error = entry.sheet.requestError(in: action) { return .refused(StoreError(.sheet(error)), previous: previous) }
            return .refused(StoreError(.versionMismatch, current: SessionSnapshot(id: id, sheet: entry.sheet)), previous: previous)
        }
        if entry.sheet.isInChain { return .inChain(previous: previous, before: before) }
        let outcome: SheetOutcome
        do { outcome = try entry.sheet.apply(action, now: now) } catch {
            return .refused(StoreError(.sheet(error), current: SessionSnapshot(id: id, sheet: entry.sheet)), previous: previous)
        }
        let after = entry.sheet.phase
        let change: ArchiveChange? = describing && !outcome.events.isEmpty
            ? .changed(id, ordinal: entry.ordinal, state: ArchivedState(entry.sheet), events: outcome.events, lastAccess: entry.lastAccess)
            : nil
        return .changed(ActionResult(session: SessionSnapshot(id: id, sheet: entry.sheet), outcome: outcome),
                        previous: previous, phases: before != after ? (before, after) : nil, change)
    }

    /// The change of a session in a chain: the sessions above and below it may change too.
    private func chainChange(_ action: SheetAction, of id: SessionID, at index: SessionTable<Entry>.Index,
                             tenant: Tenant, previous: UInt64, before: Phase, now: Timestamp)
        -> (result: Result<ActionResult, StoreError>, previousVersion: UInt64, changes: [ArchiveChange]) {
        let outcome: SheetOutcome
        let chain: [ChainChange]
        do {
            (outcome, chain) = try chainStep(action, of: id, tenant: tenant, now: now)
        } catch {
            touched.insert(id)
            return (.failure(StoreError(.sheet(error), current: SessionSnapshot(id: id, sheet: sessions[at: index].sheet))), previous, [])
        }
        let entry = sessions[at: index]
        if before != entry.sheet.phase {
            phaseCounts[before, default: 0] -= 1
            phaseCounts[entry.sheet.phase, default: 0] += 1
        }
        let result = ActionResult(session: SessionSnapshot(id: id, sheet: entry.sheet), outcome: outcome, chain: chain)
        guard !outcome.events.isEmpty else {
            touched.insert(id)
            return (.success(result), previous, [])
        }
        guard archiveKeepsChanges else { return (.success(result), previous, []) }
        var changes = [ArchiveChange.changed(id, ordinal: entry.ordinal, state: ArchivedState(entry.sheet),
                                             events: outcome.events, lastAccess: entry.lastAccess)]
        for other in chain {
            guard let otherEntry = sessions[other.id] else { continue }
            changes.append(.changed(other.id, ordinal: otherEntry.ordinal, state: ArchivedState(other.sheet),
                                    events: other.events, lastAccess: otherEntry.lastAccess))
        }
        return (.success(result), previous, changes)
    }

    func apply(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) async throws(StoreError) -> ActionResult {
        switch applyNow(action, to: id, of: tenant, ifMatch: ifMatch) {
        case .done(let result):
            return result
        case .committing(let result, let commit):
            try await publish(after: commit, of: id, version: result.session.sheet.version, others: result.companions)
            return result
        case .refused(let error):
            try await settled(id)   // a 412 or 409 shows the session as it stands: committed first
            throw error
        }
    }

    /// The synchronous part of `apply`, out of line so that its locals stay off the async frame.
    enum Applied {
        /// Applied, and nothing is left to wait for (its events are published).
        case done(ActionResult)
        /// Applied; the answer waits for `commit`, then publishes.
        case committing(ActionResult, ArchiveCommit)
        case refused(StoreError)
    }

    @inline(never)
    func applyNow(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) -> Applied {
        let (result, previous, changes) = change(action, of: id, tenant: tenant, ifMatch: ifMatch)
        // `consume`: the result moves into the answer; a copy would retain (and later release)
        // every reference a Sheet and its events hold, about fourteen.
        switch consume result {
        case .success(let done):
            guard let commit = submit(changes, of: id, previousVersion: previous, version: done.session.sheet.version,
                                      others: done.companions) else {
                return .done(done)
            }
            return .committing(done, commit)
        case .failure(let error):
            return .refused(error)
        }
    }

    /// Applies an action at most once per `Idempotency-Key`: the answer is rendered and stored in
    /// the same actor turn as the change, and both are committed together, so a concurrent retry
    /// or a restart can only ever see both or neither.
    func apply(
        _ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?,
        idempotency: IdempotencyRequest,
        render: @Sendable (Result<ActionResult, StoreError>) -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer {
        let key = IdempotencyLedger.Key(scope: id, key: idempotency.key)
        let now = clock.now()
        // The ledger comes first: a retry after the session was deleted still gets its first answer.
        switch ledger.lookup(key, fingerprint: idempotency.fingerprint, now: now) {
        case .replay(let answer):
            // The first answer may still be waiting for its commit: replay it only once that is done.
            try await settled(id)
            return IdempotentAnswer(answer: answer, replayed: true)
        case .reused:
            throw StoreError(.idempotencyKeyReused)
        case .miss:
            guard let entry = entry(id, of: tenant) else {
                try await settled(id)
                throw StoreError(.sessionNotFound)
            }
            var (result, previous, changes) = change(action, of: id, tenant: tenant, ifMatch: ifMatch)
            let answer = render(result)
            if answer.status < 500 {
                for gone in ledger.store(answer, for: key, fingerprint: idempotency.fingerprint, now: now) {
                    changes.append(.keyDropped(scope: gone.scope, key: gone.key))
                }
                changes.append(.keyStored(ArchivedKey(scope: id, request: idempotency, answer: answer, storedAt: now)))
            }
            let version = sessions[id]?.sheet.version ?? entry.sheet.version
            if case .failure = result { previous = version }
            try await persist(changes, of: id, previousVersion: previous, version: version,
                              others: (try? result.get())?.companions ?? [])
            return IdempotentAnswer(answer: answer, replayed: false)
        }
    }

    /// Deletes the session and every session presented over it (see `deleteChain`); returns
    /// how many were removed and what the sheet below recorded.
    func delete(_ id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) async throws(StoreError) -> DeletedSessions {
        guard let entry = entry(id, of: tenant) else {
            try await settled(id)
            throw StoreError(.sessionNotFound)
        }
        if let ifMatch, !ifMatch.admits(entry.sheet.version) {
            try await settled(id)
            throw StoreError(.versionMismatch, current: SessionSnapshot(id: id, sheet: entry.sheet))
        }
        guard entry.sheet.isInChain || children[id] != nil else {
            remove(id, reason: .sessionDeleted)
            try await persist([.deleted(id, ordinal: entry.ordinal)], of: id, previousVersion: entry.sheet.version, version: entry.sheet.version)
            return DeletedSessions(count: 1, events: [])
        }
        return try await deleteChain(from: id, entry, tenant: tenant)
    }

    /// Takes `id` out of memory (its waiters and streams end with `reason`); returns what it was.
    @discardableResult
    func remove(_ id: SessionID, reason: SubscriptionEnd) -> Entry? {
        guard let entry = sessions.removeValue(forKey: id) else { return nil }
        if let parent = entry.sheet.parent, var siblings = children[parent] {
            siblings.removeAll { $0 == id }
            children[parent] = siblings.isEmpty ? nil : siblings
        }
        phaseCounts[entry.sheet.phase, default: 0] -= 1
        deadInOrder += 1
        touched.remove(id)
        for waiter in waiters.removeValue(forKey: id) ?? [] {
            waiter.timer.cancel()
            waiter.continuation.resume(returning: .failure(StoreError(.sessionNotFound)))
        }
        for slot in subscribers.removeValue(forKey: id) ?? [] {
            slot.subscriber.ended(reason)
        }
        compactOrderIfWasteful()
        return entry
    }

    // MARK: Listing

    /// Up to `limit` sessions created after `after` (an ordinal), oldest first, optionally of one
    /// phase, and the outstanding commits the caller must wait for before showing them.
    func list(of tenant: Tenant, phase: Phase?, after: UInt64, limit: Int)
        -> (sessions: [(ordinal: UInt64, session: SessionSnapshot)], pending: [ArchiveCommit]) {
        var found: [(ordinal: UInt64, session: SessionSnapshot)] = []
        var pending: [ArchiveCommit] = []
        var index = insertionIndex(after: after)
        while index < order.count, found.count < limit {
            let (ordinal, id) = order[index]
            index += 1
            guard let entry = sessions[id], entry.ordinal == ordinal, entry.tenant == tenant else { continue }
            if let phase, entry.sheet.phase != phase { continue }
            found.append((ordinal, SessionSnapshot(id: id, sheet: entry.sheet)))
            if let commit = inFlight[id]?.commit, !commit.isCommitted { pending.append(commit) }
        }
        return (found, pending)
    }

    /// The first index in `order` whose ordinal is greater than `ordinal` (binary search).
    private func insertionIndex(after ordinal: UInt64) -> Int {
        var low = 0
        var high = order.count
        while low < high {
            let middle = (low + high) / 2
            if order[middle].ordinal <= ordinal { low = middle + 1 } else { high = middle }
        }
        return low
    }

    func compactOrderIfWasteful() {
        guard deadInOrder > 1024, deadInOrder * 2 > order.count else { return }
        order.removeAll { sessions[$0.id]?.ordinal != $0.ordinal }
        deadInOrder = 0
        sweepCursor = 0
    }
}
