import CSQLite
import Dispatch
import Foundation
import Locking
import Synchronization

/// Copies the write-ahead log back into the main file on a thread and connection of its own, so
/// the writer never does it inside a commit that requests are waiting on.
///
/// SQLite's automatic checkpoint runs in the commit that pushes the WAL past its threshold: that
/// commit (and every answer waiting on it) pays for copying thousands of pages and syncing the
/// main file, tens of milliseconds. Here the writer's connection has no automatic checkpoint; its
/// WAL hook (called after each commit with the WAL's length in pages) wakes this thread, which
/// runs a PASSIVE checkpoint: it copies what is committed without taking the write lock, so
/// commits go on meanwhile. Once everything is copied back, the writer's next transaction starts
/// the WAL from its beginning again (and `journal_size_limit` cuts the file back); under a
/// steady load that moment may never come by itself, see `SQLiteArchive.checkpointInWriter`.
///
/// Durability does not change: a commit is still in the WAL (synced as `synchronous` says) before
/// it returns; a checkpoint only moves committed pages, and SQLite keeps that crash-safe.
// @unchecked Sendable: `database` is used only by the checkpointer thread once it has started
// (the initializer hands it over before `Thread.start`, and the thread closes it as it ends);
// everything else threads share is the LockedValue `state`, the atomic, the semaphores and the
// `running` lock that takes checkpoints one at a time.
final class WALCheckpointer: @unchecked Sendable {
    private struct State {
        /// The WAL has reached the threshold and no checkpoint has started since.
        var due = false
        var stopping = false
    }

    /// The checkpointer thread's name, as `top -H` and `/proc/PID/task/*/comm` show it.
    static let threadName = "sheetd-checkpoint"

    private var database: SQLiteDatabase?
    private let thresholdPages: Int
    private let state = LockedValue(State())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    /// Held while a checkpoint runs; counts the checkpoints taken, the writer's included. (Not
    /// a `LockedValue(())`: see `LockedValue` on zero-sized values.)
    private let running = LockedValue(0)
    /// Checkpoints run so far (for tests and the curious).
    let checkpointsRun = Atomic<Int>(0)

    /// Opens a second connection to `path` and starts the thread. `thresholdPages`: WAL length
    /// at which a checkpoint is due.
    init(path: String, synchronous: SQLiteArchive.Synchronous, busyTimeoutMilliseconds: Int32, thresholdPages: Int) throws(SQLiteError) {
        let database = try SQLiteDatabase(path: path, flags: SQLITE_OPEN_READWRITE)
        sqlite3_busy_timeout(database.handle, busyTimeoutMilliseconds)
        try database.execute("PRAGMA synchronous = \(synchronous == .full ? "FULL" : "NORMAL")")
        // This connection never writes: no automatic checkpoint of its own, and a small cache.
        try database.execute("PRAGMA wal_autocheckpoint = 0")
        try database.execute("PRAGMA cache_size = -256")
        // A connection opens the WAL only when it first reads: until then a checkpoint through
        // it does nothing at all (and says SQLITE_OK).
        _ = try database.integer("SELECT count(*) FROM sqlite_schema")
        self.database = database
        self.thresholdPages = max(1, thresholdPages)
        let thread = Thread { [self] in
            nameCurrentThread(Self.threadName)
            run()
        }
        thread.start()
    }

    /// Called by the writer after each commit with the WAL's length in pages: wakes the thread
    /// when a checkpoint is due. Never blocks for longer than a lock hand-over.
    func walGrew(to pages: Int) {
        guard pages >= thresholdPages else { return }
        let signal = state.withLock { state -> Bool in
            guard !state.due, !state.stopping else { return false }
            state.due = true
            return true
        }
        if signal { wake.signal() }
    }

    /// Stops the thread, which closes its connection. Returns once it has, so the writer may
    /// close its own connection (which then checkpoints whatever is left, itself).
    func stop() {
        state.withLock { $0.stopping = true }
        wake.signal()
        finished.wait()
    }

    /// What one checkpoint did.
    struct Pass {
        /// It copied everything the WAL held when it began.
        var completed = false
        /// The WAL's length in pages when it began.
        var logPages = 0
    }

    /// One PASSIVE checkpoint through `database`: copies what is committed without taking the
    /// write lock, so commits go on meanwhile. One at a time (the thread's and the writer's):
    /// with `waiting`, a second one waits for the first instead of failing busy; without, it
    /// does not run at all while another one does (not completed). A failure (a backup holding
    /// a lock, say) is not fatal: the next commit asks again.
    func checkpoint(_ database: SQLiteDatabase, waiting: Bool = true) -> Pass {
        let body = { (taken: inout Int) -> Pass in
            taken += 1
            var logPages: Int32 = 0
            var copiedPages: Int32 = 0
            let status = sqlite3_wal_checkpoint_v2(database.handle, nil, SQLITE_CHECKPOINT_PASSIVE, &logPages, &copiedPages)
            return Pass(completed: status == SQLITE_OK && logPages == copiedPages, logPages: Int(logPages))
        }
        if waiting { return running.withLock(body) }
        return running.withLockIfFree(body) ?? Pass()
    }

    /// Passes in a row at most, each copying what was committed while the one before ran.
    static let passesInARow = 8
    /// A pass that finds fewer new pages than this ends the run: the writer copies the rest.
    static let remainderPages = 256

    /// Each wake runs passes until one finds little that is new (commits go on meanwhile, so
    /// each copies what arrived during the one before), leaving the writer a short remainder.
    private func run() {
        while true {
            wake.wait()
            let stop = state.withLock { state -> Bool in
                state.due = false
                return state.stopping
            }
            if stop { break }
            guard let database else { continue }
            var copiedThrough = 0
            for _ in 0..<Self.passesInARow {
                let pass = checkpoint(database)
                checkpointsRun.add(1, ordering: .relaxed)
                guard pass.completed, pass.logPages - copiedThrough >= Self.remainderPages else { break }
                copiedThrough = pass.logPages
            }
        }
        database = nil
        finished.signal()
    }
}

/// The writer's side of checkpointing.
extension SQLiteArchive {
    /// Checkpoints the checkpointer thread has run (none once the archive is closed).
    var checkpointsOffTheWriter: Int { checkpointer?.checkpointsRun.load(ordering: .relaxed) ?? 0 }

    /// The WAL hook of the writer's connection: after each commit, the WAL's length. Past
    /// `writerRestartPages` the checkpointer thread is not woken again: the writer copies the
    /// rest itself as soon as that thread is not copying (`checkpointInWriter`).
    func walCommitted(pages: Int) {
        walPages = pages
        if pages < options.writerRestartPages { checkpointer?.walGrew(to: pages) }
    }

    /// Lets the WAL start over under a steady load: SQLite starts it from its beginning only in
    /// a transaction that begins with everything copied, and under load the writer begins its
    /// next one before the checkpointer thread has copied the last. So past `writerRestartPages`
    /// the writer copies the remainder itself, between groups and after the answers, and its next
    /// transaction starts the WAL over. Without `waiting` it does not when the checkpointer is
    /// copying (the next group asks again); with it, past `writerCheckpointPages`, it waits for
    /// that pass, then copies only what the pass did not.
    func checkpointInWriter(waiting: Bool) {
        guard let database, let checkpointer else { return }
        if checkpointer.checkpoint(database, waiting: waiting).completed { walPages = 0 }
    }
}
