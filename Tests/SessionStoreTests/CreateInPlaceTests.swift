@testable import SessionStore
import SheetCore
import Testing

/// `SessionStore.createInPlace`: a session over nothing made on the calling thread, counted
/// against the limits as `create` counts it, and nothing made or counted when it cannot be made
/// without waiting.
@Suite("Sessions created in place")
struct CreateInPlaceTests {
    @Test("a session created in place is there at once, counted, and another tenant sees nothing of it")
    func createdAtOnce() async throws {
        let store = makeStore()
        let made = try #require(store.createInPlace(try twoDetents(), for: me))
        #expect(made.pending == nil, "the volatile archive has no commit to wait for")
        let snapshot = try made.result.get()
        #expect(snapshot.sheet.phase == .presented)
        #expect(snapshot.sheet.version == 1)
        #expect(try await store.session(snapshot.id, of: me).sheet == snapshot.sheet)
        #expect(store.sessionCount == 1)
        #expect(store.sessionsPerTenant[me] == 1)
        #expect(await refusal { () async throws(StoreError) in try await store.session(snapshot.id, of: Tenant("stranger")) } == .sessionNotFound)
        let listed = try await store.list(of: me, phase: nil, after: 0, limit: 10).sessions.map(\.id)
        #expect(listed == [snapshot.id])
    }

    @Test("the limits refuse a create in place as they refuse one in a task, and count nothing", arguments: [false, true])
    func limits(perTenant: Bool) async throws {
        var configuration = SessionStore.Configuration()
        configuration.maxSessions = perTenant ? 10 : 2
        configuration.maxSessionsPerTenant = perTenant ? 2 : nil
        configuration.shardCount = 4
        configuration.clock = ManualClock().storeClock
        let store = SessionStore(configuration: configuration)
        for _ in 0..<2 { _ = try #require(try store.createInPlace(try twoDetents(), for: me)?.result.get()) }
        let refused = try #require(store.createInPlace(try twoDetents(), for: me))
        #expect(refused.pending == nil)
        #expect(throws: StoreError.self) { try refused.result.get() }
        let code: StoreError.Code = perTenant ? .tenantCapacityExceeded(limit: 2) : .capacityExceeded(limit: 2)
        #expect(await refusal { () async throws(StoreError) in try await store.create(try! twoDetents(), for: me) } == code)
        #expect(store.sessionCount == 2)
        if perTenant { _ = try #require(try store.createInPlace(try twoDetents(), for: Tenant("other"))?.result.get()) }
    }

    /// One shard, held by the test: the create cannot be made without waiting for it.
    @Test("a busy shard declines the create, and nothing is made or counted")
    func busyShardDeclines() async throws {
        let store = makeStore(maxSessions: 1, shards: 1)
        let configuration = try twoDetents()
        let declined: InPlace<SessionSnapshot>?? = store.shard(for: SessionID.random()).executor.runIfIdle { store.createInPlace(configuration, for: me) }
        #expect(declined != nil, "the test could not hold the shard")
        #expect(declined! == nil)
        #expect(store.sessionCount == 0)
        #expect(store.sessionsPerTenant[me] == nil)
        // The one place the limit allows is still free.
        _ = try #require(try store.createInPlace(configuration, for: me)?.result.get())
        #expect(store.sessionCount == 1)
    }
}
