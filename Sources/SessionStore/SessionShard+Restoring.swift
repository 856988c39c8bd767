import SheetCore

/// A shard's share of what the archive held, taken either when the shard is made or, for a
/// store that serves while start-up still reads the archive, once the read is done (`adopt`).
extension SessionShard {
    struct Contents {
        var sessions: SessionTable<Entry>
        var phaseCounts: [Phase: Int]
        var order: [(ordinal: UInt64, id: SessionID)]
        var children: [SessionID: [SessionID]]
    }

    /// The shard's tables for `restored`, and `keys` stored in `ledger`. Keys over the capacity
    /// (a smaller --idempotency-keys than last time) leave the file too.
    static func contents(_ restored: [RestoredSession], keys: [ArchivedKey], ledger: inout IdempotencyLedger,
                         archive: any SessionArchive) -> Contents {
        var dropped: [ArchiveChange] = []
        for key in keys {
            for gone in ledger.store(key.answer, for: key.ledgerKey, fingerprint: key.fingerprint, now: key.storedAt) {
                dropped.append(.keyDropped(scope: gone.scope, key: gone.key))
            }
        }
        if !dropped.isEmpty { _ = archive.submit(dropped) }
        let sessions = SessionTable(restored, id: \.id) {
            Entry(sheet: $0.sheet, ordinal: $0.ordinal, lastAccess: $0.lastAccess, tenant: $0.tenant)
        }
        var phaseCounts: [Phase: Int] = [:]
        var children: [SessionID: [SessionID]] = [:]
        for session in restored {
            phaseCounts[session.sheet.phase, default: 0] += 1
            if let parent = session.sheet.parent { children[parent, default: []].append(session.id) }
        }
        let order: [(ordinal: UInt64, id: SessionID)] = restored.map { ($0.ordinal, $0.id) }.sorted { $0.ordinal < $1.ordinal }
        return Contents(sessions: sessions, phaseCounts: phaseCounts, order: order, children: children)
    }

    /// Takes the sessions and keys a restore read back. The store lets nothing reach a shard
    /// before its restore is done, so the shard holds nothing yet and simply takes them.
    func adopt(_ restored: [RestoredSession], keys: [ArchivedKey]) {
        precondition(sessions.isEmpty && order.isEmpty, "a shard adopted restored sessions after serving")
        let contents = Self.contents(restored, keys: keys, ledger: &ledger, archive: archive)
        sessions = contents.sessions
        phaseCounts = contents.phaseCounts
        order = contents.order
        children = contents.children
    }
}
