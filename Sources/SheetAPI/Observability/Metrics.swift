import SheetCore
import Synchronization

/// One counter. Each label combination gets its own cell, created up front, so counting on the
/// hot path is a single relaxed atomic add: no lock, no dictionary lookup by string.
final class CounterCell: Sendable {
    let value = Atomic<UInt64>(0)
    func add(_ amount: UInt64 = 1) { value.add(amount, ordering: .relaxed) }
    var current: UInt64 { value.load(ordering: .relaxed) }
}

/// The service's Prometheus counters and histograms (text format 0.0.4).
final class Metrics: Sendable {
    // The label sets come from what they count: routes from `RouteTable` (a path that matches
    // none is "unmatched", at the end), methods from the table too, error statuses from
    // `APIError.Code`, event types and reasons from their enums.
    static let routes = RouteTable.entries.map(\.template) + ["unmatched"]
    /// HEAD is answered as GET but counted as itself; "OTHER" is every method no route answers.
    static let methods = RouteTable.methods + ["HEAD", "OTHER"]
    /// Success statuses, every status an error code maps to, 500; 0 (the last) is any other.
    static let statuses = [200, 201, 204] + Set(APIError.Code.allCases.map(\.status)).sorted() + [500, 0]
    /// Upper bounds in seconds: from 50 µs (a cached answer) to 30 s (the longest long-poll).
    static let buckets: [Double] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1, 5, 30]

    let requests: [CounterCell]          // route × method × status
    let durationBuckets: [CounterCell]   // route × bucket (non-cumulative; summed at exposition)
    let durationSumMicros: [CounterCell] // route
    let durationCount: [CounterCell]     // route
    let events: [CounterCell]            // by event type
    let dismissals: [CounterCell]        // by DismissReason
    let interceptions: [CounterCell]     // threshold, closed
    let confirmations: [CounterCell]     // by ConfirmAction
    let gestureTargets: [CounterCell]    // detent, closed
    let refusals: [CounterCell]          // by AccessRefusal

    static let eventTypes = SheetEvent.EventType.allCases
    static let dismissReasons = DismissReason.allCases
    static let confirmActions = ConfirmAction.allCases

    init() {
        func cells(_ count: Int) -> [CounterCell] { (0..<count).map { _ in CounterCell() } }
        requests = cells(Self.routes.count * Self.methods.count * Self.statuses.count)
        durationBuckets = cells(Self.routes.count * (Self.buckets.count + 1))
        durationSumMicros = cells(Self.routes.count)
        durationCount = cells(Self.routes.count)
        events = cells(Self.eventTypes.count)
        dismissals = cells(Self.dismissReasons.count)
        interceptions = cells(2)
        confirmations = cells(Self.confirmActions.count)
        gestureTargets = cells(2)
        refusals = cells(AccessRefusal.allCases.count)
    }

    static func methodIndex(_ method: String) -> Int {
        methods.firstIndex(of: method) ?? methods.count - 1
    }

    func recordRequest(route: Route?, method: String, status: Int, seconds: Double) {
        let routeIndex = route?.index ?? Self.routes.count - 1
        let methodIndex = Self.methodIndex(method)
        let statusIndex = Self.statuses.firstIndex(of: status) ?? Self.statuses.count - 1
        requests[(routeIndex * Self.methods.count + methodIndex) * Self.statuses.count + statusIndex].add()
        let bucket = Self.buckets.firstIndex { seconds <= $0 } ?? Self.buckets.count
        durationBuckets[routeIndex * (Self.buckets.count + 1) + bucket].add()
        durationSumMicros[routeIndex].add(UInt64(max(0, seconds * 1_000_000)))
        durationCount[routeIndex].add()
    }

    /// Counts what one applied action did (never called for a replay, which applies nothing).
    func recordOutcome(_ action: SheetAction, _ outcome: SheetOutcome) {
        for event in outcome.events {
            events[Self.eventTypes.firstIndex(of: event.kind.type)!].add()
            switch event.kind {
            case .dismissed(let reason, _):
                dismissals[Self.dismissReasons.firstIndex(of: reason)!].add()
            case .intercepted(let attempted, _):
                interceptions[attempted == .closed ? 1 : 0].add()
            default:
                break
            }
        }
        if case .confirm(let choice) = action {
            confirmations[Self.confirmActions.firstIndex(of: choice)!].add()
        }
        if let gesture = outcome.gesture {
            gestureTargets[gesture.target == .closed ? 1 : 0].add()
        }
    }

    /// A created session's `presented` event.
    func recordCreated() { events[Self.eventTypes.firstIndex(of: .presented)!].add() }

    func recordRefusal(_ refusal: AccessRefusal) {
        refusals[AccessRefusal.allCases.firstIndex(of: refusal)!].add()
    }
}
