import SessionStore
import SheetCore

/// One transaction serving a group of jobs, in three steps and two round trips:
///
/// 1. load (one pipeline): `BEGIN`; the rows of every session the group changes, locked with
///    `SELECT … ORDER BY id FOR UPDATE` (every instance locks in id order, so two groups never
///    deadlock); the rows the group only reads; the `counters` row when it creates or deletes
///    (always after the session rows, the same order everywhere); the idempotency keys it names
///    (after the locks that serialise their use: the session's row, or `counters` for
///    `POST /sessions`); the events and list pages it reads.
/// 2. serve (in Swift, no I/O): each job in arrival order, on the rows as the earlier jobs of the
///    group left them, applying SheetCore's actions exactly as the in-memory store does;
/// 3. write (one pipeline): the changed rows, new events, new keys, the counters, a `NOTIFY`
///    naming the changed sessions, `COMMIT`.
///
/// Nothing is answered before the commit succeeded: the committer resumes the jobs only then.
/// Rows locked by step 1 cannot change under step 2, so each change applies to the state the
/// previous one left (no lost update) whichever instance made that one.
struct Batch {
    struct Limits: Sendable {
        var maxSessions: Int
        var maxSessionsPerTenant: Int?
        var keyLifetimeMilliseconds: Int64
        /// A read saves its time at once when the stored last access is older than this (a
        /// hundredth of the TTL): another instance's sweep then never removes a session read
        /// through this one, yet a session read often costs one write per interval, not per read.
        var touchSlackMilliseconds: Int64
    }

    struct Row {
        var sheet: Sheet
        let tenant: Tenant
        /// The chain's bottom session, as stored (`root`).
        let root: String
        let ordinal: UInt64
        var lastAccess: Int64
        /// The version committed before this group: what event readers see.
        let committedVersion: UInt64
        var change = Change.none
        var newEvents: [SheetEvent] = []
    }

    enum Change {
        case none, touched, changed, created, deleted
    }

    struct StoredKey {
        let value: UInt64
        let check: UInt64
        let answer: StoredAnswer
        let storedAt: Int64
        var isNew = false
    }

    struct KeyName: Hashable {
        let scope: String
        let key: String
    }

    let jobs: [Job]
    let limits: Limits
    let now: Timestamp
    let coding: RowCoding

    var rows: [SessionID: Row] = [:]
    var keys: [KeyName: StoredKey] = [:]
    var events: [SessionID: [SheetEvent]] = [:]
    var lists: [Int: [(SessionID, Row)]] = [:]
    var statistics: (phases: [Phase: Int], tenants: [Tenant: Int]) = ([:], [:])
    var sessionCount = 0
    var lastOrdinal: UInt64 = 0
    var countsChanged = false
    var tenantCounts: [Tenant: Int] = [:]
    /// Sessions read by this group, and when: the store saves these last reads in its sweep.
    var touched: [SessionID] = []
    /// Read sessions whose stored last access is older than `touchSlackMilliseconds`.
    var staleReads: [SessionID] = []

    init(jobs: [Job], limits: Limits, now: Timestamp, coding: RowCoding) {
        self.jobs = jobs
        self.limits = limits
        self.now = now
        self.coding = coding
    }

    /// Versions between two prunings of a session's old events.
    static let pruneStep: UInt64 = 64

    static let sessionColumns = "id, tenant, ordinal, last_access, sheet, root"

    /// Locks every session of the chains of the ids in $1, in id order. A chain's root never
    /// changes, so finding it without a lock is safe.
    static let chainLock = """
        SELECT \(sessionColumns) FROM sessions WHERE root IN (SELECT root FROM sessions WHERE id = ANY($1::text[]))
        ORDER BY id FOR UPDATE
        """

