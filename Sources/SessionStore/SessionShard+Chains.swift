import SheetCore

/// Sheets over sheets on a shard.
///
/// How a change to several sessions stays one change: a chain lives on ONE shard. A child's id
/// takes its parent's routing bits (`SessionID.random(inChainOf:)`), so every session of a chain
/// is placed on its root's shard, now and after any restart, with any shard count. A cascade is
/// then worked out by `SheetChain` (pure), written into memory in one actor turn (no reader runs
/// in between), handed to the archive as one submit (one transaction), and its events are
/// published in one actor turn after that commit. The alternative, a protocol between two
/// shards, would need both actors held across an await plus a recovery rule for a crash
/// between them, for what is a few sessions that are nearly always used together anyway.
extension SessionShard {
    /// A session of `tenant`'s, for `SheetChain`'s look-ups: another tenant's is none.
    func sheet(_ id: SessionID, of tenant: Tenant) -> Sheet? {
        guard let entry = sessions[id], entry.tenant == tenant else { return nil }
        return entry.sheet
    }

    /// `action` on a sheet in a chain: `SheetChain` applies it to the sheets above and below as
    /// well, and every changed sheet is written back in this actor turn. Returns the target's
    /// outcome and the other sessions' changes. The caller counts the target's phase change.
    func chainStep(_ action: SheetAction, of id: SessionID, tenant: Tenant, now: Timestamp)
        throws(SheetError) -> (SheetOutcome, [ChainChange]) {
        let step = try SheetChain.apply(action, to: id, sessions[id]!.sheet, in: { sheet($0, of: tenant) }, now: now)
        var others: [ChainChange] = []
        for change in step.changes {
            guard let index = sessions.index(forKey: change.id) else { continue }
            let before = sessions[at: index].sheet.phase
            sessions[at: index].sheet = change.sheet
            guard change.id != id else { continue }
            counted(from: before, to: change.sheet.phase)
            others.append(change)
        }
        return (step.outcome, others)
    }

    func counted(from before: Phase, to after: Phase) {
        guard before != after else { return }
        phaseCounts[before, default: 0] -= 1
        phaseCounts[after, default: 0] += 1
    }

    /// Creates session `id` presented over `parentID` (which records `covered`), both in one
    /// commit, with the idempotency answer `recording` renders when there is a key. Returns the
    /// result and that answer.
    func insert(_ configuration: SheetConfiguration, id: SessionID, over parentID: SessionID, ordinal: UInt64,
                tenant: Tenant, recording: ChildRecording?) async -> (Result<SessionSnapshot, StoreError>, StoredAnswer?) {
        let now = clock.now()
        var changes: [ArchiveChange] = []
        var others: [CommittedWith] = []
        var result: Result<SessionSnapshot, StoreError>
        do {
            let step = try SheetChain.present(id, configuration: configuration, over: parentID,
                                              in: { sheet($0, of: tenant) }, now: now)
            for change in step.changes {
                if change.id == id {
                    changes.append(admit(change.sheet, id: id, ordinal: ordinal, tenant: tenant))
                } else if let index = sessions.index(forKey: change.id) {
                    sessions[at: index].sheet = change.sheet
                    sessions[at: index].lastAccess = now.millisecondsSince1970
                    changes.append(.changed(change.id, ordinal: sessions[at: index].ordinal, state: ArchivedState(change.sheet),
                                            events: change.events, lastAccess: now.millisecondsSince1970))
                    others.append(CommittedWith(change))
                }
            }
            children[parentID, default: []].append(id)
            result = .success(SessionSnapshot(id: id, sheet: sessions[id]!.sheet))
        } catch {
            result = .failure(StoreError(.sheet(error)))
        }
        var answer: StoredAnswer?
        if let recording {
            let rendered = recording.render(result)
            answer = rendered
            if rendered.status < 500 {
                changes.append(.keyStored(ArchivedKey(scope: nil, request: recording.request, answer: rendered,
                                                      storedAt: now)))
            }
        }
        guard !changes.isEmpty else { return (result, answer) }
        let version = sessions[id]?.sheet.version ?? 1
        do {
            try await persist(changes, of: id, previousVersion: version, version: version,
                              others: others)
        } catch {
            // Not stored: not acknowledged.
            return (.failure(error), recording.map { $0.render(.failure(error)) })
        }
        return (result, answer)
    }

    /// Deletes `id` and every session presented over it, descendants first, and uncovers the
    /// sheet below when `id` covered it: all in one commit.
    func deleteChain(from id: SessionID, _ entry: Entry, tenant: Tenant) async throws(StoreError) -> DeletedSessions {
        let now = clock.now()
        let doomed = SheetChain.removalOrder(of: id) { children[$0] ?? [] }
        let below = SheetChain.delete(id, entry.sheet, in: { sheet($0, of: tenant) }, now: now)
        var changes: [ArchiveChange] = []
        var others: [CommittedWith] = []
        for gone in doomed {
            guard let removed = remove(gone, reason: .sessionDeleted) else { continue }
            changes.append(.deleted(gone, ordinal: removed.ordinal))
            let version = removed.sheet.version
            if gone != id { others.append(CommittedWith(id: gone, previousVersion: version, version: version)) }
        }
        for change in below {
            guard let index = sessions.index(forKey: change.id) else { continue }
            sessions[at: index].sheet = change.sheet
            changes.append(.changed(change.id, ordinal: sessions[at: index].ordinal, state: ArchivedState(change.sheet),
                                    events: change.events, lastAccess: sessions[at: index].lastAccess))
            others.append(CommittedWith(change))
        }
        try await persist(changes, of: id, previousVersion: entry.sheet.version, version: entry.sheet.version, others: others)
        return DeletedSessions(count: doomed.count, events: below.flatMap(\.events))
    }

    /// Removes the chain `id` belongs to when every session of it has been idle since before
    /// `cutoff` and none is waited on, streamed or committing; returns what to store. A chain
    /// expires as one: no sheet is left presented over a removed one, nor a parent without the
    /// children it lists.
    func sweepChain(of id: SessionID, idleBefore cutoff: Int64) -> [(change: ArchiveChange, tenant: Tenant)] {
        let root = SheetChain.root(of: id) { sessions[$0]?.sheet }
        // Decided once per chain, when the sweep reaches its root (created first, so met first).
        guard root == id else { return [] }
        let members = SheetChain.removalOrder(of: root) { children[$0] ?? [] }
        for member in members {
            catchUp(member)
            guard let entry = sessions[member], entry.lastAccess < cutoff,
                  waiters[member] == nil, subscribers[member] == nil, inFlight[member] == nil else { return [] }
        }
        var removed: [(change: ArchiveChange, tenant: Tenant)] = []
        for member in members {
            guard let entry = remove(member, reason: .sessionDeleted) else { continue }
            removed.append((.deleted(member, ordinal: entry.ordinal), entry.tenant))
        }
        return removed
    }
}

/// How an idempotent create over a parent renders the answer stored with its commit.
struct ChildRecording: Sendable {
    let request: IdempotencyRequest
    let render: @Sendable (Result<SessionSnapshot, StoreError>) -> StoredAnswer
}
