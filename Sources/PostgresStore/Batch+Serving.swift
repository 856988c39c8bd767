import SessionStore
import SheetCore

/// Step 2 of a batch: each job served on the loaded rows, in arrival order, with the same rules
/// (and the same order of checks) as the in-memory store's shards.
extension Batch {
    mutating func serve() -> [Reply] {
        var replies: [Reply] = []
        replies.reserveCapacity(jobs.count)
        for (index, job) in jobs.enumerated() { replies.append(serve(job.request, index: index)) }
        return replies
    }

    private mutating func serve(_ request: Request, index: Int) -> Reply {
        switch request {
        case .create(let configuration, let parent, let tenant, let id, let once):
            return create(configuration, over: parent, for: tenant, id: id, once: once)
        case .read(let id, let tenant):
            guard let row = rows[id], row.tenant == tenant, row.change != .deleted else { return .failed(StoreError(.sessionNotFound)) }
            read(id, row)
            return .snapshot(SessionSnapshot(id: id, sheet: row.sheet))
        case .apply(let action, let id, let tenant, let ifMatch, let once):
            return apply(action, to: id, of: tenant, ifMatch: ifMatch, once: once)
        case .delete(let id, let tenant, let ifMatch):
            guard let row = rows[id], row.tenant == tenant, row.change != .deleted else { return .failed(StoreError(.sessionNotFound)) }
            if let ifMatch, !ifMatch.admits(row.sheet.version) {
                return .failed(StoreError(.versionMismatch, current: SessionSnapshot(id: id, sheet: row.sheet)))
            }
            return .deleted(deleteChain(from: id, row))
        case .events(let id, let tenant, let after):
            return eventsPage(of: id, tenant: tenant, after: after)
        case .list(_, _, _, let limit):
            let found = lists[index] ?? []
            let page = found.prefix(limit)
            return .page(SessionPage(sessions: page.map { SessionSnapshot(id: $0.0, sheet: $0.1.sheet) },
                                     next: found.count > limit ? page.last?.1.ordinal : nil))
        case .statistics:
            return .statistics(phases: statistics.phases, tenants: statistics.tenants)
        case .sweep:
            return .failed(StoreError(.unavailable(reason: "a sweep is not served in a batch")))
        }
    }

    /// Notes a read, for the sweep (and at once when the stored last access is stale).
    private mutating func read(_ id: SessionID, _ row: Row) {
        touched.append(id)
        if row.change == .none, milliseconds - row.lastAccess > limits.touchSlackMilliseconds { staleReads.append(id) }
    }

    private enum Lookup {
        case miss
        case replay(StoredAnswer)
        case reused
    }

    /// The first answer under a key, unless the key is past its lifetime.
    private func lookup(_ name: KeyName, _ request: IdempotencyRequest) -> Lookup {
        guard let stored = keys[name], milliseconds - stored.storedAt < limits.keyLifetimeMilliseconds else { return .miss }
        let (value, check) = request.fingerprintHalves
        return stored.value == value && stored.check == check ? .replay(stored.answer) : .reused
    }

    /// Keeps an answer under its key, in the same transaction as the change it describes; a
    /// 5xx is not kept (it promised nothing, so a retry must be served afresh).
    private mutating func remember(_ answer: StoredAnswer, _ name: KeyName, _ request: IdempotencyRequest) {
        guard answer.status < 500 else { return }
        let (value, check) = request.fingerprintHalves
        keys[name] = StoredKey(value: value, check: check, answer: answer, storedAt: milliseconds, isNew: true)
    }

