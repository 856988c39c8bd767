import CSQLite
import Dispatch
import Foundation
import Glibc
import SessionStore
import SheetCore
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
public final class SQLiteArchive: SessionArchive, @unchecked Sendable {
    // @unchecked Sendable: `database`, `statements`, `encoder` and the vacuum clock are used by
    // `load()` before the first submit and afterwards only by the writer thread (the queue's
    // lock orders the hand-over); everything shared between threads is inside `queue`.

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
        /// How often the writer gives freed pages back to the file system (incremental vacuum).
        public var vacuumInterval: Duration = .seconds(10)
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
        /// The writer is parked on `wake` and must be signalled.
        var writerIdle = false
        var closing = false
    }

    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)
    private let writerDone = DispatchSemaphore(value: 0)
    private let writerStarted = Atomic<Bool>(false)
    private let lockDescriptor: Int32
    private var database: SQLiteDatabase?
    private var statements: Statements?
    private let encoder = JSONEncoder()
    private var lastVacuum = ContinuousClock.now

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

    /// One sheetd per data directory: two would each believe their memory is the truth.
    private static func lockDirectory(_ directory: String) throws(ArchiveError) -> Int32 {
        let lockPath = (directory.hasSuffix("/") ? directory : directory + "/") + "sheetd.lock"
        let fd = Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw ArchiveError("cannot open \(lockPath): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno == EWOULDBLOCK ? "another sheetd is using \(directory)" : String(cString: strerror(errno))
            Glibc.close(fd)
            throw ArchiveError("cannot lock \(lockPath): \(reason)")
        }
        return fd
    }

    /// Read-only look at an existing file: whose it is, which schema, and whether it is intact.
    static func check(_ path: String) throws(ArchiveError) {
        var status = stat()
        guard stat(path, &status) == 0, status.st_size > 0 else { return }   // new (or empty) file
        let refuse = "refusing to start; the file was left as it is"
        let database: SQLiteDatabase
        do {
            database = try SQLiteDatabase(path: path, flags: SQLITE_OPEN_READONLY)
        } catch {
            throw ArchiveError("cannot open \(path): \(error); \(refuse)")
        }
        do {
            let application = Int32(truncatingIfNeeded: try database.integer("PRAGMA application_id"))
            let version = try database.integer("PRAGMA user_version")
            let objects = try database.integer("SELECT count(*) FROM sqlite_schema")
            if application != Schema.applicationID, !(application == 0 && objects == 0) {
                throw ArchiveError("\(path) is not a sheetd database (SQLite application_id \(application), expected \(Schema.applicationID)); \(refuse)")
            }
            if version > Schema.currentVersion {
                throw ArchiveError("\(path) has schema version \(version), newer than this sheetd knows (\(Schema.currentVersion)): it was written by a newer sheetd; \(refuse)")
            }
            let problems = try database.texts("PRAGMA quick_check")
            if problems != ["ok"] {
                throw ArchiveError("\(path) is damaged (quick_check: \(problems.prefix(3).joined(separator: "; "))); \(refuse)")
            }
        } catch let error as ArchiveError {
            throw error
        } catch let error as SQLiteError where error.isNotADatabase {
            throw ArchiveError("\(path) is not a SQLite database or is damaged (\(error)); \(refuse)")
        } catch {
            throw ArchiveError("cannot read \(path): \(error); \(refuse)")
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
            try Self.migrate(database)
            self.database = database
            self.statements = try Statements(database)
        } catch let error as ArchiveError {
            throw error
        } catch {
            throw ArchiveError("cannot open \(path): \(error)")
        }
    }

    /// Brings the schema up to `Schema.currentVersion` in one transaction: all migrations or none.
    static func migrate(_ database: SQLiteDatabase) throws {
        try database.execute("BEGIN IMMEDIATE")
        do {
            let current = Int(try database.integer("PRAGMA user_version"))
            for migration in Schema.migrations where migration.version > current {
                try database.execute(migration.sql)
            }
            if current < Schema.currentVersion {
                try database.execute("PRAGMA user_version = \(Schema.currentVersion)")
                try database.execute("PRAGMA application_id = \(Schema.applicationID)")
            }
            try database.execute("COMMIT")
        } catch {
            try? database.execute("ROLLBACK")
            throw error
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
        startWriterOnce()
        let (commit, signal) = queue.withLock { queue -> (ArchiveCommit, Bool) in
            guard !queue.closing else { return (ArchiveCommit(), false) }   // never completes: nothing is answered after close
            queue.changes.append(contentsOf: changes)
            let signal = queue.writerIdle
            queue.writerIdle = false
            return (queue.commit, signal)
        }
        if signal { wake.signal() }
        return commit
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
            statements = nil
            database = nil
        }
        // Unlock explicitly: a child forked meanwhile may still share the descriptor until it execs.
        flock(lockDescriptor, LOCK_UN)
        Glibc.close(lockDescriptor)
    }

    // MARK: Writer

    /// The writer starts with the first submit, so `load()` has the connection to itself before.
    private func startWriterOnce() {
        guard !writerStarted.load(ordering: .acquiring),
              writerStarted.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let thread = Thread { [self] in runWriter() }
        thread.name = "sheetd-archive"
        thread.start()
    }

    private func runWriter() {
        var batch: [ArchiveChange] = []
        while true {
            let next = ArchiveCommit()
            let taken = queue.withLock { queue -> (commit: ArchiveCommit?, stop: Bool) in
                if queue.changes.isEmpty {
                    if queue.closing { return (nil, true) }
                    queue.writerIdle = true
                    return (nil, false)
                }
                swap(&queue.changes, &batch)   // the emptied buffer goes back, keeping its capacity
                let commit = queue.commit
                queue.commit = next
                return (commit, false)
            }
            if taken.stop { break }
            guard let commit = taken.commit else {
                wake.wait()
                continue
            }
            do {
                try write(batch)
            } catch {
                options.commitFailed("cannot commit to \(path): \(error); stopping, so that nothing that is not stored is acknowledged")
            }
            commit.complete()
            batch.removeAll(keepingCapacity: true)
            vacuumIfDue()
        }
        // Closing the connection checkpoints the WAL into the main file.
        statements = nil
        database = nil
        writerDone.signal()
    }

    /// One transaction for a whole group of changes, in the order they were submitted.
    private func write(_ changes: [ArchiveChange]) throws {
        guard let s = statements else { return }
        try s.begin.run()
        do {
            var highestOrdinal: UInt64 = 0
            for change in changes {
                switch change {
                case let .created(id, ordinal, sheet, lastAccess):
                    let text = id.description
                    s.insertSession.bind(1, text)
                    s.insertSession.bind(2, ordinal)
                    s.insertSession.bind(3, String(decoding: try encoder.encode(sheet.configuration), as: UTF8.self))
                    s.insertSession.bind(4, sheet.createdAt.millisecondsSince1970)
                    bindState(s.insertSession, from: 5, ArchivedState(sheet))
                    s.insertSession.bind(10, lastAccess)
                    try s.insertSession.run()
                    for event in sheet.events { try insert(event, of: text, s) }
                    highestOrdinal = max(highestOrdinal, ordinal)
                case let .changed(id, state, events, lastAccess):
                    let text = id.description
                    bindState(s.updateSession, from: 1, state)
                    s.updateSession.bind(6, lastAccess)
                    s.updateSession.bind(7, text)
                    try s.updateSession.run()
                    for event in events { try insert(event, of: text, s) }
                    if state.version > UInt64(Sheet.retainedEvents) {
                        s.trimEvents.bind(1, text)
                        s.trimEvents.bind(2, state.version - UInt64(Sheet.retainedEvents))
                        try s.trimEvents.run()
                    }
                case let .deleted(id):
                    let text = id.description
                    s.deleteEvents.bind(1, text)
                    try s.deleteEvents.run()
                    s.deleteSession.bind(1, text)
                    try s.deleteSession.run()
                case let .touched(id, lastAccess):
                    s.touchSession.bind(1, lastAccess)
                    s.touchSession.bind(2, id.description)
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

    private func bindState(_ statement: SQLiteStatement, from first: Int32, _ state: ArchivedState) {
        statement.bind(first, state.phase.rawValue)
        statement.bind(first + 1, state.detent.description)
        statement.bind(first + 2, state.presentation)
        statement.bind(first + 3, state.dismissReason?.rawValue)
        statement.bind(first + 4, state.version)
    }

    private func insert(_ event: SheetEvent, of session: String, _ s: Statements) throws {
        s.insertEvent.bind(1, session)
        s.insertEvent.bind(2, event.seq)
        s.insertEvent.bind(3, String(decoding: try encoder.encode(event), as: UTF8.self))
        try s.insertEvent.run()
    }

    /// Gives free pages back now and then, so the file does not keep the size of its busiest day.
    private func vacuumIfDue() {
        guard ContinuousClock.now - lastVacuum >= options.vacuumInterval, let database else { return }
        lastVacuum = .now
        do {
            if try database.integer("PRAGMA freelist_count") > 0 {
                try database.execute("PRAGMA incremental_vacuum(4096)")
            }
        } catch {
            // Not fatal: the pages stay free inside the file and are reused by later writes.
        }
    }

    // MARK: Reading back

    private func readContents() throws -> ArchiveContents {
        guard let database else { throw ArchiveError("\(path) is closed") }
        var contents = ArchiveContents()
        contents.highestOrdinal = UInt64(bitPattern: try database.integer("SELECT coalesce(max(value), 0) FROM meta WHERE name = 'highest_ordinal'"))

        // Sessions and events both in id order: one merge pass puts each session's events with it.
        let sessions = try database.prepare("""
            SELECT id, ordinal, configuration, created_at, phase, detent, presentation, dismiss_reason, version, last_access
            FROM sessions ORDER BY id
            """)
        let events = try database.prepare("SELECT session, seq, body FROM events ORDER BY session, seq")
        var pendingEvent = try events.step()
        let decoder = JSONDecoder()
        while try sessions.step() {
            let idText = sessions.text(0) ?? ""
            guard let id = SessionID(idText) else { throw ArchiveError("\(path) holds a session with an impossible id \"\(idText)\"") }
            var eventBodies: [String] = []
            while pendingEvent, let session = events.text(0), session <= idText {
                if session == idText { eventBodies.append(events.text(2) ?? "") }
                pendingEvent = try events.step()
            }
            let created = Timestamp(millisecondsSince1970: sessions.int64(3))
            var json = "{\"configuration\":" + (sessions.text(2) ?? "null")
            json += ",\"phase\":" + quoted(sessions.text(4) ?? "")
            json += ",\"detent\":" + quoted(sessions.text(5) ?? "")
            json += ",\"presentation\":" + String(sessions.int64(6))
            if !sessions.isNull(7) { json += ",\"dismissReason\":" + quoted(sessions.text(7) ?? "") }
            json += ",\"version\":" + String(UInt64(bitPattern: sessions.int64(8)))
            json += ",\"createdAt\":" + quoted(created.rfc3339)
            json += ",\"events\":[" + eventBodies.joined(separator: ",") + "]}"
            let sheet: Sheet
            do {
                sheet = try decoder.decode(Sheet.self, from: Data(json.utf8))
            } catch {
                throw ArchiveError("\(path): session \(idText) cannot be read back (\(error)); refusing to start rather than lose it")
            }
            contents.sessions.append(RestoredSession(
                id: id, ordinal: UInt64(bitPattern: sessions.int64(1)), sheet: sheet, lastAccess: sessions.int64(9)))
        }

        let keys = try database.prepare("""
            SELECT scope, key, fingerprint_value, fingerprint_check, stored_at, status, headers, body
            FROM idempotency ORDER BY stored_at
            """)
        while try keys.step() {
            let scopeText = keys.text(0) ?? ""
            let scope = scopeText.isEmpty ? nil : SessionID(scopeText)
            if !scopeText.isEmpty, scope == nil { continue }
            let headers = (try? decoder.decode([String: String].self, from: Data((keys.text(6) ?? "{}").utf8))) ?? [:]
            contents.keys.append(ArchivedKey(
                scope: scope, key: keys.text(1) ?? "",
                fingerprintValue: UInt64(bitPattern: keys.int64(2)), fingerprintCheck: UInt64(bitPattern: keys.int64(3)),
                answer: StoredAnswer(status: Int(keys.int64(5)), headers: headers, body: keys.bytes(7)),
                storedAt: Timestamp(millisecondsSince1970: keys.int64(4))))
        }
        return contents
    }

    /// A JSON string literal; stored strings are detents, phases and reasons, but escape anyway.
    private func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count) + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// Every statement the writer runs, prepared once.
private final class Statements {
    let begin, commit, rollback: SQLiteStatement
    let insertSession, updateSession, touchSession, deleteSession: SQLiteStatement
    let insertEvent, trimEvents, deleteEvents: SQLiteStatement
    let storeKey, dropKey, expireKeys: SQLiteStatement
    let raiseOrdinal: SQLiteStatement

    init(_ db: SQLiteDatabase) throws(SQLiteError) {
        begin = try db.prepare("BEGIN IMMEDIATE")
        commit = try db.prepare("COMMIT")
        rollback = try db.prepare("ROLLBACK")
        insertSession = try db.prepare("""
            INSERT INTO sessions (id, ordinal, configuration, created_at, phase, detent, presentation, dismiss_reason, version, last_access)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
            """)
        updateSession = try db.prepare("""
            UPDATE sessions SET phase = ?1, detent = ?2, presentation = ?3, dismiss_reason = ?4, version = ?5, last_access = ?6
            WHERE id = ?7
            """)
        touchSession = try db.prepare("UPDATE sessions SET last_access = max(last_access, ?1) WHERE id = ?2")
        deleteSession = try db.prepare("DELETE FROM sessions WHERE id = ?1")
        insertEvent = try db.prepare("INSERT INTO events (session, seq, body) VALUES (?1, ?2, ?3)")
        trimEvents = try db.prepare("DELETE FROM events WHERE session = ?1 AND seq <= ?2")
        deleteEvents = try db.prepare("DELETE FROM events WHERE session = ?1")
        storeKey = try db.prepare("""
            INSERT OR REPLACE INTO idempotency (scope, key, fingerprint_value, fingerprint_check, stored_at, status, headers, body)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
            """)
        dropKey = try db.prepare("DELETE FROM idempotency WHERE scope = ?1 AND key = ?2")
        expireKeys = try db.prepare("DELETE FROM idempotency WHERE stored_at < ?1")
        raiseOrdinal = try db.prepare("""
            INSERT INTO meta (name, value) VALUES ('highest_ordinal', ?1)
            ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)
            """)
    }
}
