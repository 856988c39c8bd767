#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SIGINT/SIGTERM handled without a signal handler: the signals are blocked in every thread and
/// the main thread takes them with `sigwait`, so no async-signal-safety rules apply.
enum SignalWaiter {
    /// Blocks the signals in the calling thread and every thread it starts later.
    static func block(_ signals: [Int32]) {
        var set = makeSet(signals)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Waits for the next of the (blocked) signals and returns it.
    static func wait(_ signals: [Int32]) -> Int32 {
        var set = makeSet(signals)
        var received: Int32 = 0
        while sigwait(&set, &received) != 0 {}
        return received
    }

    private static func makeSet(_ signals: [Int32]) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        return set
    }
}
