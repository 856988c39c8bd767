import Locking
import CSQLite
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SessionStore
import SheetCore
import SheetJSON
import Synchronization

/// Sessions kept in one SQLite file (`sheetd.sqlite3` in the data directory), WAL mode.
///
/// Group commit: shards submit changes to an in-memory queue (never blocking); one dedicated
/// writer thread — not a Swift concurrency thread, so disk waits never stall the cooperative pool
/// — takes everything queued, writes it in one transaction, commits, and completes the one
/// `ArchiveCommit` that every change of the group waits on. Changes that arrive while a commit is
/// running form the next group, so a group is flushed as soon as the previous one is done: no
/// timer, no added latency when idle, bigger groups (fewer syncs) under load. Groups commit in
/// submission order.
///
/// A commit that fails stops the process (after saying why): in-memory state is then ahead of the
/// file, and only a restart from the file is consistent with what was acknowledged.
// @unchecked Sendable: the connection, statements, encoder and compaction state are used by `load()` before the first submit and then only by the writer thread (started by that submit, which orders the hand-over); what threads share is in `queue` (a LockedValue) or atomic.
public final class SQLiteArchive: SessionArchive, @unchecked Sendable {
    /// `PRAGMA synchronous`: `normal` survives a crash of the process (the WAL is written before
    /// the commit returns, synced at checkpoints); `full` also survives losing power (each commit
    /// syncs the WAL).
    public enum Synchronous: String, Sendable, CaseIterable {
        case normal, full
    }

    public struct Options: Sendable {
        public var synchronous = Synchronous.normal
        /// How long a write waits for a lock held by another connection (a backup, say).
        public var busyTimeoutMilliseconds: Int32 = 5000
        /// SQLite's page cache, in KiB.
        public var cacheKiB = 32_768
        /// How much of the file reads may map instead of copying (`PRAGMA mmap_size`). None by
        /// default: the sessions live in memory, so the file is read only to find where a write
        /// goes, and every page a mapping ever touched would stay in the process's RSS (about
        /// 400 B per session at a million) where the kernel's page cache holds it anyway.
        public var mmapBytes = 0
        /// WAL pages after which the checkpointer thread copies them back into the main file.
        public var checkpointPages = 4_000
        /// WAL pages after which the writer copies back, between two groups, what the checkpointer
        /// thread's passes left (what was committed during the last one), if that thread is not
        /// copying right now: a sustained load never lets the WAL start over by itself. The
        /// remainder is short, so the next group waits a few milliseconds, and the WAL (24 MiB of
        /// 4 KiB pages) stays below `walBytesKept`: a WAL that starts over longer than that is
        /// cut back in that commit first, which made it wait tens of milliseconds.
        public var writerRestartPages = 6_000
        /// WAL pages after which the writer checkpoints itself even while the checkpointer thread
        /// is copying (it waits for that pass): the bound for a checkpointer that cannot keep up.
        public var writerCheckpointPages = 20_000
        /// The WAL file is cut back to this size after a checkpoint has emptied it.
        public var walBytesKept = 32 << 20
        /// How often the writer gives freed pages back to the file system (incremental vacuum).
        public var vacuumInterval: Duration = .seconds(10)
        /// Free pages kept for the log to grow into instead of extending the file.
        public var freePagesKept: Int64 = 1024
        /// Log rows one compaction step scans: a step runs between two groups, so it is kept short.
        public var compactionBudget = 512
        /// The longest the writer waits for a group to fill before it begins its transaction,
        /// when the load shows concurrent changes (groups of several of late, the last ended
        /// moments ago): it waits until as many changes are queued as the largest of them held
        /// (`GroupPacing`). A commit costs about as much for one change as for dozens (its locks,
        /// the WAL's writes, waking the writer and the request threads), and taking each change as
        /// it came made groups of one or two under full load. A lone client's changes (groups of
        /// one) never wait. Zero: never wait.
        public var gatherWindow: Duration = .microseconds(400)
        /// Reports a compaction or vacuum step that failed. Not fatal (nothing acknowledged is
        /// lost: the rows or pages stay until a later step succeeds), but an operator should know.
        public var housekeepingFailed: @Sendable (String) -> Void = { message in
            var line = "sheetd: " + message + "\n"
            line.withUTF8 { _ = Glibc.write(2, $0.baseAddress, $0.count) }
        }
        /// Reports a commit that failed; must not return.
        public var commitFailed: @Sendable (String) -> Never = { message in
            var line = "sheetd: " + message + "\n"
            line.withUTF8 { _ = Glibc.write(2, $0.baseAddress, $0.count) }
            _exit(1)
        }

