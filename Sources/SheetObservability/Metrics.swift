import SheetCore
import SheetJSON
import Synchronization

/// A family's counters, one per label combination, made up front in one allocation, so counting
/// on the hot path is a single relaxed atomic add: no lock, no lookup by string, and no reference
/// count (an object per counter was retained and released around each add).
// @unchecked Sendable: the pointer reaches only `Atomic`s, each read and written atomically; it
// is allocated and initialised in `init` and deinitialised and deallocated in `deinit`.
package final class CounterCells: @unchecked Sendable {
    private let cells: UnsafeMutablePointer<Atomic<UInt64>>
    package let count: Int

    package init(count: Int) {
        self.count = count
        cells = .allocate(capacity: count)
        for index in 0..<count { (cells + index).initialize(to: Atomic(0)) }
    }

    deinit {
        cells.deinitialize(count: count)
        cells.deallocate()
    }

    package func add(at index: Int, _ amount: UInt64 = 1) {
        precondition(index >= 0 && index < count, "counter \(index) of \(count)")
        cells[index].add(amount, ordering: .relaxed)
    }

    /// The current value of counter `index`.
    package subscript(index: Int) -> UInt64 {
        precondition(index >= 0 && index < count, "counter \(index) of \(count)")
        return cells[index].load(ordering: .relaxed)
    }
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

    package let requests: CounterCells          // route × method × status
    package let durationBuckets: CounterCells   // route × bucket (non-cumulative; summed at exposition)
    package let durationSumMicros: CounterCells // route
    package let durationCount: CounterCells     // route
    package let events: CounterCells            // by event type
    package let dismissals: CounterCells        // by DismissReason
    package let interceptions: CounterCells     // by InterceptedAttempt
    package let confirmations: CounterCells     // by ConfirmAction
    package let gestureTargets: CounterCells    // by GestureSettling
    package let navigations: CounterCells       // by NavigationKind
    package let refusals: CounterCells          // by AccessRefusal

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

    /// The index of `value`'s counter in a family whose counters are one per case, in `allCases` order.
    private static func index<Label: CaseIterable & Equatable>(of value: Label) -> Int where Label.AllCases == [Label] {
        Label.allCases.firstIndex(of: value)!
    }

    /// `routes` are the route table's templates in its order, `methods` every method it routes.
    package init(routes: [String], methods: [String]) {
        self.routes = routes + ["unmatched"]
        self.methods = methods + ["HEAD", "OTHER"]
        requests = CounterCells(count: self.routes.count * self.methods.count * Self.statuses.count)
        durationBuckets = CounterCells(count: self.routes.count * (Self.buckets.count + 1))
        durationSumMicros = CounterCells(count: self.routes.count)
        durationCount = CounterCells(count: self.routes.count)
        events = CounterCells(count: Self.eventTypes.count)
        dismissals = CounterCells(count: Self.dismissReasons.count)
        interceptions = CounterCells(count: InterceptedAttempt.allCases.count)
        confirmations = CounterCells(count: Self.confirmActions.count)
        gestureTargets = CounterCells(count: GestureSettling.allCases.count)
        navigations = CounterCells(count: NavigationKind.allCases.count)
        refusals = CounterCells(count: AccessRefusal.allCases.count)
    }

    package func methodIndex(_ method: String) -> Int {
        methods.firstIndex(of: method) ?? methods.count - 1
    }

    /// `route` is the matched route's index in the table; nil counts as "unmatched".
    package func recordRequest(route: Int?, method: String, status: Int, seconds: Double) {
        let routeIndex = route ?? routes.count - 1
        let methodIndex = self.methodIndex(method)
        let statusIndex = Self.statuses.firstIndex(of: status) ?? Self.statuses.count - 1
        requests.add(at: (routeIndex * self.methods.count + methodIndex) * Self.statuses.count + statusIndex)
        let bucket = Self.buckets.firstIndex { seconds <= $0 } ?? Self.buckets.count
        durationBuckets.add(at: routeIndex * (Self.buckets.count + 1) + bucket)
        durationSumMicros.add(at: routeIndex, UInt64(max(0, seconds * 1_000_000)))
        durationCount.add(at: routeIndex)
    }

    /// Counts what one applied action did (never called for a replay, which applies nothing).
    package func recordOutcome(_ action: SheetAction, _ outcome: SheetOutcome) {
        recordEvents(outcome.events)
        if case .confirm(let choice) = action {
            confirmations.add(at: Self.confirmActions.firstIndex(of: choice)!)
        }
        if let gesture = outcome.gesture {
            gestureTargets.add(at: Self.index(of: GestureSettling(gesture.target)))
        }
    }

    /// Counts events by type, dismissals by reason, interceptions and navigations: those of an
    /// action's own session, and those a chain step recorded on the sessions above and below.
    package func recordEvents(_ recorded: [SheetEvent]) {
        for event in recorded {
            events.add(at: Self.eventTypes.firstIndex(of: event.kind.type)!)
            switch event.kind {
            case .dismissed(let reason, _):
                dismissals.add(at: Self.dismissReasons.firstIndex(of: reason)!)
            case .intercepted(let attempted, _):
                interceptions.add(at: Self.index(of: InterceptedAttempt(attempted)))
            case .pushed:
                navigations.add(at: Self.index(of: NavigationKind.push))
            case .popped:
                navigations.add(at: Self.index(of: NavigationKind.pop))
            default:
                break
            }
        }
    }

    /// A created session's `presented` event, and the `covered` its parent recorded, if any.
    package func recordCreated(_ sheet: Sheet) {
        events.add(at: Self.eventTypes.firstIndex(of: .presented)!)
        if sheet.parent != nil { events.add(at: Self.eventTypes.firstIndex(of: .covered)!) }
    }

    package func recordRefusal(_ refusal: AccessRefusal) {
        refusals.add(at: AccessRefusal.allCases.firstIndex(of: refusal)!)
    }
}
