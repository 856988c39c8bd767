#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Locking
import Testing

@Suite("PerThread")
struct PerThreadTests {
    /// Counts the values made and freed, so a test sees each thread's value come and go.
    final class Tracked: Sendable {
        static let alive = LockedValue(0)
        let thread: Int
        init(thread: Int) {
            self.thread = thread
            Self.alive.withLock { $0 += 1 }
        }
        deinit { Self.alive.withLock { $0 -= 1 } }
    }

    /// The body a test thread runs (retained for the thread by `onNewThread`).
    final class Job: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Runs `body` on a new POSIX thread and returns once the thread has ended: `pthread_join`
    /// returns after the thread's keys' destructors have run, so no waiting or polling is needed.
    private func onNewThread(_ body: @escaping @Sendable () -> Void) {
        // Released by the thread's entry function.
        let argument = Unmanaged.passRetained(Job(body)).toOpaque()
        var handle = pthread_t()
        let created = pthread_create(&handle, nil, { argument in
            guard let argument else { return nil }
            Unmanaged<Job>.fromOpaque(argument).takeRetainedValue().body()
            return nil
        }, argument)
        #expect(created == 0)
        #expect(pthread_join(handle, nil) == 0)
    }

    @Test("a thread keeps its value across calls, and another thread gets one of its own")
    func onePerThread() {
        let made = LockedValue(0)
        let counters = PerThread { made.withLock { $0 += 1 }; return 0 }
        counters.withValue { $0 += 1 }
        counters.withValue { $0 += 1 }
        #expect(counters.withValue { $0 } == 2)
        let elsewhere = LockedValue<Int?>(nil)
        onNewThread {
            counters.withValue { $0 += 10 }
            elsewhere.withLock { $0 = counters.withValue { $0 } }
        }
        #expect(elsewhere.withLock { $0 } == 10)
        #expect(counters.withValue { $0 } == 2)
        #expect(made.withLock { $0 } == 2)
    }

    @Test("a thread's value is freed when the thread ends")
    func freedAtThreadEnd() {
        let before = Tracked.alive.withLock { $0 }
        let values = PerThread { Tracked(thread: 1) }
        let during = LockedValue(0)
        onNewThread {
            _ = values.withValue { $0.thread }
            during.withLock { $0 = Tracked.alive.withLock { $0 } }
        }
        #expect(during.withLock { $0 } == before + 1)
        #expect(Tracked.alive.withLock { $0 } == before)
    }
}
