import Dispatch
import Foundation
import Locking
import SessionStore
import SheetCore
import Timekeeping

/// A thread of its own with a connection of its own, serving the jobs queued for it in groups:
/// whatever queued while the previous group was in the database forms the next one, so there is
/// no timer and no added latency when idle, and larger groups (fewer round trips per request)
/// under load. Sessions are spread over several committers by id, so one session's changes from
/// this instance always go through the same committer, in order.
///
/// When the database is unreachable the jobs fail at once with `unavailable` (the API's 503)
/// rather than queue; the committer connects again on a later job, waiting longer after each
/// failed attempt (up to `maximumBackoff`).
// @unchecked Sendable: `connection`, `coding`, `retryAt` and `backoff` are only used by the
// committer's own thread (started in `init`); what other threads touch is `queue` (a
// LockedValue) and the semaphores.
final class Committer: @unchecked Sendable {
    static let maximumGroup = 256
    static let initialBackoff: Duration = .milliseconds(50)
    static let maximumBackoff: Duration = .seconds(1)

    private struct Queue {
        var jobs: [Job] = []
        var closed = false
    }

    private let index: Int
    private let context: StoreContext
    private let queue = LockedValue(Queue())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var connection: PostgresConnection?
    private let coding = RowCoding()
    private var retryAt: ContinuousClock.Instant?
    private var backoff = Committer.initialBackoff

    init(index: Int, context: StoreContext) {
        self.index = index
        self.context = context
        let thread = Thread { [self] in run() }
        thread.name = "sheetd-pg-\(index)"
        thread.start()
    }

    /// Queues `request` and returns its reply once its transaction committed (or failed).
    func perform(_ request: Request) async -> Reply {
        await withUnsafeContinuation { continuation in
            let accepted = queue.withLock { queue in
                guard !queue.closed else { return false }
                queue.jobs.append(Job(request: request, continuation: continuation))
                return true
            }
            if accepted {
                wake.signal()
            } else {
                continuation.resume(returning: .failed(StoreError(.shuttingDown)))
            }
        }
    }

    /// Serves what is queued, then ends the thread and closes the connection.
    func close() {
        queue.withLock { $0.closed = true }
        wake.signal()
        finished.wait()
    }

    private func run() {
        while true {
            wake.wait()
            let (jobs, closed) = queue.withLock { queue in
                defer { queue.jobs = [] }
                return (queue.jobs, queue.closed)
            }
            if jobs.isEmpty {
                if closed { break }
                continue
            }
            serve(jobs)
        }
        connection = nil
        finished.signal()
    }

    private func serve(_ jobs: [Job]) {
        var group: [Job] = []
        for job in jobs {
            if case .sweep(let sweep) = job.request {
                serveGroup(group)
                group = []
                job.finish(self.sweep(sweep))
                continue
            }
            group.append(job)
            if group.count == Self.maximumGroup {
                serveGroup(group)
                group = []
            }
        }
        serveGroup(group)
    }

    private func serveGroup(_ jobs: [Job]) {
        guard !jobs.isEmpty else { return }
        let outcome = transact { connection, stage throws in
            var batch = Batch(jobs: jobs, limits: context.limits, now: context.clock.now(), coding: coding)
            try batch.load(connection)
            let replies = batch.serve()
            stage = .committing
            let notified = try batch.write(connection)
            return (replies, notified, batch.touched, batch.staleReads)
        }
        switch outcome {
        case .success(let (replies, notified, touched, staleReads)):
            context.committed(changed: notified, touched: touched)
            if !staleReads.isEmpty { saveReads(staleReads) }
            for (job, reply) in zip(jobs, replies) { job.finish(reply) }
        case .failure(let error):
            for job in jobs { job.finish(.failed(error)) }
        }
    }

    enum Stage {
        /// Nothing is written yet: a lost connection loses nothing, and the group may run again.
        case loading
        /// `COMMIT` may have reached the server: a lost connection leaves the outcome unknown.
        case committing
    }

    /// Runs `body` in a transaction it begins and commits. A lost connection before the commit
    /// is tried once more on a new connection (nothing of it was written); a deadlock or
    /// serialisation failure is run again; anything else fails with `unavailable`.
    private func transact<T>(_ body: (PostgresConnection, inout Stage) throws -> T) -> Result<T, StoreError> {
        var lastError = "no attempt was made"
        for _ in 0..<4 {
            guard let connection = connected() else { return .failure(unavailable(context.health.reason ?? lastError)) }
            var stage = Stage.loading
            do {
                return .success(try body(connection, &stage))
            } catch let error as PostgresError {
                lastError = error.message
                if error.isConnectionLost {
                    self.connection = nil
                    context.health.lost(index, "the connection to PostgreSQL was lost: \(error.message)")
                    if stage == .committing {
                        return .failure(unavailable("the connection to PostgreSQL was lost during a commit, so its outcome is unknown; retry with the same Idempotency-Key to learn it"))
                    }
                    continue
                }
                rollBack(connection)
                if error.isRetryable { continue }
                context.reportFailure("PostgreSQL refused a statement: \(error.message)")
                return .failure(unavailable("PostgreSQL refused a statement: \(error.message)"))
            } catch {
                rollBack(connection)
                context.reportFailure("\(error)")
                return .failure(unavailable("\(error)"))
            }
        }
        return .failure(unavailable(lastError))
    }

