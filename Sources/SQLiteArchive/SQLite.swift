import CSQLite

/// A failed SQLite call: the result code and SQLite's own message.
struct SQLiteError: Error, CustomStringConvertible {
    let code: Int32
    let message: String

    var description: String { "\(message) (SQLite code \(code))" }

    /// SQLITE_NOTADB or SQLITE_CORRUPT: the file is not a database, or a damaged one.
    var isNotADatabase: Bool { code & 0xFF == SQLITE_NOTADB || code & 0xFF == SQLITE_CORRUPT }
}

/// One SQLite connection. Not thread-safe on its own: whoever owns it uses it from one thread at
/// a time (the archive hands it from start-up to its writer thread, see `SQLiteArchive`).
final class SQLiteDatabase {
    let handle: OpaquePointer
    let path: String

    /// Opens `path` with `SQLITE_OPEN_*` `flags`; extended result codes so errors say exactly what failed.
    init(path: String, flags: Int32) throws(SQLiteError) {
        _ = Self.memoryStatisticsOff
        var db: OpaquePointer?
        let status = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard status == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(status))
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(code: status, message: message)
        }
        sqlite3_extended_result_codes(db, 1)
        handle = db
        self.path = path
    }

    deinit { sqlite3_close_v2(handle) }

    /// Memory statistics off before the first connection opens (a global initialised once):
    /// nothing reads them, and they cost a mutex per allocation. Ignored if something in the
    /// process initialised SQLite already.
    private static let memoryStatisticsOff: Int32 = sheetd_sqlite_disable_memory_statistics()

    func error(_ status: Int32) -> SQLiteError {
        SQLiteError(code: status, message: String(cString: sqlite3_errmsg(handle)))
    }

    /// Runs one or more statements that return nothing the caller needs.
    func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &message)
        guard status == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(status))
            sqlite3_free(message)
            throw SQLiteError(code: status, message: text)
        }
    }

    func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else { throw error(status) }
        return SQLiteStatement(handle: statement, database: self)
    }

    /// The first column of the first row of `sql` as an integer (a PRAGMA's value, a count).
    func integer(_ sql: String) throws(SQLiteError) -> Int64 {
        let statement = try prepare(sql)
        guard try statement.step() else { return 0 }
        return statement.int64(0)
    }

    /// The first column of every row of `sql` as text.
    func texts(_ sql: String) throws(SQLiteError) -> [String] {
        let statement = try prepare(sql)
        var rows: [String] = []
        while try statement.step() { rows.append(statement.text(0) ?? "") }
        return rows
    }
}

/// A prepared statement, reused: bind, step, reset.
final class SQLiteStatement {
    let handle: OpaquePointer
    /// Keeps the connection open as long as a statement of it exists.
    private let database: SQLiteDatabase

    init(handle: OpaquePointer, database: SQLiteDatabase) {
        self.handle = handle
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    func bind(_ index: Int32, _ value: Int64) {
        sqlite3_bind_int64(handle, index, value)
    }

    func bind(_ index: Int32, _ value: UInt64) {
        sqlite3_bind_int64(handle, index, Int64(bitPattern: value))
    }

    func bind(_ index: Int32, _ value: Int) {
        sqlite3_bind_int64(handle, index, Int64(value))
    }

    func bind(_ index: Int32, _ value: String?) {
        guard var value else {
            sqlite3_bind_null(handle, index)
            return
        }
        value.withUTF8 { bytes in
            // TRANSIENT: SQLite copies the bytes, which are only valid inside this closure.
            _ = sqlite3_bind_text(handle, index, bytes.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) },
                                  Int32(bytes.count), sheetd_sqlite_transient())
        }
    }

    /// Binds `value` (NULL when nil) without copying it and runs `body`, which must step the
    /// statement and reset it (`run()` does both) before it returns: the text is borrowed only
    /// while `body` runs, and the reset unbinds it.
    func withText<Result>(_ index: Int32, _ value: String?, _ body: () throws -> Result) throws -> Result {
        guard var value else {
            sqlite3_bind_null(handle, index)
            return try body()
        }
        return try value.withUTF8 { bytes in
            // STATIC: SQLite reads the bytes in place, during `body`'s step.
            _ = sqlite3_bind_text(handle, index, bytes.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) },
                                  Int32(bytes.count), sheetd_sqlite_static())
            return try body()
        }
    }

    func bind(_ index: Int32, bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            // A zero-length blob still needs a non-null pointer, or SQLite stores NULL.
            _ = sqlite3_bind_blob(handle, index, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1),
                                  Int32(buffer.count), sheetd_sqlite_transient())
        }
    }

    /// Steps once: true when a row is ready, false when done.
    @discardableResult
    func step() throws(SQLiteError) -> Bool {
        let status = sqlite3_step(handle)
        switch status {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw database.error(status)
        }
    }

    /// Runs a statement that returns no rows, then resets it for the next use.
    func run() throws(SQLiteError) {
        defer { reset() }
        _ = try step()
    }

    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    func text(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    func bytes(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let pointer = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