    /// Step 1. Returns with the transaction open and the group's rows locked.
    mutating func load(_ connection: PostgresConnection) throws {
        var locked = Set<SessionID>()
        var read = Set<SessionID>()
        var counts = false
        var keyNames: [KeyName] = []
        var creatingTenants = Set<String>()
        var eventsAfter: [SessionID: UInt64] = [:]
        for job in jobs {
            let request = job.request
            if let id = request.lockedSession { locked.insert(id) }
            if let id = request.readSession { read.insert(id) }
            counts = counts || request.countsSessions
            switch request {
            case .create(_, _, let tenant, _, let once):
                creatingTenants.insert(tenant.name)
                if let once { keyNames.append(KeyName(scope: "", key: once.request.key)) }
            case .apply(_, let id, _, _, let once?):
                keyNames.append(KeyName(scope: id.description, key: once.request.key))
            case .events(let id, _, let after?):
                eventsAfter[id] = min(after, eventsAfter[id] ?? .max)
            default:
                break
            }
        }
        read.subtract(locked)
        var statements = [PostgresConnection.Statement("BEGIN")]
        var slots: [Slot] = []
        func add(_ slot: Slot, _ sql: String, _ parameters: [String?]) {
            statements.append(PostgresConnection.Statement(sql, parameters))
            slots.append(slot)
        }
        if !locked.isEmpty {
            add(.sessions, Self.chainLock, [RowCoding.array(locked.map(\.description))])
        }
        if !read.isEmpty {
            add(.sessions, "SELECT \(Self.sessionColumns) FROM sessions WHERE id = ANY($1::text[])",
                [RowCoding.array(read.map(\.description))])
        }
        if counts {
            add(.counters, "SELECT sessions, last_ordinal FROM counters FOR UPDATE", [])
            if limits.maxSessionsPerTenant != nil, !creatingTenants.isEmpty {
                add(.tenantCounts, "SELECT tenant, count(*) FROM sessions WHERE tenant = ANY($1::text[]) GROUP BY tenant",
                    [RowCoding.array(Array(creatingTenants))])
            }
        }
        if !keyNames.isEmpty {
            add(.keys, """
                SELECT scope, key, fingerprint_value, fingerprint_check, status, headers, body, stored_at FROM idempotency_keys
                WHERE (scope, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
                """, [RowCoding.array(keyNames.map(\.scope)), RowCoding.array(keyNames.map(\.key))])
        }
        if !eventsAfter.isEmpty {
            add(.events, """
                SELECT e.session_id, e.event FROM events e JOIN unnest($1::text[], $2::bigint[]) AS w(id, after)
                ON e.session_id = w.id AND e.seq > w.after ORDER BY e.session_id, e.seq
                """, [RowCoding.array(eventsAfter.keys.map(\.description)),
                      "{" + eventsAfter.values.map { String(min($0, UInt64(Int64.max))) }.joined(separator: ",") + "}"])
        }
        for (index, job) in jobs.enumerated() {
            switch job.request {
            case .list(let tenant, let phase, let after, let limit):
                add(.list(index), """
                    SELECT \(Self.sessionColumns) FROM sessions WHERE tenant = $1 AND ordinal > $2
                    AND ($3::text IS NULL OR phase = $3) ORDER BY ordinal LIMIT $4
                    """, [tenant.name, String(min(after, UInt64(Int64.max))), phase?.rawValue, String(limit + 1)])
            case .statistics:
                add(.statistics, "SELECT tenant, phase, count(*) FROM sessions GROUP BY tenant, phase", [])
            default:
                break
            }
        }
        let answers = try connection.pipeline(statements)
        for (slot, rows) in zip(slots, answers.dropFirst()) { try take(rows, as: slot) }
        try lockLateMembers(connection, locked: locked)
    }

    /// A session presented over a locked one by a transaction that committed while this one
    /// waited for the lock is not in the first result (READ COMMITTED re-reads the rows it
    /// locked, but finds no new ones); its parent, re-read, names it. Lock those too, so a
    /// cascade sees the whole chain.
    private mutating func lockLateMembers(_ connection: PostgresConnection, locked: Set<SessionID>) throws {
        for _ in 0..<SheetChain.maximumDepth where !locked.isEmpty {
            let missing = rows.values.flatMap { [$0.sheet.child, $0.sheet.parent] }.compactMap { $0 }.filter { rows[$0] == nil }
            guard !missing.isEmpty else { return }
            let found = try connection.execute(Self.chainLock, [RowCoding.array(missing.map(\.description))])
            guard found.count > 0 else { return }
            var added = false
            for values in found.values {
                let (id, row) = try row(values)
                if rows[id] == nil {
                    rows[id] = row
                    added = true
                }
            }
            if !added { return }
        }
    }

    private enum Slot {
        case sessions, counters, tenantCounts, keys, events, statistics
        case list(Int)
    }

    private mutating func take(_ result: PostgresRows, as slot: Slot) throws {
        switch slot {
        case .sessions:
            for values in result.values {
                let (id, row) = try row(values)
                rows[id] = row
            }
        case .counters:
            sessionCount = Int(RowCoding.integer(result.values.first?[0]))
            lastOrdinal = RowCoding.unsigned(result.values.first?[1])
        case .tenantCounts:
            for values in result.values { tenantCounts[Tenant(values[0] ?? "")] = Int(RowCoding.integer(values[1])) }
        case .keys:
            for values in result.values {
                let answer = StoredAnswer(status: Int(RowCoding.integer(values[4])), headers: RowCoding.headers(values[5] ?? ""),
                                          body: RowCoding.bytes(values[6] ?? ""))
                keys[KeyName(scope: values[0] ?? "", key: values[1] ?? "")] = StoredKey(
                    value: RowCoding.unsigned(values[2]), check: RowCoding.unsigned(values[3]), answer: answer,
                    storedAt: RowCoding.integer(values[7]))
            }
        case .events:
            for values in result.values {
                guard let id = SessionID(values[0] ?? "") else { continue }
                events[id, default: []].append(try coding.event(values[1] ?? ""))
            }
        case .list(let index):
            lists[index] = try result.values.map { try row($0) }
        case .statistics:
            for values in result.values {
                let count = Int(RowCoding.integer(values[2]))
                statistics.tenants[Tenant(values[0] ?? ""), default: 0] += count
                if let phase = Phase(rawValue: values[1] ?? "") { statistics.phases[phase, default: 0] += count }
            }
        }
    }

