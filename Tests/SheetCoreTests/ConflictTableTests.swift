import SheetCore
import Testing

/// The Part 2 conflict table, every cell: action × (presented, presented and covered,
/// confirming, dismissed). nil means allowed.
@Suite struct ConflictTable {
    enum State: String, CaseIterable { case presented, covered, confirming, dismissed }

    static let table: [(String, SheetAction, [State: SheetError.Code])] = [
        ("drag", .drag(.detent(.medium)), [.covered: .sheetCovered, .confirming: .confirmationPending, .dismissed: .sheetDismissed]),
        ("gesture", .gesture(DragGesture(translation: 200)), [.covered: .sheetCovered, .confirming: .confirmationPending, .dismissed: .sheetDismissed]),
        ("changes", .changes(hasChanges: true), [.dismissed: .sheetDismissed]),
        ("select", .select(.medium), [.confirming: .confirmationPending, .dismissed: .sheetDismissed]),
        ("resize", .resize(containerHeight: 600), [:]),
        ("navigate push", .navigate(.push("next")), [.confirming: .confirmationPending, .dismissed: .sheetDismissed]),
        ("navigate pop", .navigate(.pop(1)), [.confirming: .confirmationPending, .dismissed: .sheetDismissed]),
        ("dismiss", .dismiss(.done), [.dismissed: .sheetDismissed]),
        ("confirm", .confirm(.cancel), [.presented: .noPendingConfirmation, .covered: .noPendingConfirmation, .dismissed: .noPendingConfirmation]),
        ("present", .present, [.presented: .sheetPresented, .covered: .sheetPresented, .confirming: .sheetPresented]),
    ]

    static let parentID = SessionID(high: 1, low: 1)
    static let childID = SessionID(high: 2, low: 2)

    /// The sheet in `state` (pushed once, so a pop is possible), with its child when covered.
    static func chain(_ state: State) throws -> [SessionID: Sheet] {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        mustApply(&sheet, .navigate(.push("detail")))
        var sheets = [parentID: sheet]
        switch state {
        case .presented: break
        case .covered:
            let made = try SheetChain.present(childID, configuration: try seedConfiguration(), over: parentID,
                                              in: { sheets[$0] }, now: tick(1))
            for change in made.changes { sheets[change.id] = change.sheet }
        case .confirming: mustApply(&sheets[parentID]!, .drag(.detent(.height(300))))
        case .dismissed: mustApply(&sheets[parentID]!, .dismiss(.done))
        }
        return sheets
    }

    static let cells = table.flatMap { row in State.allCases.map { (row.0, row.1, $0, row.2[$0]) } }

    @Test(arguments: cells)
    func cell(name: String, action: SheetAction, state: State, refusal: SheetError.Code?) throws {
        let sheets = try Self.chain(state)
        let sheet = sheets[Self.parentID]!
        #expect(sheet.isCovered == (state == .covered))
        do {
            let out = try SheetChain.apply(action, to: Self.parentID, sheet, in: { sheets[$0] }, now: tick(5))
            #expect(refusal == nil, "\(name) while \(state) was allowed, expected \(refusal.map(\.rawValue) ?? "")")
            if name == "dismiss" && state == .covered {
                // The cascade: the child first, then this sheet uncovered, then dismissed.
                #expect(out.changes.map(\.id) == [Self.childID, Self.parentID])
                #expect(kinds(out.outcome).map(\.type.rawValue) == ["uncovered", "dismissed"])
            }
        } catch {
            #expect(error.code == refusal, "\(name) while \(state)")
        }
    }
}
