import SheetCore
import Testing

@Suite struct Creation {
    @Test func recordsPresentedAsSeqOne() throws {
        let sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        #expect(sheet.phase == .presented)
        #expect(sheet.detent == .large)
        #expect(sheet.presentation == 1)
        #expect(sheet.dismissReason == nil)
        #expect(sheet.version == 1)
        #expect(sheet.createdAt == t0)
        #expect(sheet.updatedAt == t0)
        #expect(Array(sheet.events) == [SheetEvent(seq: 1, at: t0, kind: .presented(detent: .large, presentation: 1))])
        #expect(sheet.events(after: 0) == .events(Array(sheet.events)))
        #expect(sheet.events(after: 1) == .events([]))
    }

    /// A sheet rebuilt from its parts equals the one it came from, and shows the same events,
    /// whether its log is still the first event alone (derived, not stored) or longer, in full or
    /// cut to the newest event.
    @Test(arguments: [0, 1, 3])
    func rebuiltFromItsPartsItIsTheSame(drags: Int) throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        for n in 0..<drags {
            mustApply(&sheet, .drag(.detent(n % 2 == 0 ? .medium : .large)), at: tick(Int64(n + 1)))
        }
        let rebuilt = try Sheet(restoring: sheet.configuration, phase: sheet.phase, detent: sheet.detent,
                                presentation: sheet.presentation, dismissReason: sheet.dismissReason,
                                createdAt: sheet.createdAt, events: Array(sheet.events))
        #expect(rebuilt == sheet)
        #expect(rebuilt.version == UInt64(drags + 1))
        #expect(rebuilt.events(after: 0) == .events(Array(sheet.events)))
        #expect(Array(sheet.events).count == drags + 1)
        let newest = sheet.keepingNewestEvents(1)
        #expect(newest == rebuilt.keepingNewestEvents(1))
        #expect(Array(newest.events) == [try #require(sheet.events.last)])
        #expect(newest.version == sheet.version)
        #expect((newest == sheet) == (drags == 0))
    }
}

