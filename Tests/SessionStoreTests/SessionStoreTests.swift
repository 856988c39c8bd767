import Locking
import SessionStore
import SheetCore
import Testing

/// A clock the test moves by hand: the store's idle sweep and timestamps read it.
final class ManualClock: Sendable {
    private let milliseconds = LockedValue<Int64>(1_764_422_931_000)
    var storeClock: StoreClock { StoreClock { [self] in Timestamp(millisecondsSince1970: milliseconds.withLock { $0 }) } }
    func advance(by step: Duration) {
        let (seconds, attoseconds) = step.components
        milliseconds.withLock { $0 += seconds * 1000 + attoseconds / 1_000_000_000_000_000 }
    }
}

func makeStore(maxSessions: Int = 1000, ttl: Duration = .seconds(3600), clock: ManualClock = ManualClock(),
               shards: Int = 4) -> SessionStore {
    var configuration = SessionStore.Configuration()
    configuration.maxSessions = maxSessions
    configuration.sessionTTL = ttl
    configuration.shardCount = shards
    configuration.clock = clock.storeClock
    return SessionStore(configuration: configuration)
}

func twoDetents() throws -> SheetConfiguration {
    try SheetConfiguration(detents: [.large, .medium], defaultDetent: .large, thresholdDetent: .height(300))
}

/// The code a store call refused with; nil if it did not refuse.
func refusal<T>(_ call: () async throws(StoreError) -> T) async -> StoreError.Code? {
    do {
        _ = try await call()
        return nil
    } catch {
        return error.code
    }
}

let me = Tenant.default

@Suite("SessionStore")
struct SessionStoreTests {
    @Test func aChangeIsSeenByReadsAndEvents() async throws {
        let store = makeStore()
        let created = try await store.create(try twoDetents(), for: me)
        #expect(created.sheet.version == 1)
        let dragged = try await store.apply(.drag(.detent(.medium)), to: created.id, of: me)
        #expect(dragged.session.sheet.detent == .medium)
        #expect(try await store.session(created.id, of: me).sheet.version == 2)
        let page = try await store.events(of: created.id, tenant: me, after: 0)
        #expect(page.events.map(\.seq) == [1, 2])
        #expect(page.version == 2)
    }

    @Test func aStaleIfMatchIsRefusedWithTheCurrentSessionButABadDetentOutranksIt() async throws {
        let store = makeStore()
        let created = try await store.create(try twoDetents(), for: me)
        _ = try await store.apply(.drag(.detent(.medium)), to: created.id, of: me)
        do {
            _ = try await store.apply(.drag(.detent(.large)), to: created.id, of: me, ifMatch: 1)
            Issue.record("a stale If-Match was applied")
        } catch {
            #expect(error.code == .versionMismatch)
            #expect(error.current?.sheet.version == 2)
        }
        let code = await refusal { () async throws(StoreError) in
            try await store.apply(.drag(.detent(.height(777))), to: created.id, of: me, ifMatch: 1)
        }
        guard case .sheet(let sheetError)? = code?.base else { Issue.record("got \(String(describing: code))"); return }
        #expect(sheetError.code == .unknownDetent)
    }

    @Test func theSessionLimitHoldsAndADeleteFreesAPlace() async throws {
        let store = makeStore(maxSessions: 2)
        let first = try await store.create(try twoDetents(), for: me)
        _ = try await store.create(try twoDetents(), for: me)
        let configuration = try twoDetents()
        #expect(await refusal { () async throws(StoreError) in try await store.create(configuration, for: me) } == .capacityExceeded(limit: 2))
        try await store.delete(first.id, of: me)
        #expect(await refusal { () async throws(StoreError) in try await store.session(first.id, of: me) } == .sessionNotFound)
        _ = try await store.create(configuration, for: me)
        #expect(store.sessionCount == 2)
    }

    @Test func anIdempotentActionIsAppliedOnceAndReplayed() async throws {
        let store = makeStore()
        let created = try await store.create(try twoDetents(), for: me)
        let request = IdempotencyRequest(key: "k", method: "POST", path: "/sessions/\(created.id)/drag", body: Array("{}".utf8))
        let render: @Sendable (Result<ActionResult, StoreError>) -> StoredAnswer = { result in
            let version = (try? result.get().session.sheet.version) ?? 0
            return StoredAnswer(status: 200, headers: [:], body: Array("v\(version)".utf8))
        }
        let first = try await store.apply(.drag(.detent(.medium)), to: created.id, of: me, ifMatch: nil, idempotency: request, render: render)
        let again = try await store.apply(.drag(.detent(.medium)), to: created.id, of: me, ifMatch: nil, idempotency: request, render: render)
        #expect(!first.replayed)
        #expect(again.replayed)
        #expect(again.answer == first.answer)
        #expect(try await store.session(created.id, of: me).sheet.version == 2)
        let other = IdempotencyRequest(key: "k", method: "POST", path: "/sessions/\(created.id)/drag", body: Array("{\"to\":\"large\"}".utf8))
        let reused = await refusal { () async throws(StoreError) in
            try await store.apply(.drag(.detent(.large)), to: created.id, of: me, ifMatch: nil, idempotency: other, render: render)
        }
        #expect(reused == .idempotencyKeyReused)
    }

