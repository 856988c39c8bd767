import CSQLite
import Foundation
import SessionStore
import SheetJSON
@testable import SheetCore
@testable import SQLiteArchive
import Testing

/// A fresh, empty directory under the system's temporary directory, removed by `cleanup`.
struct TemporaryDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "sheetd-archive-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    var file: String { path + "/" + SQLiteArchive.fileName }

    func cleanup() { try? FileManager.default.removeItem(atPath: path) }
}

let t0 = Timestamp(millisecondsSince1970: 1_764_422_931_123)

func seedConfiguration() throws -> SheetConfiguration {
    try SheetConfiguration(detents: [.large, .medium], defaultDetent: .large, thresholdDetent: .height(300))
}

/// Applies `action` to `sheet` and returns the change the shard would submit.
func step(_ sheet: inout Sheet, _ id: SessionID, ordinal: UInt64, _ action: SheetAction, at ms: Int64) throws -> ArchiveChange {
    let outcome = try sheet.apply(action, now: Timestamp(millisecondsSince1970: ms))
    return .changed(id, ordinal: ordinal, state: ArchivedState(sheet), events: outcome.events, lastAccess: ms)
}

func answer(_ text: String, status: Int = 200) -> StoredAnswer {
    StoredAnswer(status: status, headers: ["Content-Type": "application/json; charset=utf-8", "ETag": "\"2\""],
                 body: Array(text.utf8))
}

@Suite("SQLite archive")
struct SQLiteArchiveTests {
    @Test func roundTripKeepsEverySessionAndKey() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let config = try seedConfiguration()

        // A long-lived session: 300 changes, so the file must keep exactly the newest 256 events.
        let busyID = SessionID.random()
        var busy = Sheet(configuration: config, now: t0)
        // One waiting for a confirmation, one dismissed, one deleted.
        let askingID = SessionID.random()
        var asking = Sheet(configuration: config, now: t0)
        let goneID = SessionID.random()
        let dismissedID = SessionID.random()
        var dismissed = Sheet(configuration: config, now: t0)

