import Dispatch
import Locking

/// A serial executor (an actor's) that a thread can also enter in place, without a task.
///
/// Why: a default actor can only be entered by a task, so answering one request on it costs a
/// task and two executor switches even when nothing else wants the actor. With this executor an
/// idle actor's synchronous work runs right on the calling thread (`runIfIdle`), and
/// `assumeIsolated` holds there. Otherwise it keeps a default actor's rules: one job at a time,
/// in the order enqueued; a job enqueued while the executor is idle from a thread answering a
/// request inline (`InlineExecution`) runs on that thread at once; the thread that ran a job
/// also runs whatever was enqueued meanwhile; anything else is drained on a Dispatch queue.
/// Unlike a default actor it does not reorder by priority or escalate: jobs run in arrival order.
// @unchecked Sendable: every mutable field lives in `state`, touched only under its lock.
package final class InlineSerialExecutor: SerialExecutor, @unchecked Sendable {
    private struct State {
        /// The thread running this executor's work now (a job or a `runIfIdle` body), 0 if none.
        var owner: UInt = 0
        /// Jobs waiting, oldest first from `head`.
        var queue: [UnownedJob] = []
        var head = 0
        /// A drain is scheduled on a Dispatch queue and has not started.
        var drainScheduled = false

        var isIdle: Bool { owner == 0 && !drainScheduled && head == queue.count }

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
        let thread = InlineExecution.currentThread
        let inline = InlineExecution.isActive
        enum Next { case runHere, scheduleDrain, nothing }
        let next: Next = state.withLock { s in
            if inline && s.isIdle {
                s.owner = thread
                return .runHere
            }
            s.queue.append(job)
            if s.owner == 0 && !s.drainScheduled {
                s.drainScheduled = true
                return .scheduleDrain
            }
            return .nothing   // the owner (or the scheduled drain) runs it
        }
        switch next {
        case .runHere:
            job.runSynchronously(on: asUnownedSerialExecutor())
            runPending()
        case .scheduleDrain:
            DispatchQueue.global().async { self.drain() }
        case .nothing:
            break
        }
    }

    /// Runs `body` isolated to this executor on the calling thread if nothing else holds or
    /// awaits it; nil (and `body` not run) otherwise. Jobs enqueued meanwhile run after it, here.
    package func runIfIdle<Result>(_ body: () throws -> Result) rethrows -> Result? {
        let thread = InlineExecution.currentThread
        let entered = state.withLock { s in
            guard s.isIdle else { return false }
            s.owner = thread
            return true
        }
        guard entered else { return nil }
        defer { runPending() }
        return try body()
    }

    /// SE-0471: the runtime asks this for `assumeIsolated` and isolation checks.
    package func isIsolatingCurrentContext() -> Bool? {
        let thread = InlineExecution.currentThread
        return state.withLock { $0.owner == thread }
    }

    package func checkIsolated() {
        precondition(isIsolatingCurrentContext() == true, "not on this InlineSerialExecutor")
    }

    /// Scheduled on a Dispatch queue: becomes the owner unless a thread already is.
    private func drain() {
        let thread = InlineExecution.currentThread
        let owns = state.withLock { s in
            s.drainScheduled = false
            guard s.owner == 0 else { return false }
            s.owner = thread
            return true
        }
        if owns { runPending() }
    }

    /// The owner runs queued jobs until none is left, then gives the executor up.
    private func runPending() {
        while let job = state.withLock({ s -> UnownedJob? in
            if let job = s.pop() { return job }
            s.owner = 0
            return nil
        }) {
            job.runSynchronously(on: asUnownedSerialExecutor())
        }
    }
}