        public init() {}
    }

    public static let fileName = "sheetd.sqlite3"

    /// The database file.
    public let path: String
    public let options: Options

    private struct Queue {
        var changes: [ArchiveChange] = []
        /// The commit the changes now queued will complete.
        var commit = ArchiveCommit()
        /// The writer is parked on `wake` and must be signalled (once `changes` holds `gatherUntil`).
        var writerIdle = false
        /// While the writer gathers a group: how many changes end the wait early; 0 otherwise.
        var gatherUntil = 0
        var closing = false
    }

    private let queue = LockedValue(Queue())
    private let wake = DispatchSemaphore(value: 0)
    private let writerDone = DispatchSemaphore(value: 0)
    private let writerStarted = Atomic<Bool>(false)
    private let lockDescriptor: Int32
    var database: SQLiteDatabase?
    var statements: Statements?
    /// Copies the WAL back into the main file off the writer thread.
    var checkpointer: WALCheckpointer?
    /// The WAL's length in pages after the writer's last commit (writer thread only).
    var walPages = 0
    private let encoder = JSONEncoder()
    /// Configurations as stored, by configuration: most sessions share a few, so each is written
    /// once.
    private var configurationTexts: [SheetConfiguration: String] = [:]
    /// The configuration stored last and its text: runs of creates mostly share one, and
    /// comparing it costs a fraction of hashing it for the dictionary.
    private var lastConfigurationText: (configuration: SheetConfiguration, text: String)?
    private static let configurationTextLimit = 4096
    var lastVacuum = ContinuousClock.now
    /// Each live session's newest seq, by ordinal (how the log names a session; changes carry
    /// it), so compaction can tell retained rows from dropped ones with integer lookups.
    var newestSeq = NewestSeqs()
    /// Log rows owed to compaction (two per appended row); and where its scan resumes.
    var compactionOwed = 0
    var compactionCursor: Int64 = 0
    /// Whether garbage may be left behind the cursor: idle time finishes the pass, then one more
    /// in which nothing changed, so a quiet file ends up holding only what is retained.
    var passNeeded = true
    var changedDuringPass = true

    // MARK: Opening

