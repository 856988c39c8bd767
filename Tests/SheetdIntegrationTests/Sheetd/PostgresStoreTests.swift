import Polling
import PostgresStore
import SessionStore
import SheetCore
import Testing
import Timekeeping

/// The PostgreSQL store against a real PostgreSQL, two stores on one database standing for two
/// sheetd instances: whatever one commits, the other serves, with the guarantees of one process.
@Suite("PostgreSQL store", .serialized)
struct PostgresStoreTests {
    @Test func createThroughOneActThroughTheOtherReadThroughEither() async throws {
        let fixture = try await PostgresStoreFixture()
        let a = try await fixture.open()
        let b = try await fixture.open()
        let tenant = Tenant.default
        let created = try await a.create(PostgresStoreFixture.twoDetents, for: tenant)
        #expect(created.sheet.version == 1)

        let dragged = try await b.apply(.drag(.detent(.medium)), to: created.id, of: tenant, ifMatch: nil)
        #expect(dragged.session.sheet.version == 2)
        #expect(dragged.session.sheet.detent == .medium)
        #expect(dragged.outcome.events.map(\.seq) == [2])

        let read = try await a.session(created.id, of: tenant)
        #expect(read.sheet.version == 2)
        #expect(read.sheet.detent == .medium)
        #expect(read.sheet.configuration == PostgresStoreFixture.twoDetents)

        let events = try await a.events(of: created.id, tenant: tenant, after: 0)
        #expect(events.events.map(\.seq) == [1, 2])
        #expect(events.version == 2)

        // Another tenant's session does not exist for it.
        let other = await storeError { () async throws(StoreError) in _ = try await b.session(created.id, of: Tenant("other")) }
        #expect(other?.code == .sessionNotFound)

        try await b.delete(created.id, of: tenant, ifMatch: 2)
        let gone = await storeError { () async throws(StoreError) in _ = try await a.session(created.id, of: tenant) }
        #expect(gone?.code == .sessionNotFound)
        try await a.close()
        try await b.close()
    }

    @Test func ifMatchRefusesAStaleVersionAndShowsTheCurrentOne() async throws {
        let fixture = try await PostgresStoreFixture()
        let a = try await fixture.open()
        let b = try await fixture.open()
        let created = try await a.create(PostgresStoreFixture.twoDetents, for: .default)
        _ = try await a.apply(.drag(.detent(.medium)), to: created.id, of: .default, ifMatch: 1)
        let stale = await storeError { () async throws(StoreError) in
            _ = try await b.apply(.drag(.detent(.large)), to: created.id, of: .default, ifMatch: 1)
        }
        #expect(stale?.code == .versionMismatch)
        #expect(stale?.current?.sheet.version == 2)
        let deleteStale = await storeError { () async throws(StoreError) in try await b.delete(created.id, of: .default, ifMatch: 1) }
        #expect(deleteStale?.code == .versionMismatch)
        #expect(try await b.apply(.drag(.detent(.large)), to: created.id, of: .default, ifMatch: 2).session.sheet.version == 3)
        try await a.close()
        try await b.close()
    }