    @Test(arguments: [1, 2, 3, 7])
    func listingPagesThroughEverySessionOnceInCreationOrder(pageSize: Int) async throws {
        let store = makeStore(shards: 4)
        var created: [SessionID] = []
        for _ in 0..<10 { created.append(try await store.create(try twoDetents(), for: me).id) }
        _ = try await store.apply(.drag(.detent(.height(300))), to: created[3], of: me)   // now confirming
        var seen: [SessionID] = []
        var cursor: UInt64 = 0
        while true {
            let page = try await store.list(of: me, phase: nil, after: cursor, limit: pageSize)
            seen += page.sessions.map(\.id)
            guard let next = page.next else { break }
            cursor = next
        }
        #expect(seen == created)
        let confirming = try await store.list(of: me, phase: .confirming, after: 0, limit: 100)
        #expect(confirming.sessions.map(\.id) == [created[3]])
        #expect(try await store.list(of: Tenant("someone-else"), phase: nil, after: 0, limit: 100).sessions.isEmpty)
    }

    @Test func aLongPollEndsWithTheNextEvent() async throws {
        let store = makeStore()
        let created = try await store.create(try twoDetents(), for: me)
        async let waited = store.waitForEvents(of: created.id, tenant: me, after: 1, timeout: .seconds(600))
        // The poll may start before or after the drag: either way it ends with event 2.
        _ = try await store.apply(.drag(.detent(.medium)), to: created.id, of: me)
        guard case .events(let page) = try await waited else { Issue.record("the long-poll timed out"); return }
        #expect(page.events.map(\.seq) == [2])
    }

    @Test func shutdownReleasesLongPollsAndRefusesNewOnes() async throws {
        let store = makeStore()
        let created = try await store.create(try twoDetents(), for: me)
        let poll = Task { () async -> StoreError.Code? in
            await refusal { () async throws(StoreError) in
                try await store.waitForEvents(of: created.id, tenant: me, after: 1, timeout: .seconds(600))
            }
        }
        await store.shutdown()
        // Parked before the shutdown, or refused after it: shutting down either way.
        #expect(await poll.value == .shuttingDown)
        _ = try await store.apply(.drag(.detent(.medium)), to: created.id, of: me)   // actions still go through
    }

    @Test func theIdleSweepRemovesOnlySessionsIdlePastTheTTL() async throws {
        let clock = ManualClock()
        let store = makeStore(ttl: .seconds(60), clock: clock)
        let idle = try await store.create(try twoDetents(), for: me)
        let busy = try await store.create(try twoDetents(), for: me)
        clock.advance(by: .seconds(45))
        _ = try await store.session(busy.id, of: me)   // a read counts as use
        clock.advance(by: .seconds(30))
        #expect(await store.sweepIdleSessions(slice: 1) == 1)
        #expect(await refusal { () async throws(StoreError) in try await store.session(idle.id, of: me) } == .sessionNotFound)
        #expect(try await store.session(busy.id, of: me).id == busy.id)
        #expect(store.sessionCount == 1)
    }

    @Test func anIdleShardIsChangedInPlaceAndAnotherTenantSeesNothing() async throws {
        let store = makeStore()
        let created = try await store.create(try twoDetents(), for: me)
        let applied = try #require(store.changeInPlace(.drag(.detent(.medium)), to: created.id, of: me))
        #expect(try applied.result.get().session.sheet.detent == .medium)
        #expect(applied.pending == nil, "the volatile archive has no commit to wait for")
        let stranger = Tenant("stranger")
        let read = try #require(store.readInPlace(created.id, of: stranger))
        #expect(throws: StoreError.self) { try read.result.get() }
        #expect(await refusal { () async throws(StoreError) in
            try await store.apply(.dismiss(.done), to: created.id, of: stranger)
        } == .sessionNotFound)
        #expect(await store.phaseCounts()[.presented] == 1)
    }
}
