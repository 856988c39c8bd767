import SheetCore
import SheetJSON
import Synchronization

/// One counter. Each label combination gets its own cell, created up front, so counting on the
/// hot path is a single relaxed atomic add: no lock, no dictionary lookup by string.
package final class CounterCell: Sendable {
    package let value = Atomic<UInt64>(0)
    package func add(_ amount: UInt64 = 1) { value.add(amount, ordering: .relaxed) }
    package var current: UInt64 { value.load(ordering: .relaxed) }
}

/// The service's Prometheus counters and histograms (text format 0.0.4).
package final class Metrics: Sendable {
    // The label sets come from what they count: routes and methods from the service's route
    // table, given at init (a path that matches none is "unmatched", at the end), error statuses
    // from `APIError.Code`, event types and reasons from their enums.
    package let routes: [String]
    /// HEAD is answered as GET but counted as itself; "OTHER" is every method no route answers.
    package let methods: [String]
    /// Success statuses, every status an error code maps to, 500; 0 (the last) is any other.
    package static let statuses = [200, 201, 204] + Set(APIError.Code.allCases.map(\.status)).sorted() + [500, 0]
    /// Upper bounds in seconds: from 50 µs (a cached answer) to 30 s (the longest long-poll).
    package static let buckets: [Double] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1, 5, 30]

    package let requests: [CounterCell]          // route × method × status
    package let durationBuckets: [CounterCell]   // route × bucket (non-cumulative; summed at exposition)
    package let durationSumMicros: [CounterCell] // route
    package let durationCount: [CounterCell]     // route
    package let events: [CounterCell]            // by event type
    package let dismissals: [CounterCell]        // by DismissReason
    package let interceptions: [CounterCell]     // by InterceptedAttempt
    package let confirmations: [CounterCell]     // by ConfirmAction
    package let gestureTargets: [CounterCell]    // by GestureSettling
    package let navigations: [CounterCell]       // by NavigationKind
    package let refusals: [CounterCell]          // by AccessRefusal

    package static let eventTypes = SheetEvent.EventType.allCases
    package static let dismissReasons = DismissReason.allCases
    package static let confirmActions = ConfirmAction.allCases

    /// `sheetd_navigations_total`'s `kind`: a push or a pop (a pop is never a dismissal).
    package enum NavigationKind: String, CaseIterable, Sendable {
        case push, pop
    }

    /// `sheetd_interceptions_total`'s `attempted`: what the user dragged to when intercepted.
    package enum InterceptedAttempt: String, CaseIterable, Sendable {
        case threshold, closed
        init(_ target: DragTarget) { self = target == .closed ? .closed : .threshold }
    }

    /// `sheetd_gesture_targets_total`'s `target`: where a released gesture settled.
    package enum GestureSettling: String, CaseIterable, Sendable {
        case detent, closed
        init(_ target: DragTarget) { self = target == .closed ? .closed : .detent }
    }

    /// The cell of `value` in a family whose cells are one per case, in `allCases` order.
    private static func cell<Label: CaseIterable & Equatable>(_ value: Label, in cells: [CounterCell]) -> CounterCell
    where Label.AllCases == [Label] {
        cells[Label.allCases.firstIndex(of: value)!]
    }

    /// `routes` are the route table's templates in its order, `methods` every method it routes.
    package init(routes: [String], methods: [String]) {
        self.routes = routes + ["unmatched"]
        self.methods = methods + ["HEAD", "OTHER"]
        func cells(_ count: Int) -> [CounterCell] { (0..<count).map { _ in CounterCell() } }
        requests = cells(self.routes.count * self.methods.count * Self.statuses.count)
        durationBuckets = cells(self.routes.count * (Self.buckets.count + 1))
        durationSumMicros = cells(self.routes.count)
        durationCount = cells(self.routes.count)
        events = cells(Self.eventTypes.count)
        dismissals = cells(Self.dismissReasons.count)
        interceptions = cells(InterceptedAttempt.allCases.count)
        confirmations = cells(Self.confirmActions.count)
        gestureTargets = cells(GestureSettling.allCases.count)
        navigations = cells(NavigationKind.allCases.count)
        refusals = cells(AccessRefusal.allCases.count)
    }

    package func methodIndex(_ method: String) -> Int {
        methods.firstIndex(of: method) ?? methods.count - 1
    }

    /// `route` is the matched route's index in the table; nil counts as "unmatched".
    package func recordRequest(route: Int?, method: String, status: Int, seconds: Double) {
        let routeIndex = route ?? routes.count - 1
        let methodIndex = self.methodIndex(method)
        let statusIndex = Self.statuses.firstIndex(of: status) ?? Self.statuses.count - 1
        requests[(routeIndex * self.methods.count + methodIndex) * Self.statuses.count + statusIndex].add()
        let bucket = Self.buckets.firstIndex { seconds <= $0 } ?? Self.buckets.count
        durationBuckets[routeIndex * (Self.buckets.count + 1) + bucket].add()
        durationSumMicros[routeIndex].add(UInt64(max(0, seconds * 1_000_000)))
        durationCount[routeIndex].add()
    }

    /// Counts what one applied action did (never called for a replay, which applies nothing).
    package func recordOutcome(_ action: SheetAction, _ outcome: SheetOutcome) {
        recordEvents(outcome.events)
        if case .confirm(let choice) = action {
            confirmations[Self.confirmActions.firstIndex(of: choice)!].add()
        }
        if let gesture = outcome.gesture {
            Self.cell(GestureSettling(gesture.target), in: gestureTargets).add()
        }
    }

    /// Counts events by type, dismissals by reason, interceptions and navigations: those of an
    /// action's own session, and those a chain step recorded on the sessions above and below.
    package func recordEvents(_ recorded: [SheetEvent]) {
        for event in recorded {
            events[Self.eventTypes.firstIndex(of: event.kind.type)!].add()
            switch event.kind {
            case .dismissed(let reason, _):
                dismissals[Self.dismissReasons.firstIndex(of: reason)!].add()
            case .intercepted(let attempted, _):
                Self.cell(InterceptedAttempt(attempted), in: interceptions).add()
            case .pushed:
                Self.cell(NavigationKind.push, in: navigations).add()
            case .popped:
                Self.cell(NavigationKind.pop, in: navigations).add()
            default:
                break
            }
        }
    }

    /// A created session's `presented` event, and the `covered` its parent recorded, if any.
    package func recordCreated(_ sheet: Sheet) {
        events[Self.eventTypes.firstIndex(of: .presented)!].add()
        if sheet.parent != nil { events[Self.eventTypes.firstIndex(of: .covered)!].add() }
    }

    package func recordRefusal(_ refusal: AccessRefusal) {
        refusals[AccessRefusal.allCases.firstIndex(of: refusal)!].add()
    }
}