        let archive = try SQLiteArchive.open(directory: directory.path)
        #expect(try archive.load().sessions.isEmpty)
        var commits: [ArchiveCommit] = []
        commits.append(archive.submit([
            .created(busyID, ordinal: 1, sheet: busy, lastAccess: 10, tenant: .default),
            .created(askingID, ordinal: 2, sheet: asking, lastAccess: 11, tenant: .default),
            .created(dismissedID, ordinal: 3, sheet: dismissed, lastAccess: 12, tenant: .default),
            .created(goneID, ordinal: 4, sheet: Sheet(configuration: config, now: t0), lastAccess: 13, tenant: .default),
        ]))
        for index in 0..<300 {
            let to: Detent = index % 2 == 0 ? .medium : .large
            commits.append(archive.submit([try step(&busy, busyID, ordinal: 1, .drag(.detent(to)), at: 1000 + Int64(index))]))
        }
        commits.append(archive.submit([try step(&asking, askingID, ordinal: 2, .drag(.detent(.height(300))), at: 2000)]))
        commits.append(archive.submit([try step(&dismissed, dismissedID, ordinal: 3, .dismiss(.programmatic), at: 2001)]))
        commits.append(archive.submit([.deleted(goneID, ordinal: 4)]))
        let scoped = ArchivedKey(scope: askingID, key: "drag-1", fingerprintValue: .max, fingerprintCheck: 7,
                                 answer: answer(#"{"ok":true}"#), storedAt: Timestamp(millisecondsSince1970: 3000))
        let global = ArchivedKey(scope: nil, key: "create-1", fingerprintValue: 1, fingerprintCheck: 2,
                                 answer: answer(#"{"id":"x"}"#, status: 201), storedAt: Timestamp(millisecondsSince1970: 2999))
        let dropped = ArchivedKey(scope: nil, key: "create-0", fingerprintValue: 1, fingerprintCheck: 2,
                                  answer: answer(""), storedAt: Timestamp(millisecondsSince1970: 2998))
        commits.append(archive.submit([.keyStored(dropped), .keyStored(global), .keyStored(scoped),
                                       .keyDropped(scope: nil, key: "create-0"),
                                       .touched(dismissedID, ordinal: 3, lastAccess: 5000)]))
        for commit in commits { try await commit.wait() }
        archive.close()

        let reopened = try SQLiteArchive.open(directory: directory.path)
        defer { reopened.close() }
        let contents = try reopened.load()
        let byID = Dictionary(uniqueKeysWithValues: contents.sessions.map { ($0.id, $0) })
        #expect(contents.sessions.count == 3)
        #expect(byID[goneID] == nil)
        // Sheet is Hashable over its whole state: configuration, phase, detent, presentation, the log.
        #expect(byID[busyID]?.sheet == busy)
        #expect(byID[busyID]?.sheet.version == 301)
        #expect(byID[busyID]?.sheet.events.count == Sheet.retainedEvents)
        #expect(byID[busyID]?.sheet.events.first?.seq == 301 - 255)
        #expect(byID[askingID]?.sheet == asking)
        #expect(byID[askingID]?.sheet.phase == .confirming)
        #expect(byID[dismissedID]?.sheet == dismissed)
        #expect(byID[dismissedID]?.lastAccess == 5000)
        #expect(byID[busyID]?.lastAccess == 1299)
        #expect(byID[busyID]?.ordinal == 1)
        // The deleted session had the highest ordinal; it is still remembered.
        #expect(contents.highestOrdinal == 4)
        #expect(contents.keys == [global, scoped])
        // Once compacted (closing runs a step, which covers this small log), the log holds only
        // what is retained: 256 rows of the busy session, 2 each of the other two, none of the deleted one.
        let database = try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READONLY)
        #expect(try database.integer("SELECT count(*) FROM event_log") == 256 + 2 + 2)
    }

    @Test func storeCarriesOnAfterReopening() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let config = try seedConfiguration()

        let archive = try SQLiteArchive.open(directory: directory.path)
        let store = SessionStore(archive: archive, restoring: try archive.load())
        let first = try await store.create(config, for: .default)
        let second = try await store.create(config, for: .default)
        _ = try await store.apply(.drag(.detent(.medium)), to: first.id, of: .default)
        _ = try await store.apply(.drag(.detent(.height(300))), to: first.id, of: .default)
        let request = IdempotencyRequest(key: "k1", method: "POST", path: "/sessions/\(second.id)/dismiss", body: [])
        let applied = try await store.apply(.dismiss(.done), to: second.id, of: .default, ifMatch: nil, idempotency: request) { _ in
            answer("first answer")
        }
        #expect(!applied.replayed)
        let before = try await store.session(first.id, of: .default)
        let third = try await store.create(config, for: .default)
        try await store.delete(third.id, of: .default)
        try await store.close()

        let again = try SQLiteArchive.open(directory: directory.path)
        let restored = SessionStore(archive: again, restoring: try again.load())
        let after = try await restored.session(first.id, of: .default)
        #expect(after.sheet == before.sheet)
        #expect(after.sheet.phase == .confirming)
        #expect(restored.sessionCount == 2)
        // The idempotency answer survived: a retry is replayed, not applied again.
        let retried = try await restored.apply(.dismiss(.done), to: second.id, of: .default, ifMatch: nil, idempotency: request) { _ in
            answer("second answer")
        }
        #expect(retried.replayed)
        #expect(retried.answer.body == Array("first answer".utf8))
        // Ordinals continue past every one given before, the deleted third included.
        let fourth = try await restored.create(config, for: .default)
        let page = try await restored.list(of: .default, phase: nil, after: 0, limit: 10)
        #expect(page.sessions.map(\.id) == [first.id, second.id, fourth.id])
        let tail = try await restored.list(of: .default, phase: nil, after: 3, limit: 10)
        #expect(tail.sessions.map(\.id) == [fourth.id])
        // Confirm, then the events continue from where they stopped.
        let confirmed = try await restored.apply(.confirm(.cancel), to: first.id, of: .default)
        #expect(confirmed.outcome.events.map(\.seq) == [4])
        try await restored.close()
    }

    @Test func olderSchemaIsMigrated() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let config = try seedConfiguration()
        let id = SessionID.random()
        let sheet = Sheet(configuration: config, now: t0)
        do {
            // A file as the first sheetd with a data directory wrote it: schema version 1.
            let database = try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            try database.execute("PRAGMA auto_vacuum = INCREMENTAL")
            _ = try database.texts("PRAGMA journal_mode = WAL")
            try database.execute(Schema.migrations[0].sql)
            try database.execute("PRAGMA user_version = 1")
            try database.execute("PRAGMA application_id = \(Schema.applicationID)")
            let configuration = Rendering.configurationText(config)
            let event = Rendering.eventText(sheet.events[0])
            try database.execute("""
                INSERT INTO sessions VALUES ('\(id)', 7, '\(configuration)', \(t0.millisecondsSince1970), 'presented', 'large', 1, NULL, 1);
                INSERT INTO events VALUES ('\(id)', 1, '\(event)');
                INSERT INTO meta VALUES ('highest_ordinal', 9);
                INSERT INTO idempotency VALUES ('', 'create-1', 1, 2, \(t0.millisecondsSince1970), 201, '{}', x'7b7d');
                INSERT INTO idempotency VALUES ('\(id)', 'drag-1', 3, 4, \(t0.millisecondsSince1970), 200, '{}', x'7b7d');
                """)
        }
        let started = Int64(Date().timeIntervalSince1970 * 1000)
        let archive = try SQLiteArchive.open(directory: directory.path)
        // Opening leaves the schema as it is (sheetd listens right after); the load migrates.
        func version() throws -> Int64 {
            try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READONLY).integer("PRAGMA user_version")
        }
        #expect(try version() == 1)
        let contents = try archive.load()
        #expect(try version() == Int64(Schema.currentVersion))
        // A change after the load is written with the migrated schema.
        try await archive.submit([.touched(id, ordinal: 7, lastAccess: started + 60_000)]).wait()
        archive.close()
        #expect(contents.sessions.count == 1)
        #expect(contents.sessions.first?.sheet == sheet)
        #expect(contents.sessions.first?.ordinal == 7)
        #expect(contents.highestOrdinal == 9)
        // Sessions and keys from before tenants belong to the default tenant.
        #expect(contents.sessions.first?.tenant == .default)
        #expect(Set(contents.keys.map(\.key)) == ["default create-1", "default drag-1"])
        // Version 1 did not record the last access: it counts from the migration.
        #expect((contents.sessions.first?.lastAccess ?? 0) >= started - 1000)
        let database = try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READONLY)
        #expect(try database.integer("PRAGMA user_version") == Int64(Schema.currentVersion))
        #expect(try database.integer("SELECT count(*) FROM sqlite_schema WHERE name = 'idempotency_by_age'") == 1)
        #expect(try database.integer("SELECT count(*) FROM sqlite_schema WHERE name = 'events'") == 0)
        #expect(try database.integer("SELECT count(*) FROM event_log") == 1)
        #expect(try database.integer("SELECT last_access FROM sessions WHERE ordinal = 7") == started + 60_000)
    }

    /// Opens must fail with `expected` in the message and leave the file byte for byte as it was.
    func expectRefused(_ directory: TemporaryDirectory, _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let before = try Data(contentsOf: URL(fileURLWithPath: directory.file))
        var message = ""
        do {
            let archive = try SQLiteArchive.open(directory: directory.path)
            archive.close()
        } catch {
            message = error.message
        }
        #expect(message.contains(expected), "message was: \(message)", sourceLocation: sourceLocation)
        #expect(message.contains("left as it is"), sourceLocation: sourceLocation)
        let after = try Data(contentsOf: URL(fileURLWithPath: directory.file))
        #expect(before == after, sourceLocation: sourceLocation)
    }

    /// A new archive in `directory` with one session committed (its writer thread started).
    private func archiveWithOneSession(in directory: TemporaryDirectory) async throws -> SQLiteArchive {
        let archive = try SQLiteArchive.open(directory: directory.path)
        _ = try archive.load()
        try await archive.submit([.created(.random(), ordinal: 1, sheet: Sheet(configuration: try seedConfiguration(), now: t0), lastAccess: 1, tenant: .default)]).wait()
        return archive
    }

    @Test func newerSchemaIsRefusedAndLeftAlone() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let archive = try await archiveWithOneSession(in: directory)
        archive.close()
        do {
            let database = try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READWRITE)
            try database.execute("PRAGMA user_version = \(Schema.currentVersion + 1)")
        }
        try expectRefused(directory, "newer than this sheetd knows")
    }

    @Test func theWriterThreadIsNamed() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let archive = try await archiveWithOneSession(in: directory)
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
        let names = tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        #expect(names.contains(SQLiteArchive.writerThreadName), "\(names)")
        archive.close()
    }

    @Test("SQLite keeps no memory statistics: they would cost a process-wide mutex per allocation")
    func memoryStatisticsAreOff() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let archive = try await archiveWithOneSession(in: directory)
        defer { archive.close() }
        // With statistics on, SQLite counts the bytes its open connection holds.
        #expect(sqlite3_memory_used() == 0)
    }

    @Test func somethingElseIsRefusedAndLeftAlone() throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let garbage = Data((0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) })
        try garbage.write(to: URL(fileURLWithPath: directory.file))
        try expectRefused(directory, "not a SQLite database")
    }

    @Test func foreignDatabaseIsRefusedAndLeftAlone() throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        do {
            let database = try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            try database.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5);")
        }
        try expectRefused(directory, "is not a sheetd database")
    }

    @Test func damagedDatabaseIsRefusedAndLeftAlone() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let archive = try SQLiteArchive.open(directory: directory.path)
        _ = try archive.load()
        let config = try seedConfiguration()
        let changes: [ArchiveChange] = (0..<400).map {
            .created(.random(), ordinal: UInt64($0 + 1), sheet: Sheet(configuration: config, now: t0), lastAccess: 1, tenant: .default)
        }
        try await archive.submit(changes).wait()
        archive.close()
        // Scribble over the middle of the file: b-tree pages no longer parse.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory.file)))
        #expect(bytes.count > 16 * 4096)
        for index in (8 * 4096)..<(12 * 4096) { bytes[index] = UInt8(truncatingIfNeeded: index &* 31) }
        try Data(bytes).write(to: URL(fileURLWithPath: directory.file))
        try expectRefused(directory, "damaged")
    }

    @Test func secondOpenOfOneDirectoryIsRefused() throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let archive = try SQLiteArchive.open(directory: directory.path)
        defer { archive.close() }
        #expect(throws: ArchiveError.self) { _ = try SQLiteArchive.open(directory: directory.path) }
    }

    @Test func deletedSessionsGiveTheirSpaceBack() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        var options = SQLiteArchive.Options()
        options.vacuumInterval = .zero
        options.freePagesKept = 0
        let archive = try SQLiteArchive.open(directory: directory.path, options: options)
        _ = try archive.load()
        let config = try seedConfiguration()
        let ids = (0..<3000).map { _ in SessionID.random() }
        try await archive.submit(ids.enumerated().map { index, id in
            .created(id, ordinal: UInt64(index + 1), sheet: Sheet(configuration: config, now: t0), lastAccess: 1, tenant: .default)
        }).wait()
        let database = try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READONLY)
        let full = try database.integer("PRAGMA page_count")
        try await archive.submit(ids.enumerated().map { .deleted($1, ordinal: UInt64($0 + 1)) }).wait()
        // Compaction removes the deleted sessions' log rows a step at a time, between commits;
        // the incremental vacuum after each commit gives the freed pages back.
        var emptied = full
        for _ in 0..<100 where emptied >= full / 4 {
            try await archive.submit([.keysExpired(before: 0)]).wait()
            emptied = try database.integer("PRAGMA page_count")
        }
        archive.close()
        #expect(full > 50)
        #expect(emptied < full / 4, "page_count \(full) → \(emptied)")
    }

    /// A change names its session by the ordinal it was created with, so a change that commits
    /// after its session was deleted lands nowhere, even when the id lives again under another.
    @Test func aChangeAfterItsSessionWasDeletedLandsNowhere() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let archive = try SQLiteArchive.open(directory: directory.path)
        _ = try archive.load()
        let config = try seedConfiguration()
        let id = SessionID.random()
        var old = Sheet(configuration: config, now: t0)
        let fresh = Sheet(configuration: config, now: t0)
        let late = try step(&old, id, ordinal: 1, .drag(.detent(.medium)), at: 2000)
        try await archive.submit([.created(id, ordinal: 1, sheet: Sheet(configuration: config, now: t0), lastAccess: 1, tenant: .default),
                                  .deleted(id, ordinal: 1),
                                  .created(id, ordinal: 2, sheet: fresh, lastAccess: 3, tenant: .default)]).wait()
        try await archive.submit([late]).wait()
        archive.close()

        let reopened = try SQLiteArchive.open(directory: directory.path)
        defer { reopened.close() }
        let contents = try reopened.load()
        #expect(contents.sessions.count == 1)
        #expect(contents.sessions.first?.ordinal == 2)
        #expect(contents.sessions.first?.sheet == fresh)
        #expect(contents.sessions.first?.sheet.version == 1)
        // Nor does it keep rows of the deleted ordinal alive: closing compacted them away.
        let database = try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READONLY)
        #expect(try database.integer("SELECT count(*) FROM event_log WHERE session = 1") == 0)
    }

    @Test func aSubmitAfterCloseFailsItsCommit() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let archive = try SQLiteArchive.open(directory: directory.path)
        _ = try archive.load()
        try await archive.submit([.keysExpired(before: 0)]).wait()
        archive.close()
        let late = archive.submit([.keysExpired(before: 1)])
        #expect(!late.isCommitted)
        await #expect(throws: ArchiveError.self) { try await late.wait() }
    }

    @Test func aChangeAfterTheStoreClosedIsRefusedNotLeftHanging() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let archive = try SQLiteArchive.open(directory: directory.path)
        let store = SessionStore(archive: archive, restoring: try archive.load())
        let session = try await store.create(try seedConfiguration(), for: .default)
        try await store.close()
        let configuration = try seedConfiguration()
        do {
            _ = try await store.apply(.drag(.detent(.medium)), to: session.id, of: .default)
            Issue.record("a change after close was acknowledged")
        } catch {
            #expect(error.code == .shuttingDown)
        }
        do {
            _ = try await store.create(configuration, for: .default)
            Issue.record("a session created after close was acknowledged")
        } catch {
            #expect(error.code == .shuttingDown)
        }
    }
}

