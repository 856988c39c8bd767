import CSQLite
import SheetCore

/// Housekeeping between groups, on the writer thread: the log's compaction and giving free
/// pages back to the file system.
extension SQLiteArchive {
    /// One step of the log's compaction: scans up to `budget` rows from where the last step
    /// stopped (oldest first, wrapping at the end) and deletes those no one will read again —
    /// rows of deleted sessions and rows older than their session's newest 256. Each appended row
    /// owes two rows of scanning, so the pass keeps up with the appends and the log stays about
    /// the size of what is retained. A failure here loses nothing: the rows are read past on load.
    func compact(budget: Int) {
        guard let s = statements else { return }
        compactionOwed = max(0, compactionOwed - budget)
        do {
            try s.begin.run()
            s.scanLog.bind(1, compactionCursor)
            s.scanLog.bind(2, budget)
            var dead: [Int64] = []
            var scanned = 0
            var last = compactionCursor
            while try s.scanLog.step() {
                scanned += 1
                last = s.scanLog.int64(0)
                let seq = UInt64(bitPattern: s.scanLog.int64(2))
                if let newest = newestSeq[UInt64(bitPattern: s.scanLog.int64(1))], seq + UInt64(Sheet.retainedEvents) > newest { continue }
                dead.append(last)
            }
            s.scanLog.reset()
            for row in dead {
                s.deleteLogRow.bind(1, row)
                try s.deleteLogRow.run()
            }
            try s.commit.run()
            if scanned < budget {
                // A whole pass is done; if nothing changed while it ran, the log is clean.
                compactionCursor = 0
                passNeeded = changedDuringPass
                changedDuringPass = false
            } else {
                compactionCursor = last
            }
        } catch {
            s.scanLog.reset()
            try? s.rollback.run()
            options.housekeepingFailed("compacting the event log of \(path) failed (\(error)); the rows stay until a later step succeeds")
        }
    }

    /// Gives free pages back now and then, so the file does not keep the size of its busiest day.
    /// A few free pages stay: the log's next appends reuse them.
    func vacuumIfDue() {
        guard ContinuousClock.now - lastVacuum >= options.vacuumInterval, let database else { return }
        lastVacuum = .now
        do {
            let free = try database.integer("PRAGMA freelist_count")
            if free > options.freePagesKept {
                try database.execute("PRAGMA incremental_vacuum(\(free - Int64(options.freePagesKept)))")
            }
        } catch {
            // Not fatal: the pages stay free inside the file and are reused by later writes.
            options.housekeepingFailed("giving free pages of \(path) back failed (\(error)); they are reused by later writes")
        }
    }
}
