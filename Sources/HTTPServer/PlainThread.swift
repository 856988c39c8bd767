#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs blocking work (MHD_stop_daemon joins libmicrohttpd's threads) on a fresh POSIX thread, so
/// that it never occupies a thread of Swift's cooperative pool, and awaits its end.
func runOnPlainThread(_ work: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let job = PlainThreadJob {
            work()
            continuation.resume()
        }
        // Released by the thread's entry function (or below if the thread cannot be created).
        let argument = Unmanaged.passRetained(job).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { argument in
            guard let argument else { return nil }
            let job = Unmanaged<PlainThreadJob>.fromOpaque(argument).takeRetainedValue()
            job.body()
            return nil
        }, argument)
        if created == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<PlainThreadJob>.fromOpaque(argument).release()
            job.body()
        }
    }
}

private final class PlainThreadJob: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