    /// Opens (or creates) `directory/sheetd.sqlite3`, creating the directory if needed.
    ///
    /// A file that exists is first checked through a read-only connection, so a file sheetd must
    /// not use is left exactly as it was: a newer schema, another application's database,
    /// something that is not SQLite, or a damaged file each give an `ArchiveError` saying which.
    /// An older schema is migrated. A second sheetd on the same directory is refused.
    public static func open(directory: String, options: Options = Options()) throws(ArchiveError) -> SQLiteArchive {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw ArchiveError("cannot create the data directory \(directory): \(error.localizedDescription)")
        }
        let path = directory.hasSuffix("/") ? directory + fileName : directory + "/" + fileName
        let lock = try lockDirectory(directory)
        do {
            try check(path)
            let archive = try SQLiteArchive(path: path, options: options, lockDescriptor: lock)
            return archive
        } catch {
            Glibc.close(lock)
            throw error
        }
    }

    private init(path: String, options: Options, lockDescriptor: Int32) throws(ArchiveError) {
        self.path = path
        self.options = options
        self.lockDescriptor = lockDescriptor
        do {
            let database = try SQLiteDatabase(path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            sqlite3_busy_timeout(database.handle, options.busyTimeoutMilliseconds)
            // Set before the first table exists, which is the only time it takes effect.
            try database.execute("PRAGMA auto_vacuum = INCREMENTAL")
            let mode = try database.texts("PRAGMA journal_mode = WAL")
            guard mode == ["wal"] else { throw ArchiveError("\(path) cannot use WAL mode (journal_mode is \(mode.first ?? "?"))") }
            try database.execute("PRAGMA synchronous = \(options.synchronous == .full ? "FULL" : "NORMAL")")
            // Enough page cache for the hot b-tree pages, so a change rarely reads the file, and a
            // longer WAL between checkpoints: a page changed many times is copied back once.
            try database.execute("PRAGMA cache_size = -\(options.cacheKiB)")
            try database.execute("PRAGMA mmap_size = \(options.mmapBytes)")
            try database.execute("PRAGMA journal_size_limit = \(options.walBytesKept)")
            self.database = database
            // A new file gets its tables now. An older one is brought up to date by `load()`,
            // which sheetd runs while it already answers: a migration that rewrites a table of a
            // million sessions takes seconds. The statements are prepared for the schema they
            // will run on, so only after it: until then `statements` is nil, by which `load()`
            // tells that migrations are owed.
            if try !Self.hasOlderSchema(database) {
                try Self.migrate(database)   // a new file's tables; nothing for a current one
                self.statements = try Statements(database)
            }
            checkpointer = try WALCheckpointer(path: path, synchronous: options.synchronous,
                                               busyTimeoutMilliseconds: options.busyTimeoutMilliseconds,
                                               thresholdPages: options.checkpointPages)
            // Replaces SQLite's automatic checkpoint (itself a WAL hook) on this connection.
            // Unmanaged, unretained: the hook runs only inside this archive's own commits on
            // this connection, which the archive closes before it goes away.
            sqlite3_wal_hook(database.handle, { context, _, _, pages in
                guard let context else { return SQLITE_OK }
                Unmanaged<SQLiteArchive>.fromOpaque(context).takeUnretainedValue().walCommitted(pages: Int(pages))
                return SQLITE_OK
            }, Unmanaged.passUnretained(self).toOpaque())
        } catch let error as ArchiveError {
            throw error
        } catch {
            throw ArchiveError("cannot open \(path): \(error)")
        }
    }

    // MARK: SessionArchive

    public func load() throws(ArchiveError) -> ArchiveContents {
        do {
            return try readContents()
        } catch let error as ArchiveError {
            throw error
        } catch {
            throw ArchiveError("cannot read \(path): \(error)")
        }
    }

    public func submit(_ changes: [ArchiveChange]) -> ArchiveCommit {
        let accepted = queue.withLock { queue -> (commit: ArchiveCommit, signal: Bool)? in
            guard !queue.closing else { return nil }
            queue.changes.append(contentsOf: changes)
            let signal = queue.writerIdle && queue.changes.count >= queue.gatherUntil
            if signal { queue.writerIdle = false }
            return (queue.commit, signal)
        }
        guard let accepted else {
            return .failed(ArchiveError(.closed, "\(path) is closed; changes submitted after close are not stored"))
        }
        startWriterOnce()   // a writer that starts now finds the changes queued
        if accepted.signal { wake.signal() }
        return accepted.commit
    }

    public func close() {
        let signal = queue.withLock { queue -> Bool in
            queue.closing = true
            let signal = queue.writerIdle
            queue.writerIdle = false
            return signal
        }
        if writerStarted.load(ordering: .acquiring) {
            if signal { wake.signal() }
            writerDone.wait()
        } else {
            checkpointer?.stop()
            checkpointer = nil
            statements = nil
            database = nil
        }
        // Unlock explicitly: a child forked meanwhile may still share the descriptor until it execs.
        flock(lockDescriptor, LOCK_UN)
        Glibc.close(lockDescriptor)
    }

    // MARK: Writer

    /// The writer thread's name, as `top -H` and `/proc/PID/task/*/comm` show it.
    static let writerThreadName = "sheetd-archive"

    /// The writer starts with the first submit, so `load()` has the connection to itself before.
    private func startWriterOnce() {
        guard !writerStarted.load(ordering: .acquiring),
              writerStarted.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let thread = Thread { [self] in
            nameCurrentThread(Self.writerThreadName)
            runWriter()
        }
        thread.start()
    }

    /// The most follower slots the writer reserves in the next commit: a burst of queued creates
    /// must not make every later commit reserve a large block.
    private static let followersReservedAtMost = 1024

    /// What the writer does next.
    private enum Turn {
        case stop
        case idle
        /// Wait (up to `gatherWindow`) for the queue to hold this many changes.
        case gather(Int)
        case write(ArchiveCommit)
    }

    private func runWriter() {
        var batch: [ArchiveChange] = []
        var pacing = GroupPacing()
        var lastAnswered = ContinuousClock.now
        var gathered = false
        let window = options.gatherWindow
        let windowNanoseconds = Int(window / .nanoseconds(1))
        // Made once: `Duration * Int` goes through a generic 128-bit conversion (about 500
        // instructions), and it was made on every turn of the loop.
        let quietSpell = window * 2
        var next = ArchiveCommit()   // what the queue's next group will complete
        writing: while true {
            // A group is gathered only right after another (under load), and once.
            let target = gathered || window <= .zero || ContinuousClock.now - lastAnswered > quietSpell ? 0 : pacing.target
            let turn = queue.withLock { queue -> Turn in
                if queue.changes.isEmpty {
                    if queue.closing { return .stop }
                    queue.writerIdle = true
                    return .idle
                }
                if queue.changes.count < target && !queue.closing {
                    queue.writerIdle = true
                    queue.gatherUntil = target
                    return .gather(target)
                }
                swap(&queue.changes, &batch)   // the emptied buffer goes back, keeping its capacity
                let commit = queue.commit
                queue.commit = next
                return .write(commit)
            }
            let commit: ArchiveCommit
            switch turn {
            case .stop:
                break writing
            case .idle:
                // Idle. After a quiet spell, catch up on compaction; between groups under load the
                // gaps are short, and compaction there would only delay the next group.
                if compactionOwed > 0 || passNeeded {
                    if wake.wait(timeout: .now() + .milliseconds(20)) == .timedOut { compact(budget: options.compactionBudget) }
                } else {
                    wake.wait()
                }
                gathered = false
                continue
            case .gather:
                // Signalled once the queue holds the target (or by close); else the window ends it.
                _ = wake.wait(timeout: .now() + .nanoseconds(windowNanoseconds))
                queue.withLock { queue in
                    queue.writerIdle = false
                    queue.gatherUntil = 0
                }
                gathered = true   // the next turn takes what is queued, however much
                continue
            case .write(let taken):
                commit = taken
                next = ArchiveCommit(expectedFollowers: min(batch.count, Self.followersReservedAtMost))   // the next group is likely as large
            }
            gathered = false
            pacing.finished(group: batch.count)
            do {
                try write(batch)
            } catch {
                options.commitFailed("cannot commit to \(path): \(error); stopping, so that nothing that is not stored is acknowledged")
            }
            commit.complete()
            lastAnswered = .now
            batch.removeAll(keepingCapacity: true)
            if walPages >= options.writerCheckpointPages {
                checkpointInWriter(waiting: true)
            } else if walPages >= options.writerRestartPages {
                checkpointInWriter(waiting: false)
            }
            // Housekeeping runs between groups, in transactions of its own, after the answers.
            if compactionOwed >= options.compactionBudget { compact(budget: options.compactionBudget) }
            vacuumIfDue()
        }
        compact(budget: options.compactionBudget)
        // Closing the connection checkpoints the WAL into the main file, once the checkpointer's
        // connection is gone (the last connection to close does it).
        checkpointer?.stop()
        checkpointer = nil
        statements = nil
        database = nil
        writerDone.signal()
    }

    /// One transaction for a whole group of changes, in the order they were submitted.
    private func write(_ changes: [ArchiveChange]) throws {
        guard let s = statements else {
            throw ArchiveError("\(path) was not migrated to schema \(Schema.currentVersion): changes submitted before load()")
        }
        try s.begin.run()
        do {
            var highestOrdinal: UInt64 = 0
            for change in changes {
                switch change {
                case let .created(id, ordinal, sheet, lastAccess, tenant):
                    let text = id.description
                    s.insertSession.bind(1, text)
                    s.insertSession.bind(2, ordinal)
                    s.insertSession.bind(3, configurationText(sheet.configuration))
                    s.insertSession.bind(4, sheet.createdAt.millisecondsSince1970)
                    s.insertSession.bind(5, lastAccess)
                    s.insertSession.bind(6, tenant.name)
                    try s.insertSession.run()
                    let state = ArchivedState(sheet)
                    for event in sheet.events { try append(event, state, of: ordinal, s) }
                    newestSeq.set(sheet.version, for: ordinal)
                    highestOrdinal = max(highestOrdinal, ordinal)
                case let .changed(_, ordinal, state, events, _):
                    // Appended rows only: the event's time is the session's last access, and the
                    // newest row's state is the session's state, so no session row is rewritten.
                    guard newestSeq.update(state.version, for: ordinal) else { continue }   // not a stored session
                    for event in events { try append(event, state, of: ordinal, s) }
                case let .deleted(_, ordinal):
                    // Its log rows are garbage from now on; compaction removes them.
                    s.deleteSession.bind(1, ordinal)
                    try s.deleteSession.run()
                    if let newest = newestSeq.remove(ordinal) {
                        compactionOwed += Int(min(newest, UInt64(Sheet.retainedEvents)))
                        changedDuringPass = true
                    }
                case let .touched(_, ordinal, lastAccess):
                    s.touchSession.bind(1, lastAccess)
                    s.touchSession.bind(2, ordinal)
                    try s.touchSession.run()
                case let .keyStored(key):
                    s.storeKey.bind(1, key.scope?.description ?? "")
                    s.storeKey.bind(2, key.key)
                    s.storeKey.bind(3, key.fingerprintValue)
                    s.storeKey.bind(4, key.fingerprintCheck)
                    s.storeKey.bind(5, key.storedAt.millisecondsSince1970)
                    s.storeKey.bind(6, key.answer.status)
                    s.storeKey.bind(7, String(decoding: try encoder.encode(key.answer.headers), as: UTF8.self))
                    s.storeKey.bind(8, bytes: key.answer.body)
                    try s.storeKey.run()
                case let .keyDropped(scope, key):
                    s.dropKey.bind(1, scope?.description ?? "")
                    s.dropKey.bind(2, key)
                    try s.dropKey.run()
                case let .keysExpired(before):
                    s.expireKeys.bind(1, before)
                    try s.expireKeys.run()
                }
            }
            if highestOrdinal > 0 {
                s.raiseOrdinal.bind(1, highestOrdinal)
                try s.raiseOrdinal.run()
            }
            try s.commit.run()
        } catch {
            try? s.rollback.run()
            throw error
        }
    }

    /// The JSON a session row stores for `configuration`, encoded once per distinct configuration.
    private func configurationText(_ configuration: SheetConfiguration) -> String {
        if let last = lastConfigurationText, last.configuration == configuration { return last.text }
        let text: String
        if let known = configurationTexts[configuration] {
            text = known
        } else {
            text = Rendering.configurationText(configuration)
            if configurationTexts.count < Self.configurationTextLimit { configurationTexts[configuration] = text }
        }
        lastConfigurationText = (configuration, text)
        return text
    }

    /// Appends one event row; `state` is the session's state after the change that recorded it.
    /// The texts are bound without copies: the statement runs while they are borrowed.
    private func append(_ event: SheetEvent, _ state: ArchivedState, of ordinal: UInt64, _ s: Statements) throws {
        let statement = s.appendEvent
        statement.bind(1, ordinal)
        statement.bind(2, event.seq)
        statement.bind(6, state.presentation)
        try statement.withText(3, Rendering.eventText(event)) {   // the event as the API answers it
            try statement.withText(4, state.phase.rawValue) {
                try statement.withText(5, state.detent.description) {
                    try statement.withText(7, state.dismissReason?.rawValue) {
                        try statement.withText(8, state.extras.map(Rendering.extrasText)) {
                            try statement.run()
                        }
                    }
                }
            }
        }
        // The row `retainedEvents` before this one is garbage from now on: two rows of scanning
        // are owed for it, so the pass keeps up. Appends that make no garbage (a session's first
        // 256 events) owe nothing: a pass over a log that holds only what is retained finds nothing.
        if event.seq > UInt64(Sheet.retainedEvents) {
            compactionOwed += 2
            changedDuringPass = true
        }
    }
}
