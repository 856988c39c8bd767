import Dispatch
import InlineExecution
import Testing

/// An actor on an InlineSerialExecutor, as SessionShard is.
private actor Counter {
    nonisolated let executor = InlineSerialExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    private(set) var value = 0
    private(set) var threads: [UInt] = []

    /// Read, then write: two callers running at once would lose an increment.
    func increment() {
        let read = value
        threads.append(InlineExecution.currentThread)
        value = read + 1
    }

    nonisolated func incrementInPlace() -> Int? {
        executor.runIfIdle {
            assumeIsolated { counter in
                counter.increment()
                return counter.value
            }
        }
    }
}

/// Runs `body` on a Dispatch thread (no Swift executor: as a libmicrohttpd thread is) and waits.
private func onPlainThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: body()) }
    }
}

@Suite("InlineSerialExecutor")
struct InlineSerialExecutorTests {
    @Test("runIfIdle runs on the calling thread, isolated to the executor, and only there")
    func runIfIdleIsolates() async {
        let counter = Counter()
        let (result, isolatedInside, isolatedAfter) = await onPlainThread { () -> (Int?, Bool?, Bool?) in
            var inside: Bool?
            let result = counter.executor.runIfIdle { () -> Int in
                inside = counter.executor.isIsolatingCurrentContext()
                return counter.incrementInPlace() ?? -1   // nested: the executor is taken
            }
            return (result, inside, counter.executor.isIsolatingCurrentContext())
        }
        #expect(result == -1)
        #expect(isolatedInside == true)
        #expect(isolatedAfter == false)
        #expect(await counter.value == 0)
        let inPlace = await onPlainThread { (counter.incrementInPlace(), InlineExecution.currentThread) }
        #expect(inPlace.0 == 1)
        #expect(await counter.threads == [inPlace.1])
    }

    @Test("runIfIdle refuses while another thread holds the executor")
    func runIfIdleRefusesWhenBusy() async {
        let counter = Counter()
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = Task.detached {
            await onPlainThread {
                counter.executor.runIfIdle {
                    entered.signal()
                    release.wait()
                } != nil
            }
        }
        await onPlainThread { entered.wait() }
        #expect(await onPlainThread { counter.incrementInPlace() } == nil)
        release.signal()
        #expect(await holder.value)
        #expect(await onPlainThread { counter.incrementInPlace() } == 1)
    }

    @Test("jobs from many tasks run one at a time: no increment is lost")
    func serialUnderContention() async {
        let counter = Counter()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<2_000 {
                group.addTask {
                    if index % 3 == 0 {
                        // Mixed with in-place entries from plain threads, which may be refused.
                        if await onPlainThread({ counter.incrementInPlace() }) == nil { await counter.increment() }
                    } else {
                        await counter.increment()
                    }
                }
            }
        }
        #expect(await counter.value == 2_000)
    }

    @Test("a task switching to an idle executor from a thread marked inline runs there at once")
    func inlineThreadRunsTheJob() async {
        let counter = Counter()
        let (seen, caller) = await onPlainThread { () -> (Int?, UInt) in
            InlineExecution.run {
                _ = Task.immediate { await counter.increment() }
            }
            // Had the job been queued for another thread, the executor would not be idle yet, or
            // the value still 0.
            let seen = counter.executor.runIfIdle { counter.assumeIsolated { $0.value } }
            return (seen, InlineExecution.currentThread)
        }
        #expect(seen == 1)
        #expect(await counter.threads == [caller])
    }

    @Test("without the inline mark, the job is drained on another thread")
    func unmarkedThreadDoesNotRunTheJob() async {
        let counter = Counter()
        let caller = await onPlainThread { () -> UInt in
            let finished = DispatchSemaphore(value: 0)
            Task.immediate {
                await counter.increment()
                finished.signal()
            }
            finished.wait()   // this thread is busy: the job cannot be running here
            return InlineExecution.currentThread
        }
        let threads = await counter.threads
        #expect(threads.count == 1)
        #expect(threads.first != caller)
    }
}