    @Test func anIdempotencyKeyRetriedThroughTheOtherStoreReplaysTheFirstAnswer() async throws {
        let fixture = try await PostgresStoreFixture()
        let a = try await fixture.open()
        let b = try await fixture.open()
        let created = try await a.create(PostgresStoreFixture.twoDetents, for: .default)
        let path = "/sessions/\(created.id)/drag"
        let first = try await a.apply(.drag(.detent(.medium)), to: created.id, of: .default, ifMatch: nil,
                                      idempotency: idempotency("k1", path: path, body: "medium"), render: renderAction)
        #expect(!first.replayed)
        #expect(first.answer.body == Array("v2".utf8))
        let retry = try await b.apply(.drag(.detent(.medium)), to: created.id, of: .default, ifMatch: nil,
                                      idempotency: idempotency("k1", path: path, body: "medium"), render: renderAction)
        #expect(retry.replayed)
        #expect(retry.answer == first.answer)
        #expect(try await b.session(created.id, of: .default).sheet.version == 2)   // applied once

        let reused = await storeError { () async throws(StoreError) in
            _ = try await b.apply(.drag(.detent(.large)), to: created.id, of: .default, ifMatch: nil,
                                  idempotency: idempotency("k1", path: path, body: "large"), render: renderAction)
        }
        #expect(reused?.code == .idempotencyKeyReused)
        // Keys are the tenant's own: another tenant's same key is another key.
        let foreign = await storeError { () async throws(StoreError) in
            _ = try await b.apply(.drag(.detent(.medium)), to: created.id, of: Tenant("other"), ifMatch: nil,
                                  idempotency: idempotency("k1", path: path, body: "medium"), render: renderAction)
        }
        #expect(foreign?.code == .sessionNotFound)

        // POST /sessions: one session per key, whichever store the retry reaches.
        let made = try await a.create(PostgresStoreFixture.twoDetents, for: .default,
                                      idempotency: idempotency("c1", path: "/sessions", body: "{}"), render: renderCreate)
        let again = try await b.create(PostgresStoreFixture.twoDetents, for: .default,
                                       idempotency: idempotency("c1", path: "/sessions", body: "{}"), render: renderCreate)
        #expect(again.replayed)
        #expect(again.answer.body == made.answer.body)
        #expect(try await a.list(of: .default, phase: nil, after: 0, limit: 10).sessions.count == 2)
        try await a.close()
        try await b.close()
    }

    /// 2 stores × 4 appliers × 30 changes on one session, each change a new container height so
    /// every one records an event: all are applied, one after the other, versions gap-free.
    @Test func concurrentAppliersThroughTwoStoresLoseNoUpdate() async throws {
        let fixture = try await PostgresStoreFixture()
        let stores = [try await fixture.open(), try await fixture.open()]
        let created = try await stores[0].create(PostgresStoreFixture.twoDetents, for: .default)
        let perApplier = 30
        let versions = try await withThrowingTaskGroup(of: [UInt64].self) { group in
            for applier in 0..<8 {
                let store = stores[applier % 2]
                group.addTask {
                    var seen: [UInt64] = []
                    for step in 0..<perApplier {
                        let height = Double(400 + applier * perApplier + step)
                        let result = try await store.apply(.resize(containerHeight: height), to: created.id, of: .default, ifMatch: nil)
                        #expect(result.outcome.events.count == 1)
                        seen.append(result.session.sheet.version)
                    }
                    return seen
                }
            }
            var all: [UInt64] = []
            for try await part in group { all += part }
            return all
        }
        let total = 8 * perApplier
        #expect(versions.sorted() == Array(2...UInt64(total + 1)))
        let events = try await stores[1].events(of: created.id, tenant: .default, after: 0)
        #expect(events.events.map(\.seq) == Array(1...UInt64(total + 1)))
        #expect(events.version == UInt64(total + 1))
        for store in stores { try await store.close() }
    }

    @Test func maxSessionsHoldsAcrossStoresAndListsKeepCreationOrder() async throws {
        let fixture = try await PostgresStoreFixture()
        let a = try await fixture.open { $0.maxSessions = 3 }
        let b = try await fixture.open { $0.maxSessions = 3 }
        let first = try await a.create(PostgresStoreFixture.twoDetents, for: .default)
        let second = try await b.create(PostgresStoreFixture.twoDetents, for: .default)
        let third = try await a.create(PostgresStoreFixture.twoDetents, for: Tenant("other"))
        let over = await storeError { () async throws(StoreError) in _ = try await b.create(PostgresStoreFixture.twoDetents, for: .default) }
        #expect(over?.code == .capacityExceeded(limit: 3))

        let page = try await b.list(of: .default, phase: nil, after: 0, limit: 1)
        #expect(page.sessions.map(\.id) == [first.id])
        let next = try #require(page.next)
        let rest = try await a.list(of: .default, phase: nil, after: next, limit: 5)
        #expect(rest.sessions.map(\.id) == [second.id])
        #expect(rest.next == nil)
        #expect(try await a.list(of: Tenant("other"), phase: nil, after: 0, limit: 5).sessions.map(\.id) == [third.id])

        // A removal makes room again, cluster-wide.
        try await b.delete(first.id, of: .default, ifMatch: nil)
        _ = try await a.create(PostgresStoreFixture.twoDetents, for: .default)
        #expect(await a.phaseCounts() == [.presented: 3])
        #expect(a.sessionsPerTenant == [.default: 2, Tenant("other"): 1])
        try await a.close()
        try await b.close()
    }

