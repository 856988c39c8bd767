import CMicroHTTPD
import Synchronization
import Timekeeping

/// What the libmicrohttpd callbacks see through their `cls` pointer: configuration, responder,
/// counters and the suspension registry of one running daemon.
final class ServerCore: Sendable {
    let configuration: HTTPServerConfiguration
    let responder: any HTTPResponder
    let limits: RequestStateMachine.Limits
    let registry = SuspensionRegistry()
    let connections: ConnectionTracker
    let watcher: SocketWatcher
    let acceptor: ConnectionAcceptor
    let errorLog: @Sendable (String) -> Void
    let departureLog: @Sendable (String) -> Void
    let noticeLog: @Sendable (String) -> Void

    /// TCP connections open now (NOTIFY_CONNECTION).
    let openConnections = Atomic<Int>(0)
    /// Requests between their first access-handler call and NOTIFY_COMPLETED.
    let requestsInProgress = Atomic<Int>(0)
    /// Streams attached to a connection and not yet ended (their requests count in
    /// `requestsInProgress` too; shutdown's grace does not wait for them: they have no natural end).
    let activeStreams = Atomic<Int>(0)
    /// Connections suspended and not yet resumed. `MHD_stop_daemon` aborts the process if any
    /// connection is suspended; shutdown waits for this to reach 0 first.
    let unresumedSuspensions = Atomic<Int>(0)
    /// Requests whose responder had to wait (a busy actor, a long-poll, a commit), so their
    /// connection was suspended, since start. The rest were answered within the access handler.
    let requestSuspensions = Atomic<UInt64>(0)
    /// Set when shutdown begins: new requests are refused with 503 + Connection: close.
    let isStopping = Atomic<Bool>(false)
    /// Shutdown waiting for the counters above to come down.
    let counterWaits = CounterWaits()
    /// What the timing rules read (connection cut-offs, suspended-request deadlines, the grace).
    let clock: any ServiceClock
    /// `clockNanoseconds()` counts from here (the connection tracker keeps plain integers).
    private let clockOrigin: ContinuousClock.Instant
    /// With the system clock, where `clockNanoseconds()` counts from on the monotonic clock read
    /// directly: turning an instant into nanoseconds is Int128 arithmetic, once per request.
    private let monotonicOrigin: Int64?
    /// Checks the deadlines from a thread of its own.
    let sweeper = DeadlineSweeper()
    /// Sweeps done since start (tests wait for one after moving a manual clock).
    let completedSweeps = Atomic<UInt64>(0)

    let suspendedRequestDeadline: Duration
    let streamSendBufferSize: Int32

    init(configuration: HTTPServerConfiguration, responder: any HTTPResponder) {
        self.configuration = configuration
        self.responder = responder
        self.clock = configuration.clock
        self.clockOrigin = configuration.clock.now
        self.monotonicOrigin = configuration.clock is SystemClock ? sheetd_monotonic_ns() : nil
        self.limits = RequestStateMachine.Limits(
            maxBodySize: max(0, configuration.maxBodySize),
            maxHeaderCount: max(0, configuration.maxHeaderCount),
            maxDiscardedBytes: max(1 << 20, configuration.maxBodySize)
        )
        let toStandardError: @Sendable (String) -> Void = { writeToStandardError("HTTPServer: \($0)") }
        self.errorLog = configuration.errorLog ?? toStandardError
        self.departureLog = configuration.departureLog ?? { _ in }
        self.noticeLog = configuration.noticeLog ?? toStandardError
        self.connections = ConnectionTracker(timeout: configuration.connectionTimeout)
        let (lingerSeconds, lingerAttoseconds) = configuration.lingerTime.components
        self.watcher = SocketWatcher(limits: SocketWatcher.Limits(
            lingerNanoseconds: max(0, lingerSeconds * 1_000_000_000 + lingerAttoseconds / 1_000_000_000),
            lingerBytes: max(0, configuration.lingerBytes),
            maxLingering: max(0, configuration.maxLingeringConnections)))
        self.acceptor = ConnectionAcceptor(maxConnections: configuration.maxConnections, errorLog: errorLog)
        self.suspendedRequestDeadline = configuration.suspendedRequestDeadline
        self.streamSendBufferSize = Int32(clamping: configuration.streamSendBufferSize)
    }

    @inline(__always)
    func suspensionBegan() {
        unresumedSuspensions.add(1, ordering: .relaxed)
    }

    @inline(__always)
    func suspensionEnded() {
        unresumedSuspensions.subtract(1, ordering: .releasing)
        countersWentDown()
    }

    /// Wakes shutdown's waits when a counter went down (or a request became a stream) while
    /// stopping (one atomic load otherwise).
    @inline(__always)
    func countersWentDown() {
        if isStopping.load(ordering: .acquiring) { counterWaits.changed() }
    }

    /// Answers every suspended request whose responder overran its deadline, cuts connections
    /// that did not deliver a complete request within the connection timeout, and closes
    /// sockets that lingered for `lingerTime`.
    func sweepDeadlines() {
        for request in registry.sweep(now: clock.now) {
            request.resolve(responder.deadlineExceeded(request.head), core: self)
        }
        let now = clockNanoseconds()
        connections.cutOverdue(now: now)
        watcher.closeOverdue(now: now)
        completedSweeps.add(1, ordering: .releasing)
    }

    /// The clock's now as nanoseconds since the server was made (never negative).
    func clockNanoseconds() -> Int64 {
        if let monotonicOrigin { return max(0, sheetd_monotonic_ns() - monotonicOrigin) }
        let (seconds, attoseconds) = (clock.now - clockOrigin).components
        return max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// The answer given when shutdown refuses or cuts a request.
    func shutdownAnswer(_ head: HTTPRequestHead) -> HTTPResponse {
        var response = responder.rejection(.serviceUnavailable, head: head)
        response.headers.replace("Connection", "close")
        return response
    }
}
