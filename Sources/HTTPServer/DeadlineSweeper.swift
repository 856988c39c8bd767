import Synchronization

#if canImport(Glibc)
import Glibc
#endif

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

    /// Sweeps every `interval` until `stop()`; run it on a plain thread (`PlainThread.start`).
    func run(_ sweep: () -> Void, every interval: Duration) {
        let (seconds, attoseconds) = interval.components
        let microseconds = max(1_000, Int64(seconds) * 1_000_000 + attoseconds / 1_000_000_000_000)
        // Slept in slices of at most 10 ms, so that `stop()` takes effect quickly.
        let slice = min(microseconds, 10_000)
        while !stopped.load(ordering: .acquiring) {
            var slept: Int64 = 0
            while slept < microseconds && !stopped.load(ordering: .acquiring) {
                usleep(useconds_t(slice))
                slept += slice
            }
            if stopped.load(ordering: .acquiring) { return }
            sweep()
        }
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
    }
}
