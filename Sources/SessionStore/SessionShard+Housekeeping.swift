import SheetCore

/// A shard's housekeeping: the idle sweep, saving when sessions were last read, shutting down.
extension SessionShard {
    // MARK: Housekeeping

    /// Removes up to `budget` scanned sessions idle since before `cutoff`; returns how many were
    /// removed and whether the pass reached the end. Sessions someone is waiting on are kept.
    /// The removals are submitted without waiting: an expired session that a crash brings back is
    /// simply swept again.
    func sweep(idleBefore cutoff: Int64, budget: Int) -> (removed: [Tenant], finished: Bool) {
        var removed: [ArchiveChange] = []
        var owners: [Tenant] = []
        var scanned = 0
        while sweepCursor < order.count, scanned < budget {
            let (ordinal, id) = order[sweepCursor]
            sweepCursor += 1
            scanned += 1
            guard let entry = sessions[id], entry.ordinal == ordinal else { continue }
            catchUp(id)   // an entry of `inFlight` that outlived its commit goes
            if entry.sheet.isInChain || children[id] != nil {
                for (change, tenant) in sweepChain(of: id, idleBefore: cutoff) {
                    removed.append(change)
                    owners.append(tenant)
                }
                continue
            }
            guard entry.lastAccess < cutoff,
                  waiters[id] == nil, subscribers[id] == nil, inFlight[id] == nil
            else { continue }
            remove(id, reason: .sessionDeleted)
            removed.append(.deleted(id, ordinal: entry.ordinal))
            owners.append(entry.tenant)
        }
        if !removed.isEmpty { _ = archive.submit(removed) }
        let finished = sweepCursor >= order.count
        if finished { sweepCursor = 0 }
        ledger.expire(now: clock.now())
        return (owners, finished)
    }

    /// Saves the last access of sessions that were only read since their last write, so the idle
    /// sweep after a restart measures from the right moment. Returns the commit to wait for.
    func flushTouched() -> ArchiveCommit? {
        guard !touched.isEmpty else { return nil }
        var changes: [ArchiveChange] = []
        changes.reserveCapacity(touched.count)
        for id in touched {
            if let entry = sessions[id] { changes.append(.touched(id, ordinal: entry.ordinal, lastAccess: entry.lastAccess)) }
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
