import SheetCore

extension SessionStore {
    /// What the archive holds, split the way the shards hold it.
    struct Partition {
        var sessions: [[RestoredSession]]
        var keys: [[ArchivedKey]]
        var globalKeys: [ArchivedKey] = []
        var highestOrdinal: UInt64
        var count: Int
        var tenantCounts: [Tenant: Int] = [:]
    }

    static func partition(_ contents: ArchiveContents, _ configuration: Configuration) -> Partition {
        let shardCount = max(1, configuration.shardCount)
        let lifetime = IdempotencyLedger(capacity: 1).lifetimeMilliseconds
        let oldestKept = configuration.clock.now().millisecondsSince1970 - lifetime
        var parts = Partition(sessions: [[RestoredSession]](repeating: [], count: shardCount),
                              keys: [[ArchivedKey]](repeating: [], count: shardCount),
                              highestOrdinal: contents.highestOrdinal, count: contents.sessions.count)
        for session in contents.sessions {
            parts.sessions[session.id.shardIndex(of: shardCount)].append(session)
            parts.highestOrdinal = max(parts.highestOrdinal, session.ordinal)
            parts.tenantCounts[session.tenant, default: 0] += 1
        }
        for key in contents.keys where key.storedAt.millisecondsSince1970 > oldestKept {
            if let scope = key.scope {
                parts.keys[scope.shardIndex(of: shardCount)].append(key)
            } else {
                parts.globalKeys.append(key)
            }
        }
        return parts
    }
}
