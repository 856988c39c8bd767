import Locking
import Timekeeping

/// Shutdown's waits on the server's counters (requests in progress, suspended connections):
/// each parks until its condition holds or its deadline passes, and whoever lowers a counter
/// while the server stops calls `changed`, which wakes those whose condition now holds. Waiting
/// for an event, not polling for it.
final class CounterWaits: Sendable {
    private struct Waiter {
        let number: UInt64
        let condition: @Sendable () -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var next: UInt64 = 0
        var waiters: [Waiter] = []
    }

    private let state = LockedValue(State())

    /// True once `condition` holds; false if `deadline` passed first on `clock`. The condition
    /// is read under the lock that `changed` takes, so a change between the first look and
    /// parking is not missed.
    func wait(
        until condition: @escaping @Sendable () -> Bool, deadline: ContinuousClock.Instant,
        on clock: any ServiceClock = SystemClock()
    ) async -> Bool {
        if condition() { return true }
        let number = state.withLock { state -> UInt64 in
            state.next += 1
            return state.next
        }
        let timer = Task { [self] in
            do { try await clock.sleep(until: deadline) } catch { return }
            expire(number)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let holds = state.withLock { state -> Bool in
                if condition() { return true }
                state.waiters.append(Waiter(number: number, condition: condition, continuation: continuation))
                return false
            }
            if holds { continuation.resume(returning: true) }
        }
    }

    /// Waits parked now, their condition not yet holding (tests).
    var parkedCount: Int { state.withLock { $0.waiters.count } }

    /// A counter went down: wakes the waiters whose condition holds now.
    func changed() {
        let ready = state.withLock { state -> [Waiter] in
            guard !state.waiters.isEmpty else { return [] }
            var ready: [Waiter] = []
            state.waiters.removeAll { waiter in
                guard waiter.condition() else { return false }
                ready.append(waiter)
                return true
            }
            return ready
        }
        for waiter in ready { waiter.continuation.resume(returning: true) }
    }

    /// The deadline of waiter `number` passed (if it is still parked).
    private func expire(_ number: UInt64) {
        let expired = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.number == number }) else { return nil }
            return state.waiters.remove(at: index)
        }
        expired?.continuation.resume(returning: false)
    }
}
