import Locking
import SessionStore
import SheetCore
import Testing

/// Collects what a subscription delivers, from every session it is given to, in one order.
final class ChainRecorder: EventSubscriber {
    private let log = LockedValue<[(SessionID, SheetEvent.EventType)]>([])
    let session: SessionID

    init(_ session: SessionID) { self.session = session }

    func receive(_ events: [SheetEvent]) -> Bool {
        log.withLock { $0 += events.map { (session, $0.kind.type) } }
        return true
    }

    func ended(_ reason: SubscriptionEnd) {}

    var types: [SheetEvent.EventType] { log.withLock { $0.map(\.1) } }
}

@Suite("SessionStore: sheets over sheets")
struct ChainStoreTests {
    let plain = try! SheetConfiguration()

    @Test func aChildTakesItsParentsRoutingBitsAndNothingElse() {
        let root = SessionID.random()
        var ids: Set<SessionID> = [root]
        var parent = root
        for _ in 0..<7 {
            let child = SessionID.random(inChainOf: parent)
            #expect(child.routingBits == root.routingBits)
            #expect(ids.insert(child).inserted)
            parent = child
        }
    }

    @Test(arguments: [1, 3, 4, 64])
    func aCascadeIsOneStepOnEverySessionOfTheChain(shards: Int) async throws {
        let store = makeStore(shards: shards)
        let root = try await store.create(plain, for: me)
        let middle = try await store.create(plain, over: root.id, for: me)
        let top = try await store.create(plain, over: middle.id, for: me)
        #expect(try await store.session(root.id, of: me).sheet.child == middle.id)
        let watchers = [ChainRecorder(root.id), ChainRecorder(middle.id), ChainRecorder(top.id)]
        for watcher in watchers { _ = try await store.subscribe(watcher, to: watcher.session, of: me, after: nil) }

        // The root is covered: no drag; the app dismisses it and takes the two above down first.
        #expect(await code { () async throws(StoreError) in try await store.apply(.drag(.closed), to: root.id, of: me) } == .sheetCovered)
        let result = try await store.apply(.dismiss(.done), to: root.id, of: me)
        #expect(result.outcome.events.map(\.kind.type) == [.uncovered, .dismissed])
        #expect(result.chainEvents.filter { $0.kind.type == .dismissed }.count == 2)
        #expect(watchers[2].types == [.dismissed])
        #expect(watchers[1].types == [.uncovered, .dismissed])
        #expect(watchers[0].types == [.uncovered, .dismissed])
        for id in [middle.id, top.id] {
            let sheet = try await store.session(id, of: me).sheet
            #expect(sheet.phase == .dismissed && sheet.dismissReason == .parentDismissed && sheet.child == nil)
        }
    }

    @Test func aChildDismissedAloneUncoversItsParentAndCoversItAgainWhenPresented() async throws {
        let store = makeStore()
        let root = try await store.create(plain, for: me)
        let child = try await store.create(plain, over: root.id, for: me)
        let dismissed = try await store.apply(.dismiss(.done), to: child.id, of: me)
        #expect(dismissed.chainEvents.map(\.kind.type) == [.uncovered])
        #expect(try await store.session(root.id, of: me).sheet.child == nil)
        _ = try await store.apply(.drag(.closed), to: root.id, of: me)   // the parent goes away
        #expect(await code { () async throws(StoreError) in try await store.apply(.present, to: child.id, of: me) } == .parentUnavailable)
        _ = try await store.apply(.present, to: root.id, of: me)
        let again = try await store.apply(.present, to: child.id, of: me)
        #expect(again.chainEvents.map(\.kind.type) == [.covered])
        #expect(try await store.session(root.id, of: me).sheet.child == child.id)
    }

    @Test func creatingOverAParentFollowsItsRules() async throws {
        let store = makeStore()
        let root = try await store.create(plain, for: me)
        _ = try await store.create(plain, over: root.id, for: me)
        #expect(store.sessionCount == 2)
        // Covered already; then a missing parent, another tenant's, a dismissed one.
        #expect(await code { () async throws(StoreError) in try await store.create(plain, over: root.id, for: me) } == .sheetCovered)
        #expect(await code { () async throws(StoreError) in try await store.create(plain, over: SessionID.random(), for: me) } == .invalidField)
        #expect(await code { () async throws(StoreError) in try await store.create(plain, over: root.id, for: Tenant("other")) } == .invalidField)
        let lone = try await store.create(plain, for: me)
        _ = try await store.apply(.dismiss(.programmatic), to: lone.id, of: me)
        #expect(await code { () async throws(StoreError) in try await store.create(plain, over: lone.id, for: me) } == .sheetDismissed)
        // Refused creates took no place.
        #expect(store.sessionCount == 3)
        // Eight in one chain, not nine.
        var top = lone.id
        _ = try await store.apply(.present, to: lone.id, of: me)
        for _ in 1..<SheetChain.maximumDepth { top = try await store.create(plain, over: top, for: me).id }
        #expect(await code { () async throws(StoreError) in try await store.create(plain, over: top, for: me) } == .tooDeep)
    }