    private func unavailable(_ reason: String) -> StoreError {
        StoreError(.unavailable(reason: reason))
    }

    private func rollBack(_ connection: PostgresConnection) {
        do { try connection.execute("ROLLBACK") } catch { self.connection = nil }
    }

    /// The connection, opened again if it was lost and the backoff has passed; nil when the
    /// database cannot be reached now.
    private func connected() -> PostgresConnection? {
        if let connection, connection.isConnected { return connection }
        connection = nil
        let clock = context.timerClock
        // The backoff holds only while the store is known to be down: once the listener has
        // reached the database again (and cleared the health), the next job connects at once
        // instead of failing for the rest of the wait.
        if let retryAt, clock.now < retryAt, context.health.reason != nil { return nil }
        do {
            let opened = try PostgresConnection(context.url)
            connection = opened
            retryAt = nil
            backoff = Self.initialBackoff
            context.health.restored(index)
            return opened
        } catch {
            context.health.lost(index, "PostgreSQL cannot be reached: \(error.message)")
            retryAt = clock.now + backoff
            backoff = min(backoff * 2, Self.maximumBackoff)
            return nil
        }
    }

    // MARK: The idle sweep

    /// Saves when sessions were last read, in a transaction of its own (it holds no other lock
    /// while it waits for theirs), before the reads are answered.
    private func saveReads(_ ids: [SessionID]) {
        let now = context.clock.now().millisecondsSince1970
        let outcome = transact { connection, _ throws in
            _ = try connection.pipeline(Self.touchStatements(ids.map { ($0, now) }))
        }
        if case .failure(let error) = outcome { context.reportFailure("saving last reads: \(PostgresStore.reason(of: error))") }
    }

    /// Last accesses raised to `touches`, the rows locked in id order first.
    static func touchStatements(_ touches: [(SessionID, Int64)]) -> [PostgresConnection.Statement] {
        let sorted = touches.sorted { $0.0.description < $1.0.description }
        let ids = RowCoding.array(sorted.map(\.0.description))
        return [
            .init("BEGIN"),
            .init("SELECT id FROM sessions WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE", [ids]),
            .init("""
                UPDATE sessions s SET last_access = GREATEST(s.last_access, w.at)
                FROM unnest($1::text[], $2::bigint[]) AS w(id, at) WHERE s.id = w.id
                """, [ids, "{" + sorted.map { String($0.1) }.joined(separator: ",") + "}"]),
            .init("COMMIT"),
        ]
    }

    /// Saves the last reads, then removes idle sessions in slices (each its own transaction,
    /// rows taken with `SKIP LOCKED`: a session busy in a group is not idle, and two instances
    /// sweeping at once take disjoint rows, so each expired session is removed exactly once).
    /// A chain expires as one: a session goes only when every session of its chain is idle.
    private func sweep(_ sweep: Sweep) -> Reply {
        let outcome = transact { connection, _ throws -> [SessionID] in
            if !sweep.touched.isEmpty {
                _ = try connection.pipeline(Self.touchStatements(sweep.touched.map { ($0.key, $0.value) }))
            }
            var removed: [SessionID] = []
            while true {
                let rows = try connection.pipeline([
                    .init("BEGIN"),
                    .init("""
                        WITH doomed AS (SELECT id FROM sessions s WHERE last_access < $1
                            AND NOT EXISTS (SELECT 1 FROM sessions o WHERE o.root = s.root AND o.last_access >= $1)
                            ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED),
                        gone AS (DELETE FROM sessions s USING doomed WHERE s.id = doomed.id RETURNING s.id),
                        events_gone AS (DELETE FROM events e USING gone WHERE e.session_id = gone.id),
                        counted AS (UPDATE counters SET sessions = sessions - (SELECT count(*) FROM gone) WHERE EXISTS (SELECT 1 FROM gone))
                        SELECT id FROM gone
                        """, [String(sweep.idleBefore)]),
                ])
                let slice = rows[1].values.compactMap { $0[0].flatMap { SessionID($0) } }
                var closing: [PostgresConnection.Statement] = Notification.payloads(naming: slice).map {
                    .init("SELECT pg_notify($1, $2)", [Notification.channel, $0])
                }
                closing.append(.init("COMMIT"))
                _ = try connection.pipeline(closing)
                removed += slice
                if rows[1].count < 500 { break }
            }
            _ = try connection.pipeline([
                .init("DELETE FROM idempotency_keys WHERE stored_at < $1", [String(sweep.keysBefore)]),
                .init("""
                    DELETE FROM idempotency_keys WHERE (scope, key) IN
                    (SELECT scope, key FROM idempotency_keys ORDER BY stored_at DESC OFFSET $1)
                    """, [String(sweep.keyCapacity)]),
            ])
            return removed
        }
        switch outcome {
        case .success(let removed):
            context.committed(changed: removed, touched: [])
            return .swept(removed: removed)
        case .failure(let error):
            return .failed(error)
        }
    }
}