/// The drag table of SHEET-SEMANTICS.md, row by row.
@Suite struct DragTable {
    @Test func toTheCurrentDetentChangesNothing() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        let before = sheet
        let outcome = mustApply(&sheet, .drag(.detent(.large)), at: tick(1))
        #expect(outcome.events.isEmpty)
        #expect(outcome.gesture == nil)
        #expect(sheet == before)
        #expect(sheet.updatedAt == t0)
    }

    @Test(arguments: [DismissPolicy.allow, .intercept, .block])
    func toAnotherDetentMovesThere(policy: DismissPolicy) throws {
        var sheet = Sheet(configuration: try SheetConfiguration(detents: [.large, .medium, .height(200)],
                                                                dismissPolicy: policy), now: t0)
        let outcome = mustApply(&sheet, .drag(.detent(.medium)), at: tick(1))
        #expect(outcome.events == [SheetEvent(seq: 2, at: tick(1), kind: .detentChanged(from: .large, to: .medium, by: .user))])
        #expect(sheet.detent == .medium)
        #expect(sheet.phase == .presented)
        #expect(sheet.version == 2)
        #expect(sheet.updatedAt == tick(1))
        mustApply(&sheet, .drag(.detent(.height(200))), at: tick(2))
        #expect(sheet.detent == .height(200))
    }

    /// Threshold rows, for both policies that allow a threshold and both intercept actions.
    @Test(arguments: [DismissPolicy.intercept, .block], InterceptAction.allCases)
    func toTheThresholdIntercepts(policy: DismissPolicy, action: InterceptAction) throws {
        var sheet = Sheet(configuration: try seedConfiguration(dismissPolicy: policy, interceptAction: action), now: t0)
        mustApply(&sheet, .drag(.detent(.medium)))
        let outcome = mustApply(&sheet, .drag(.detent(.height(300))), at: tick(2))
        #expect(kinds(outcome) == [.intercepted(attempted: .detent(.height(300)), restoredTo: .medium)])
        #expect(outcome.events.map(\.seq) == [3])
        #expect(sheet.detent == .medium)
        #expect(sheet.phase == (action == .confirm ? .confirming : .presented))
        #expect(sheet.dismissReason == nil)
    }

    @Test func closedWithAllowDismissesBySwipe() throws {
        var sheet = Sheet(configuration: try SheetConfiguration(detents: [.large, .medium]), now: t0)
        mustApply(&sheet, .drag(.detent(.medium)))
        let outcome = mustApply(&sheet, .drag(.closed), at: tick(2))
        #expect(outcome.events == [SheetEvent(seq: 3, at: tick(2), kind: .dismissed(reason: .swipe, screen: "root"))])
        #expect(sheet.phase == .dismissed)
        #expect(sheet.dismissReason == .swipe)
        #expect(sheet.detent == .medium)   // keeps where it rested
    }

    @Test(arguments: InterceptAction.allCases, [true, false])
    func closedWithInterceptIntercepts(action: InterceptAction, withThreshold: Bool) throws {
        let config = try SheetConfiguration(detents: [.large, .medium], thresholdDetent: withThreshold ? .height(300) : nil,
                                            dismissPolicy: .intercept, interceptAction: action)
        var sheet = Sheet(configuration: config, now: t0)
        let outcome = mustApply(&sheet, .drag(.closed))
        #expect(kinds(outcome) == [.intercepted(attempted: .closed, restoredTo: .large)])
        #expect(sheet.detent == .large)
        #expect(sheet.phase == (action == .confirm ? .confirming : .presented))
    }

    @Test(arguments: [true, false])
    func closedWithBlockIsBlocked(withThreshold: Bool) throws {
        let config = try SheetConfiguration(detents: [.large, .medium], thresholdDetent: withThreshold ? .height(300) : nil,
                                            dismissPolicy: .block)
        var sheet = Sheet(configuration: config, now: t0)
        let outcome = mustApply(&sheet, .drag(.closed))
        #expect(kinds(outcome) == [.dismissBlocked(attempted: .closed)])
        #expect(sheet.phase == .presented)
        #expect(sheet.detent == .large)
        #expect(sheet.version == 2)
    }

    @Test(arguments: [Phase.presented, .confirming, .dismissed])
    func unknownDetentIsABodyErrorInEveryPhase(phase: Phase) throws {
        var sheet = try sheetIn(phase)
        let error = mustRefuse(&sheet, .drag(.detent(.height(777))))
        #expect(error?.code == .unknownDetent)
        #expect(error?.field == "to")
    }
}

/// Puts the seed sheet into the given phase.
func sheetIn(_ phase: Phase) throws -> Sheet {
    var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
    switch phase {
    case .presented: break
    case .confirming: mustApply(&sheet, .drag(.detent(.height(300))))
    case .dismissed: mustApply(&sheet, .dismiss(.programmatic))
    }
    #expect(sheet.phase == phase)
    return sheet
}

@Suite struct ConfirmTable {
    @Test(arguments: [(ConfirmAction.discard, DismissReason.discarded), (.save, .saved)])
    func discardAndSaveDismiss(answer: ConfirmAction, reason: DismissReason) throws {
        var sheet = try sheetIn(.confirming)
        let outcome = mustApply(&sheet, .confirm(answer), at: tick(3))
        #expect(outcome.events == [SheetEvent(seq: 3, at: tick(3), kind: .dismissed(reason: reason, screen: "root"))])
        #expect(sheet.phase == .dismissed)
        #expect(sheet.dismissReason == reason)
        #expect(sheet.detent == .large)
    }

    @Test func cancelReturnsToPresentedAtTheSameDetent() throws {
        var sheet = try sheetIn(.confirming)
        let outcome = mustApply(&sheet, .confirm(.cancel), at: tick(3))
        #expect(outcome.events == [SheetEvent(seq: 3, at: tick(3), kind: .confirmationCancelled(detent: .large))])
        #expect(sheet.phase == .presented)
        #expect(sheet.detent == .large)
        #expect(sheet.dismissReason == nil)
    }
}

@Suite struct DismissAndPresent {
    @Test(arguments: [Phase.presented, .confirming], AppDismissReason.allCases)
    func dismissAlwaysSucceeds(phase: Phase, reason: AppDismissReason) throws {
        var sheet = try sheetIn(phase)
        let detentBefore = sheet.detent
        let outcome = mustApply(&sheet, .dismiss(reason), at: tick(5))
        #expect(kinds(outcome) == [.dismissed(reason: reason == .done ? .done : .programmatic, screen: "root")])
        #expect(outcome.events.map(\.seq) == [sheet.version])
        #expect(sheet.phase == .dismissed)
        #expect(sheet.dismissReason == reason.dismissReason)
        #expect(sheet.detent == detentBefore)
    }

