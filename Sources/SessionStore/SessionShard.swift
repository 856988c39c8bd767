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
    struct Entry {
        var sheet: Sheet
        let ordinal: UInt64
        /// Wall-clock milliseconds of the last request that named this session, for the idle sweep.
        var lastAccess: Int64
    }

    /// A session with a change submitted but not known to be committed.
    private struct InFlight {
        /// The newest commit submitted for the session; commits complete in order, so once this
        /// one is done every earlier change of the session is too.
        var commit: ArchiveCommit
        /// The version that is committed and published: event readers see up to here.
        var durableVersion: UInt64
    }

    private struct Waiter {
        let token: UInt64
        let after: UInt64
        let continuation: CheckedContinuation<Result<WaitOutcome, StoreError>, Never>
        let timer: Task<Void, Never>
    }

    private struct Subscriber {
        let number: UInt64
        let subscriber: any EventSubscriber
    }

    private var sessions: [SessionID: Entry] = [:]
    /// Sessions per phase, kept as changes happen so the metrics gauge never scans.
    private(set) var phaseCounts: [Phase: Int] = [:]
    /// Creation order for listing; deleted sessions linger here until `compactOrder`.
    private var order: [(ordinal: UInt64, id: SessionID)] = []
    private var deadInOrder = 0
    private var waiters: [SessionID: [Waiter]] = [:]
    private var subscribers: [SessionID: [Subscriber]] = [:]
    private var ledger: IdempotencyLedger
    private var nextToken: UInt64 = 0
    /// Set by `shutdown`: long-polls and streams are refused from then on.
    private var isShuttingDown = false
    /// Where the idle sweep resumes in `order`, so each pass does a bounded slice of work.
    private var sweepCursor = 0
    private let clock: StoreClock
    private let archive: any SessionArchive
    /// Only sessions with a commit outstanding are here; the map stays as small as the load.
    private var inFlight: [SessionID: InFlight] = [:]
    /// Sessions read since their last write: their last access is saved by `flushTouched`.
    private var touched: Set<SessionID> = []

    init(clock: StoreClock, idempotencyCapacity: Int, archive: any SessionArchive,
         restoring restored: [RestoredSession] = [], keys: [ArchivedKey] = []) {
        self.clock = clock
        self.archive = archive
        var ledger = IdempotencyLedger(capacity: idempotencyCapacity)
        var dropped: [ArchiveChange] = []
        for key in keys {
            for gone in ledger.store(key.answer, for: key.ledgerKey, fingerprint: key.fingerprint, now: key.storedAt) {
                dropped.append(.keyDropped(scope: gone.scope, key: gone.key))
            }
        }
        self.ledger = ledger
        var sessions: [SessionID: Entry] = [:]
        sessions.reserveCapacity(restored.count)
        var phaseCounts: [Phase: Int] = [:]
        for session in restored {
            sessions[session.id] = Entry(sheet: session.sheet, ordinal: session.ordinal, lastAccess: session.lastAccess)
            phaseCounts[session.sheet.phase, default: 0] += 1
        }
        self.sessions = sessions
        self.phaseCounts = phaseCounts
        self.order = restored.map { ($0.ordinal, $0.id) }.sorted { $0.ordinal < $1.ordinal }
        // Keys over the capacity (a smaller --idempotency-keys than last time) leave the file too.
        if !dropped.isEmpty { _ = archive.submit(dropped) }
    }

    var count: Int { sessions.count }

    // MARK: Committing

    /// Submits this turn's changes of session `id` and waits for their commit (or, with no
    /// changes of its own, for the session's newest outstanding commit, which the answer may
    /// reflect); then publishes the session's events up to `version`.
    private func persist(_ changes: [ArchiveChange], of id: SessionID, previousVersion: UInt64, version: UInt64) async {
        let commit: ArchiveCommit?
        if changes.isEmpty {
            commit = inFlight[id]?.commit
        } else {
            let submitted = archive.submit(changes)
            if submitted.isCommitted {
                commit = nil
            } else {
                commit = submitted
                inFlight[id, default: InFlight(commit: submitted, durableVersion: previousVersion)].commit = submitted
            }
        }
        guard let commit else {
            // Nothing outstanding (the volatile archive, or all committed): publish at once.
            if version > previousVersion, let entry = sessions[id] {
                publish(of: id, sheet: entry.sheet, after: previousVersion, through: version)
            }
            return
        }
        await commit.wait()
        // Everything of this session up to `version` is committed now.
        guard var flight = inFlight[id] else { return }   // a later commit already published past us
        let from = flight.durableVersion
        if flight.commit === commit {
            inFlight[id] = nil
        } else if version > from {
            flight.durableVersion = version
            inFlight[id] = flight
        }
        if version > from, let entry = sessions[id] {
            publish(of: id, sheet: entry.sheet, after: from, through: version)
        }
    }

    /// Waits until whatever of session `id` is in memory now is committed, for answers that show it.
    private func settled(_ id: SessionID) async {
        if let commit = inFlight[id]?.commit, !commit.isCommitted { await commit.wait() }
    }

    /// The version event readers may see: the committed one.
    private func durableVersion(_ id: SessionID, _ entry: Entry) -> UInt64 {
        inFlight[id]?.durableVersion ?? entry.sheet.version
    }

    // MARK: Sessions

    /// Adds a new session (and the idempotency answer it was created under, in the same commit),
    /// returning once both are committed.
    func insert(_ sheet: Sheet, id: SessionID, ordinal: UInt64, key: ArchivedKey?) async {
        // Ordinals come from a shared counter; two creates can arrive here out of order, so keep `order` sorted.
        let now = clock.now().millisecondsSince1970
        sessions[id] = Entry(sheet: sheet, ordinal: ordinal, lastAccess: now)
        phaseCounts[sheet.phase, default: 0] += 1
        if let last = order.last, last.ordinal > ordinal {
            let index = insertionIndex(after: ordinal)
            order.insert((ordinal, id), at: index)
        } else {
            order.append((ordinal, id))
        }
        var changes: [ArchiveChange] = [.created(id, ordinal: ordinal, sheet: sheet, lastAccess: now)]
        if let key { changes.append(.keyStored(key)) }
        await persist(changes, of: id, previousVersion: sheet.version, version: sheet.version)
    }

    func snapshot(_ id: SessionID) async throws(StoreError) -> SessionSnapshot {
        guard var entry = sessions[id] else {
            await settled(id)   // a delete that is not committed yet still answers only once it is
            throw StoreError(.sessionNotFound)
        }
        entry.lastAccess = clock.now().millisecondsSince1970
        sessions[id] = entry
        touched.insert(id)
        let snapshot = SessionSnapshot(id: id, sheet: entry.sheet)
        await settled(id)
        return snapshot
    }

    /// The change itself, in one actor turn: the result, the version before it, and what to store.
    private func change(_ action: SheetAction, of id: SessionID, ifMatch: UInt64?)
        -> (result: Result<ActionResult, StoreError>, previousVersion: UInt64, changes: [ArchiveChange]) {
        guard var entry = sessions[id] else { return (.failure(StoreError(.sessionNotFound)), 0, []) }
        let now = clock.now()
        let previous = entry.sheet.version
        entry.lastAccess = now.millisecondsSince1970
        // Body errors (an unknown detent) come before the version precondition, as the API's order says.
        if let ifMatch, ifMatch != entry.sheet.version {
            sessions[id] = entry
            touched.insert(id)
            if case .drag(.detent(let detent)) = action, !entry.sheet.configuration.detents.contains(detent) {
                // Let the sheet produce its own unknown-detent error, which outranks 412.
                var probe = entry.sheet
                do { _ = try probe.apply(action, now: now) } catch where error.code == .unknownDetent {
                    return (.failure(StoreError(.sheet(error))), previous, [])
                } catch {}
            }
            return (.failure(StoreError(.versionMismatch, current: SessionSnapshot(id: id, sheet: entry.sheet))), previous, [])
        }
        let outcome: SheetOutcome
        do {
            outcome = try entry.sheet.apply(action, now: now)
        } catch {
            sessions[id] = entry
            touched.insert(id)
            return (.failure(StoreError(.sheet(error), current: SessionSnapshot(id: id, sheet: entry.sheet))), previous, [])
        }
        let before = sessions[id]?.sheet.phase
        sessions[id] = entry
        if let before, before != entry.sheet.phase {
            phaseCounts[before, default: 0] -= 1
            phaseCounts[entry.sheet.phase, default: 0] += 1
        }
        let result = ActionResult(session: SessionSnapshot(id: id, sheet: entry.sheet), outcome: outcome)
        guard !outcome.events.isEmpty else {
            touched.insert(id)
            return (.success(result), previous, [])
        }
        let changed = ArchiveChange.changed(id, state: ArchivedState(entry.sheet), events: outcome.events,
                                            lastAccess: entry.lastAccess)
        return (.success(result), previous, [changed])
    }

    func apply(_ action: SheetAction, to id: SessionID, ifMatch: UInt64?) async throws(StoreError) -> ActionResult {
        let (result, previous, changes) = change(action, of: id, ifMatch: ifMatch)
        switch result {
        case .success(let done):
            await persist(changes, of: id, previousVersion: previous, version: done.session.sheet.version)
            return done
        case .failure(let error):
            await settled(id)   // a 412 or 409 shows the session as it stands: committed first
            throw error
        }
    }

    /// Applies an action at most once per `Idempotency-Key`: the answer is rendered and stored in
    /// the same actor turn as the change, and both are committed together, so a concurrent retry
    /// or a restart can only ever see both or neither.
    func apply(
        _ action: SheetAction, to id: SessionID, ifMatch: UInt64?,
        idempotency: IdempotencyRequest,
        render: @Sendable (Result<ActionResult, StoreError>) -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer {
        let key = IdempotencyLedger.Key(scope: id, key: idempotency.key)
        let now = clock.now()
        // The ledger comes first: a retry after the session was deleted still gets its first answer.
        switch ledger.lookup(key, fingerprint: idempotency.fingerprint, now: now) {
        case .replay(let answer):
            // The first answer may still be waiting for its commit: replay it only once that is done.
            await settled(id)
            return IdempotentAnswer(answer: answer, replayed: true)
        case .reused:
            throw StoreError(.idempotencyKeyReused)
        case .miss:
            guard let entry = sessions[id] else {
                await settled(id)
                throw StoreError(.sessionNotFound)
            }
            var (result, previous, changes) = change(action, of: id, ifMatch: ifMatch)
            let answer = render(result)
            if answer.status < 500 {
                for gone in ledger.store(answer, for: key, fingerprint: idempotency.fingerprint, now: now) {
                    changes.append(.keyDropped(scope: gone.scope, key: gone.key))
                }
                changes.append(.keyStored(ArchivedKey(scope: id, request: idempotency, answer: answer, storedAt: now)))
            }
            let version = sessions[id]?.sheet.version ?? entry.sheet.version
            if case .failure = result { previous = version }
            await persist(changes, of: id, previousVersion: previous, version: version)
            return IdempotentAnswer(answer: answer, replayed: false)
        }
    }

    func delete(_ id: SessionID, ifMatch: UInt64?) async throws(StoreError) {
        guard let entry = sessions[id] else {
            await settled(id)
            throw StoreError(.sessionNotFound)
        }
        if let ifMatch, ifMatch != entry.sheet.version {
            await settled(id)
            throw StoreError(.versionMismatch, current: SessionSnapshot(id: id, sheet: entry.sheet))
        }
        remove(id, reason: .sessionDeleted)
        await persist([.deleted(id)], of: id, previousVersion: entry.sheet.version, version: entry.sheet.version)
    }

    private func remove(_ id: SessionID, reason: SubscriptionEnd) {
        guard let entry = sessions.removeValue(forKey: id) else { return }
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
    }

    // MARK: Listing

    /// Up to `limit` sessions created after `after` (an ordinal), oldest first, optionally of one
    /// phase, and the outstanding commits the caller must wait for before showing them.
    func list(phase: Phase?, after: UInt64, limit: Int)
        -> (sessions: [(ordinal: UInt64, session: SessionSnapshot)], pending: [ArchiveCommit]) {
        var found: [(ordinal: UInt64, session: SessionSnapshot)] = []
        var pending: [ArchiveCommit] = []
        var index = insertionIndex(after: after)
        while index < order.count, found.count < limit {
            let (ordinal, id) = order[index]
            index += 1
            guard let entry = sessions[id], entry.ordinal == ordinal else { continue }
            if let phase, entry.sheet.phase != phase { continue }
            found.append((ordinal, SessionSnapshot(id: id, sheet: entry.sheet)))
            if let commit = inFlight[id]?.commit { pending.append(commit) }
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

    private func compactOrderIfWasteful() {
        guard deadInOrder > 1024, deadInOrder * 2 > order.count else { return }
        order.removeAll { sessions[$0.id]?.ordinal != $0.ordinal }
        deadInOrder = 0
        sweepCursor = 0
    }

    // MARK: Events

    func events(of id: SessionID, after: UInt64) async throws(StoreError) -> EventsPage {
        guard let entry = sessions[id] else {
            await settled(id)
            throw StoreError(.sessionNotFound)
        }
        touch(id)
        return try page(of: entry.sheet, after: after, through: durableVersion(id, entry))
    }

    /// Reading a session's events names it as much as reading the session: the idle sweep must
    /// not remove a session whose presenter only polls or streams its events.
    private func touch(_ id: SessionID) {
        guard sessions[id] != nil else { return }
        sessions[id]?.lastAccess = clock.now().millisecondsSince1970
        touched.insert(id)
    }

    /// Events with `after < seq <= through`; `through` is the reader's horizon (the durable version).
    private func page(of sheet: Sheet, after: UInt64, through: UInt64) throws(StoreError) -> EventsPage {
        guard after <= through else { throw StoreError(.resumePointAhead(version: through)) }
        switch sheet.events(after: after) {
        case .events(let events):
            // Usually nothing is uncommitted; filter only when the newest event is past the horizon.
            if let newest = events.last, newest.seq > through {
                return EventsPage(events: events.filter { $0.seq <= through }, version: through)
            }
            return EventsPage(events: events, version: through)
        case .expired: throw StoreError(.eventsExpired)
        }
    }

    /// Answers at once when there are committed events after `after`; otherwise parks the caller
    /// (a continuation, no thread) until an event is committed or `timeout` passes.
    func wait(on id: SessionID, after: UInt64, timeout: Duration) async -> Result<WaitOutcome, StoreError> {
        guard !isShuttingDown else { return .failure(StoreError(.shuttingDown)) }
        guard let entry = sessions[id] else {
            await settled(id)
            return .failure(StoreError(.sessionNotFound))
        }
        touch(id)
        let first: EventsPage
        do { first = try page(of: entry.sheet, after: after, through: durableVersion(id, entry)) } catch { return .failure(error) }
        if !first.events.isEmpty || timeout <= .zero { return .success(.events(first)) }
        nextToken += 1
        let token = nextToken
        return await withCheckedContinuation { continuation in
            let timer = Task { [weak self] in
                try? await Task.sleep(for: timeout)
                guard !Task.isCancelled else { return }
                await self?.expireWaiter(token, on: id)
            }
            waiters[id, default: []].append(Waiter(token: token, after: after, continuation: continuation, timer: timer))
        }
    }

    private func expireWaiter(_ token: UInt64, on id: SessionID) {
        guard var list = waiters[id], let index = list.firstIndex(where: { $0.token == token }) else { return }
        let waiter = list.remove(at: index)
        waiters[id] = list.isEmpty ? nil : list
        touch(id)
        let version = sessions[id].map { durableVersion(id, $0) } ?? 0
        waiter.continuation.resume(returning: .success(.timedOut(version: version)))
    }

    /// Starts delivering events after `after` (nil: only new ones) to `subscriber`; the committed
    /// backlog is delivered here, inside the same actor turn, and later events are published as
    /// they commit, so nothing is missed or sent twice.
    func subscribe(_ subscriber: any EventSubscriber, to id: SessionID, after: UInt64?) async throws(StoreError) -> SubscriptionToken {
        guard !isShuttingDown else { throw StoreError(.shuttingDown) }
        guard let entry = sessions[id] else {
            await settled(id)
            throw StoreError(.sessionNotFound)
        }
        touch(id)
        let durable = durableVersion(id, entry)
        let backlog = try page(of: entry.sheet, after: after ?? durable, through: durable)
        nextToken += 1
        let token = SubscriptionToken(session: id, number: nextToken)
        if !backlog.events.isEmpty, !subscriber.receive(backlog.events) { return token }
        subscribers[id, default: []].append(Subscriber(number: token.number, subscriber: subscriber))
        return token
    }

    func unsubscribe(_ token: SubscriptionToken) {
        guard var list = subscribers[token.session] else { return }
        list.removeAll { $0.number == token.number }
        subscribers[token.session] = list.isEmpty ? nil : list
    }

    /// Hands committed events `after < seq <= through` to long-polls and streams, in order.
    private func publish(of id: SessionID, sheet: Sheet, after: UInt64, through: UInt64) {
        let parked = waiters.removeValue(forKey: id)
        let list = subscribers[id]
        guard parked != nil || list != nil else { return }
        if let parked {
            for waiter in parked {
                waiter.timer.cancel()
                let result: Result<WaitOutcome, StoreError>
                do { result = .success(.events(try page(of: sheet, after: waiter.after, through: through))) } catch { result = .failure(error) }
                waiter.continuation.resume(returning: result)
            }
        }
        if var list {
            let events: [SheetEvent]
            switch sheet.events(after: after) {
            case .events(let all): events = all.filter { $0.seq <= through }
            case .expired: events = sheet.events.filter { $0.seq <= through }
            }
            guard !events.isEmpty else { return }
            list.removeAll { !$0.subscriber.receive(events) }
            subscribers[id] = list.isEmpty ? nil : list
        }
    }

    // MARK: Housekeeping

    /// Removes up to `budget` scanned sessions idle since before `cutoff`; returns how many were
    /// removed and whether the pass reached the end. Sessions someone is waiting on are kept.
    /// The removals are submitted without waiting: an expired session that a crash brings back is
    /// simply swept again.
    func sweep(idleBefore cutoff: Int64, budget: Int) -> (removed: Int, finished: Bool) {
        var removed: [ArchiveChange] = []
        var scanned = 0
        while sweepCursor < order.count, scanned < budget {
            let (ordinal, id) = order[sweepCursor]
            sweepCursor += 1
            scanned += 1
            guard let entry = sessions[id], entry.ordinal == ordinal, entry.lastAccess < cutoff,
                  waiters[id] == nil, subscribers[id] == nil, inFlight[id] == nil
            else { continue }
            remove(id, reason: .sessionDeleted)
            removed.append(.deleted(id))
        }
        if !removed.isEmpty { _ = archive.submit(removed) }
        let finished = sweepCursor >= order.count
        if finished { sweepCursor = 0 }
        ledger.expire(now: clock.now())
        return (removed.count, finished)
    }

    /// Saves the last access of sessions that were only read since their last write, so the idle
    /// sweep after a restart measures from the right moment. Returns the commit to wait for.
    func flushTouched() -> ArchiveCommit? {
        guard !touched.isEmpty else { return nil }
        var changes: [ArchiveChange] = []
        changes.reserveCapacity(touched.count)
        for id in touched {
            if let entry = sessions[id] { changes.append(.touched(id, lastAccess: entry.lastAccess)) }
        }
        touched.removeAll(keepingCapacity: false)
        return changes.isEmpty ? nil : archive.submit(changes)
    }

    /// Releases everyone waiting or streaming and refuses new waits; actions still go through, so
    /// requests already in flight during a graceful stop finish normally.
    func shutdown() {
        isShuttingDown = true
        for (_, list) in waiters {
            for waiter in list {
                waiter.timer.cancel()
                waiter.continuation.resume(returning: .failure(StoreError(.shuttingDown)))
            }
        }
        waiters = [:]
        for (_, list) in subscribers {
            for slot in list { slot.subscriber.ended(.shuttingDown) }
        }
        subscribers = [:]
    }
}
