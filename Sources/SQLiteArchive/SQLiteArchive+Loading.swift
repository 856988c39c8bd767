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
extension SQLiteArchive {
    func readContents() throws -> ArchiveContents {
        guard let database else { throw ArchiveError("\(path) is closed") }
        var contents = ArchiveContents()
        contents.highestOrdinal = UInt64(bitPattern: try database.integer("SELECT coalesce(max(value), 0) FROM meta WHERE name = 'highest_ordinal'"))

        struct Row {
            var ordinal: UInt64
            var configuration: String
            var createdAt: Int64
            var lastAccess: Int64
            var tenant: Tenant
            /// Newest retained event bodies, in log order (which is seq order within a session).
            var events: [(seq: UInt64, body: String)] = []
            var state: (phase: String, detent: String, presentation: Int64, dismissReason: String?)?
        }
        var rows: [UInt64: Row] = [:]
        var ids: [UInt64: SessionID] = [:]
        let sessions = try database.prepare("SELECT id, ordinal, configuration, created_at, last_access, tenant FROM sessions")
        while try sessions.step() {
            let text = sessions.text(0) ?? ""
            guard let id = SessionID(text) else { throw ArchiveError("\(path) holds a session with an impossible id \"\(text)\"") }
            let ordinal = UInt64(bitPattern: sessions.int64(1))
            guard ids.updateValue(id, forKey: ordinal) == nil else { throw ArchiveError("\(path) holds two sessions with ordinal \(ordinal)") }
            rows[ordinal] = Row(ordinal: ordinal, configuration: sessions.text(2) ?? "null",
                                createdAt: sessions.int64(3), lastAccess: sessions.int64(4),
                                tenant: Tenant(sessions.text(5) ?? Tenant.default.name))
        }
        // The log in append order; rows of deleted sessions wait there for compaction.
        let log = try database.prepare("SELECT session, seq, body, phase, detent, presentation, dismiss_reason FROM event_log ORDER BY id")
        let keep = Sheet.retainedEvents
        while try log.step() {
            let id = UInt64(bitPattern: log.int64(0))
            guard rows[id] != nil else { continue }
            rows[id]!.events.append((UInt64(bitPattern: log.int64(1)), log.text(2) ?? ""))
            rows[id]!.state = (log.text(3) ?? "", log.text(4) ?? "", log.int64(5), log.isNull(6) ? nil : log.text(6))
            if rows[id]!.events.count >= 2 * keep { rows[id]!.events.removeFirst(keep) }
        }

        let decoder = JSONDecoder()
        contents.sessions.reserveCapacity(rows.count)
        for (ordinal, var row) in rows {
            let id = ids[ordinal]!
            guard let state = row.state else {
                throw ArchiveError("\(path): session \(id) has no events; refusing to start rather than guess its state")
            }
            if row.events.count > keep { row.events.removeFirst(row.events.count - keep) }
            let created = Timestamp(millisecondsSince1970: row.createdAt)
            var json = "{\"configuration\":" + row.configuration
            json += ",\"phase\":" + quoted(state.phase)
            json += ",\"detent\":" + quoted(state.detent)
            json += ",\"presentation\":" + String(state.presentation)
            if let reason = state.dismissReason { json += ",\"dismissReason\":" + quoted(reason) }
            json += ",\"createdAt\":" + quoted(created.rfc3339)
            json += ",\"events\":[" + row.events.map(\.body).joined(separator: ",") + "]}"
            let sheet: Sheet
            do {
                sheet = try decoder.decode(Sheet.self, from: Data(json.utf8))
            } catch {
                throw ArchiveError("\(path): session \(id) cannot be read back (\(error)); refusing to start rather than lose it")
            }
            ordinals[id] = ordinal
            newestSeq[ordinal] = sheet.version
            // A change writes no session row: its event's time is when the session was last used.
            let lastAccess = max(row.lastAccess, sheet.updatedAt.millisecondsSince1970)
            contents.sessions.append(RestoredSession(id: id, ordinal: row.ordinal, sheet: sheet, lastAccess: lastAccess,
                                                   tenant: row.tenant))
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
        // Start compaction with a full pass over what the last run left.
        compactionOwed = Int(try database.integer("SELECT count(*) FROM event_log"))
        return contents
    }

    /// A JSON string literal; stored strings are detents, phases and reasons, but escape anyway.
    fileprivate func quoted(_ text: String) -> String {
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