    @Test func deleteTakesTheDescendantsAndUncoversTheSheetBelow() async throws {
        let store = makeStore()
        let root = try await store.create(plain, for: me)
        let first = try await store.create(plain, over: root.id, for: me)
        let firstChild = try await store.create(plain, over: first.id, for: me)
        _ = try await store.apply(.dismiss(.done), to: first.id, of: me)   // dismissed, still root's child
        let second = try await store.create(plain, over: root.id, for: me)
        let secondChild = try await store.create(plain, over: second.id, for: me)
        #expect(store.sessionCount == 5)

        let deleted = try await store.delete(second.id, of: me)
        #expect(deleted.count == 2)
        #expect(deleted.events.map(\.kind.type) == [.uncovered])
        let below = try await store.session(root.id, of: me).sheet
        #expect(below.child == nil)
        guard case .uncovered(let child, let reason)? = below.events.last?.kind else { Issue.record("no uncovered"); return }
        #expect(child == second.id && reason == .deleted)
        for id in [second.id, secondChild.id] {
            #expect(await refusal { () async throws(StoreError) in try await store.session(id, of: me) } == .sessionNotFound)
        }
        // The root takes everything created over it, dismissed or not.
        #expect(try await store.delete(root.id, of: me).count == 3)
        #expect(store.sessionCount == 0)
        #expect(await refusal { () async throws(StoreError) in try await store.session(firstChild.id, of: me) } == .sessionNotFound)
    }

    @Test func aChainExpiresAsOne() async throws {
        let clock = ManualClock()
        let store = makeStore(ttl: .seconds(60), clock: clock)
        let root = try await store.create(plain, for: me)
        let child = try await store.create(plain, over: root.id, for: me)
        let loneIdle = try await store.create(plain, for: me)
        clock.advance(by: .seconds(45))
        _ = try await store.apply(.navigate(.push("details")), to: child.id, of: me)   // only the child is used
        clock.advance(by: .seconds(30))
        // The root alone is past the time to live, and the lone session: only the lone one goes.
        #expect(await store.sweepIdleSessions(slice: 1) == 1)
        #expect(try await store.session(root.id, of: me).sheet.child == child.id)
        #expect(await refusal { () async throws(StoreError) in try await store.session(loneIdle.id, of: me) } == .sessionNotFound)
        clock.advance(by: .seconds(61))
        #expect(await store.sweepIdleSessions(slice: 1) == 2)
        #expect(store.sessionCount == 0)
    }

    @Test func anIdempotentCreateOverAParentIsStoredWithItsAnswer() async throws {
        let store = makeStore()
        let root = try await store.create(plain, for: me)
        let request = IdempotencyRequest(key: "child-1", method: "POST", path: "/sessions", body: Array("{}".utf8))
        let render: @Sendable (Result<SessionSnapshot, StoreError>) -> StoredAnswer = { result in
            switch result {
            case .success(let snapshot): StoredAnswer(status: 201, headers: [:], body: Array(snapshot.id.description.utf8))
            case .failure: StoredAnswer(status: 409, headers: [:], body: [])
            }
        }
        let first = try await store.create(plain, over: root.id, for: me, idempotency: request, render: render)
        let again = try await store.create(plain, over: root.id, for: me, idempotency: request, render: render)
        #expect(first.answer.status == 201 && !first.replayed)
        #expect(again.replayed && again.answer.body == first.answer.body)
        #expect(store.sessionCount == 2)
        let other = IdempotencyRequest(key: "child-2", method: "POST", path: "/sessions", body: Array("{}".utf8))
        let refused = try await store.create(plain, over: root.id, for: me, idempotency: other, render: render)
        #expect(refused.answer.status == 409)
        #expect(store.sessionCount == 2)
    }

    private func code<T>(_ call: () async throws(StoreError) -> T) async -> SheetError.Code? {
        guard case .sheet(let error)? = await refusal(call)?.base else { return nil }
        return error.code
    }
}
