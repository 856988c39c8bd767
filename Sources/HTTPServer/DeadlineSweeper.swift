import CMicroHTTPD
import Synchronization

/// The loop that enforces the server's deadlines (`ServerCore.sweepDeadlines`: slow and idle
/// connections cut, overdue responders answered 503), on a thread of its own.
///
/// Not a task: a task needs a free thread of Swift's cooperative pool each time it wakes, and
/// that pool is the application's. When its work fills the pool (CPU-heavy answers, or code that
/// blocks), a sweeping task waits with it, and the server stops cutting slow peers exactly when
/// it is busiest. The pace is real time; whether a deadline has passed is the server's clock's
/// to say.
final class DeadlineSweeper: Sendable {
    private let stopped = Atomic<Bool>(false)
    /// Ends the wait between two sweeps at once when `stop()` is called.
    private let wake = WakeSignal()

    /// Sweeps every `interval` until `stop()`; run it on a plain thread (`PlainThread.start`).
    /// Between sweeps the thread waits on `wake`, so it wakes for a sweep or a stop and for
    /// nothing else.
    func run(_ sweep: () -> Void, every interval: Duration) {
        let (seconds, attoseconds) = interval.components
        let period = max(1_000_000, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        while true {
            let due = sheetd_monotonic_ns() + period
            while !stopped.load(ordering: .acquiring) {
                let left = due - sheetd_monotonic_ns()
                if left <= 0 { break }
                // Rounded up to whole milliseconds, so the wait never ends just short of `due`
                // and spins. An interrupted return goes round again.
                wake.wait(milliseconds: Int32(clamping: (left + 999_999) / 1_000_000))
            }
            if stopped.load(ordering: .acquiring) { return }
            sweep()
        }
    }

    /// Ends `run` after the sweep in progress, if any. Without an eventfd (`WakeSignal.fd` of -1)
    /// it ends when the current interval does.
    func stop() {
        stopped.store(true, ordering: .releasing)
        wake.signal()
    }
}
