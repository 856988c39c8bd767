import SheetCore
import Testing

/// A fixed clock: tests never read the real time, so every event is reproducible.
let t0 = Timestamp(millisecondsSince1970: 1_764_422_931_123)   // 2025-11-29T13:28:51.123Z

func tick(_ n: Int64) -> Timestamp {
    Timestamp(millisecondsSince1970: t0.millisecondsSince1970 + n * 1000)
}

func detent(_ text: String) -> Detent {
    do { return try Detent(parsing: text) } catch { fatalError("test detent \(text): \(error.message)") }
}

func target(_ text: String) -> DragTarget {
    do { return try DragTarget(parsing: text) } catch { fatalError("test target \(text): \(error.message)") }
}

/// The seed's configuration: large (default), medium, threshold height:300.
func seedConfiguration(
    dismissPolicy: DismissPolicy? = nil,
    interceptAction: InterceptAction? = nil
) throws -> SheetConfiguration {
    try SheetConfiguration(detents: [.large, .medium], defaultDetent: .large, thresholdDetent: .height(300),
                           dismissPolicy: dismissPolicy, interceptAction: interceptAction)
}

/// Applies and fails the test on an unexpected error.
@discardableResult
func mustApply(_ sheet: inout Sheet, _ action: SheetAction, at now: Timestamp = t0,
               sourceLocation: SourceLocation = #_sourceLocation) -> SheetOutcome {
    do {
        return try sheet.apply(action, now: now)
    } catch {
        Issue.record("unexpected \(error.code): \(error.message)", sourceLocation: sourceLocation)
        return SheetOutcome(events: [])
    }
}

/// Applies an action that must be refused, and checks that nothing changed.
func mustRefuse(_ sheet: inout Sheet, _ action: SheetAction,
                sourceLocation: SourceLocation = #_sourceLocation) -> SheetError? {
    let before = sheet
    do {
        _ = try sheet.apply(action, now: tick(99))
        Issue.record("expected \(action) to be refused", sourceLocation: sourceLocation)
        return nil
    } catch {
        #expect(sheet == before, "state changed on error", sourceLocation: sourceLocation)
        return error
    }
}

/// Kinds of the events an outcome produced, for compact expectations.
func kinds(_ outcome: SheetOutcome) -> [SheetEvent.Kind] { outcome.events.map(\.kind) }
