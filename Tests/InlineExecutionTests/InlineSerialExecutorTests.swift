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

    /// Switches to `other` and reports whether this actor's executor still claims the thread
    /// that runs `other`'s code, and which thread that is.
    func hop(to other: Counter) async -> (Bool?, UInt) {
        threads.append(InlineExecution.currentThread)
        return await other.probe(executor)
    }

    func probe(_ executor: InlineSerialExecutor) -> (Bool?, UInt) {
        (executor.isIsolatingCurrentContext(), InlineExecution.currentThread)
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

    @Test("a task that hops from one idle actor to another, from a request's thread, leaves the first unowned")
    func hopDoesNotNestOwnership() async {
        let first = Counter()
        let second = Counter()
        // As a libmicrohttpd thread starts a request's task: marked inline, the task immediate.
        // The caller then stays alive (blocked) until the task is done, so that no other thread
        // can have its id meanwhile.
        let (task, caller) = await onPlainThread { () -> (Task<(Bool?, UInt), Never>, UInt) in
            let finished = DispatchSemaphore(value: 0)
            let task = InlineExecution.run {
                Task.immediate {
                    defer { finished.signal() }
                    return await first.hop(to: second)
                }
            }
            finished.wait()
            return (task, InlineExecution.currentThread)
        }
        let (firstOwnedDuringSecond, secondThread) = await task.value
        // The second actor's job must not run nested inside the first's, with the first still
        // owned by that thread, nor on the request's thread at all.
        #expect(firstOwnedDuringSecond == false)
        #expect(secondThread != caller)
        #expect(await first.threads.allSatisfy { $0 != caller })
    }

    @Test("jobs enqueued while runIfIdle holds the executor run on an ordinary thread, not the caller's")
    func runIfIdleLeavesQueuedJobsToOthers() async {
        let counter = Counter()
        let (task, caller) = await onPlainThread { () -> (Task<Void, Never>?, UInt) in
            let finished = DispatchSemaphore(value: 0)
            let task = counter.executor.runIfIdle { () -> Task<Void, Never> in
                // Starts on this thread and enqueues its job on the held executor before returning.
                Task.immediate {
                    await counter.increment()
                    finished.signal()
                }
            }
            if task != nil { finished.wait() }   // alive until the job ran, wherever it ran
            return (task, InlineExecution.currentThread)
        }
        await task?.value
        #expect(task != nil)
        #expect(await counter.value == 1)
        #expect(await counter.threads.allSatisfy { $0 != caller })
    }

    @Test("a job enqueued from a plain thread is drained on another thread")
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
