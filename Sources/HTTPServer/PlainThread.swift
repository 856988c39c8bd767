import Locking
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs blocking work (MHD_stop_daemon joins libmicrohttpd's threads) on a fresh POSIX thread, so
/// that it never occupies a thread of Swift's cooperative pool, and awaits its end.
func runOnPlainThread(_ work: @escaping @Sendable () -> Void) async {
    await PlainThread.start(work).wait()
}

/// A POSIX thread started at once, by the caller, and its end for one awaiting task. The server's
/// own threads (the deadline sweeper, the socket watcher) start this way: started from a task,
/// they would wait for a free thread of the cooperative pool, and a server started while the
/// application fills that pool would cut no slow peer until it frees up.
final class PlainThread: Sendable {
    private struct State {
        var finished = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = LockedValue(State())

    private init() {}

    /// Starts `work` on a new thread before returning. If no thread can be created (the process
    /// is out of them), it runs on a detached task instead: late while the pool is full, but it
    /// runs, and its end is still awaited.
    static func start(_ work: @escaping @Sendable () -> Void) -> PlainThread {
        let thread = PlainThread()
        let job = PlainThreadJob {
            work()
            thread.finish()
        }
        // Released by the thread's entry function (or below if the thread cannot be created).
        let argument = Unmanaged.passRetained(job).toOpaque()
        var handle = pthread_t()
        let created = pthread_create(&handle, nil, { argument in
            guard let argument else { return nil }
            let job = Unmanaged<PlainThreadJob>.fromOpaque(argument).takeRetainedValue()
            job.body()
            return nil
        }, argument)
        if created == 0 {
            pthread_detach(handle)
        } else {
            Unmanaged<PlainThreadJob>.fromOpaque(argument).release()
            Task.detached { job.body() }
        }
        return thread
    }

    private func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Returns once the thread's work has returned. One waiter at a time (the server's stop).
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let finished = state.withLock { state -> Bool in
                if state.finished { return true }
                precondition(state.waiter == nil, "PlainThread.wait: a second waiter")
                state.waiter = continuation
                return false
            }
            if finished { continuation.resume() }
        }
    }
}

private final class PlainThreadJob: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
