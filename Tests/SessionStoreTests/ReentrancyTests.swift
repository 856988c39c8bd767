import Dispatch
import Foundation
import InlineExecution
import Locking
import Polling
@testable import SessionStore
import SheetCore
import Testing
import Timekeeping

/// A task executor with a thread of its own. The tasks that line up on the shard run here, not
/// on the cooperative pool, so they get there however long other tests hold the pool's threads
/// (a CPU-bound test can hold one for minutes on a loaded 2-core machine). That the task has a
/// preference at all is what matters to the shard, as every request's task has one
/// (`RequestContext`).
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable: `jobs` is touched only under its lock; the thread is the only reader.
    private let jobs = LockedValue<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)

    init() {
        let thread = Thread { [self] in
            while true {
                ready.wait()
                guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return }
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.append(job) }
        ready.signal()
    }

    /// Ends the thread once the jobs before it have run.
    func shutdown() { ready.signal() }
}

/// Holds a shard: its `receive`, called on the shard's turn with a subscription's backlog,
/// blocks that turn until `release`. Jobs enqueued meanwhile line up in arrival order.
final class ShardHolder: EventSubscriber {
    private let entered = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)

    /// Called once: returning false ends the subscription, so no later event comes here.
    func receive(_ events: [SheetEvent]) -> Bool {
        entered.signal()
        // 300 s only end a failure (a test that never releases).
        _ = released.wait(timeout: .now() + 300)
        return false
    }

    func ended(_ reason: SubscriptionEnd) {}

    /// Blocks a plain thread (never the cooperative pool) until the shard is held.
    func waitUntilHeld() async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: self.entered.wait(timeout: .now() + 300) == .success) }
        }
    }

    func release() { released.signal() }
}

/// A long-poll decides between answering and parking in one turn of its shard, however the
/// turn is split by its own `await`s: a change, a delete or a shutdown queued behind it on the
/// shard reaches it, and is never published to nobody.
@Suite("SessionStore: a long-poll and what is queued behind it")
struct ReentrancyTests {
    enum Intervention: String, CaseIterable, CustomTestStringConvertible {
        case drag, delete, shutdown
        var testDescription: String { rawValue }
    }

    @Test(arguments: Intervention.allCases)
    func aLongPollSeesWhatWasQueuedBehindIt(_ intervention: Intervention) async throws {
        let clock = Timekeeping.ManualClock()
        let store = ClockedStoreTests.store(on: clock)
        let created = try await store.create(try ClockedStoreTests.twoDetents(), for: .default)
        let executor = store.shard(for: created.id).executor

        // 1. The shard is held by a subscription delivering its backlog.
        let lane = ThreadExecutor()
        defer { lane.shutdown() }
        let holder = ShardHolder()
        let holding = Task(executorPreference: lane) { _ = try? await store.subscribe(holder, to: created.id, of: .default, after: 0) }
        #expect(await holder.waitUntilHeld())

        // 2. A long-poll from a task with an executor preference queues first, then the
        //    intervention queues behind it.
        let poll = Task(executorPreference: lane) { () async -> Result<WaitOutcome, StoreError> in
            do throws(StoreError) {
                return .success(try await store.waitForEvents(of: created.id, tenant: .default, after: 1, timeout: .seconds(30)))
            } catch {
                return .failure(error)
            }
        }
        // 300 s only end a failure: the test's own task runs on the cooperative pool, which a
        // loaded machine may withhold from it for a long time.
        #expect(await eventually(within: .seconds(300)) { executor.queuedJobCount == 1 })
        let intervening = Task(executorPreference: lane) {
            switch intervention {
            case .drag: _ = try? await store.apply(.drag(.detent(.medium)), to: created.id, of: .default)
            case .delete: _ = try? await store.delete(created.id, of: .default)
            case .shutdown: await store.shutdown()
            }
        }
        #expect(await eventually(within: .seconds(300)) { executor.queuedJobCount == 2 })

        // 3. Released, the shard runs them in that order. Had the poll parked after the
        //    intervention, only its deadline could answer it: it is passed here, so a poll that
        //    missed what happened answers "timed out" instead of hanging the test.
        holder.release()
        await holding.value
        await intervening.value
        clock.advance(by: .seconds(31))
        let outcome = await poll.value
        switch (intervention, outcome) {
        case (.drag, .success(.events(let page))):
            #expect(page.events.map { $0.seq } == [2])
        case (.delete, .failure(let error)):
            #expect(error.code == .sessionNotFound)
        case (.shutdown, .failure(let error)):
            #expect(error.code == .shuttingDown)
        default:
            Issue.record("after a \(intervention) queued behind it, the long-poll answered \(outcome)")
        }
    }
}