    @Test func eachIdleSessionIsRemovedOnceAcrossStores() async throws {
        let fixture = try await PostgresStoreFixture()
        let a = try await fixture.open { $0.sessionTTL = .seconds(60) }
        let b = try await fixture.open { $0.sessionTTL = .seconds(60) }
        var ids: [SessionID] = []
        for _ in 0..<6 { ids.append(try await a.create(PostgresStoreFixture.twoDetents, for: .default).id) }
        // Idle itself, but in a chain whose bottom is read: a chain expires as one, so it stays.
        let child = try await a.create(PostgresStoreFixture.twoDetents, over: ids[0], for: .default)
        fixture.advance(by: .seconds(50))
        _ = try await b.session(ids[0], of: .default)   // read through b: it stays
        fixture.advance(by: .seconds(20))
        async let removedByA = a.sweep()
        async let removedByB = b.sweep()
        let removed = await removedByA + removedByB
        #expect(removed == 5)
        #expect(try await a.session(ids[0], of: .default).id == ids[0])
        #expect(try await b.session(child.id, of: .default).id == child.id)
        for id in ids.dropFirst() {
            let gone = await storeError { () async throws(StoreError) in _ = try await a.session(id, of: .default) }
            #expect(gone?.code == .sessionNotFound)
        }
        // The count went down with them: creating is allowed again up to the limit.
        #expect(await b.phaseCounts() == [.presented: 2])
        try await a.close()
        try await b.close()
    }

    @Test func aLongPollAndAStreamOnOneStoreWakeOnAChangeThroughTheOther() async throws {
        let fixture = try await PostgresStoreFixture()
        let a = try await fixture.open()
        let b = try await fixture.open()
        let created = try await a.create(PostgresStoreFixture.twoDetents, for: .default)
        let collector = EventCollector()
        let token = try await b.subscribe(collector, to: created.id, of: .default, after: 0)
        // Parked or not yet when the change comes through a, the long-poll answers with it: its
        // watch is taken before its first read.
        async let waited = b.waitForEvents(of: created.id, tenant: .default, after: 1, timeout: .seconds(30))
        _ = try await a.apply(.drag(.detent(.medium)), to: created.id, of: .default, ifMatch: nil)
        guard case .events(let page) = try await waited else {
            Issue.record("the long-poll timed out instead of being woken")
            return
        }
        #expect(page.events.map(\.seq) == [2])
        _ = try await a.apply(.drag(.detent(.large)), to: created.id, of: .default, ifMatch: nil)
        #expect(await collector.waitFor(seq: 3, timeout: .seconds(30)) == [1, 2, 3])
        try await a.delete(created.id, of: .default, ifMatch: nil)
        #expect(await collector.waitForEnd(timeout: .seconds(30)) == .sessionDeleted)
        await b.unsubscribe(token)
        try await a.close()
        try await b.close()
    }

    /// The store's timers run on its `timerClock`: a long-poll ends at its deadline on that clock,
    /// not a moment before, whatever the machine's load.
    @Test func aLongPollEndsAtItsDeadlineOnTheTimerClock() async throws {
        let fixture = try await PostgresStoreFixture()
        let timers = Timekeeping.ManualClock()
        let store = try await fixture.open { $0.timerClock = timers }
        let created = try await store.create(PostgresStoreFixture.twoDetents, for: .default)
        async let waited = store.waitForEvents(of: created.id, tenant: .default, after: 1, timeout: .seconds(30))
        #expect(await eventually { timers.sleeperCount == 1 })   // parked until its deadline
        timers.advance(by: .seconds(29))
        #expect(timers.sleeperCount == 1, "29 of its 30 s: still waiting")
        timers.advance(by: .seconds(1))
        guard case .timedOut(let version) = try await waited else {
            Issue.record("the long-poll answered events, though nothing changed")
            return
        }
        #expect(version == 1)
        #expect(await eventually { timers.sleeperCount == 0 })
        try await store.close()
    }

