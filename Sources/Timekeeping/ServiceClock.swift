/// The time the service's timing rules read: when an idle or slow connection is cut, when a
/// suspended request's deadline passes, how long shutdown's grace lasts. Injected through the
/// configurations, so that tests can put the rules on a `ManualClock` and check them exactly,
/// whatever the load of the machine running them.
public protocol ServiceClock: Sendable {
    /// Now, on a monotonic time line.
    var now: ContinuousClock.Instant { get }

    /// Returns once `now` has reached `deadline`; throws `CancellationError` if the task is
    /// cancelled first.
    func sleep(until deadline: ContinuousClock.Instant) async throws
}

/// The real monotonic clock: what the service uses.
public struct SystemClock: ServiceClock {
    public init() {}

    public var now: ContinuousClock.Instant { ContinuousClock.now }

    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await Task.sleep(until: deadline, clock: .continuous)
    }
}
