/// Every statement the writer runs, prepared once.
final class Statements {
    let begin, commit, rollback: SQLiteStatement
    let insertSession, touchSession, deleteSession: SQLiteStatement
    let appendEvent, scanLog, deleteLogRow: SQLiteStatement
    let storeKey, dropKey, expireKeys: SQLiteStatement
    let raiseOrdinal: SQLiteStatement

    init(_ db: SQLiteDatabase) throws(SQLiteError) {
        begin = try db.prepare("BEGIN IMMEDIATE")
        commit = try db.prepare("COMMIT")
        rollback = try db.prepare("ROLLBACK")
        insertSession = try db.prepare("""
            INSERT INTO sessions (id, ordinal, configuration, created_at, last_access, tenant) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
            """)
        touchSession = try db.prepare("UPDATE sessions SET last_access = max(last_access, ?1) WHERE ordinal = ?2")
        deleteSession = try db.prepare("DELETE FROM sessions WHERE ordinal = ?1")
        appendEvent = try db.prepare("""
            INSERT INTO event_log (session, seq, body, phase, detent, presentation, dismiss_reason, more)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
            """)
        scanLog = try db.prepare("SELECT id, session, seq FROM event_log WHERE id > ?1 ORDER BY id LIMIT ?2")
        deleteLogRow = try db.prepare("DELETE FROM event_log WHERE id = ?1")
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
