import SheetCore
import Testing

/// `select`: the app moves the sheet.
@Suite struct Select {
    @Test func appMoveSaysApp() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        let out = mustApply(&sheet, .select(.medium), at: tick(1))
        #expect(out.events == [SheetEvent(seq: 2, at: tick(1), kind: .detentChanged(from: .large, to: .medium, by: .app))])
        #expect(sheet.detent == .medium)
        #expect(kinds(mustApply(&sheet, .drag(.detent(.large)), at: tick(2))) == [.detentChanged(from: .medium, to: .large, by: .user)])
    }

    @Test func currentDetentIsNoEvent() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        #expect(mustApply(&sheet, .select(.large), at: tick(1)).events.isEmpty)
        #expect(sheet.version == 1)
    }

    @Test func unknownDetentAndThresholdAreBodyErrors() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        let unknown = mustRefuse(&sheet, .select(.fraction(0.3)))
        #expect(unknown?.code == .unknownDetent)
        #expect(unknown?.field == "detent")
        let threshold = mustRefuse(&sheet, .select(.height(300)))
        #expect(threshold?.code == .invalidField)
        #expect(threshold?.field == "detent")
        // Body errors come before phase conflicts.
        mustApply(&sheet, .dismiss(.done))
        #expect(mustRefuse(&sheet, .select(.height(300)))?.code == .invalidField)
    }

    @Test func phaseConflicts() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        mustApply(&sheet, .drag(.detent(.height(300))))
        #expect(mustRefuse(&sheet, .select(.medium))?.code == .confirmationPending)
        mustApply(&sheet, .confirm(.discard))
        #expect(mustRefuse(&sheet, .select(.medium))?.code == .sheetDismissed)
    }
}

/// `resize`: the container changes height; the detent stays by identity.
@Suite struct Resize {
    static func points(_ sheet: Sheet) -> [String] {
        sheet.heights.map { "\($0.detent)=\($0.points == $0.points.rounded() ? String(Int($0.points)) : String($0.points))" }
    }

    /// The rotation case: `height:300` as the threshold, 844 → 390 → 844.
    @Test func rotationDeactivatesAndReactivatesTheThreshold() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        mustApply(&sheet, .drag(.detent(.medium)), at: tick(1))
        #expect(sheet.thresholdActive)
        #expect(Self.points(sheet) == ["height:300=300", "medium=422", "large=844"])

        let out = mustApply(&sheet, .resize(containerHeight: 390), at: tick(2))
        #expect(out.events == [SheetEvent(seq: 3, at: tick(2), kind: .resized(from: 844, to: 390))])
        #expect(sheet.containerHeight == 390)
        #expect(sheet.configuration.containerHeight == 844)
        #expect(sheet.detent == .medium)
        #expect(!sheet.thresholdActive)
        #expect(Self.points(sheet) == ["medium=195", "height:300=300", "large=390"])
        let refused = mustRefuse(&sheet, .drag(.detent(.height(300))))
        #expect(refused?.code == .thresholdInactive)
        // A swipe past the smallest detent is still judged by the policy (intercept).
        #expect(kinds(mustApply(&sheet, .drag(.closed), at: tick(3))) == [.intercepted(attempted: .closed, restoredTo: .medium)])
        mustApply(&sheet, .confirm(.cancel), at: tick(4))