    @Test func dismissFromConfirmingDropsTheQuestion() throws {
        var sheet = try sheetIn(.dismissed)
        mustApply(&sheet, .present)
        mustApply(&sheet, .drag(.detent(.height(300))))
        mustApply(&sheet, .dismiss(.done))
        #expect(mustRefuse(&sheet, .confirm(.discard))?.code == .noPendingConfirmation)
        mustApply(&sheet, .present)
        #expect(sheet.phase == .presented)   // not confirming: the question is gone
    }

    @Test func presentMovesToTheDefaultAndCountsUp() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        mustApply(&sheet, .drag(.detent(.medium)))
        mustApply(&sheet, .dismiss(.done))
        #expect(sheet.detent == .medium)
        let outcome = mustApply(&sheet, .present, at: tick(9))
        #expect(outcome.events == [SheetEvent(seq: 4, at: tick(9), kind: .presented(detent: .large, presentation: 2))])
        #expect(sheet.phase == .presented)
        #expect(sheet.detent == .large)
        #expect(sheet.presentation == 2)
        #expect(sheet.dismissReason == nil)
        mustApply(&sheet, .dismiss(.programmatic))
        mustApply(&sheet, .present)
        #expect(sheet.presentation == 3)
    }

    @Test func repeatingARequestNeverTogglesBack() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        mustApply(&sheet, .dismiss(.done))
        #expect(mustRefuse(&sheet, .dismiss(.done))?.code == .sheetDismissed)
        mustApply(&sheet, .present)
        #expect(mustRefuse(&sheet, .present)?.code == .sheetPresented)
        #expect(sheet.phase == .presented)
    }
}

/// The whole phase-conflict table: 4 actions × 3 phases, nil where the action is allowed.
@Suite struct PhaseConflicts {
    static let rows: [(String, Phase, SheetError.Code?)] = [
        ("drag", .presented, nil), ("drag", .confirming, .confirmationPending), ("drag", .dismissed, .sheetDismissed),
        ("confirm", .presented, .noPendingConfirmation), ("confirm", .confirming, nil), ("confirm", .dismissed, .noPendingConfirmation),
        ("dismiss", .presented, nil), ("dismiss", .confirming, nil), ("dismiss", .dismissed, .sheetDismissed),
        ("present", .presented, .sheetPresented), ("present", .confirming, .sheetPresented), ("present", .dismissed, nil),
    ]

    static func actions(_ name: String) -> [SheetAction] {
        switch name {
        case "drag": [.drag(.detent(.medium)), .drag(.closed), .drag(.detent(.large)), .gesture(DragGesture(translation: 400))]
        case "confirm": ConfirmAction.allCases.map { .confirm($0) }
        case "dismiss": AppDismissReason.allCases.map { .dismiss($0) }
        default: [.present]
        }
    }

    @Test(arguments: rows)
    func row(action name: String, phase: Phase, expected: SheetError.Code?) throws {
        for action in Self.actions(name) {
            var sheet = try sheetIn(phase)
            if let expected {
                let error = mustRefuse(&sheet, action)
                #expect(error?.code == expected, "\(action) while \(phase)")
                #expect(error?.message.isEmpty == false)
            } else {
                #expect(throws: Never.self) { try sheet.apply(action, now: tick(1)) }
            }
        }
    }

    @Test func codesAreTheAPIStrings() {
        #expect(SheetError.Code.confirmationPending.rawValue == "confirmation_pending")
        #expect(SheetError.Code.sheetDismissed.rawValue == "sheet_dismissed")
        #expect(SheetError.Code.noPendingConfirmation.rawValue == "no_pending_confirmation")
        #expect(SheetError.Code.sheetPresented.rawValue == "sheet_presented")
        #expect(SheetError.Code.unknownDetent.rawValue == "unknown_detent")
    }
}

