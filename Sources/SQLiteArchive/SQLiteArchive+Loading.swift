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
import Synchronization

/// Reading the whole file back at start-up: sessions with their retained events, keys, ordinals.
///
/// A million sessions must come back in seconds and take no more memory than before the
/// restart. So a configuration is decoded once per distinct stored text and shared by every
/// session stored with it (as `SessionStore` shares them when sessions are created), events are
/// decoded a few thousand log rows per `JSONDecoder` call, sessions are built from their parts
/// (`Sheet(restoring:...)`, no JSON of the whole session), and the heap's free memory goes back
/// to the system once the load's temporary storage is gone.
extension SQLiteArchive {
    func readContents() throws -> ArchiveContents {
        guard let database else { throw ArchiveError(.closed, "\(path) is closed") }
        if statements == nil { try migrateBeforeReading(database) }
        var contents = ArchiveContents()
        contents.highestOrdinal = UInt64(bitPattern: try database.integer("SELECT coalesce(max(value), 0) FROM meta WHERE name = 'highest_ordinal'"))

        let decoder = JSONDecoder()
        // Read through the page cache, not a mapping: every page of the file is read once here,
        // and mapped pages would stay in the process's RSS. The writer maps again afterwards
        // only if `options.mmapBytes` asks for it.
        try database.execute("PRAGMA mmap_size = 0")
        contents.sessions = try readSessions(database, decoder)
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
        // Start compaction with a full pass over what the last run left.
        compactionOwed = Int(try database.integer("SELECT count(*) FROM event_log"))
        try database.execute("PRAGMA mmap_size = \(options.mmapBytes)")
        // The pages the load read are not what the writer needs: drop them from SQLite's cache.
        sqlite3_db_release_memory(database.handle)
        Self.returnFreeHeapMemory()
        return contents
    }
}

extension SQLiteArchive {
    /// An older file's migrations, run by the load (see `init`), then the statements for the
    /// schema they leave. The migration's rows are then copied back into the main file here,
    /// before any session is served, not by the writer's first group.
    private func migrateBeforeReading(_ database: SQLiteDatabase) throws {
        try Self.migrate(database)
        statements = try Statements(database)
        checkpointInWriter(waiting: true)   // the writer's connection; its thread has not started
    }

    /// A session as its rows give it, until the whole log is read.
    private struct SessionRows {
        let id: SessionID
        let ordinal: UInt64
        let configuration: SheetConfiguration
        let createdAt: Int64
        let lastAccess: Int64
        let tenant: Tenant
        /// Newest retained events, in log order (which is seq order within a session).
        var events: [SheetEvent] = []
        /// The newest log row's state (short texts: Swift keeps them inline, no allocation).
        var phase = ""
        var detent = ""
        var presentation: Int64 = 0
        var dismissReason: String?
        /// The newest row's other state as JSON members (`,"hasChanges":true`…), nil for a sheet
        /// whose other state is what every sheet starts with (nearly all of them).
        var more: String?
    }

    /// Log rows decoded per `JSONDecoder` call: its fixed cost per call was most of a small event's.
    private static let eventBatch = 4096

