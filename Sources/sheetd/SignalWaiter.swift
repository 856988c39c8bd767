import Glibc

/// Turns SIGINT/SIGTERM into an awaitable value. The signals are blocked in every thread and a
/// dedicated thread takes them with `sigwait`, so no async-signal-safety rules apply to the handler.
final class SignalWaiter: Sendable {
    private let signals: [Int32]

    init(signals: [Int32]) {
        self.signals = signals
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Waits, on a thread of its own, for the next of the signals.
    func next() async -> Int32 {
        await withCheckedContinuation { continuation in
            let box = Unmanaged.passRetained(ContinuationBox(continuation, signals: signals))
            var thread = pthread_t()
            // passRetained: the box lives until the signal thread takes it back with takeRetainedValue.
            let started = pthread_create(&thread, nil, { raw in
                let box = Unmanaged<ContinuationBox>.fromOpaque(raw!).takeRetainedValue()
                var set = sigset_t()
                sigemptyset(&set)
                for signal in box.signals { sigaddset(&set, signal) }
                var received: Int32 = 0
                sigwait(&set, &received)
                box.continuation.resume(returning: received)
                return nil
            }, box.toOpaque())
            if started == 0 { pthread_detach(thread) } else {
                box.release()
                continuation.resume(returning: SIGTERM)
            }
        }
    }
}

private final class ContinuationBox: Sendable {
    let continuation: CheckedContinuation<Int32, Never>
    let signals: [Int32]

    init(_ continuation: CheckedContinuation<Int32, Never>, signals: [Int32]) {
        self.continuation = continuation
        self.signals = signals
    }
}