    private func row(_ values: [String?]) throws -> (SessionID, Row) {
        let text = values[0] ?? ""
        guard let id = SessionID(text) else { throw RowCoding.Unreadable(description: "a session row has the id \"\(text)\"") }
        let sheet = try coding.sheet(values[4] ?? "", id: text)
        return (id, Row(sheet: sheet, tenant: Tenant(values[1] ?? ""), root: values[5] ?? text, ordinal: RowCoding.unsigned(values[2]),
                        lastAccess: RowCoding.integer(values[3]), committedVersion: sheet.version))
    }

    /// Step 3: writes what step 2 changed and commits. Returns the sessions named in the
    /// notification (changed or deleted).
    func write(_ connection: PostgresConnection) throws -> [SessionID] {
        var statements = [PostgresConnection.Statement]()
        var notified: [SessionID] = []
        for (id, row) in rows {
            let key = id.description
            switch row.change {
            case .none:
                break
            case .touched:
                statements.append(.init("UPDATE sessions SET last_access = $2 WHERE id = $1", [key, String(row.lastAccess)]))
            case .created:
                statements.append(.init("""
                    INSERT INTO sessions (id, tenant, ordinal, phase, version, last_access, sheet, root)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                    """, [key, row.tenant.name, String(row.ordinal), row.sheet.phase.rawValue, String(row.sheet.version),
                          String(row.lastAccess), coding.text(of: row.sheet, id: id), row.root]))
                for event in row.sheet.events {
                    statements.append(.init("INSERT INTO events (session_id, seq, event) VALUES ($1, $2, $3)",
                                            [key, String(event.seq), coding.text(of: event)]))
                }
            case .changed:
                statements.append(.init("""
                    UPDATE sessions SET phase = $2, version = $3, last_access = $4, sheet = $5 WHERE id = $1
                    """, [key, row.sheet.phase.rawValue, String(row.sheet.version), String(row.lastAccess),
                          coding.text(of: row.sheet, id: id)]))
                for event in row.newEvents {
                    statements.append(.init("INSERT INTO events (session_id, seq, event) VALUES ($1, $2, $3)",
                                            [key, String(event.seq), coding.text(of: event)]))
                }
                // Events past the retained ones go in steps of `pruneStep` versions, not with
                // every change: readers never see them (pages stop at the retained window), and
                // a statement less per change is most of a long-lived session's writes.
                let retained = UInt64(Sheet.retainedEvents)
                if row.sheet.version > retained, row.sheet.version / Self.pruneStep != row.committedVersion / Self.pruneStep {
                    statements.append(.init("DELETE FROM events WHERE session_id = $1 AND seq <= $2",
                                            [key, String(row.sheet.version - retained)]))
                }
                notified.append(id)
            case .deleted:
                statements.append(.init("DELETE FROM sessions WHERE id = $1", [key]))
                statements.append(.init("DELETE FROM events WHERE session_id = $1", [key]))
                notified.append(id)
            }
        }
        for (name, stored) in keys where stored.isNew {
            statements.append(.init("""
                INSERT INTO idempotency_keys (scope, key, fingerprint_value, fingerprint_check, status, headers, body, stored_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7::bytea, $8) ON CONFLICT (scope, key) DO UPDATE SET
                fingerprint_value = $3, fingerprint_check = $4, status = $5, headers = $6, body = $7::bytea, stored_at = $8
                """, [name.scope, name.key, RowCoding.signed(stored.value), RowCoding.signed(stored.check),
                      String(stored.answer.status), RowCoding.text(of: stored.answer.headers),
                      RowCoding.bytea(stored.answer.body), String(stored.storedAt)]))
        }
        if countsChanged {
            statements.append(.init("UPDATE counters SET sessions = $1, last_ordinal = $2",
                                    [String(sessionCount), String(lastOrdinal)]))
        }
        for payload in Notification.payloads(naming: notified) {
            statements.append(.init("SELECT pg_notify($1, $2)", [Notification.channel, payload]))
        }
        statements.append(.init("COMMIT"))
        _ = try connection.pipeline(statements)
        return notified
    }
}
