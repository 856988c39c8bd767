/// The tables of the PostgreSQL store, versioned. Each instance migrates at start, holding an
/// advisory lock, so whichever instance of a rolling deploy comes first migrates and the others
/// wait for it and then find nothing to do; an instance that finds a schema newer than it knows
/// refuses to start rather than write rows an older layout does not describe.
///
/// - `sessions`: one row per session. `sheet` is the session's answer (the renderer's JSON, read
///   back by `Sheet`'s `Decodable`) with only its newest event beside it: members added to the
///   sheet's state later come along without a new column, and a change writes the state, not
///   the event log. `phase`, `version` and `last_access` are copies for queries (the metrics
///   gauge, the idle sweep). `ordinal` is the creation order. `root` is the bottom session of
///   the session's chain (itself when it was created over no other): a change locks the whole
///   chain by it, since a cascade may touch any of its sheets.
/// - `events`: the newest `Sheet.retainedEvents` events of each session, by `(session_id, seq)`.
/// - `idempotency_keys`: the first answer to each `Idempotency-Key`, scoped to a session id, or
///   to `''` for `POST /sessions`.
/// - `counters`: one row, locked by every transaction that creates or removes sessions: it holds
///   the cluster-wide session count (`--max-sessions`) and the last creation ordinal given, so
///   ordinals commit in order and a list cursor never sees a session slip in behind it.
enum Schema {
    /// The newest version this binary knows.
    static let version = 1

    /// `pg_advisory_lock` key: "sheetd" in ASCII, so other applications' keys do not collide.
    static let migrationLock = "126879484863588"

    /// The statements that bring the schema from version `index` to `index + 1`.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE sessions (
                id text PRIMARY KEY,
                tenant text NOT NULL,
                ordinal bigint NOT NULL,
                phase text NOT NULL,
                version bigint NOT NULL,
                last_access bigint NOT NULL,
                sheet text NOT NULL,
                root text NOT NULL)
            """,
            "CREATE INDEX sessions_by_root ON sessions (root)",
            "CREATE INDEX sessions_by_tenant ON sessions (tenant, ordinal)",
            "CREATE INDEX sessions_by_last_access ON sessions (last_access)",
            """
            CREATE TABLE events (
                session_id text NOT NULL,
                seq bigint NOT NULL,
                event text NOT NULL,
                PRIMARY KEY (session_id, seq))
            """,
            """
            CREATE TABLE idempotency_keys (
                scope text NOT NULL,
                key text NOT NULL,
                fingerprint_value bigint NOT NULL,
                fingerprint_check bigint NOT NULL,
                status integer NOT NULL,
                headers text NOT NULL,
                body bytea NOT NULL,
                stored_at bigint NOT NULL,
                PRIMARY KEY (scope, key))
            """,
            "CREATE INDEX idempotency_keys_by_age ON idempotency_keys (stored_at)",
            """
            CREATE TABLE counters (
                single boolean PRIMARY KEY DEFAULT true CHECK (single),
                sessions bigint NOT NULL,
                last_ordinal bigint NOT NULL)
            """,
            "INSERT INTO counters (sessions, last_ordinal) VALUES (0, 0)",
        ],
    ]

    /// Why the database cannot be used by this binary: the message an operator reads.
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    /// Brings the database to `version`, under the advisory lock; returns the version found.
    @discardableResult
    static func migrate(_ connection: PostgresConnection) throws -> Int {
        try connection.execute("SELECT pg_advisory_lock(\(migrationLock))")
        defer { _ = try? connection.execute("SELECT pg_advisory_unlock(\(migrationLock))") }
        try connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
        let rows = try connection.execute("SELECT max(version) FROM schema_version")
        let found = (rows.values.first?.first ?? nil).flatMap { Int($0) } ?? 0
        if found > version {
            throw Refusal(description: "the database's schema is version \(found), newer than version \(version) that this sheetd knows: run a newer sheetd (or another database)")
        }
        for step in found..<version {
            try connection.execute("BEGIN")
            do {
                for statement in migrations[step] { try connection.execute(statement) }
                try connection.execute("INSERT INTO schema_version (version) VALUES ($1)", [String(step + 1)])
                try connection.execute("COMMIT")
            } catch {
                _ = try? connection.execute("ROLLBACK")
                throw error
            }
        }
        return found
    }
}