@Suite("SQLite archive: checkpoints")
struct SQLiteCheckpointTests {
    /// The writer's two ways of letting the WAL start over: copying the remainder only when the
    /// checkpointer thread is not copying (restart pages), and waiting for that thread's pass
    /// (checkpoint pages). Each alone must keep the WAL bounded.
    static let writerBounds: [(restartPages: Int, checkpointPages: Int)] = [
        (restartPages: 64, checkpointPages: .max),   // never waits for the checkpointer
        (restartPages: .max, checkpointPages: 128),  // only the waiting fallback
    ]

    /// 12,000 creates in 60 groups write far more than the WAL may hold: the checkpointer thread
    /// copies it back, the writer copies the rest, the WAL starts over, and (with
    /// `journal_size_limit` 0) its file stays within the writer's bound plus a group.
    /// Everything is there after reopening.
    @Test(arguments: writerBounds)
    func theWALStaysBoundedWhileACheckpointerThreadCopiesItBack(_ bound: (restartPages: Int, checkpointPages: Int)) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        var options = SQLiteArchive.Options()
        options.checkpointPages = 16
        options.writerRestartPages = bound.restartPages
        options.writerCheckpointPages = bound.checkpointPages
        options.walBytesKept = 0
        let archive = try SQLiteArchive.open(directory: directory.path, options: options)
        _ = try archive.load()
        let config = try seedConfiguration()
        var ordinal: UInt64 = 0
        var largestWAL: UInt64 = 0
        var written: UInt64 = 0
        for _ in 0..<60 {
            let changes: [ArchiveChange] = (0..<200).map { _ in
                ordinal += 1
                return .created(.random(), ordinal: ordinal, sheet: Sheet(configuration: config, now: t0), lastAccess: 1, tenant: .default)
            }
            try await archive.submit(changes).wait()
            let wal = (try? FileManager.default.attributesOfItem(atPath: directory.file + "-wal")[.size] as? UInt64) ?? 0
            largestWAL = max(largestWAL, wal)
            written += 200
        }
        #expect(archive.checkpointsOffTheWriter > 0)
        archive.close()
        let main = try FileManager.default.attributesOfItem(atPath: directory.file)[.size] as? UInt64 ?? 0
        #expect(main > 2 << 20, "the test must write more than the bound below: \(main) bytes")
        #expect(largestWAL < 2 << 20, "the WAL grew to \(largestWAL) bytes")
        let reopened = try SQLiteArchive.open(directory: directory.path)
        defer { reopened.close() }
        #expect(try reopened.load().sessions.count == Int(written))
    }

    /// Sessions are stored in creation order: a group of creates on a file of many sessions adds
    /// a few pages to the WAL, where rows kept in the order of their random ids put nearly every
    /// create on a page of its own. (Checkpoints off, so the WAL only grows.)
    @Test func aGroupOfCreatesAppendsAFewPagesNotOnePerSession() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        var options = SQLiteArchive.Options()
        options.checkpointPages = .max
        options.writerRestartPages = .max
        options.writerCheckpointPages = .max
        options.vacuumInterval = .seconds(3600)
        let archive = try SQLiteArchive.open(directory: directory.path, options: options)
        defer { archive.close() }
        _ = try archive.load()
        let config = try seedConfiguration()
        var ordinal: UInt64 = 0
        func creates(_ count: Int) -> [ArchiveChange] {
            (0..<count).map { _ in
                ordinal += 1
                return .created(.random(), ordinal: ordinal, sheet: Sheet(configuration: config, now: t0), lastAccess: 1, tenant: .default)
            }
        }
        // Far more pages of sessions than the group below has sessions.
        for _ in 0..<20 { try await archive.submit(creates(1_000)).wait() }
        func walBytes() throws -> UInt64 {
            try FileManager.default.attributesOfItem(atPath: directory.file + "-wal")[.size] as? UInt64 ?? 0
        }
        let before = try walBytes()
        try await archive.submit(creates(200)).wait()
        let frames = (try walBytes() - before) / (4096 + 24)
        #expect(frames < 40, "200 creates wrote \(frames) pages to the WAL")
    }
}

