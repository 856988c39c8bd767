import SheetCore
import Testing

/// `protectWhen`, `hasChanges` and `changes`: the policy protects only while there is
/// something to lose.
@Suite struct UnsavedChanges {
    static func editForm(policy: DismissPolicy = .intercept, protectWhen: ProtectWhen = .hasChanges,
                         threshold: Detent? = .height(300)) throws -> Sheet {
        Sheet(configuration: try SheetConfiguration(detents: [.large, .medium], thresholdDetent: threshold,
                                                    dismissPolicy: policy, protectWhen: protectWhen), now: t0)
    }

    enum Target: String, CaseIterable { case threshold, closedIntercept, closedBlock }

    static func sheet(for target: Target, protected: Bool) throws -> (Sheet, SheetAction) {
        let when: ProtectWhen = protected ? .always : .hasChanges
        return switch target {
        case .threshold: (try editForm(protectWhen: when), .drag(.detent(.height(300))))
        case .closedIntercept: (try editForm(protectWhen: when, threshold: nil), .drag(.closed))
        case .closedBlock: (try editForm(policy: .block, protectWhen: when, threshold: nil), .drag(.closed))
        }
    }

    /// The Part 2 drag table, "protected" column: as Part 1.
    @Test(arguments: Target.allCases)
    func protectedColumn(target: Target) throws {
        var (sheet, drag) = try Self.sheet(for: target, protected: true)
        #expect(sheet.isProtected)
        let out = mustApply(&sheet, drag, at: tick(1))
        switch target {
        case .threshold: #expect(kinds(out) == [.intercepted(attempted: .detent(.height(300)), restoredTo: .large)])
        case .closedIntercept: #expect(kinds(out) == [.intercepted(attempted: .closed, restoredTo: .large)])
        case .closedBlock: #expect(kinds(out) == [.dismissBlocked(attempted: .closed)])
        }
        #expect(sheet.phase != .dismissed)
    }

    /// The "not protected" column: every closing drag dismisses by swipe.
    @Test(arguments: Target.allCases)
    func unprotectedColumn(target: Target) throws {
        var (sheet, drag) = try Self.sheet(for: target, protected: false)
        #expect(!sheet.isProtected)
        let out = mustApply(&sheet, drag, at: tick(1))
        #expect(kinds(out) == [.dismissed(reason: .swipe, screen: "root")])
        #expect(sheet.phase == .dismissed)
        #expect(sheet.detent == .large)
    }

    /// `protectWhen: hasChanges` with changes marked is protected again.
    @Test(arguments: Target.allCases)
    func changesProtect(target: Target) throws {
        var (sheet, drag) = try Self.sheet(for: target, protected: false)
        mustApply(&sheet, .changes(hasChanges: true), at: tick(1))
        #expect(sheet.isProtected)
        let out = mustApply(&sheet, drag, at: tick(2))
        #expect(kinds(out).allSatisfy { if case .dismissed = $0 { false } else { true } })
    }

    @Test func allowProtectsNothingWhateverTheChanges() throws {
        var sheet = Sheet(configuration: try SheetConfiguration(detents: [.large, .medium]), now: t0)
        mustApply(&sheet, .changes(hasChanges: true), at: tick(1))
        #expect(!sheet.isProtected)
        #expect(kinds(mustApply(&sheet, .drag(.closed), at: tick(2))) == [.dismissed(reason: .swipe, screen: "root")])
    }

    @Test func hasChangesWithAllowIsRefused() {
        #expect(throws: ConfigurationError.self) { try SheetConfiguration(protectWhen: .hasChanges) }
        #expect(throws: ConfigurationError.self) {
            try SheetConfiguration(dismissPolicy: .allow, protectWhen: .hasChanges)
        }
        #expect((try? SheetConfiguration(dismissPolicy: .allow, protectWhen: .always)) != nil)
        do {
            _ = try SheetConfiguration(protectWhen: .hasChanges)
        } catch {
            #expect(error.code == .protectWhenWithAllow)
            #expect(error.field == "protectWhen")
        }
    }

    @Test func changesIsASetOperation() throws {
        var sheet = try Self.editForm()
        #expect(!sheet.hasChanges)
        #expect(mustApply(&sheet, .changes(hasChanges: false), at: tick(1)).events.isEmpty)
        #expect(sheet.version == 1)
        let out = mustApply(&sheet, .changes(hasChanges: true), at: tick(2))
        #expect(out.events == [SheetEvent(seq: 2, at: tick(2), kind: .changesMarked(hasChanges: true))])
        #expect(mustApply(&sheet, .changes(hasChanges: true), at: tick(3)).events.isEmpty)
        #expect(sheet.version == 2)
        #expect(kinds(mustApply(&sheet, .changes(hasChanges: false), at: tick(4))) == [.changesMarked(hasChanges: false)])
    }

    /// The story: clean, the swipe dismisses; with changes it is intercepted and `save` ends it.
    @Test func editFormStory() throws {
        var clean = try Self.editForm(threshold: nil)
        #expect(kinds(mustApply(&clean, .drag(.closed), at: tick(1))) == [.dismissed(reason: .swipe, screen: "root")])

        var edited = try Self.editForm(threshold: nil)
        mustApply(&edited, .changes(hasChanges: true), at: tick(1))
        #expect(kinds(mustApply(&edited, .drag(.closed), at: tick(2))) == [.intercepted(attempted: .closed, restoredTo: .large)])
        #expect(edited.phase == .confirming)
        // The pending question stays while the app marks changes; the user's answer decides.
        mustApply(&edited, .changes(hasChanges: false), at: tick(3))
        #expect(edited.phase == .confirming)
        mustApply(&edited, .changes(hasChanges: true), at: tick(4))
        #expect(kinds(mustApply(&edited, .confirm(.save), at: tick(5))) == [.dismissed(reason: .saved, screen: "root")])
        #expect(!edited.hasChanges)
    }

    @Test(arguments: [(ConfirmAction.discard, false), (.save, false)])
    func savingOrDiscardingClearsChanges(answer: ConfirmAction, after: Bool) throws {
        var sheet = try Self.editForm()
        mustApply(&sheet, .changes(hasChanges: true), at: tick(1))
        mustApply(&sheet, .drag(.detent(.height(300))), at: tick(2))
        mustApply(&sheet, .confirm(answer), at: tick(3))
        #expect(sheet.hasChanges == after)
    }

    @Test(arguments: [AppDismissReason.done, .programmatic])
    func otherDismissalsKeepChangesUntilPresentedAgain(reason: AppDismissReason) throws {
        var sheet = try Self.editForm()
        mustApply(&sheet, .changes(hasChanges: true), at: tick(1))
        mustApply(&sheet, .dismiss(reason), at: tick(2))
        #expect(sheet.hasChanges)
        #expect(mustRefuse(&sheet, .changes(hasChanges: false))?.code == .sheetDismissed)
        mustApply(&sheet, .present, at: tick(3))
        #expect(!sheet.hasChanges)
    }

    @Test func unprotectedSwipeKeepsChangesAsTheyWere() throws {
        // hasChanges false, so unprotected: the swipe dismisses and leaves it false.
        var sheet = try Self.editForm(threshold: nil)
        mustApply(&sheet, .drag(.closed), at: tick(1))
        #expect(!sheet.hasChanges)
    }
}