    /// The idle sweep runs every tenth of the TTL on the timer clock, and a pass removes what the
    /// store's wall clock says is idle past the TTL.
    @Test func theIdleSweepRunsAtItsPaceOnTheTimerClock() async throws {
        let fixture = try await PostgresStoreFixture()
        let timers = Timekeeping.ManualClock()
        let store = try await fixture.open {
            $0.timerClock = timers
            $0.sessionTTL = .seconds(60)
        }
        _ = try await store.create(PostgresStoreFixture.twoDetents, for: .default)
        let sweeper = Task { await store.runIdleSweeps() }
        defer { sweeper.cancel() }
        #expect(await eventually { timers.sleeperCount == 1 })
        fixture.advance(by: .seconds(70))
        #expect(await store.phaseCounts() == [.presented: 1], "idle past the TTL, but no pass has run")
        timers.advance(by: .seconds(5))
        #expect(timers.sleeperCount == 1, "5 of the 6 s between passes")
        #expect(await store.phaseCounts() == [.presented: 1])
        timers.advance(by: .seconds(1))
        #expect(await eventually(every: .milliseconds(20)) { await store.phaseCounts()[.presented, default: 0] == 0 })
        sweeper.cancel()
        _ = await sweeper.value
        try await store.close()
    }

    /// A sheet over a sheet through the other store, a cascade in one transaction: dismissing the
    /// bottom sheet takes the one above down first; deleting it removes both.
    @Test func aCascadeOverTwoStoresChangesTheWholeChainAtOnce() async throws {
        let fixture = try await PostgresStoreFixture()
        let a = try await fixture.open()
        let b = try await fixture.open()
        let bottom = try await a.create(PostgresStoreFixture.twoDetents, for: .default)
        let top = try await b.create(PostgresStoreFixture.twoDetents, over: bottom.id, for: .default)
        #expect(top.sheet.parent == bottom.id)
        #expect(try await a.session(bottom.id, of: .default).sheet.child == top.id)
        let covered = await storeError { () async throws(StoreError) in
            _ = try await b.create(PostgresStoreFixture.twoDetents, over: bottom.id, for: .default)
        }
        if case .sheet(let refusal)? = covered?.code.base {
            #expect(refusal.code == .sheetCovered)
        } else {
            Issue.record("a second sheet over a covered one: \(String(describing: covered?.code))")
        }

        let dismissed = try await a.apply(.dismiss(.done), to: bottom.id, of: .default, ifMatch: nil)
        #expect(dismissed.session.sheet.phase == .dismissed)
        #expect(dismissed.chain.map(\.id) == [top.id])
        let topNow = try await b.session(top.id, of: .default)
        #expect(topNow.sheet.phase == .dismissed)
        #expect(topNow.sheet.dismissReason == .parentDismissed)

        let deleted = try await b.delete(bottom.id, of: .default, ifMatch: nil)
        #expect(deleted.count == 2)
        for id in [bottom.id, top.id] {
            let gone = await storeError { () async throws(StoreError) in _ = try await a.session(id, of: .default) }
            #expect(gone?.code == .sessionNotFound)
        }
        #expect(await a.phaseCounts() == [:])
        try await a.close()
        try await b.close()
    }

    /// Past the retained events, the oldest are dropped (from the table too, in steps) and a
    /// resume point before them is `eventsExpired`, as in memory.
    @Test func onlyTheRetainedEventsAreKept() async throws {
        let fixture = try await PostgresStoreFixture()
        let store = try await fixture.open()
        let created = try await store.create(PostgresStoreFixture.twoDetents, for: .default)
        for step in 0..<330 {
            _ = try await store.apply(.resize(containerHeight: Double(400 + step)), to: created.id, of: .default, ifMatch: nil)
        }
        let version: UInt64 = 331
        let expired = await storeError { () async throws(StoreError) in _ = try await store.events(of: created.id, tenant: .default, after: 0) }
        #expect(expired?.code == .eventsExpired)
        let window = try await store.events(of: created.id, tenant: .default, after: version - 256)
        #expect(window.events.map(\.seq) == Array((version - 255)...version))
        let rows = try await offPool { try fixture.server.psql("SELECT count(*) FROM events") }
        let count = Int(rows.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(count >= 256 && count <= 256 + 64)
        try await store.close()
    }
}
