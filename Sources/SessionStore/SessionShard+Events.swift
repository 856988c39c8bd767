import SheetCore
import Timekeeping

/// A shard's readers of events: event pages, long-poll waiters and stream subscribers. They only
/// ever see committed events (up to the session's durable version).
extension SessionShard {
    func events(of id: SessionID, tenant: Tenant, after: UInt64) async throws(StoreError) -> EventsPage {
        catchUp(id)
        guard let entry = entry(id, of: tenant) else {
            try await settled(id)
            throw StoreError(.sessionNotFound)
        }
        touch(id)
        return try page(of: entry.sheet, after: after, through: durableVersion(id, entry))
    }

    /// Reading a session's events names it as much as reading the session: the idle sweep must
    /// not remove a session whose presenter only polls or streams its events.
    func touch(_ id: SessionID) {
        guard sessions[id] != nil else { return }
        sessions[id]?.lastAccess = clock.now().millisecondsSince1970
        touched.insert(id)
    }

    /// Events with `after < seq <= through`; `through` is the reader's horizon (the durable version).
    func page(of sheet: Sheet, after: UInt64, through: UInt64) throws(StoreError) -> EventsPage {
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
    /// (a continuation, no thread) until an event is committed or `timeout` passes on `clock`.
    ///
    /// Every `await` may end the actor's turn (reentrancy), `withCheckedContinuation` included:
    /// its isolated parameter makes the runtime switch to this shard again, and a task whose
    /// executor preference is not the one the job runs with (a request's `RequestContext`) is
    /// queued behind whatever arrived meanwhile. So what decides between answering and parking
    /// is read inside the continuation's body, in the same turn as the parking: a change, a
    /// delete or a shutdown that slips in before it is seen there, not missed.
    func wait(on id: SessionID, of tenant: Tenant, after: UInt64, timeout: Duration,
              clock: any ServiceClock) async -> Result<WaitOutcome, StoreError> {
        switch waitDecision(of: id, tenant: tenant, after: after, timeout: timeout) {
        case .answer(let outcome):
            return outcome
        case .unknownSession:
            do { try await settled(id) } catch { return .failure(error) }
            return .failure(StoreError(.sessionNotFound))
        case .park:
            break
        }
        let deadline = clock.now + timeout
        return await withCheckedContinuation { continuation in
            switch waitDecision(of: id, tenant: tenant, after: after, timeout: timeout) {
            case .answer(let outcome):
                continuation.resume(returning: outcome)
            case .unknownSession:
                // Deleted (or expired) since the check above: answered as `remove` answers waiters.
                continuation.resume(returning: .failure(StoreError(.sessionNotFound)))
            case .park:
                nextToken += 1
                let token = nextToken
                let timer = Task { [weak self] in
                    do { try await clock.sleep(until: deadline) } catch { return }   // cancelled: answered
                    guard !Task.isCancelled else { return }
                    await self?.expireWaiter(token, on: id)
                }
                waiters[id, default: []].append(Waiter(token: token, after: after, continuation: continuation, timer: timer))
                arrangePublication(of: id)
            }
        }
    }

    /// What a long-poll gets now, without waiting.
    private enum WaitDecision {
        case answer(Result<WaitOutcome, StoreError>)
        case unknownSession
        case park
    }

    private func waitDecision(of id: SessionID, tenant: Tenant, after: UInt64, timeout: Duration) -> WaitDecision {
        guard !isShuttingDown else { return .answer(.failure(StoreError(.shuttingDown))) }
        catchUp(id)
        guard let entry = entry(id, of: tenant) else { return .unknownSession }
        touch(id)
        let first: EventsPage
        do { first = try page(of: entry.sheet, after: after, through: durableVersion(id, entry)) } catch { return .answer(.failure(error)) }
        if !first.events.isEmpty || timeout <= .zero { return .answer(.success(.events(first))) }
        return .park
    }

    func expireWaiter(_ token: UInt64, on id: SessionID) {
        guard var list = waiters[id], let index = list.firstIndex(where: { $0.token == token }) else { return }
        let waiter = list.remove(at: index)
        waiters[id] = list.isEmpty ? nil : list
        touch(id)
        catchUp(id)
        let version = sessions[id].map { durableVersion(id, $0) } ?? 0
        waiter.continuation.resume(returning: .success(.timedOut(version: version)))
    }

    /// Starts delivering events after `after` (nil: only new ones) to `subscriber`; the committed
    /// backlog is delivered here, inside the same actor turn, and later events are published as
    /// they commit, so nothing is missed or sent twice.
    func subscribe(_ subscriber: any EventSubscriber, to id: SessionID, of tenant: Tenant, after: UInt64?) async throws(StoreError) -> SubscriptionToken {
        guard !isShuttingDown else { throw StoreError(.shuttingDown) }
        catchUp(id)
        guard let entry = entry(id, of: tenant) else {
            try await settled(id)
            throw StoreError(.sessionNotFound)
        }
        touch(id)
        let durable = durableVersion(id, entry)
        let backlog = try page(of: entry.sheet, after: after ?? durable, through: durable)
        nextToken += 1
        let token = SubscriptionToken(session: id, number: nextToken)
        if !backlog.events.isEmpty, !subscriber.receive(backlog.events) { return token }
        subscribers[id, default: []].append(Subscriber(number: token.number, subscriber: subscriber))
        arrangePublication(of: id)
        return token
    }

    func unsubscribe(_ token: SubscriptionToken) {
        guard var list = subscribers[token.session] else { return }
        list.removeAll { $0.number == token.number }
        subscribers[token.session] = list.isEmpty ? nil : list
    }

    /// Hands committed events `after < seq <= through` to long-polls and streams, in order.
    /// Whether any session of the shard has a long-poll waiting or a stream attached.
    var hasListeners: Bool { !waiters.isEmpty || !subscribers.isEmpty }

    func publish(of id: SessionID, sheet: Sheet, after: UInt64, through: UInt64) {
        guard hasListeners else { return }
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
}
