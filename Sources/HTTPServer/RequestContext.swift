import CMicroHTTPD
import Synchronization

/// Per-request state, stored in libmicrohttpd's `*con_cls` from the first access-handler call
/// until NOTIFY_COMPLETED.
///
/// Two kinds of fields:
/// - `machine`, `head`, `body`, `bytesIn`, `status`, `bytesOut`, `stream`, `connectionState`: touched only by the
///   libmicrohttpd thread that owns the connection (libmicrohttpd runs one connection's callbacks
///   on one thread, one at a time). `head` is also read by the deadline sweeper and shutdown,
///   but only after it was published through the registry's mutex and never written again.
/// - `answer`: written by whoever wins `resolution` (responder task, deadline sweeper, shutdown)
///   and read by the connection thread after the resume, ordered by `resolution`
///   (release store of `.ready`, acquire load).
// @unchecked Sendable: see above; every field is either confined to the connection's thread,
// immutable after publication, or handed over through the `resolution` atomic.
final class RequestContext: @unchecked Sendable {
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
    let started: ContinuousClock.Instant
    var machine: RequestStateMachine
    var head: HTTPRequestHead
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
    var deadline: ContinuousClock.Instant

    private let resolution = Atomic<UInt8>(Resolution.waiting.rawValue)
    private var answer: HTTPResponse?

    init(connection: OpaquePointer, started: ContinuousClock.Instant, limits: RequestStateMachine.Limits, head: HTTPRequestHead) {
        self.connection = connection
        self.started = started
        self.deadline = started
        self.machine = RequestStateMachine(limits: limits)
        self.head = head
    }

    /// Stores the answer and resumes the suspended connection, if nobody did so before.
    /// Exactly one call per suspension wins; the losers' answers are dropped (a losing stream is
    /// closed so that its writer learns it).
    @discardableResult
    func resolve(_ response: HTTPResponse, core: ServerCore) -> Bool {
        let (won, _) = resolution.compareExchange(
            expected: Resolution.waiting.rawValue, desired: Resolution.claimed.rawValue, ordering: .acquiring)
        guard won else {
            if case .stream(let stream) = response.body { stream.abandon() }
            return false
        }
        answer = response
        resolution.store(Resolution.ready.rawValue, ordering: .releasing)
        MHD_resume_connection(connection)
        core.suspensionEnded()
        return true
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
        _ = resolution.compareExchange(
            expected: Resolution.waiting.rawValue, desired: Resolution.cancelled.rawValue, ordering: .relaxed)
    }
}
