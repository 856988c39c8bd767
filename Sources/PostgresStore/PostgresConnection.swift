import CLibPQ
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One libpq connection, used by exactly one thread (a committer or the listener): libpq calls
/// block, so they never run on a libmicrohttpd thread or on the Swift cooperative pool.
/// Parameters and results travel as text (PostgreSQL's own spelling of each type), which keeps
/// the binding code small; the values are ids, integers and JSON.
final class PostgresConnection {
    private let connection: OpaquePointer

    /// Connects (blocking, at most `timeoutSeconds` unless the URL says otherwise) to `url`, a
    /// libpq connection string or `postgresql://` URI.
    init(_ url: String, timeoutSeconds: Int = 5, applicationName: String = "sheetd") throws(PostgresError) {
        // `dbname` comes last and is expanded (expand_dbname = 1): what the URL itself says
        // (its own connect_timeout, say) overrides the defaults given before it.
        // Both arrays end with NULL, as libpq reads them up to it.
        let keywords: [String?] = ["connect_timeout", "application_name", "dbname", nil]
        let values: [String?] = [String(timeoutSeconds), applicationName, url, nil]
        let opened = Self.withCStrings(keywords) { keywordPointers in
            Self.withCStrings(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let opened else { throw PostgresError(.connectionLost, "libpq could not allocate a connection") }
        guard PQstatus(opened) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(opened))
            PQfinish(opened)
            throw PostgresError(.connectionLost, message)
        }
        connection = opened
        // Notices (a migration's "already exists, skipping") are not for the operator's log.
        PQsetNoticeProcessor(opened, { _, _ in }, nil)
    }

    deinit {
        PQfinish(connection)
    }

    var isConnected: Bool { PQstatus(connection) == CONNECTION_OK }

    /// The socket, for `poll` while waiting for notifications.
    var socket: Int32 { PQsocket(connection) }

    /// Runs one statement with `parameters` ($1, $2, …; nil is NULL) and returns its rows.
    @discardableResult
    func execute(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> PostgresRows {
        let result = Self.withCStrings(parameters) { pointers in
            PQexecParams(connection, sql, Int32(parameters.count), nil, pointers, nil, nil, 0)
        }
        return try rows(of: result, sql: sql)
    }

    /// Runs `statements` in pipeline mode: all are sent, then one round trip collects every
    /// answer. A statement that fails makes the server skip the rest; the first failure is
    /// thrown (a transaction begun in the pipeline must then be rolled back by the caller).
    func pipeline(_ statements: [Statement]) throws(PostgresError) -> [PostgresRows] {
        guard PQenterPipelineMode(connection) == 1 else { throw failure(sql: "pipeline mode") }
        defer { _ = PQexitPipelineMode(connection) }
        for statement in statements {
            let sent = Self.withCStrings(statement.parameters) { pointers in
                PQsendQueryParams(connection, statement.sql, Int32(statement.parameters.count), nil, pointers, nil, nil, 0)
            }
            guard sent == 1 else { throw failure(sql: statement.sql) }
        }
        guard PQpipelineSync(connection) == 1 else { throw failure(sql: "pipeline sync") }
        var answers: [PostgresRows] = []
        var firstError: PostgresError?
        for statement in statements {
            let result = PQgetResult(connection)
            do throws(PostgresError) {
                answers.append(try rows(of: result, sql: statement.sql))
            } catch {
                if firstError == nil { firstError = error }
            }
            // Each statement's results end with a NULL; a broken connection gives NULL at once.
            if result != nil { _ = PQgetResult(connection) }
        }
        // Then the sync's own result.
        while let result = PQgetResult(connection) {
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { break }
        }
        if let firstError { throw firstError }
        guard isConnected else { throw PostgresError(.connectionLost, Self.trimmed(PQerrorMessage(connection))) }
        return answers
    }

    /// Reads what the server sent without blocking and returns the notifications received.
    func notifications() throws(PostgresError) -> [String] {
        guard PQconsumeInput(connection) == 1 else { throw failure(sql: "reading notifications") }
        var payloads: [String] = []
        while let notice = PQnotifies(connection) {
            payloads.append(String(cString: notice.pointee.extra))
            PQfreemem(notice)
        }
        return payloads
    }

    struct Statement {
        var sql: String
        var parameters: [String?]

        init(_ sql: String, _ parameters: [String?] = []) {
            self.sql = sql
            self.parameters = parameters
        }
    }

    // MARK: Results

    private func rows(of result: OpaquePointer?, sql: String) throws(PostgresError) -> PostgresRows {
        guard let result else { throw failure(sql: sql) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            var rows = PostgresRows()
            let columns = PQnfields(result)
            for row in 0..<PQntuples(result) {
                var values: [String?] = []
                values.reserveCapacity(Int(columns))
                for column in 0..<columns {
                    values.append(PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column)))
                }
                rows.values.append(values)
            }
            return rows
        case PGRES_PIPELINE_ABORTED:
            throw PostgresError(.query(state: ""), "skipped: an earlier statement of the pipeline failed")
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            let message = Self.trimmed(PQresultErrorMessage(result))
            if !isConnected || state.hasPrefix("08") || state.hasPrefix("57P") {
                throw PostgresError(.connectionLost, message)
            }
            throw PostgresError(.query(state: state), message)
        }
    }

    private func failure(sql: String) -> PostgresError {
        let message = Self.trimmed(PQerrorMessage(connection))
        return isConnected ? PostgresError(.query(state: ""), "\(sql): \(message)") : PostgresError(.connectionLost, message)
    }

    private static func trimmed(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "" }
        // libpq's messages span lines ("…failed: Connection refused\n\tIs the server running…"):
        // one line reads better in a log and a JSON answer.
        let words = String(cString: text).split(whereSeparator: { $0 == "\n" || $0 == "\t" || $0 == " " })
        return words.joined(separator: " ")
    }

    /// The strings as NUL-terminated copies, valid during `body` (nil stays a NULL pointer).
    private static func withCStrings<Result>(
        _ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> Result
    ) -> Result {
        let copies = strings.map { $0.map { strdup($0) } ?? nil }
        defer { for copy in copies { free(copy) } }
        return body(copies.map { $0.map { UnsafePointer($0) } })
    }
}

/// A statement's rows, every value as PostgreSQL's text (nil for NULL).
struct PostgresRows {
    var values: [[String?]] = []

    var count: Int { values.count }
}

/// Why PostgreSQL did not do what was asked: the connection is gone (or never came up), or the
/// server refused a statement (its SQLSTATE says why).
struct PostgresError: Error, CustomStringConvertible {
    fileprivate enum Code {
        case connectionLost
        case query(state: String)
    }

    private let code: Code
    let message: String

    fileprivate init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    var isConnectionLost: Bool {
        if case .connectionLost = code { return true }
        return false
    }

    /// A deadlock or serialisation failure: the whole transaction may simply be run again.
    var isRetryable: Bool {
        if case .query(let state) = code { return state == "40P01" || state == "40001" }
        return false
    }

    /// The SQLSTATE of a refused statement; empty when the connection failed.
    var state: String {
        if case .query(let state) = code { return state }
        return ""
    }

    var description: String { message }
}
