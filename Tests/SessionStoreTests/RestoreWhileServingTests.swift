import Polling
import SessionStore
import SheetCore
import Testing

/// A store that serves while start-up still reads its archive (`SessionStore.awaitingRestore`):
/// calls made before `restore` wait for it and then see every restored session, as if the store
/// had started with them.
@Suite("SessionStore restore while serving")
struct RestoreWhileServingTests {
    /// Three idle sessions as an archive would give them back, ordinals 1 to 3.
    static func contents() throws -> ArchiveContents {
        let now = Timestamp(millisecondsSince1970: 1_764_422_931_000)
        let sessions = try (1...3).map { ordinal in
            RestoredSession(id: SessionID.random(), ordinal: UInt64(ordinal), sheet: Sheet(configuration: try twoDetents(), now: now),
                            lastAccess: now.millisecondsSince1970, tenant: me)
        }
        return ArchiveContents(sessions: sessions, highestOrdinal: 3)
    }

    static func store(maxSessions: Int = 1000) -> SessionStore {
        var configuration = SessionStore.Configuration()
        configuration.maxSessions = maxSessions
        configuration.shardCount = 4
        configuration.clock = ManualClock().storeClock
        return SessionStore.awaitingRestore(configuration: configuration, archive: VolatileArchive())
    }

    /// Returns once `count` calls are parked waiting for the restore; the deadline only ends a failure.
    static func parked(_ count: Int, on store: SessionStore) async throws {
        try #require(await eventually { store.callsAwaitingRestore >= count }, "no call waited for the restore")
    }

    @Test func aSessionAskedForBeforeItIsReadIsAnsweredOnceItIs() async throws {
        let store = Self.store()
        let contents = try Self.contents()
        let wanted = contents.sessions[1]
        let read = Task { try await store.session(wanted.id, of: me) }
        let dragged = Task { try await store.apply(.drag(.detent(.medium)), to: contents.sessions[2].id, of: me) }
        try await Self.parked(2, on: store)
        #expect(!store.isRestored)
        await store.restore(contents)
        #expect(store.isRestored)
        #expect(try await read.value.sheet == wanted.sheet)
        #expect(try await dragged.value.session.sheet.detent == .medium)
        #expect(await refusal { () async throws(StoreError) in try await store.session(SessionID.random(), of: me) } == .sessionNotFound)
    }

    @Test func inPlaceCallsStepAsideUntilTheRestore() async throws {
        let store = Self.store()
        let contents = try Self.contents()
        let id = contents.sessions[0].id
        #expect(store.readInPlace(id, of: me) == nil)
        #expect(store.changeInPlace(.drag(.detent(.medium)), to: id, of: me) == nil)
        #expect(store.createInPlace(try twoDetents(), for: me) == nil)
        #expect(store.sessionCount == 0, "a declined create counts nothing")
        await store.restore(contents)
        let configuration = try twoDetents()
        #expect(await retried { store.createInPlace(configuration, for: me) } != nil, "a shard the restore filled stayed busy")
        guard case .success(let snapshot)? = store.readInPlace(id, of: me)?.result else {
            Issue.record("no in-place answer after the restore")
            return
        }
        #expect(snapshot.id == id)
    }

    /// `--max-sessions` 3 with three sessions in the file: a create made before they are read
    /// must not slip in as the fourth.
    @Test func aCreateWhileRestoringCountsTheSessionsNotReadYet() async throws {
        let store = Self.store(maxSessions: 3)
        let configuration = try twoDetents()
        let create = Task { await refusal { () async throws(StoreError) in try await store.create(configuration, for: me) } }
        try await Self.parked(1, on: store)
        await store.restore(try Self.contents())
        #expect(await create.value == .capacityExceeded(limit: 3))
        #expect(store.sessionCount == 3)
        #expect(store.sessionsPerTenant == [me: 3])
    }

    @Test func aListWhileRestoringShowsEverySessionAndNewOnesAfterThem() async throws {
        let store = Self.store()
        let contents = try Self.contents()
        let list = Task { try await store.list(of: me, phase: nil, after: 0, limit: 10) }
        let configuration = try twoDetents()
        let create = Task { try await store.create(configuration, for: me) }
        let phases = Task { await store.phaseCounts() }
        try await Self.parked(3, on: store)
        await store.restore(contents)
        let page = try await list.value
        let created = try await create.value
        // The list may have run before or after the create once released; the restored three
        // come first either way, and a new session's ordinal is past every restored one.
        #expect(Array(page.sessions.prefix(3).map(\.id)) == contents.sessions.map(\.id))
        let after = try await store.list(of: me, phase: nil, after: 3, limit: 10)
        #expect(after.sessions.map(\.id) == [created.id])
        #expect(await phases.value.values.reduce(0, +) >= 3)
        #expect(store.sessionCount == 4)
    }
}
