import Locking

/// A clock that moves only when told to (`advance(by:)`): the timing rules of a server or store
/// built on it are checked exactly, as an embedded event loop checks a 10 s timeout without
/// waiting 10 s. Sleepers whose deadline the clock reaches are woken inside `advance`.
public final class ManualClock: ServiceClock {
    private struct Sleeper {
        let number: UInt64
        let deadline: ContinuousClock.Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: ContinuousClock.Instant
        var nextNumber: UInt64 = 0
        var sleepers: [Sleeper] = []
        /// Sleepers cancelled before they parked.
        var cancelled: Set<UInt64> = []
    }

    private let state: LockedValue<State>

    /// Starts at the real clock's now, so its instants mix with real ones in one time line.
    public init(startingAt start: ContinuousClock.Instant = .now) {
        state = LockedValue(State(now: start))
    }

    public var now: ContinuousClock.Instant { state.withLock { $0.now } }

    /// Moves the clock forward and wakes every sleeper whose deadline it reached.
    public func advance(by duration: Duration) {
        let due = state.withLock { s -> [Sleeper] in
            s.now += max(.zero, duration)
            let now = s.now
            let due = s.sleepers.filter { $0.deadline <= now }
            s.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Tasks parked in `sleep(until:)` now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        let number = state.withLock { s -> UInt64 in
            s.nextNumber += 1
            return s.nextNumber
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case parked, due, cancelled }
                let outcome = state.withLock { s -> Outcome in
                    if s.cancelled.remove(number) != nil { return .cancelled }
                    if deadline <= s.now { return .due }
                    s.sleepers.append(Sleeper(number: number, deadline: deadline, continuation: continuation))
                    return .parked
                }
                switch outcome {
                case .parked: break
                case .due: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let parked = state.withLock { s -> Sleeper? in
                if let index = s.sleepers.firstIndex(where: { $0.number == number }) {
                    return s.sleepers.remove(at: index)
                }
                s.cancelled.insert(number)
                return nil
            }
            parked?.continuation.resume(throwing: CancellationError())
        }
    }
}
