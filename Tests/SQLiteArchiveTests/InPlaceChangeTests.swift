import CSQLite
import Locking
import Polling
@testable import SessionStore
import SheetCore
@testable import SQLiteArchive
import Testing
import Timekeeping

/// Changes made on the calling thread (`SessionStore.changeInPlace`, how sheetd answers a drag
/// without a task) against a real SQLite archive: the answer waits for the commit, event readers
/// see the change only after it, in order and once, and a session changed in place with nobody
/// reading it is settled by whoever needs it next. Commits are held back for real: another
/// connection holds SQLite's write lock, so the writer cannot commit until it lets go.
@Suite("SQLite archive: changes made in place")
struct InPlaceChangeTests {
    /// A store over a SQLite archive in `directory` whose writer waits (up to ten minutes, which
    /// only ends a failure) for a write lock another connection holds; its timers run on `clock`.
    static func store(in directory: TemporaryDirectory, clock: Timekeeping.ManualClock) throws -> SessionStore {
        var options = SQLiteArchive.Options()
        options.busyTimeoutMilliseconds = 600_000
        let archive = try SQLiteArchive.open(directory: directory.path, options: options)
        var configuration = SessionStore.Configuration()
        configuration.timerClock = clock
        configuration.sessionTTL = .seconds(3600)
        configuration.shardCount = 4
        let start = clock.now
        configuration.clock = StoreClock {
            let (seconds, attoseconds) = (clock.now - start).components
            return Timestamp(millisecondsSince1970: 1_764_422_931_000 + seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        }
        return SessionStore(configuration: configuration, archive: archive, restoring: try archive.load())
    }

    /// Another connection to the file, holding SQLite's write lock while `locked`.
    final class WriteLock {
        private let database: SQLiteDatabase

        init(_ directory: TemporaryDirectory) throws {
            database = try SQLiteDatabase(path: directory.file, flags: SQLITE_OPEN_READWRITE)
            sqlite3_busy_timeout(database.handle, 600_000)   // housekeeping may hold it a moment
        }

        func lock() throws { try database.execute("BEGIN IMMEDIATE") }
        func unlock() throws { try database.execute("ROLLBACK") }
    }

    /// What `PendingCommit.whenSettled` reported (committed or not), and how often.
    final class Settlement: Sendable {
        private let reports = LockedValue<[Bool]>([])

        func record(_ committed: Bool) { reports.withLock { $0.append(committed) } }

        /// Records when `change` may be shown: now when nothing is pending (the writer may have
        /// committed before the change was handed back), else once its pending part says so.
        func follow<Value>(_ change: InPlace<Value>) {
            guard let pending = change.pending else { return record(true) }
            pending.whenSettled { self.record($0) }
        }
        var count: Int { reports.withLock { $0.count } }
        var reported: [Bool] { reports.withLock { $0 } }
    }

    /// Collects the seqs of the events a subscription delivers.
    final class Collector: EventSubscriber {
        private let seqs = LockedValue<[UInt64]>([])

        func receive(_ events: [SheetEvent]) -> Bool {
            seqs.withLock { $0 += events.map(\.seq) }
            return true
        }

        func ended(_ reason: SubscriptionEnd) {}
        var received: [UInt64] { seqs.withLock { $0 } }
    }

    /// `body` (a change or read in place) once the shard is idle: right after an await, the turn
    /// that ended it may still be leaving the shard (nil: nothing done).
    static func inPlace<Value>(_ body: () -> InPlace<Value>?) async throws -> InPlace<Value> {
        try #require(await retried { body() }, "the shard stayed busy")
    }

    static func seqs(_ store: SessionStore, _ id: SessionID, after: UInt64 = 0) async throws -> [UInt64] {
        try await store.events(of: id, tenant: .default, after: after).events.map(\.seq)
    }

    @Test("a change made in place is answered once its commit is done, not before, and a restart finds it")
    func answeredAfterCommit() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try Self.store(in: directory, clock: Timekeeping.ManualClock())
        let session = try await store.create(try seedConfiguration(), for: .default)
        let writeLock = try WriteLock(directory)
        try writeLock.lock()

        let change = try await Self.inPlace { store.changeInPlace(.drag(.detent(.medium)), to: session.id, of: .default) }
        #expect(try change.result.get().session.sheet.detent == .medium)
        #expect(change.pending != nil, "a durable change waits for its commit")
        let settlement = Settlement()
        settlement.follow(change)
        // The writer cannot commit while the lock is held: nothing is answered, no reader sees it.
        #expect(settlement.count == 0)
        #expect(try await Self.seqs(store, session.id) == [1])

        try writeLock.unlock()
        #expect(await eventually { settlement.count == 1 })
        #expect(settlement.reported.allSatisfy { $0 })
        #expect(try await Self.seqs(store, session.id) == [1, 2])
        try await store.close()

        let again = try SQLiteArchive.open(directory: directory.path)
        defer { again.close() }
        let restored = try #require(try again.load().sessions.first { $0.id == session.id })
        #expect(restored.sheet.detent == .medium)
        #expect(restored.sheet.version == 2)
    }