    fileprivate func readSessions(_ database: SQLiteDatabase, _ decoder: JSONDecoder) throws -> [RestoredSession] {
        var rows: [SessionRows] = []
        rows.reserveCapacity(Int(try database.integer("SELECT count(*) FROM sessions")))
        var positions: [UInt64: Int] = [:]
        positions.reserveCapacity(rows.capacity)
        var configurations: [String: SheetConfiguration] = [:]
        let sessions = try database.prepare("SELECT id, ordinal, configuration, created_at, last_access, tenant FROM sessions")
        while try sessions.step() {
            let text = sessions.text(0) ?? ""
            guard let id = SessionID(text) else { throw ArchiveError(.damaged, "\(path) holds a session with an impossible id \"\(text)\"") }
            let ordinal = UInt64(bitPattern: sessions.int64(1))
            guard positions.updateValue(rows.count, forKey: ordinal) == nil else { throw ArchiveError(.damaged, "\(path) holds two sessions with ordinal \(ordinal)") }
            let stored = sessions.text(2) ?? "null"
            let configuration: SheetConfiguration
            if let known = configurations[stored] {
                configuration = known
            } else {
                do {
                    configuration = try decoder.decode(SheetConfiguration.self, from: Data(stored.utf8))
                } catch {
                    throw unreadable(id, error)
                }
                if configurations.count < 4096 { configurations[stored] = configuration }
            }
            rows.append(SessionRows(id: id, ordinal: ordinal, configuration: configuration, createdAt: sessions.int64(3),
                                    lastAccess: sessions.int64(4), tenant: Tenant(sessions.text(5) ?? Tenant.default.name)))
        }

        // The log in append order; rows of deleted sessions wait there for compaction.
        let keep = Sheet.retainedEvents
        var bodies: [String] = []
        var owners: [Int] = []
        bodies.reserveCapacity(Self.eventBatch)
        owners.reserveCapacity(Self.eventBatch)
        func decodeBatch() throws {
            guard !bodies.isEmpty else { return }
            let events: [SheetEvent]
            do {
                events = try decoder.decode([SheetEvent].self, from: Data(("[" + bodies.joined(separator: ",") + "]").utf8))
            } catch {
                // Name the session whose event does not read back.
                for (body, owner) in zip(bodies, owners) {
                    do { _ = try decoder.decode(SheetEvent.self, from: Data(body.utf8)) } catch { throw unreadable(rows[owner].id, error) }
                }
                throw ArchiveError(.damaged, "\(path): events cannot be read back (\(error)); refusing to start rather than lose them")
            }
            for (event, owner) in zip(events, owners) {
                rows[owner].events.append(event)
                if rows[owner].events.count >= 2 * keep { rows[owner].events.removeFirst(keep) }
            }
            bodies.removeAll(keepingCapacity: true)
            owners.removeAll(keepingCapacity: true)
        }
        let log = try database.prepare("SELECT session, seq, body, phase, detent, presentation, dismiss_reason, more FROM event_log ORDER BY id")
        while try log.step() {
            guard let owner = positions[UInt64(bitPattern: log.int64(0))] else { continue }
            bodies.append(log.text(2) ?? "")
            owners.append(owner)
            rows[owner].phase = log.text(3) ?? ""
            rows[owner].detent = log.text(4) ?? ""
            rows[owner].presentation = log.int64(5)
            rows[owner].dismissReason = log.isNull(6) ? nil : log.text(6)
            rows[owner].more = log.isNull(7) ? nil : log.text(7)
            if bodies.count == Self.eventBatch { try decodeBatch() }
        }
        try decodeBatch()
        positions = [:]

        var restored: [RestoredSession] = []
        restored.reserveCapacity(rows.count)
        // Taken from the end, so each session's temporary storage is freed as it is built.
        while var row = rows.popLast() {
            guard !row.events.isEmpty else {
                throw ArchiveError(.damaged, "\(path): session \(row.id) has no events; refusing to start rather than guess its state")
            }
            if row.events.count > keep { row.events.removeFirst(row.events.count - keep) }
            let sheet: Sheet
            do {
                guard let phase = Phase(rawValue: row.phase) else { throw ArchiveError(.damaged, "unknown phase \"\(row.phase)\"") }
                var reason: DismissReason?
                if let text = row.dismissReason {
                    guard let known = DismissReason(rawValue: text) else { throw ArchiveError(.damaged, "unknown dismiss reason \"\(text)\"") }
                    reason = known
                }
                // Decoded only for the few rows that carry it: rows written before the column
                // existed, and plain sheets' rows, have none and take the start values.
                var later = LaterState()
                if let text = row.more {
                    later = try decoder.decode(LaterState.self, from: Data(("{" + text.dropFirst() + "}").utf8))
                }
                sheet = try Sheet(restoring: row.configuration, phase: phase, detent: try Detent(parsing: row.detent),
                                  presentation: Int(row.presentation), dismissReason: reason,
                                  createdAt: Timestamp(millisecondsSince1970: row.createdAt), events: row.events, later: later)
            } catch {
                throw unreadable(row.id, error)
            }
            newestSeq.set(sheet.version, for: row.ordinal)
            // A change writes no session row: its event's time is when the session was last used.
            let lastAccess = max(row.lastAccess, sheet.updatedAt.millisecondsSince1970)
            restored.append(RestoredSession(id: row.id, ordinal: row.ordinal, sheet: sheet, lastAccess: lastAccess, tenant: row.tenant))
        }
        return restored
    }

    /// Gives the heap's free memory back to the system: the load's temporary storage (texts,
    /// per-session event arrays) is free once it is done, but glibc keeps freed memory for reuse,
    /// and RSS after a restart would carry it. glibc's `malloc_trim(0)`, which Swift's Glibc
    /// module does not declare: looked up by name, and skipped on a C library without it.
    public static func returnFreeHeapMemory() {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return }
        typealias MallocTrim = @convention(c) (Int) -> Int32
        _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
    }

    private func unreadable(_ id: SessionID, _ error: any Error) -> ArchiveError {
        ArchiveError(.damaged, "\(path): session \(id) cannot be read back (\(error)); refusing to start rather than lose it")
    }
}
