import SheetCore
import Testing

/// Sheets over sheets: a small in-memory chain driven through `SheetChain`, as a store would.
struct Chain {
    var sheets: [SessionID: Sheet] = [:]
    var clock: Int64 = 0

    static func id(_ n: UInt64) -> SessionID { SessionID(high: n, low: n) }

    mutating func now() -> Timestamp { clock += 1; return tick(clock) }

    mutating func root(_ n: UInt64) throws {
        sheets[Self.id(n)] = Sheet(configuration: try seedConfiguration(), now: now())
    }

    @discardableResult
    mutating func child(_ n: UInt64, over parent: UInt64) throws(SheetError) -> ChainOutcome {
        let configuration = try! seedConfiguration()
        let sheets = self.sheets
        let out = try SheetChain.present(Self.id(n), configuration: configuration, over: Self.id(parent),
                                         in: { sheets[$0] }, now: now())
        commit(out.changes)
        return out
    }

    @discardableResult
    mutating func apply(_ action: SheetAction, to n: UInt64) throws(SheetError) -> ChainOutcome {
        let sheets = self.sheets
        let out = try SheetChain.apply(action, to: Self.id(n), sheets[Self.id(n)]!, in: { sheets[$0] }, now: now())
        commit(out.changes)
        return out
    }

    mutating func commit(_ changes: [ChainChange]) {
        for change in changes { sheets[change.id] = change.sheet }
    }

    subscript(n: UInt64) -> Sheet { sheets[Self.id(n)]! }

    func types(_ n: UInt64, after version: UInt64 = 0) -> [String] {
        self[n].events.filter { $0.seq > version }.map(\.kind.type.rawValue)
    }
}

@Suite struct SheetsOverSheets {
    @Test func childCoversItsParent() throws {
        var chain = Chain()
        try chain.root(1)
        let out = try chain.child(2, over: 1)
        #expect(out.changes.map(\.id) == [Chain.id(2), Chain.id(1)])
        #expect(kinds(out.outcome) == [.presented(detent: .large, presentation: 1)])
        #expect(chain[1].child == Chain.id(2))
        #expect(chain[1].isCovered)
        #expect(chain[2].parent == Chain.id(1))
        #expect(chain[1].events.last?.kind == .covered(child: Chain.id(2)))
        // A covered sheet takes no drag, but the app may still select, resize, navigate, mark changes.
        #expect(throws: SheetError.self) { try chain.apply(.drag(.detent(.medium)), to: 1) }
        #expect(try chain.apply(.select(.medium), to: 1).outcome.events.count == 1)
        #expect(try chain.apply(.resize(containerHeight: 500), to: 1).outcome.events.count == 1)
        #expect(try chain.apply(.navigate(.push("x")), to: 1).outcome.events.count == 1)
        #expect(try chain.apply(.changes(hasChanges: true), to: 1).outcome.events.count == 1)
    }

    @Test func creationRules() throws {
        var chain = Chain()
        try chain.root(1)
        func refusal(_ n: UInt64, over parent: UInt64) -> SheetError? {
            do { try chain.child(n, over: parent); return nil } catch { return error }
        }
        let missing = refusal(2, over: 99)
        #expect(missing?.code == .invalidField)
        #expect(missing?.field == "parent")
        try chain.child(2, over: 1)
        #expect(refusal(3, over: 1)?.code == .sheetCovered)
        try chain.apply(.drag(.detent(.height(300))), to: 2)
        #expect(refusal(3, over: 2)?.code == .confirmationPending)
        try chain.apply(.confirm(.discard), to: 2)
        #expect(refusal(3, over: 2)?.code == .sheetDismissed)
        // Eight deep, not nine.
        for n in UInt64(3)...9 { try chain.child(n, over: n == 3 ? 1 : n - 1) }
        #expect(SheetChain.depth(of: chain[9], in: { chain.sheets[$0] }) == 8)
        #expect(refusal(10, over: 9)?.code == .tooDeep)
    }

    /// The story: dismissing the parent takes the child down first, in one step.
    @Test func dismissingACoveredSheetCascadesTopDown() throws {
        var chain = Chain()
        try chain.root(1)
        try chain.child(2, over: 1)
        try chain.child(3, over: 2)
        let v1 = chain[1].version, v2 = chain[2].version, v3 = chain[3].version
        let out = try chain.apply(.dismiss(.done), to: 1)
        #expect(out.changes.map(\.id) == [Chain.id(3), Chain.id(2), Chain.id(1)])
        #expect(chain.types(3, after: v3) == ["dismissed"])
        #expect(chain.types(2, after: v2) == ["uncovered", "dismissed"])
        #expect(chain.types(1, after: v1) == ["uncovered", "dismissed"])
        #expect(kinds(out.outcome).map(\.type.rawValue) == ["uncovered", "dismissed"])
        #expect(chain[3].dismissReason == .parentDismissed)
        #expect(chain[2].dismissReason == .parentDismissed)
        #expect(chain[1].dismissReason == .done)
        #expect(chain[2].events.filter { $0.seq > v2 }.first?.kind == .uncovered(child: Chain.id(3), reason: .parentDismissed))
        #expect(chain[1].events.filter { $0.seq > v1 }.first?.kind == .uncovered(child: Chain.id(2), reason: .parentDismissed))
        #expect(chain.sheets.values.allSatisfy { $0.child == nil })
    }

