import CSQLite
import Foundation
import Locking
import SessionStore
@testable import SheetCore
@testable import SQLiteArchive
import Testing

/// Compaction and vacuum steps that fail are reported, not swallowed, and lose nothing: the
/// failure is made real by another connection holding SQLite's write lock.
@Suite("SQLite archive housekeeping failures")
struct HousekeepingFailureTests {
    @Test func aBlockedCompactionAndVacuumAreReportedAndALaterStepSucceeds() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let config = try seedConfiguration()
        let ids = (0..<3000).map { _ in SessionID.random() }
        let kept = SessionID.random()

        // Sessions created and deleted: their log rows are dead and their pages free.
        let first = try SQLiteArchive.open(directory: directory.path)
        _ = try first.load()
        try await first.submit(ids.enumerated().map { index, id in
            .created(id, ordinal: UInt64(index + 1), sheet: Sheet(configuration: config, now: t0), lastAccess: 1, tenant: .default)
        } + [.created(kept, ordinal: 3001, sheet: Sheet(configuration: config, now: t0), lastAccess: 1, tenant: .default)]).wait()
        try await first.submit(ids.enumerated().map { .deleted($1, ordinal: UInt64($0 + 1)) }).wait()
        first.close()

        let reports = LockedValue<[String]>([])
        var options = SQLiteArchive.Options()
        options.busyTimeoutMilliseconds = 1
        options.vacuumInterval = .zero
        options.freePagesKept = 0
        options.housekeepingFailed = { message in reports.withLock { $0.append(message) } }
        let archive = try SQLiteArchive.open(directory: directory.path, options: options)
        defer { archive.close() }
        _ = try archive.load()   // before the first submit the calling thread owns the archive
        let rowsBefore = try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READONLY).integer("SELECT count(*) FROM event_log")

        let blocker = try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READWRITE)
        try blocker.execute("BEGIN IMMEDIATE")
        archive.compact(budget: 10_000)
        archive.vacuumIfDue()
        let blocked = reports.withLock { $0 }
        #expect(blocked.count == 2, "\(blocked)")
        #expect(blocked.first?.contains("compacting the event log") == true, "\(blocked)")
        #expect(blocked.last?.contains("giving free pages") == true, "\(blocked)")
        #expect(blocked.allSatisfy { $0.contains("locked") }, "\(blocked)")
        #expect(try blocker.integer("SELECT count(*) FROM event_log") == rowsBefore, "a failed step deletes nothing")
        try blocker.execute("ROLLBACK")

        archive.compact(budget: 10_000)
        #expect(reports.withLock { $0.count } == 2, "\(reports.withLock { $0 })")
        let rowsAfter = try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READONLY).integer("SELECT count(*) FROM event_log")
        #expect(rowsAfter == 1, "the one kept session's event stays, \(rowsBefore) → \(rowsAfter)")
    }
}
