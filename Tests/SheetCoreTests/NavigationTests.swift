import SheetCore
import Testing

/// `navigate`: a stack of screens inside the sheet; a pop is never a dismissal.
@Suite struct Navigation {
    static func settings(root: String? = nil) throws -> Sheet {
        Sheet(configuration: try SheetConfiguration(detents: [.large, .medium], rootScreen: root), now: t0)
    }

    @Test func pushPopAndDismissFromTheScreenLeftOpen() throws {
        var sheet = try Self.settings(root: "settings")
        #expect(sheet.stack == ["settings"])
        #expect(kinds(mustApply(&sheet, .navigate(.push("account")), at: tick(1))) == [.pushed(screen: "account", depth: 2)])
        #expect(kinds(mustApply(&sheet, .navigate(.push("password")), at: tick(2))) == [.pushed(screen: "password", depth: 3)])
        #expect(kinds(mustApply(&sheet, .navigate(.pop(1)), at: tick(3))) == [.popped(screens: ["password"], depth: 2)])
        #expect(sheet.phase == .presented)
        #expect(kinds(mustApply(&sheet, .drag(.closed), at: tick(4))) == [.dismissed(reason: .swipe, screen: "account")])
        // The stack is kept while dismissed; present starts again at the root.
        #expect(sheet.stack == ["settings", "account"])
        mustApply(&sheet, .present, at: tick(5))
        #expect(sheet.stack == ["settings"])
    }

    @Test func popRemovesTopFirst() throws {
        var sheet = try Self.settings()
        for screen in ["a", "b", "c"] { mustApply(&sheet, .navigate(.push(screen))) }
        #expect(kinds(mustApply(&sheet, .navigate(.pop(3)), at: tick(1))) == [.popped(screens: ["c", "b", "a"], depth: 1)])
        #expect(sheet.stack == ["root"])
        #expect(mustRefuse(&sheet, .navigate(.pop(1)))?.code == .cannotPop)
    }

    @Test func stackHoldsAtMost32() throws {
        var sheet = try Self.settings()
        for i in 1..<32 { mustApply(&sheet, .navigate(.push("s\(i)"))) }
        #expect(sheet.stack.count == 32)
        #expect(mustRefuse(&sheet, .navigate(.push("one-more")))?.code == .stackFull)
    }

    @Test(arguments: ["", String(repeating: "x", count: 65), "with space", "ünï", "a/b", "semi;colon"])
    func screenNamesFollowTheRule(name: String) throws {
        var sheet = try Self.settings()
        let error = mustRefuse(&sheet, .navigate(.push(name)))
        #expect(error?.code == .invalidField)
        #expect(error?.field == "push")
        #expect(throws: ConfigurationError.self) { try SheetConfiguration(rootScreen: name) }
    }

    @Test(arguments: ["a", "Settings.v2_final-1", String(repeating: "z", count: 64)])
    func goodScreenNames(name: String) throws {
        var sheet = try Self.settings(root: name)
        mustApply(&sheet, .navigate(.push(name)))
        #expect(sheet.stack == [name, name])
    }

    @Test(arguments: [0, -1, Int.min])
    func popNeedsAPositiveCount(count: Int) throws {
        var sheet = try Self.settings()
        let error = mustRefuse(&sheet, .navigate(.pop(count)))
        #expect(error?.code == .invalidField)
        #expect(error?.field == "pop")
    }

    @Test func phaseConflicts() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        mustApply(&sheet, .drag(.detent(.height(300))))
        #expect(mustRefuse(&sheet, .navigate(.push("x")))?.code == .confirmationPending)
        #expect(mustRefuse(&sheet, .navigate(.pop(5)))?.code == .confirmationPending)
        mustApply(&sheet, .confirm(.save))
        #expect(mustRefuse(&sheet, .navigate(.push("x")))?.code == .sheetDismissed)
        // A body error still comes first.
        #expect(mustRefuse(&sheet, .navigate(.pop(0)))?.code == .invalidField)
    }

    @Test func dismissedCarriesTheScreenForEveryWayOut() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        mustApply(&sheet, .navigate(.push("edit")))
        mustApply(&sheet, .drag(.detent(.height(300))))
        #expect(kinds(mustApply(&sheet, .confirm(.discard), at: tick(1))) == [.dismissed(reason: .discarded, screen: "edit")])
    }
}
