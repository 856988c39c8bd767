import Foundation

/// Runs blocking test code (sockets that wait seconds for a long-poll or a stream) on threads of
/// its own, so it never occupies one of the few cooperative-pool threads that in-process servers
/// of other suites need. It stays in the same task, so Swift Testing still knows which test an
/// expectation belongs to (a bare Thread would lose that task-local context).
func offPool<T: Sendable>(_ body: @Sendable () throws -> T) async throws -> T {
    try await withTaskExecutorPreference(ThreadPerJobExecutor.shared) {
        try body()
    }
}

/// A task executor that runs each job on a fresh thread: slow, but tests block freely on it.
final class ThreadPerJobExecutor: TaskExecutor {
    static let shared = ThreadPerJobExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let unownedJob = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        let thread = Thread {
            unownedJob.runSynchronously(on: executor)
        }
        thread.stackSize = 4 << 20
        thread.start()
    }
}
