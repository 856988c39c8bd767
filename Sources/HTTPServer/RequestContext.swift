import CMicroHTTPD
import InlineExecution
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Per-request state, stored in libmicrohttpd's `*con_cls` from the first access-handler call
/// until NOTIFY_COMPLETED.
///
/// Two kinds of fields:
/// - `machine`, `head`, `body`, `bytesIn`, `status`, `bytesOut`, `stream`, `connectionState`: touched only by the
///   libmicrohttpd thread that owns the connection (libmicrohttpd runs one connection's callbacks
///   on one thread, one at a time). `head` is a constant, complete with its tag when the
///   context is made; the deadline sweeper and shutdown read it once the registry publishes it.
/// - `answer`: written by whoever wins `resolution` (responder task, deadline sweeper, shutdown)
///   and read by the connection thread after the resume, ordered by `resolution`
///   (release store of `.ready`, acquire load).
/// - `held`, `core`: an answer made ahead and the server, set by the connection's thread before
///   the `DeferredAnswer` that reads them is handed to anyone (`suspendAndRespond`), then read
///   (and `held` taken) by whoever gives it: the hand-over is what orders them. `core` is
///   touched after that only by whoever wins `resolution` (which lets go of it), so a
///   `DeferredAnswer` kept somewhere does not keep the server alive through the request.
/// - `delivery`, `inlineThread`: atomics (see `Delivery` and `enqueue`).
/// - `registrySlot`: the `SuspensionRegistry`'s, under its lock; `isRegistered` is the
///   connection thread's.
///
/// It is also the responder task's executor preference: while the access handler runs the task
/// (`runInline`), every job of that task enqueued on the handler's own thread runs right there,
/// so an uncontended request is answered within the one access-handler call.
// @unchecked Sendable: see above; every field is either confined to the connection's thread,
// immutable after publication, or handed over through the `resolution` / `delivery` atomics.
final class RequestContext: AnswerReceiver, TaskExecutor, @unchecked Sendable {
    /// Who hands the answer to libmicrohttpd. The final access-handler call starts the responder
    /// task while `.running`; then either the answer is already there (`.answered`: the handler
    /// queues it in the same call, no suspension at all), or the handler suspends the connection
    /// and tries `.running → .suspended`. Exactly one transition out of `.running` wins:
    /// - the resolver wins (`.answered`): the handler queues the answer itself (if it has not
    ///   suspended yet) or resumes the connection it just suspended;
    /// - the handler wins (`.suspended`): the resolver resumes the connection.
    /// So `MHD_resume_connection` is called exactly once per suspension, always after it.
    enum Delivery: UInt8 {
        case running = 0
        case answered = 1
        case suspended = 2
    }

    enum Resolution: UInt8 {
        /// Suspended (or not yet), nobody has answered.
        case waiting = 0
        /// Someone won the race and is storing the answer.
        case claimed = 1
        /// `answer` is stored and the connection resumed (or about to be).
        case ready = 2
        /// The request ended without an answer being needed (connection gone).
        case cancelled = 3
    }

    let connection: OpaquePointer
    /// When the head arrived (`sheetd_monotonic_ns`).
    let startedNanoseconds: Int64
    var machine: RequestStateMachine
    let head: HTTPRequestHead
    var body: [UInt8] = []
    var bytesIn = 0
    var status = 0
    /// The headers of the queued answer, for the exchange record (logs read X-Request-Id there).
    var responseHeaders = HTTPHeaders()
    var bytesOut = 0
    var stream: HTTPStream?
    /// The connection's receive-deadline state (lives until NOTIFY_CONNECTION CLOSED, which
    /// follows this request's NOTIFY_COMPLETED).
    var connectionState: ConnectionState?
    /// When a suspended request gets `deadlineExceeded` (set before it is published).
    var deadline: ContinuousClock.Instant?
    /// Its index in the `SuspensionRegistry`, -1 when not in it: read and written only under
    /// the registry's lock.
    var registrySlot = -1
    /// The registry took it (`suspendAndRespond`): it must be taken out when it completes.
    var isRegistered = false

    private let resolution = Atomic<UInt8>(Resolution.waiting.rawValue)
    private var answer: HTTPResponse?
    /// The answer a `DeferredAnswer` of this request made ahead (`hold`).
    private var held: HTTPResponse?
    /// The server whose connection a `DeferredAnswer` of this request resumes: set before the
    /// `DeferredAnswer` is handed out, let go of by whoever wins `resolution` (`claim`, `cancel`).
    var core: ServerCore?
    private let delivery = Atomic<UInt8>(Delivery.running.rawValue)
    /// The libmicrohttpd thread running this request's responder task inside the access
    /// handler (`runInline`), 0 otherwise.
    private let inlineThread = Atomic<UInt>(0)

    init(connection: OpaquePointer, startedNanoseconds: Int64, machine: RequestStateMachine, head: HTTPRequestHead) {
        self.connection = connection
        self.startedNanoseconds = startedNanoseconds
        self.machine = machine
        self.head = head
    }