    @Test func cascadeFromTheMiddleLeavesTheRootCoveredByNoOne() throws {
        var chain = Chain()
        try chain.root(1)
        try chain.child(2, over: 1)
        try chain.child(3, over: 2)
        try chain.apply(.drag(.detent(.height(300))), to: 3)   // a pending question on top is dropped
        let out = try chain.apply(.dismiss(.programmatic), to: 2)
        #expect(out.changes.map(\.id) == [Chain.id(3), Chain.id(2), Chain.id(1)])
        #expect(chain[3].phase == .dismissed)
        #expect(chain[1].events.last?.kind == .uncovered(child: Chain.id(2), reason: .programmatic))
        #expect(chain[1].phase == .presented)
        #expect(!chain[1].isCovered)
    }

    @Test(arguments: [DismissReason.swipe, .saved, .discarded, .done])
    func anyDismissalOfTheTopUncoversWithItsReason(reason: DismissReason) throws {
        var chain = Chain()
        try chain.root(1)
        try chain.child(2, over: 1)
        switch reason {
        case .swipe:
            // The seed's child intercepts a swipe; an `allow` child is dismissed by it.
            chain = Chain()
            try chain.root(1)
            let sheets = chain.sheets
            let made = try SheetChain.present(Chain.id(2), configuration: try SheetConfiguration(detents: [.large]),
                                              over: Chain.id(1), in: { sheets[$0] }, now: tick(50))
            chain.commit(made.changes)
            try chain.apply(.drag(.closed), to: 2)
        case .saved, .discarded:
            try chain.apply(.drag(.detent(.height(300))), to: 2)
            try chain.apply(.confirm(reason == .saved ? .save : .discard), to: 2)
        default:
            try chain.apply(.dismiss(.done), to: 2)
        }
        #expect(chain[1].events.last?.kind == .uncovered(child: Chain.id(2), reason: UncoverReason(reason)))
        #expect(!chain[1].isCovered)
    }

    @Test func presentingADismissedChildAgain() throws {
        var chain = Chain()
        try chain.root(1)
        try chain.child(2, over: 1)
        try chain.apply(.dismiss(.done), to: 2)
        // Another child covers the parent: the first cannot come back.
        try chain.child(3, over: 1)
        do { try chain.apply(.present, to: 2); Issue.record("presented over a covered parent") } catch {
            #expect(error.code == .parentUnavailable)
        }
        try chain.apply(.dismiss(.done), to: 3)
        // The parent confirming, then dismissed: unavailable too.
        try chain.apply(.drag(.detent(.height(300))), to: 1)
        #expect((try? chain.apply(.present, to: 2)) == nil)
        try chain.apply(.confirm(.cancel), to: 1)
        let out = try chain.apply(.present, to: 2)
        #expect(out.changes.map(\.id) == [Chain.id(2), Chain.id(1)])
        #expect(chain[1].events.last?.kind == .covered(child: Chain.id(2)))
        #expect(chain[2].presentation == 2)
        // Presenting a presented child is a phase conflict first.
        do { try chain.apply(.present, to: 2); Issue.record("presented twice") } catch { #expect(error.code == .sheetPresented) }
    }

    @Test func deletingACoveringSheetUncoversItsParent() throws {
        var chain = Chain()
        try chain.root(1)
        try chain.child(2, over: 1)
        let changes = SheetChain.delete(Chain.id(2), chain[2], in: { chain.sheets[$0] }, now: tick(9))
        #expect(changes.map(\.id) == [Chain.id(1)])
        #expect(changes[0].events.map(\.kind) == [.uncovered(child: Chain.id(2), reason: .deleted)])
        #expect(changes[0].sheet.child == nil)
        // A dismissed child covers nothing: deleting it changes no one.
        try chain.apply(.dismiss(.done), to: 2)
        #expect(SheetChain.delete(Chain.id(2), chain[2], in: { chain.sheets[$0] }, now: tick(9)).isEmpty)
    }

    @Test func aCoveredSheetIsNotDismissedAlone() throws {
        var chain = Chain()
        try chain.root(1)
        try chain.child(2, over: 1)
        var parent = chain[1]
        #expect(mustRefuse(&parent, .dismiss(.done))?.code == .sheetCovered)
    }
}