    @Test("a session created in place is answered once its commit is done, not before, and a restart finds it")
    func createdAfterCommit() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try Self.store(in: directory, clock: Timekeeping.ManualClock())
        let writeLock = try WriteLock(directory)
        try writeLock.lock()

        let made = try await Self.inPlace { store.createInPlace(try! seedConfiguration(), for: .default) }
        let session = try made.result.get()
        #expect(made.pending != nil, "a durable create waits for its commit")
        let settlement = Settlement()
        settlement.follow(made)
        #expect(settlement.count == 0)
        // A read shows the session only once it is stored.
        #expect(try await Self.inPlace { store.readInPlace(session.id, of: .default) }.pending != nil)

        try writeLock.unlock()
        #expect(await eventually { settlement.count == 1 })
        #expect(settlement.reported == [true])
        #expect(try await Self.seqs(store, session.id) == [1])
        try await store.close()

        let again = try SQLiteArchive.open(directory: directory.path)
        defer { again.close() }
        let restored = try #require(try again.load().sessions.first { $0.id == session.id })
        #expect(restored.sheet == session.sheet)
    }

    @Test("sessions created in place and left alone keep no commit behind: each shard's next create drops the done ones")
    func createsLeaveNothingBehind() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try Self.store(in: directory, clock: Timekeeping.ManualClock())
        var made: [SessionID] = []
        for _ in 0..<64 {
            let create = try await Self.inPlace { store.createInPlace(try! seedConfiguration(), for: .default) }
            let settlement = Settlement()
            settlement.follow(create)
            #expect(await eventually { settlement.count == 1 })
            made.append(try create.result.get().id)
        }
        // Every create was answered before the next was made, so each shard keeps at most the
        // entry of its newest create: the earlier ones were dropped by the creates after them.
        var kept = 0
        for id in made { if await store.shard(for: id).inFlight[id] != nil { kept += 1 } }
        #expect(kept <= 4, "entries of settled creates stayed: \(kept) of \(made.count)")   // the store has 4 shards
        for id in made { #expect(try await Self.seqs(store, id) == [1]) }
        try await store.close()
    }

    @Test("a refusal or a read in place shows the session as it stands, so it waits for the commit of what it shows")
    func refusalsAndReadsWait() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try Self.store(in: directory, clock: Timekeeping.ManualClock())
        let session = try await store.create(try seedConfiguration(), for: .default)
        #expect(try await Self.inPlace { store.readInPlace(session.id, of: .default) }.pending == nil, "nothing outstanding: answered now")
        let writeLock = try WriteLock(directory)
        try writeLock.lock()
        _ = try await Self.inPlace { store.changeInPlace(.drag(.detent(.medium)), to: session.id, of: .default) }

        let stale = try await Self.inPlace {
            store.changeInPlace(.drag(.detent(.large)), to: session.id, of: .default, ifMatch: AcceptedVersions([1]))
        }
        #expect(throws: StoreError.self) { try stale.result.get() }
        let read = try await Self.inPlace { store.readInPlace(session.id, of: .default) }
        #expect(try read.result.get().sheet.version == 2)
        let settlement = Settlement()
        try #require(stale.pending).whenSettled { settlement.record($0) }
        try #require(read.pending).whenSettled { settlement.record($0) }
        #expect(settlement.count == 0)

        try writeLock.unlock()
        #expect(await eventually { settlement.count == 2 })
        #expect(settlement.reported.allSatisfy { $0 })
        try await store.close()
    }

    @Test("readers of a session see a change made in place only after its commit, each once and in order",
          arguments: [true, false])
    func readersAfterCommit(subscribedBefore: Bool) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let clock = Timekeeping.ManualClock()
        let store = try Self.store(in: directory, clock: clock)
        let session = try await store.create(try seedConfiguration(), for: .default)
        // There before the change: the change's own answer publishes after the commit. Without
        // it, the readers arriving before the commit arrange the publication themselves.
        let early = Collector()
        if subscribedBefore { _ = try await store.subscribe(early, to: session.id, of: .default, after: nil) }
        let writeLock = try WriteLock(directory)
        try writeLock.lock()

        let change = try await Self.inPlace { store.changeInPlace(.drag(.detent(.medium)), to: session.id, of: .default) }
        #expect(change.pending != nil)
        let settlement = Settlement()
        settlement.follow(change)
        let late = Collector()
        _ = try await store.subscribe(late, to: session.id, of: .default, after: nil)
        let polled = LockedValue<WaitOutcome?>(nil)
        let poll = Task {
            let outcome = try await store.waitForEvents(of: session.id, tenant: .default, after: 1, timeout: .seconds(60))
            polled.withLock { $0 = outcome }
        }
        defer { poll.cancel() }
        #expect(await eventually { clock.sleeperCount == 1 }, "the long-poll parked")
        #expect(early.received.isEmpty && late.received.isEmpty && settlement.count == 0)

        try writeLock.unlock()
        #expect(await eventually { polled.withLock { $0 } != nil }, "the long-poll got the event")
        guard case .events(let page)? = polled.withLock({ $0 }) else {
            Issue.record("the long-poll was not answered with events")
            return
        }
        #expect(page.events.map(\.seq) == [2])
        #expect(await eventually { settlement.count == 1 && late.received == [2] })

        // With readers there, the next change in place is published by its own request, and one
        // through a task after it.
        settlement.follow(try await Self.inPlace { store.changeInPlace(.drag(.detent(.large)), to: session.id, of: .default) })
        _ = try await store.apply(.drag(.detent(.medium)), to: session.id, of: .default)
        #expect(await eventually { settlement.count == 2 && late.received.count == 3 })
        #expect(late.received == [2, 3, 4])
        #expect(early.received == (subscribedBefore ? [2, 3, 4] : []))
        try await store.close()
    }

    @Test("a session changed in place with nobody reading is settled by whoever comes next: readers, its next change, the sweep")
    func settledByWhoeverComesNext() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let clock = Timekeeping.ManualClock()
        let store = try Self.store(in: directory, clock: clock)
        let read = try await store.create(try seedConfiguration(), for: .default)
        let swept = try await store.create(try seedConfiguration(), for: .default)
        let settlement = Settlement()
        for (index, (id, detent)) in [(read.id, Detent.medium), (read.id, .large), (swept.id, .medium)].enumerated() {
            settlement.follow(try await Self.inPlace { store.changeInPlace(.drag(.detent(detent)), to: id, of: .default) })
            #expect(await eventually { settlement.count == index + 1 })
        }

        // Its events are there for a reader, and a subscription's backlog holds each once.
        #expect(try await Self.seqs(store, read.id) == [1, 2, 3])
        let stream = Collector()
        let token = try await store.subscribe(stream, to: read.id, of: .default, after: 1)
        #expect(stream.received == [2, 3])
        _ = try await store.apply(.drag(.detent(.medium)), to: read.id, of: .default)
        #expect(await eventually { stream.received == [2, 3, 4] })

        // Nothing outstanding keeps an idle session from the sweep.
        clock.advance(by: .seconds(7200))
        await store.unsubscribe(token)
        #expect(await store.sweepIdleSessions() == 2)
        try await store.close()
    }

    @Test("a change made in place after the archive closed is never acknowledged")
    func afterClose() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let store = try Self.store(in: directory, clock: Timekeeping.ManualClock())
        let session = try await store.create(try seedConfiguration(), for: .default)
        try await store.close()
        let change = try await Self.inPlace { store.changeInPlace(.drag(.detent(.medium)), to: session.id, of: .default) }
        let settlement = Settlement()
        try #require(change.pending, "the failed commit is what the answer waits for").whenSettled { settlement.record($0) }
        #expect(settlement.reported == [false], "never stored, so never acknowledged")
    }
}
