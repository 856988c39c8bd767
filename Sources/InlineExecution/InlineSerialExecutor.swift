import Dispatch
import Locking

/// A serial executor (an actor's) that a thread can also enter in place, without a task.
///
/// Why: a default actor can only be entered by a task, so answering one request on it costs a
/// task and two executor switches even when nothing else wants the actor. With this executor an
/// idle actor's synchronous work runs right on the calling thread (`runIfIdle`), and
/// `assumeIsolated` holds there.
///
/// That is the only work it runs in place. Jobs (a task switching to the actor) are always
/// queued and drained on a Dispatch thread, one at a time in the order enqueued, and jobs
/// enqueued while a `runIfIdle` body holds the executor are handed to such a drain when it
/// ends. So a thread that answers a request runs nothing but that request's own work: no job of
/// another request, and no job nested inside another executor's (which would leave that
/// executor owned by the thread, answering `isIsolatingCurrentContext` for code that is not
/// its own, and growing the stack with each hop). Unlike a default actor it does not reorder by
/// priority or escalate: jobs run in arrival order.
// @unchecked Sendable: every mutable field lives in `state`, touched only under its lock.
package final class InlineSerialExecutor: SerialExecutor, @unchecked Sendable {
    private struct State {
        /// The thread running this executor's work now (a drain or a `runIfIdle` body), 0 if none.
        var owner: UInt = 0
        /// Jobs waiting, oldest first from `head`.
        var queue: [UnownedJob] = []
        var head = 0
        /// A drain is scheduled on a Dispatch queue and has not started.
        var drainScheduled = false

        var isIdle: Bool { owner == 0 && !drainScheduled && head == queue.count }

        /// Marks a drain scheduled if one is needed (jobs waiting, nobody to run them).
        mutating func needsDrain() -> Bool {
            guard owner == 0, !drainScheduled, head < queue.count else { return false }
            drainScheduled = true
            return true
        }

        mutating func pop() -> UnownedJob? {
            guard head < queue.count else { return nil }
            let job = queue[head]
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: queue.capacity <= 64)
                head = 0
            }
            return job
        }
    }

    private let state = LockedValue(State())

    package init() {}

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let drain = state.withLock { s in
            s.queue.append(job)
            return s.needsDrain()   // otherwise the owner (or the scheduled drain) runs it
        }
        if drain { scheduleDrain() }
    }

    /// Runs `body` isolated to this executor on the calling thread if nothing else holds or
    /// awaits it; nil (and `body` not run) otherwise. Jobs enqueued meanwhile are drained on
    /// a Dispatch thread after it, not here.
    package func runIfIdle<Result>(_ body: () throws -> Result) rethrows -> Result? {
        let thread = InlineExecution.currentThread
        let entered = state.withLock { s in
            guard s.isIdle else { return false }
            s.owner = thread
            return true
        }
        guard entered else { return nil }
        defer { giveUp() }
        return try body()
    }

    /// Jobs waiting for a drain now, for tests that line jobs up behind a held executor.
    package var queuedJobCount: Int {
        state.withLock { $0.queue.count - $0.head }
    }

    /// SE-0471: the runtime asks this for `assumeIsolated` and isolation checks.
    package func isIsolatingCurrentContext() -> Bool? {
        let thread = InlineExecution.currentThread
        return state.withLock { $0.owner == thread }
    }

    package func checkIsolated() {
        precondition(isIsolatingCurrentContext() == true, "not on this InlineSerialExecutor")
    }

    /// The end of a `runIfIdle` body: the executor is free, and jobs enqueued meanwhile go to a drain.
    private func giveUp() {
        let drain = state.withLock { s in
            s.owner = 0
            return s.needsDrain()
        }
        if drain { scheduleDrain() }
    }

    private func scheduleDrain() {
        DispatchQueue.global().async { self.drain() }
    }

    /// On a Dispatch thread: owns the executor and runs queued jobs until none is left. The
    /// executor is not idle while a drain is scheduled, so nothing else owns it when this starts.
    private func drain() {
        assert(!InlineExecution.isActive, "a thread answering a request must not run queued jobs")
        let thread = InlineExecution.currentThread
        state.withLock { s in
            precondition(s.owner == 0, "a drain started on an owned InlineSerialExecutor")
            s.drainScheduled = false
            s.owner = thread
        }
        while let job = state.withLock({ s -> UnownedJob? in
            if let job = s.pop() { return job }
            s.owner = 0
            return nil
        }) {
            job.runSynchronously(on: asUnownedSerialExecutor())
        }
    }
}