@Suite("SQLite archive: loading")
struct SQLiteLoadingTests {
    /// Sessions stored with one configuration come back sharing one configuration storage, as
    /// sessions created alike share one, so a restart does not grow every session; and a batch
    /// of events bigger than one decoding call comes back whole and in order.
    @Test func restoredSessionsShareTheirConfigurationAndKeepTheirEvents() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let archive = try SQLiteArchive.open(directory: directory.path)
        _ = try archive.load()
        let config = try seedConfiguration()
        let ids = (0..<3).map { _ in SessionID.random() }
        var sheets = ids.map { _ in Sheet(configuration: config, now: t0) }
        try await archive.submit(ids.enumerated().map { index, id in
            .created(id, ordinal: UInt64(index + 1), sheet: sheets[index], lastAccess: 1, tenant: .default)
        }).wait()
        // 5,000 drags of the first session: more log rows than one decoding batch holds.
        var changes: [ArchiveChange] = []
        for index in 0..<5000 {
            changes.append(try step(&sheets[0], ids[0], ordinal: 1, .drag(.detent(index % 2 == 0 ? .medium : .large)), at: 2000 + Int64(index)))
        }
        try await archive.submit(changes).wait()
        archive.close()

        let reopened = try SQLiteArchive.open(directory: directory.path)
        defer { reopened.close() }
        let restored = try reopened.load().sessions
        #expect(restored.count == 3)
        let storages = Set(restored.map { ObjectIdentifier($0.sheet.configuration.storage) })
        #expect(storages.count == 1)
        let busy = try #require(restored.first { $0.id == ids[0] })
        #expect(busy.sheet == sheets[0])
        #expect(busy.sheet.version == 5001)
        #expect(busy.sheet.events.count == Sheet.retainedEvents)
    }
}