    private mutating func create(_ configuration: SheetConfiguration, over parent: SessionID?, for tenant: Tenant,
                                 id: SessionID, once: Once<SessionSnapshot>?) -> Reply {
        let name = KeyName(scope: "", key: once?.request.key ?? "")
        if let once {
            switch lookup(name, once.request) {
            case .replay(let answer): return .answer(IdempotentAnswer(answer: answer, replayed: true))
            case .reused: return .failed(StoreError(.idempotencyKeyReused))
            case .miss: break
            }
        }
        var refusal: StoreError?
        if sessionCount >= limits.maxSessions {
            refusal = StoreError(.capacityExceeded(limit: limits.maxSessions))
        } else if let limit = limits.maxSessionsPerTenant, tenantCounts[tenant, default: 0] >= limit {
            refusal = StoreError(.tenantCapacityExceeded(limit: limit))
        }
        if let refusal {
            guard let once else { return .failed(refusal) }
            let answer = once.render(.failure(refusal))
            remember(answer, name, once.request)
            return .answer(IdempotentAnswer(answer: answer, replayed: false))
        }
        let result: Result<SessionSnapshot, StoreError>
        if let parent {
            result = present(id, configuration: configuration, over: parent, for: tenant)
        } else {
            let sheet = Sheet(configuration: configuration, now: now)
            admit(sheet, id: id, root: id.description, tenant: tenant)
            result = .success(SessionSnapshot(id: id, sheet: sheet))
        }
        guard let once else {
            switch result {
            case .success(let snapshot): return .snapshot(snapshot)
            case .failure(let error): return .failed(error)
            }
        }
        let answer = once.render(result)
        remember(answer, name, once.request)
        return .answer(IdempotentAnswer(answer: answer, replayed: false))
    }

    private mutating func apply(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?,
                                once: Once<ActionResult>?) -> Reply {
        let name = KeyName(scope: id.description, key: once?.request.key ?? "")
        // The key comes first: a retry after the session was deleted still gets its first answer.
        if let once {
            switch lookup(name, once.request) {
            case .replay(let answer): return .answer(IdempotentAnswer(answer: answer, replayed: true))
            case .reused: return .failed(StoreError(.idempotencyKeyReused))
            case .miss: break
            }
        }
        guard var row = rows[id], row.tenant == tenant, row.change != .deleted else { return .failed(StoreError(.sessionNotFound)) }
        rows[id] = nil   // changed as `row` without a second reference to its sheet, then put back
        let result = change(&row, id: id, by: action, ifMatch: ifMatch)
        rows[id] = row
        guard let once else {
            switch result {
            case .success(let done): return .action(done)
            case .failure(let error): return .failed(error)
            }
        }
        let answer = once.render(result)
        remember(answer, name, once.request)
        return .answer(IdempotentAnswer(answer: answer, replayed: false))
    }

    /// The action on one row: the version precondition after the body's own errors (the API's
    /// order), then SheetCore's reducer.
    private mutating func change(_ row: inout Row, id: SessionID, by action: SheetAction, ifMatch: AcceptedVersions?) -> Result<ActionResult, StoreError> {
        row.lastAccess = milliseconds
        if row.change == .none { row.change = .touched }
        if let ifMatch, !ifMatch.admits(row.sheet.version) {
            if let error = row.sheet.requestError(in: action) { return .failure(StoreError(.sheet(error))) }
            return .failure(StoreError(.versionMismatch, current: SessionSnapshot(id: id, sheet: row.sheet)))
        }
        let step: ChainOutcome
        do {
            step = try SheetChain.apply(action, to: id, row.sheet, in: sheets(of: row.tenant, besides: id), now: now)
        } catch {
            return .failure(StoreError(.sheet(error), current: SessionSnapshot(id: id, sheet: row.sheet)))
        }
        var others: [ChainChange] = []
        for change in step.changes {
            if change.id == id {
                row.sheet = change.sheet
                if !change.events.isEmpty {
                    row.newEvents += change.events
                    if row.change != .created { row.change = .changed }
                }
            } else {
                record(change)
                others.append(change)
            }
        }
        return .success(ActionResult(session: SessionSnapshot(id: id, sheet: row.sheet), outcome: step.outcome, chain: others))
    }

    /// Committed events only: what was committed before this group, as the in-memory store
    /// shows event readers only committed events.
    private mutating func eventsPage(of id: SessionID, tenant: Tenant, after: UInt64?) -> Reply {
        guard let row = rows[id], row.tenant == tenant, row.change != .deleted, row.change != .created else {
            return .failed(StoreError(.sessionNotFound))
        }
        read(id, row)
        let version = row.committedVersion
        guard let after else { return .events(EventsPage(events: [], version: version)) }
        guard after <= version else { return .failed(StoreError(.resumePointAhead(version: version))) }
        let retained = UInt64(Sheet.retainedEvents)
        if version > retained, after < version - retained { return .failed(StoreError(.eventsExpired)) }
        let page = (events[id] ?? []).filter { $0.seq > after && $0.seq <= version }
        return .events(EventsPage(events: page, version: version))
    }
}