        #expect(kinds(mustApply(&sheet, .resize(containerHeight: 844), at: tick(5))) == [.resized(from: 390, to: 844)])
        #expect(sheet.thresholdActive)
        #expect(kinds(mustApply(&sheet, .drag(.detent(.height(300))), at: tick(6))) == [.intercepted(attempted: .detent(.height(300)), restoredTo: .medium)])
    }

    @Test func inactiveThresholdIsNoGestureCandidate() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        mustApply(&sheet, .resize(containerHeight: 390), at: tick(1))
        // From large (390), released at 300 exactly: the threshold would be the target if active.
        let r = sheet.resolve(DragGesture(translation: 90))
        #expect(r.target == .detent(.large))   // 300 is nearer 390 (90) than 195 (105)
        let lower = sheet.resolve(DragGesture(translation: 110))
        #expect(lower.target == .detent(.medium))
        for t in stride(from: -500.0, through: 800, by: 7) {
            #expect(sheet.resolve(DragGesture(translation: t)).target != .detent(.height(300)))
        }
    }

    @Test func sameHeightIsNoEventAndRangeIsChecked() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        #expect(mustApply(&sheet, .resize(containerHeight: 844), at: tick(1)).events.isEmpty)
        for bad in [0.0, -1, 10_000.5, .infinity, .nan] {
            let error = mustRefuse(&sheet, .resize(containerHeight: bad))
            #expect(error?.code == .invalidField)
            #expect(error?.field == "containerHeight")
        }
    }

    @Test(arguments: Phase.allCases)
    func allowedInEveryPhase(phase: Phase) throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        if phase == .confirming { mustApply(&sheet, .drag(.detent(.height(300)))) }
        if phase == .dismissed { mustApply(&sheet, .dismiss(.done)) }
        #expect(kinds(mustApply(&sheet, .resize(containerHeight: 500), at: tick(1))) == [.resized(from: 844, to: 500)])
        #expect(sheet.phase == phase)
    }

    @Test func orderAndTiesFollowTheNewHeight() throws {
        var sheet = Sheet(configuration: try SheetConfiguration(detents: [.large, .medium, .height(400), .fraction(0.5)]), now: t0)
        #expect(Self.points(sheet) == ["height:400=400", "fraction:0.5=422", "medium=422", "large=844"])
        mustApply(&sheet, .resize(containerHeight: 300), at: tick(1))
        // height:400 clamps to 300, tying large: ties by canonical string.
        #expect(Self.points(sheet) == ["fraction:0.5=150", "medium=150", "height:400=300", "large=300"])
        #expect(sheet.detent == .large)
    }
}

/// `largestUndimmedDetent`, `dimmed`, `backgroundInteractive`.
@Suite struct Dimming {
    static func sheet(undimmed: Detent?) throws -> Sheet {
        Sheet(configuration: try SheetConfiguration(detents: [.large, .medium, .fraction(0.25)], thresholdDetent: .height(100),
                                                    largestUndimmedDetent: undimmed), now: t0)
    }

    @Test(arguments: [(Detent.large, false), (.medium, true), (.fraction(0.25), true)])
    func noUndimmedDetentDimsEveryPresentedDetent(detent: Detent, _ unused: Bool) throws {
        var sheet = try Self.sheet(undimmed: nil)
        mustApply(&sheet, .select(detent))
        #expect(sheet.dimmed)
        #expect(!sheet.backgroundInteractive)
    }

    @Test(arguments: [(Detent.large, true), (.medium, false), (.fraction(0.25), false)])
    func dimmedAboveTheLargestUndimmed(detent: Detent, dimmed: Bool) throws {
        var sheet = try Self.sheet(undimmed: .medium)
        mustApply(&sheet, .select(detent))
        #expect(sheet.dimmed == dimmed)
        #expect(sheet.backgroundInteractive == !dimmed)
    }

    @Test func confirmingFollowsTheRuleAndDismissedIsNeverDimmed() throws {
        var sheet = try Self.sheet(undimmed: .medium)
        mustApply(&sheet, .drag(.detent(.height(100))))
        #expect(sheet.phase == .confirming)
        #expect(sheet.dimmed)
        mustApply(&sheet, .confirm(.discard))
        #expect(!sheet.dimmed)
        #expect(sheet.backgroundInteractive)
    }

    @Test func judgedAtTheCurrentHeight() throws {
        // height:300 undimmed; at medium: 422 > 300 is dimmed; at 500 points medium is 250, not dimmed.
        var sheet = Sheet(configuration: try SheetConfiguration(detents: [.large, .medium, .height(300)],
                                                                largestUndimmedDetent: .height(300)), now: t0)
        mustApply(&sheet, .select(.medium))
        #expect(sheet.dimmed)
        mustApply(&sheet, .resize(containerHeight: 500))
        #expect(!sheet.dimmed)
    }

    @Test func mustNameANonThresholdDetentOfTheSet() {
        func code(_ make: () throws(ConfigurationError) -> SheetConfiguration) -> (ConfigurationError.Code, String)? {
            do { _ = try make(); return nil } catch { return (error.code, error.field) }
        }
        let unknown = code { () throws(ConfigurationError) in try SheetConfiguration(detents: [.large], largestUndimmedDetent: .medium) }
        #expect(unknown?.0 == .unknownDetent)
        #expect(unknown?.1 == "largestUndimmedDetent")
        let threshold = code { () throws(ConfigurationError) in
            try SheetConfiguration(detents: [.large], thresholdDetent: .height(100), largestUndimmedDetent: .height(100))
        }
        #expect(threshold?.0 == .undimmedIsThreshold)
        // A default named only as `defaultDetent` is in the effective set.
        #expect(code { () throws(ConfigurationError) in
            try SheetConfiguration(detents: [.large], defaultDetent: .medium, largestUndimmedDetent: .medium)
        } == nil)
    }
}