    /// Stores the answer and resumes the suspended connection, if nobody did so before.
    /// Exactly one call per suspension wins; the losers' answers are dropped (a losing stream is
    /// closed so that its writer learns it).
    @discardableResult
    func resolve(_ response: HTTPResponse, core: ServerCore) -> Bool {
        guard claim() != nil else { return dropped(response) }
        deliver(response, core: core)
        return true
    }

    /// Wins `resolution` for an answer about to be given, or nil when someone did before. The
    /// winner lets go of `core` (returned, for the deferred answer's own use): nothing needs it
    /// after the answer.
    private func claim() -> ServerCore?? {
        let (won, _) = resolution.compareExchange(
            expected: Resolution.waiting.rawValue, desired: Resolution.claimed.rawValue, ordering: .acquiring)
        guard won else { return nil }
        return .some(core.take())
    }

    /// An answer nobody takes: a stream is closed, so that its writer learns it.
    private func dropped(_ response: HTTPResponse) -> Bool {
        if case .stream(let stream) = response.body { stream.abandon() }
        return false
    }

    /// The rest of `resolve`, once claimed: store the answer, and resume the connection unless
    /// the access handler is still in its call (then it queues the answer itself).
    private func deliver(_ response: HTTPResponse, core: ServerCore) {
        answer = response
        resolution.store(Resolution.ready.rawValue, ordering: .releasing)
        let (handlerDelivers, _) = delivery.compareExchange(
            expected: Delivery.running.rawValue, desired: Delivery.answered.rawValue, ordering: .acquiringAndReleasing)
        if handlerDelivers { return }
        // `.suspended`: the handler suspended the connection and left; resume it.
        MHD_resume_connection(connection)
        core.suspensionEnded()
    }

    // MARK: AnswerReceiver (a DeferredAnswer of this request)

    override func give(_ response: HTTPResponse) -> Bool {
        guard let claimed = claim() else { return dropped(response) }
        deliver(response, core: Self.handedOut(claimed))
        return true
    }

    override func hold(_ response: HTTPResponse) {
        held = response
    }

    override func giveHeld() -> Bool {
        guard let response = held.take() else { preconditionFailure("giveHeld without hold") }
        guard let claimed = claim() else { return dropped(response) }
        deliver(response, core: Self.handedOut(claimed))
        return true
    }

    override func giveUnavailable() -> Bool {
        guard let claimed = claim() else { return false }
        let core = Self.handedOut(claimed)
        deliver(core.responder.rejection(.serviceUnavailable, head: head), core: core)
        return true
    }

    /// The server a `DeferredAnswer`'s winning claim took: set before it was handed out.
    private static func handedOut(_ claimed: ServerCore?) -> ServerCore {
        guard let claimed else { preconditionFailure("a DeferredAnswer of a request that was not handed one") }
        return claimed
    }

    /// The final access-handler call, after running the responder task (`runInline`): true if
    /// the answer is already stored (queue it now, without suspending).
    var answeredInline: Bool {
        delivery.load(ordering: .acquiring) == Delivery.answered.rawValue
    }

    /// The final access-handler call has suspended the connection: true if the resolver will
    /// resume it; false if the answer arrived in the meantime (the caller resumes it itself).
    func handOverToResolver() -> Bool {
        delivery.compareExchange(
            expected: Delivery.running.rawValue, desired: Delivery.suspended.rawValue, ordering: .acquiringAndReleasing
        ).exchanged
    }

    /// Runs `body` (which starts the responder task with this context as its executor
    /// preference) with this thread marked as the one that may run the task's jobs inline.
    /// The thread is marked for `InlineExecution` too: a shard's executor never runs queued jobs
    /// (another request's work) on it.
    func runInline(_ body: () -> Void) {
        inlineThread.store(UInt(pthread_self()), ordering: .relaxed)
        InlineExecution.run(body)
        inlineThread.store(0, ordering: .relaxed)
    }

    /// TaskExecutor: jobs of this request's responder task (and of actors it enters) enqueued
    /// on the thread that is inside this request's access-handler call run synchronously here:
    /// they cannot be nested inside anybody else's work, since that thread is busy with exactly
    /// this request. Everything else (another thread, or after the handler returned) goes to the
    /// global executor, as without a preference.
    func enqueue(_ job: consuming ExecutorJob) {
        let thread = inlineThread.load(ordering: .relaxed)
        if thread != 0 && thread == UInt(pthread_self()) {
            job.runSynchronously(on: asUnownedTaskExecutor())
        } else {
            globalConcurrentExecutor.enqueue(job)
        }
    }

    /// On the connection's thread after the resume: the stored answer.
    func takeAnswer() -> HTTPResponse? {
        guard resolution.load(ordering: .acquiring) == Resolution.ready.rawValue else { return nil }
        defer { answer = nil }
        return answer
    }

    /// True once an answer was stored or the request was cancelled (for the registry's sweep).
    var isResolved: Bool {
        resolution.load(ordering: .relaxed) != Resolution.waiting.rawValue
    }

    /// The request is over (NOTIFY_COMPLETED): a late resolver must not touch the connection.
    func cancel() {
        let (won, _) = resolution.compareExchange(
            expected: Resolution.waiting.rawValue, desired: Resolution.cancelled.rawValue, ordering: .relaxed)
        if won { core = nil }   // no answer will need it
    }
}
