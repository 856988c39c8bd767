/// The file's layout, by version. `PRAGMA user_version` records which version a file has; on start
/// every migration past it runs, in order, in one transaction. Migrations are only ever added,
/// never edited: a file written by an older sheetd must come out the same as a new one.
enum Schema {
    /// `PRAGMA application_id`: "shdt". Marks the file as sheetd's, so a foreign SQLite file
    /// dropped into the data directory is refused instead of being written into.
    static let applicationID: Int32 = 0x7368_6474

    struct Migration {
        /// The version a file has after this migration.
        let version: Int
        let what: String
        let sql: String
    }

    static let migrations: [Migration] = [
        Migration(version: 1, what: "sessions, their events, idempotency keys, counters", sql: """
            -- One row per session: what an action can change, plus what never changes.
            CREATE TABLE sessions (
                id TEXT PRIMARY KEY,             -- the 22-character id of the API
                ordinal INTEGER NOT NULL,        -- creation order, for list cursors
                configuration TEXT NOT NULL,     -- SheetConfiguration as JSON
                created_at INTEGER NOT NULL,     -- milliseconds since 1970
                phase TEXT NOT NULL,
                detent TEXT NOT NULL,
                presentation INTEGER NOT NULL,
                dismiss_reason TEXT,
                version INTEGER NOT NULL         -- seq of the newest event
            ) WITHOUT ROWID;
            -- The newest 256 events of each session; a change adds a row and drops the oldest.
            CREATE TABLE events (
                session TEXT NOT NULL,
                seq INTEGER NOT NULL,
                body TEXT NOT NULL,              -- SheetEvent as JSON
                PRIMARY KEY (session, seq)
            ) WITHOUT ROWID;
            -- First answers for Idempotency-Key, replayed to retries.
            CREATE TABLE idempotency (
                scope TEXT NOT NULL,             -- session id, or '' for POST /sessions
                key TEXT NOT NULL,
                fingerprint_value INTEGER NOT NULL,
                fingerprint_check INTEGER NOT NULL,
                stored_at INTEGER NOT NULL,      -- milliseconds since 1970
                status INTEGER NOT NULL,
                headers TEXT NOT NULL,           -- JSON object
                body BLOB NOT NULL,
                PRIMARY KEY (scope, key)
            ) WITHOUT ROWID;
            -- Counters that outlive the rows they count (the highest ordinal ever given).
            CREATE TABLE meta (
                name TEXT PRIMARY KEY,
                value INTEGER NOT NULL
            ) WITHOUT ROWID;
            """),
        Migration(version: 2, what: "events in an append-only log; state on the newest event row", sql: """
            -- Version 1 kept events clustered by session and updated the session row on every
            -- change: a group of N drags on N sessions wrote about 2N random b-tree pages to the
            -- WAL. Now a change appends one row to a log in commit order, so a whole group shares
            -- the last page or two; the row carries the session's state after the change. Rows
            -- past a session's newest 256, and rows of deleted sessions, are removed by the
            -- writer's compaction pass (oldest first), not by each change.
            CREATE TABLE event_log (
                id INTEGER PRIMARY KEY,          -- append order
                session INTEGER NOT NULL,        -- sessions.ordinal: cheap to compare while compacting
                seq INTEGER NOT NULL,
                body TEXT NOT NULL,              -- SheetEvent as JSON
                phase TEXT NOT NULL,             -- the session's state after this event
                detent TEXT NOT NULL,
                presentation INTEGER NOT NULL,
                dismiss_reason TEXT
            );
            INSERT INTO event_log (session, seq, body, phase, detent, presentation, dismiss_reason)
                SELECT s.ordinal, e.seq, e.body, s.phase, s.detent, s.presentation, s.dismiss_reason
                FROM events AS e JOIN sessions AS s ON s.id = e.session
                ORDER BY e.session, e.seq;
            DROP TABLE events;
            ALTER TABLE sessions DROP COLUMN phase;
            ALTER TABLE sessions DROP COLUMN detent;
            ALTER TABLE sessions DROP COLUMN presentation;
            ALTER TABLE sessions DROP COLUMN dismiss_reason;
            ALTER TABLE sessions DROP COLUMN version;
            -- The idle sweep after a restart measures from the last access, not from the restart.
            -- Version 1 did not record it: its sessions count from the migration.
            ALTER TABLE sessions ADD COLUMN last_access INTEGER NOT NULL DEFAULT 0;
            UPDATE sessions SET last_access = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER);
            CREATE INDEX idempotency_by_age ON idempotency (stored_at);
            """),
        Migration(version: 3, what: "each session belongs to a tenant; idempotency keys are per tenant", sql: """
            -- Sessions and keys from before tenants belong to the default tenant: the one every
            -- request has without --auth-keys, and the one a keys-file line can name to reach them.
            ALTER TABLE sessions ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
            -- A key is stored as "<tenant> <key>" (an Idempotency-Key has no space).
            UPDATE idempotency SET key = 'default ' || key;
            """),
        Migration(version: 4, what: "a session's changes, container height, navigation stack and chain", sql: """
            -- The state after each change gained members: whether the app has changes to lose,
            -- the container height now, the navigation stack, the sheets below and above. They
            -- are kept as JSON members ("hasChanges":…), and only when some differs from what
            -- every sheet had before they existed, so rows of plain sheets stay as small as
            -- before. Rows written before this version have none: the defaults.
            ALTER TABLE event_log ADD COLUMN more TEXT;
            """),
        Migration(version: 5, what: "sessions kept in creation order", sql: """
            -- Keyed by their random id, sessions made every create write a b-tree page of its own
            -- (a group of N creates about N random pages to the WAL, and as many copied back by
            -- the checkpoint). Keyed by ordinal (creation order), a group of creates shares the
            -- last page or two, as the log's appends do. Nothing reads a session row by its id:
            -- the sessions are all in memory, and changes name a row by its ordinal.
            CREATE TABLE sessions_by_ordinal (
                ordinal INTEGER PRIMARY KEY,     -- creation order, for list cursors
                id TEXT NOT NULL,                -- the 22-character id of the API
                configuration TEXT NOT NULL,     -- SheetConfiguration as JSON
                created_at INTEGER NOT NULL,     -- milliseconds since 1970
                last_access INTEGER NOT NULL DEFAULT 0,
                tenant TEXT NOT NULL DEFAULT 'default'   -- the defaults versions 2 and 3 gave
            );
            INSERT INTO sessions_by_ordinal (ordinal, id, configuration, created_at, last_access, tenant)
                SELECT ordinal, id, configuration, created_at, last_access, tenant FROM sessions ORDER BY ordinal;
            DROP TABLE sessions;
            ALTER TABLE sessions_by_ordinal RENAME TO sessions;
            """),
    ]

    static var currentVersion: Int { migrations.last?.version ?? 0 }
}