/// Issue 2's seed scenario, end to end.
@Test func seedScenario() throws {
    var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
    #expect(sheet.detent == .large)

    var out = mustApply(&sheet, .drag(target("medium")), at: tick(1))
    #expect(kinds(out) == [.detentChanged(from: .large, to: .medium, by: .user)])

    out = mustApply(&sheet, .drag(target("height:300")), at: tick(2))
    #expect(kinds(out) == [.intercepted(attempted: target("height:300"), restoredTo: .medium)])
    #expect(sheet.phase == .confirming)
    #expect(sheet.detent == .medium)

    out = mustApply(&sheet, .confirm(.cancel), at: tick(3))
    #expect(kinds(out) == [.confirmationCancelled(detent: .medium)])
    #expect(sheet.phase == .presented)
    #expect(sheet.detent == .medium)

    mustApply(&sheet, .drag(target("height:300")), at: tick(4))
    #expect(sheet.phase == .confirming)
    out = mustApply(&sheet, .confirm(.discard), at: tick(5))
    #expect(kinds(out) == [.dismissed(reason: .discarded, screen: "root")])
    #expect(sheet.phase == .dismissed)
    #expect(sheet.dismissReason == .discarded)

    out = mustApply(&sheet, .present, at: tick(6))
    #expect(kinds(out) == [.presented(detent: .large, presentation: 2)])
    #expect(sheet.phase == .presented)
    #expect(sheet.detent == .large)
    #expect(sheet.presentation == 2)

    #expect(sheet.version == 7)
    #expect(sheet.events.map(\.seq) == Array(1...7))
    #expect(sheet.events.map(\.kind.type.rawValue) ==
            ["presented", "detentChanged", "intercepted", "confirmationCancelled", "intercepted", "dismissed", "presented"])
    #expect(sheet.events.map(\.at) == [t0] + (1...6).map { tick($0) })
}

@Suite struct EventLogBound {
    @Test func keepsTheNewest256() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        for i in 1...300 {
            mustApply(&sheet, .drag(.detent(i % 2 == 1 ? .medium : .large)), at: tick(Int64(i)))
        }
        #expect(sheet.version == 301)
        #expect(sheet.events.count == Sheet.retainedEvents)
        #expect(sheet.events.first?.seq == 46)
        #expect(sheet.events.last?.seq == 301)
        #expect(sheet.events.map(\.seq) == Array(46...301))
        #expect(sheet.createdAt == t0)
        #expect(sheet.updatedAt == tick(300))

        #expect(sheet.events(after: 0) == .expired)
        #expect(sheet.events(after: 44) == .expired)
        guard case .events(let all) = sheet.events(after: 45) else { Issue.record("expected events"); return }
        #expect(all.map(\.seq) == Array(46...301))
        guard case .events(let tail) = sheet.events(after: 299) else { Issue.record("expected events"); return }
        #expect(tail.map(\.seq) == [300, 301])
        #expect(sheet.events(after: 301) == .events([]))
        #expect(sheet.events(after: .max) == .events([]))

        // seq keeps counting after the ring wraps
        let out = mustApply(&sheet, .dismiss(.done), at: tick(301))
        #expect(out.events.map(\.seq) == [302])
        #expect(sheet.events.first?.seq == 47)
    }

    @Test func beforeWrappingEverythingIsThere() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        #expect(sheet.events(after: 0) == .events(Array(sheet.events)))
        for i in 1...255 { mustApply(&sheet, .drag(.detent(i % 2 == 1 ? .medium : .large))) }
        #expect(sheet.events.count == 256)
        #expect(sheet.events(after: 0) != .expired)
        #expect(sheet.detent == .medium)
        mustApply(&sheet, .drag(.detent(.large)))
        #expect(sheet.version == 257)
        #expect(sheet.events(after: 0) == .expired)
        #expect(sheet.events(after: 1) != .expired)
    }

    @Test func equalityIsLogicalNotPhysical() throws {
        // Two sheets with the same history are equal and hash alike however the ring is laid out.
        var a = Sheet(configuration: try seedConfiguration(), now: t0)
        var b = a
        for i in 1...300 { mustApply(&a, .drag(.detent(i % 2 == 1 ? .medium : .large))) }
        for i in 1...300 { mustApply(&b, .drag(.detent(i % 2 == 1 ? .medium : .large))) }
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
    }
}
