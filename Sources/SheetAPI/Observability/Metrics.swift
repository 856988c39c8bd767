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
    static let routes = [
        "/sessions", "/sessions/{id}", "/sessions/{id}/drag", "/sessions/{id}/confirm",
        "/sessions/{id}/dismiss", "/sessions/{id}/present", "/sessions/{id}/events",
        "/healthz", "/metrics", "/openapi.yaml", "unmatched",
    ]
    static let methods = ["GET", "POST", "DELETE", "HEAD", "OTHER"]
    static let statuses = [200, 201, 204, 400, 404, 405, 409, 410, 412, 413, 422, 431, 500, 503, 0]
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

    static let eventTypes = ["presented", "detentChanged", "intercepted", "confirmationCancelled", "dismissBlocked", "dismissed"]

    init() {
        func cells(_ count: Int) -> [CounterCell] { (0..<count).map { _ in CounterCell() } }
        requests = cells(Self.routes.count * Self.methods.count * Self.statuses.count)
        durationBuckets = cells(Self.routes.count * (Self.buckets.count + 1))
        durationSumMicros = cells(Self.routes.count)
        durationCount = cells(Self.routes.count)
        events = cells(Self.eventTypes.count)
        dismissals = cells(DismissReason.allCases.count)
        interceptions = cells(2)
        confirmations = cells(ConfirmAction.allCases.count)
        gestureTargets = cells(2)
    }

    /// Where each route's counters are: `routes` in the order of `Route.template`'s cases.
    static func routeIndex(_ route: Route?) -> Int {
        switch route {
        case .sessions?: 0
        case .session?: 1
        case .action(_, let action)?:
            switch action {
            case .drag: 2
            case .confirm: 3
            case .dismiss: 4
            case .present: 5
            }
        case .events?: 6
        case .health?: 7
        case .metrics?: 8
        case .openAPI?: 9
        case nil: 10
        }
    }

    static func methodIndex(_ method: String) -> Int {
        switch method {
        case "GET": 0
        case "POST": 1
        case "DELETE": 2
        case "HEAD": 3
        default: 4
        }
    }

    func recordRequest(route: Route?, method: String, status: Int, seconds: Double) {
        let routeIndex = Self.routeIndex(route)
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
            if let index = Self.eventTypes.firstIndex(of: event.kind.type) { events[index].add() }
            switch event.kind {
            case .dismissed(let reason):
                dismissals[DismissReason.allCases.firstIndex(of: reason)!].add()
            case .intercepted(let attempted, _):
                interceptions[attempted == .closed ? 1 : 0].add()
            default:
                break
            }
        }
        if case .confirm(let choice) = action {
            confirmations[ConfirmAction.allCases.firstIndex(of: choice)!].add()
        }
        if let gesture = outcome.gesture {
            gestureTargets[gesture.target == .closed ? 1 : 0].add()
        }
    }

    func recordCreated() { events[0].add() }
}
