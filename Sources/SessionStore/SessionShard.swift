import SheetCore

/// One actor's share of the sessions (picked by id), so requests on different sessions do not
/// queue behind one another. It is the single writer of each of its sessions.
actor SessionShard {
    struct Entry {
        var sheet: Sheet
        let ordinal: UInt64
        /// Wall-clock milliseconds of the last request that named this session, for the idle sweep.
        var lastAccess: Int64
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

    init(clock: StoreClock, idempotencyCapacity: Int) {
        self.clock = clock
        self.ledger = IdempotencyLedger(capacity: idempotencyCapacity)
    }

    var count: Int { sessions.count }

    // MARK: Sessions

    func insert(_ sheet: Sheet, id: SessionID, ordinal: UInt64) {
        // Ordinals come from a shared counter; two creates can arrive here out of order, so keep `order` sorted.
        sessions[id] = Entry(sheet: sheet, ordinal: ordinal, lastAccess: clock.now().millisecondsSince1970)
        phaseCounts[sheet.phase, default: 0] += 1
        if let last = order.last, last.ordinal > ordinal {
            let index = insertionIndex(after: ordinal)
            order.insert((ordinal, id), at: index)
        } else {
            order.append((ordinal, id))
        }
    }

    func snapshot(_ id: SessionID) throws(StoreError) -> SessionSnapshot {
        guard var entry = sessions[id] else { throw StoreError(.sessionNotFound) }
        entry.lastAccess = clock.now().millisecondsSince1970
        sessions[id] = entry
        return SessionSnapshot(id: id, sheet: entry.sheet)
    }

    func apply(_ action: SheetAction, to id: SessionID, ifMatch: UInt64?) throws(StoreError) -> ActionResult {
        guard var entry = sessions[id] else { throw StoreError(.sessionNotFound) }
        let now = clock.now()
        entry.lastAccess = now.millisecondsSince1970
        // Body errors (an unknown detent) come before the version precondition, as the API's order says.
        if let ifMatch, ifMatch != entry.sheet.version {
            if case .drag(.detent(let detent)) = action, !entry.sheet.configuration.detents.contains(detent) {
                // Let the sheet produce its own unknown-detent error, which outranks 412.
                var probe = entry.sheet
                do { _ = try probe.apply(action, now: now) } catch where error.code == .unknownDetent {
                    throw StoreError(.sheet(error))
                } catch {}
            }
            sessions[id] = entry
            throw StoreError(.versionMismatch, current: SessionSnapshot(id: id, sheet: entry.sheet))
        }
        let outcome: SheetOutcome
        do {
            outcome = try entry.sheet.apply(action, now: now)
        } catch {
            sessions[id] = entry
            throw StoreError(.sheet(error), current: SessionSnapshot(id: id, sheet: entry.sheet))
        }
        let before = sessions[id]?.sheet.phase
        sessions[id] = entry
        if let before, before != entry.sheet.phase {
            phaseCounts[before, default: 0] -= 1
            phaseCounts[entry.sheet.phase, default: 0] += 1
        }
        if !outcome.events.isEmpty { publish(outcome.events, of: id, sheet: entry.sheet) }
        return ActionResult(session: SessionSnapshot(id: id, sheet: entry.sheet), outcome: outcome)
    }

    /// Applies an action at most once per `Idempotency-Key`: the answer is rendered and stored in
    /// the same actor turn as the change, so a concurrent retry can only ever see both or neither.
    func apply(
        _ action: SheetAction, to id: SessionID, ifMatch: UInt64?,
        idempotency: IdempotencyRequest,
        render: @Sendable (Result<ActionResult, StoreError>) -> StoredAnswer
    ) throws(StoreError) -> IdempotentAnswer {
        let key = IdempotencyLedger.Key(scope: id, key: idempotency.key)
        let now = clock.now()
        // The ledger comes first: a retry after the session was deleted still gets its first answer.
        switch ledger.lookup(key, fingerprint: idempotency.fingerprint, now: now) {
        case .replay(let answer):
            return IdempotentAnswer(answer: answer, replayed: true)
        case .reused:
            throw StoreError(.idempotencyKeyReused)
        case .miss:
            guard sessions[id] != nil else { throw StoreError(.sessionNotFound) }
            let result: Result<ActionResult, StoreError>
            do { result = .success(try apply(action, to: id, ifMatch: ifMatch)) } catch { result = .failure(error) }
            let answer = render(result)
            if answer.status < 500 {
                ledger.store(answer, for: key, fingerprint: idempotency.fingerprint, now: now)
            }
            return IdempotentAnswer(answer: answer, replayed: false)
        }
    }

    func delete(_ id: SessionID, ifMatch: UInt64?) throws(StoreError) {
        guard let entry = sessions[id] else { throw StoreError(.sessionNotFound) }
        if let ifMatch, ifMatch != entry.sheet.version {
            throw StoreError(.versionMismatch, current: SessionSnapshot(id: id, sheet: entry.sheet))
        }
        remove(id, reason: .sessionDeleted)
    }

    private func remove(_ id: SessionID, reason: SubscriptionEnd) {
        guard let entry = sessions.removeValue(forKey: id) else { return }
        phaseCounts[entry.sheet.phase, default: 0] -= 1
        deadInOrder += 1
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

    /// Up to `limit` sessions created after `after` (an ordinal), oldest first, optionally of one phase.
    func list(phase: Phase?, after: UInt64, limit: Int) -> [(ordinal: UInt64, session: SessionSnapshot)] {
        var found: [(ordinal: UInt64, session: SessionSnapshot)] = []
        var index = insertionIndex(after: after)
        while index < order.count, found.count < limit {
            let (ordinal, id) = order[index]
            index += 1
            guard let entry = sessions[id], entry.ordinal == ordinal else { continue }
            if let phase, entry.sheet.phase != phase { continue }
            found.append((ordinal, SessionSnapshot(id: id, sheet: entry.sheet)))
        }
        return found
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

    func events(of id: SessionID, after: UInt64) throws(StoreError) -> EventsPage {
        guard let entry = sessions[id] else { throw StoreError(.sessionNotFound) }
        touch(id)
        return try page(of: entry.sheet, after: after)
    }

    /// Reading a session's events names it as much as reading the session: the idle sweep must
    /// not remove a session whose presenter only polls or streams its events.
    private func touch(_ id: SessionID) {
        sessions[id]?.lastAccess = clock.now().millisecondsSince1970
    }

    private func page(of sheet: Sheet, after: UInt64) throws(StoreError) -> EventsPage {
        guard after <= sheet.version else { throw StoreError(.resumePointAhead(version: sheet.version)) }
        switch sheet.events(after: after) {
        case .events(let events): return EventsPage(events: events, version: sheet.version)
        case .expired: throw StoreError(.eventsExpired)
        }
    }

    /// Answers at once when there are events after `after`; otherwise parks the caller (a
    /// continuation, no thread) until an event arrives or `timeout` passes.
    func wait(on id: SessionID, after: UInt64, timeout: Duration) async -> Result<WaitOutcome, StoreError> {
        guard !isShuttingDown else { return .failure(StoreError(.shuttingDown)) }
        guard let entry = sessions[id] else { return .failure(StoreError(.sessionNotFound)) }
        touch(id)
        let first: EventsPage
        do { first = try page(of: entry.sheet, after: after) } catch { return .failure(error) }
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
        let version = sessions[id]?.sheet.version ?? 0
        waiter.continuation.resume(returning: .success(.timedOut(version: version)))
    }

    /// Starts delivering events after `after` (nil: only new ones) to `subscriber`; the backlog is
    /// delivered here, inside the same actor turn, so nothing can slip in between.
    func subscribe(_ subscriber: any EventSubscriber, to id: SessionID, after: UInt64?) throws(StoreError) -> SubscriptionToken {
        guard !isShuttingDown else { throw StoreError(.shuttingDown) }
        guard let entry = sessions[id] else { throw StoreError(.sessionNotFound) }
        touch(id)
        let backlog = try page(of: entry.sheet, after: after ?? entry.sheet.version)
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
        touch(token.session)
    }

    private func publish(_ events: [SheetEvent], of id: SessionID, sheet: Sheet) {
        if let parked = waiters.removeValue(forKey: id) {
            for waiter in parked {
                waiter.timer.cancel()
                let result: Result<WaitOutcome, StoreError>
                do { result = .success(.events(try page(of: sheet, after: waiter.after))) } catch { result = .failure(error) }
                waiter.continuation.resume(returning: result)
            }
        }
        if var list = subscribers[id] {
            list.removeAll { !$0.subscriber.receive(events) }
            subscribers[id] = list.isEmpty ? nil : list
        }
    }

    // MARK: Housekeeping

    /// Removes up to `budget` scanned sessions idle since before `cutoff`; returns how many were
    /// removed and whether the pass reached the end. Sessions someone is waiting on are kept.
    func sweep(idleBefore cutoff: Int64, budget: Int) -> (removed: Int, finished: Bool) {
        var removed = 0
        var scanned = 0
        while sweepCursor < order.count, scanned < budget {
            let (ordinal, id) = order[sweepCursor]
            sweepCursor += 1
            scanned += 1
            guard let entry = sessions[id], entry.ordinal == ordinal, entry.lastAccess < cutoff,
                  waiters[id] == nil, subscribers[id] == nil
            else { continue }
            remove(id, reason: .sessionDeleted)
            removed += 1
        }
        let finished = sweepCursor >= order.count
        if finished { sweepCursor = 0 }
        ledger.expire(now: clock.now())
        return (removed, finished)
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
