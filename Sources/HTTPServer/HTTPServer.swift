import Locking
import CEpollInterposer
import CMicroHTTPD
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An HTTP/1.1 server on libmicrohttpd (epoll, internal thread pool). Requests are answered by an
/// `HTTPResponder` in Swift tasks while their connections are suspended; no libmicrohttpd thread
/// waits for Swift code.
///
/// Life cycle: `init` → `start()` (once) → `shutdown(grace:)`. A server released while running
/// shuts itself down in the background with no grace.
public final class HTTPServer: Sendable {
    /// What `start()` hands libmicrohttpd besides the listening socket, released together once no
    /// callback can run any more: in `stop` after MHD_stop_daemon returned, or in `start()` when
    /// the daemon did not start or was stopped before accepting.
    // @unchecked Sendable: raw pointers owned by this value; it lives in `Running`, and exactly one
    // shutdown (or the failed start) calls `release()`.
    private struct DaemonAttachments: @unchecked Sendable {
        /// passRetained in `start()`: the callbacks' context.
        let coreReference: Unmanaged<ServerCore>
        /// Allocated in `start()`.
        let logSink: UnsafeMutablePointer<sheetd_log_sink>
        /// The PEM texts given to libmicrohttpd (strdup in `start()`).
        let tlsTexts: [UnsafeMutablePointer<CChar>]

        func release() {
            logSink.deinitialize(count: 1)
            logSink.deallocate()
            tlsTexts.forEach { free($0) }
            coreReference.release()
        }
    }

    /// The resources of a running daemon.
    // @unchecked Sendable: `daemon` is a pointer behind its handle; it lives in the `lifecycle`
    // mutex while running, and exactly one shutdown takes it out and frees it.
    private struct Running: @unchecked Sendable {
        let daemon: DaemonHandle
        /// Ours, not libmicrohttpd's: closed in `stop` as soon as the accept loop has ended.
        let listenFD: Int32
        let attachments: DaemonAttachments
        /// The deadline sweeper's thread (`DeadlineSweeper.run`), ended at shutdown.
        let sweeper: PlainThread
        /// The socket watcher's thread (`SocketWatcher.run`), ended after MHD_stop_daemon.
        let watcherThread: PlainThread
        /// The accept loop's thread (`ConnectionAcceptor.run`), ended first at shutdown.
        let acceptorThread: PlainThread
    }

    private enum Lifecycle: Sendable {
        case idle
        case running(Running)
        case stopping([CheckedContinuation<Void, Never>])
        case stopped
    }

    public let configuration: HTTPServerConfiguration
    private let core: ServerCore
    private let lifecycle = LockedValue<Lifecycle>(.idle)
    /// Set when shutdown had to leave the daemon running (see `shutdown`).
    private let leftRunning = Atomic<Bool>(false)
    private let port = Atomic<Int>(0)

    public init(configuration: HTTPServerConfiguration, responder: any HTTPResponder) {
        self.configuration = configuration
        self.core = ServerCore(configuration: configuration, responder: responder)
    }

    deinit {
        let leftover = lifecycle.withLock { state -> Running? in
            if case .running(let running) = state {
                state = .stopped
                return running
            }
            return nil
        }
        if let leftover {
            let core = self.core
            Task.detached { await Self.stop(leftover, core: core, grace: .zero) }
        }
    }

    /// Binds and starts serving. Returns the bound port (useful with port 0).
    public func start() throws(HTTPServerError) -> Int {
        try lifecycle.withLock { state throws(HTTPServerError) -> Int in
            guard case .idle = state else {
                throw HTTPServerError(code: .startFailed, message: "the server was already started")
            }
            let running = try startDaemon()
            state = .running(running)
            let bound = Int(sheetd_socket_port(running.listenFD))
            port.store(bound, ordering: .releasing)
            return bound
        }
    }

    /// Deadline sweeps done since start (tests: a sweep that began after a clock change).
    var completedSweeps: UInt64 { core.completedSweeps.load(ordering: .acquiring) }

    /// Sockets lingering after an early answer now (tests: lingering's time bound).
    var lingeringConnections: Int { core.watcher.lingeringCount }

    /// Shutdown's waits parked until a counter changes (tests: shutdown is waiting out its grace).
    var parkedShutdownWaits: Int { core.counterWaits.parkedCount }

    /// Suspended requests in the registry, answered or not (tests: a completed request is out).
    var registeredRequests: Int { core.registry.requestCount }

    /// Connections the accept loop handed to libmicrohttpd and not yet closed (tests).
    var admittedConnections: Int { core.acceptor.admittedConnections }

    /// The bound port (0 before `start()`).
    public var boundPort: Int { port.load(ordering: .acquiring) }

    /// Open connections now (for metrics).
    public var openConnections: Int { core.openConnections.load(ordering: .acquiring) }

    /// Requests since start whose connection was suspended while the responder waited (for
    /// metrics: the others were answered without leaving the libmicrohttpd thread).
    public var requestSuspensions: UInt64 { core.requestSuspensions.load(ordering: .relaxed) }

    /// Requests between their head and their completion now (for metrics; added to the contract).
    public var requestsInProgress: Int { core.requestsInProgress.load(ordering: .relaxed) }

    /// Graceful stop: stop accepting at once (end the accept loop and close the listening
    /// socket: a new connection is refused); end every open HTTPStream; let requests in flight
    /// finish for up to `grace`; answer 503 to any still waiting for their responder and resume
    /// every suspended connection; give those answers a moment to go out; shut every
    /// connection's socket and wait for libmicrohttpd to close each; then MHD_stop_daemon on a
    /// plain thread. New requests arriving on open connections meanwhile get 503 with
    /// `Connection: close`. Idempotent: later calls wait for the first one to finish. Every step
    /// waits for what it needs (the counters coming down), bounded by its deadline.
    ///
    /// Returns false when the daemon could not be stopped: a connection was still suspended
    /// 5 s after the answers were given, and `MHD_stop_daemon` would abort the process. The
    /// daemon is then left running and the caller must escalate (sheetd exits with status 1).
    @discardableResult
    public func shutdown(grace: Duration) async -> Bool {
        let running = lifecycle.withLock { state -> Running? in
            switch state {
            case .running(let running):
                state = .stopping([])
                return running
            case .idle:
                state = .stopped
                return nil
            case .stopping, .stopped:
                return nil
            }
        }
        guard let running else {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let finished = lifecycle.withLock { state -> Bool in
                    if case .stopping(var waiters) = state {
                        waiters.append(continuation)
                        state = .stopping(waiters)
                        return false
                    }
                    return true
                }
                if finished { continuation.resume() }
            }
            return !leftRunning.load(ordering: .acquiring)
        }
        let stopped = await Self.stop(running, core: core, grace: grace)
        leftRunning.store(!stopped, ordering: .releasing)
        let waiters = lifecycle.withLock { state -> [CheckedContinuation<Void, Never>] in
            defer { state = .stopped }
            if case .stopping(let waiters) = state { return waiters }
            return []
        }
        for waiter in waiters { waiter.resume() }
        return stopped
    }

    // MARK: - Start

    private func startDaemon() throws(HTTPServerError) -> Running {
        let config = configuration
        var kind: Int32 = 0
        var err: Int32 = 0
        var isIPv6: Int32 = 0
        let fd = sheetd_listen(config.host, Int32(clamping: config.port), Int32(clamping: max(1, config.listenBacklog)),
                               &kind, &err, &isIPv6)
        if fd < 0 {
            if kind == Int32(SHEETD_LISTEN_INVALID_ADDRESS) {
                throw HTTPServerError(code: .invalidAddress,
                                      message: "'\(config.host)' port \(config.port) is not an IPv4/IPv6 literal and port")
            }
            throw HTTPServerError(code: .bindFailed,
                                  message: "cannot listen on \(config.host) port \(config.port): \(String(cString: strerror(err)))")
        }

        // Released by `DaemonAttachments.release()`: in `stop` after MHD_stop_daemon, or below when
        // the daemon does not start or is stopped before accepting.
        let coreReference = Unmanaged.passRetained(core)
        let corePointer = coreReference.toOpaque()
        let logSink = UnsafeMutablePointer<sheetd_log_sink>.allocate(capacity: 1)
        logSink.initialize(to: sheetd_log_sink(fn: errorLogCallback, ctx: corePointer))

        var options = sheetd_daemon_options()
        options.extra_flags = 0
        _ = isIPv6
        let threads = max(1, config.threads)
        options.thread_pool_size = UInt32(clamping: threads)
        options.connection_timeout = UInt32(clamping: wholeSecondsRoundedUp(config.inactivityTimeout ?? config.connectionTimeout))
        options.connection_limit = UInt32(clamping: Self.daemonConnectionLimit(maxConnections: config.maxConnections,
                                                                                threads: threads))
        options.per_ip_connection_limit = UInt32(clamping: max(0, config.maxConnectionsPerClient))
        options.connection_memory_limit = max(2048, config.connectionMemoryLimit)
        options.access_handler = accessHandlerCallback
        options.access_handler_cls = corePointer
        options.completed = requestCompletedCallback
        options.completed_cls = corePointer
        options.notify_connection = notifyConnectionCallback
        options.notify_connection_cls = corePointer
        options.uri_log = rawTargetCallback
        options.uri_log_cls = corePointer
        options.log_sink = logSink
        var tlsTexts: [UnsafeMutablePointer<CChar>] = []
        if let tls = config.tls, let certificate = strdup(tls.certificatePEM), let key = strdup(tls.privateKeyPEM) {
            tlsTexts = [certificate, key]
            options.tls_certificate = UnsafePointer(certificate)
            options.tls_key = UnsafePointer(key)
        }

        if sheetd_epoll_interposer_installed() == 0 {
            core.errorLog("epoll_wait is libc's, not CEpollInterposer's: a worker may stall for up to the connection timeout after a full batch of 128 events")
        }
        let attachments = DaemonAttachments(coreReference: coreReference, logSink: logSink, tlsTexts: tlsTexts)
        guard let daemon = sheetd_start_daemon(&options) else {
            close(fd)
            attachments.release()
            let tlsNote = config.tls == nil ? "" : ", TLS: is the certificate and key PEM, and do they belong together?"
            throw HTTPServerError(code: .startFailed,
                                  message: "libmicrohttpd did not start (threads \(config.threads), memory limit \(config.connectionMemoryLimit)\(tlsNote))")
        }
        // Every descriptor of the server is open now; the accept loop has not started, so the
        // daemon has no connection and stops at once.
        guard OpenFileLimit.hasRoom(for: config.descriptorsKeptFree + 1) else {
            MHD_stop_daemon(daemon)
            close(fd)
            attachments.release()
            throw HTTPServerError(code: .startFailed,
                                  message: "the open-file limit (ulimit -n \(OpenFileLimit.current)) leaves no descriptor for a connection")
        }

        let core = self.core
        let tick = Self.sweepInterval(deadline: config.suspendedRequestDeadline, connectionTimeout: config.connectionTimeout,
                                      lingerTime: config.lingerTime)
        // Started here, before start() returns: a task would wait for the cooperative pool.
        let sweeper = PlainThread.start { core.sweeper.run({ core.sweepDeadlines() }, every: tick) }
        let watcherThread = PlainThread.start { core.watcher.run() }
        let handle = DaemonHandle(pointer: daemon)
        let acceptorThread = PlainThread.start { core.acceptor.run(listenFD: fd, daemon: handle) }
        return Running(daemon: handle, listenFD: fd, attachments: attachments,
                       sweeper: sweeper, watcherThread: watcherThread, acceptorThread: acceptorThread)
    }

    /// libmicrohttpd's MHD_OPTION_CONNECTION_LIMIT, so large that it never refuses a connection
    /// the accept loop admitted: the loop keeps `maxConnections` (ConnectionAcceptor).
    ///
    /// libmicrohttpd splits its limit evenly among the workers, and `MHD_add_connection` queues a
    /// connection to a worker without counting it until that worker takes it. A worker may then
    /// find itself at its share while taking a queued one (a firm check under its cleanup mutex),
    /// and 0.9.75 leaves that mutex locked on this path: the worker deadlocks on its next
    /// connection. So every worker's share is the whole limit plus one per worker, for the
    /// connections that closed but are not yet uncounted: each worker uncounts a closed one just
    /// after NOTIFY_CONNECTION CLOSED frees its slot in the loop, one at a time.
    static func daemonConnectionLimit(maxConnections: Int, threads: Int) -> Int {
        let threads = max(1, threads)
        let (total, overflow) = (max(1, maxConnections) + threads).multipliedReportingOverflow(by: threads)
        return overflow ? Int(UInt32.max) : min(total, Int(UInt32.max))
    }

    /// How often deadlines are checked: fine enough for the shortest of the limits.
    static func sweepInterval(deadline: Duration, connectionTimeout: Duration, lingerTime: Duration) -> Duration {
        let interval = min(deadline / 20, connectionTimeout / 10, lingerTime / 10)
        if interval < .milliseconds(10) { return .milliseconds(10) }
        if interval > .seconds(1) { return .seconds(1) }
        return interval
    }

    // MARK: - Stop

    /// False when the daemon could not be stopped (a connection stayed suspended): it is left
    /// running, since stopping it would abort the process, and the caller must escalate.
    private static func stop(_ running: Running, core: ServerCore, grace: Duration) async -> Bool {
        let clock = ContinuousClock()
        let graceEnd = core.clock.now + max(.zero, grace)
        core.isStopping.store(true, ordering: .sequentiallyConsistent)

        // 1. Stop accepting, and close the listening socket: a new connection is refused now
        //    rather than left in the backlog until the daemon stops.
        core.acceptor.stop()
        await running.acceptorThread.wait()
        close(running.listenFD)

        // 2. Streams have no natural end: end them now (queued bytes still go out).
        for stream in core.registry.closeStreams() { stream.finish() }

        // 3. Requests in flight get up to `grace` to finish (ended streams whose client is slow
        //    to take the rest are not waited for here; step 7 closes them).
        _ = await core.counterWaits.wait(until: {
            core.requestsInProgress.load(ordering: .acquiring) - core.activeStreams.load(ordering: .acquiring) <= 0
        }, deadline: graceEnd, on: core.clock)

        // 4. Whatever still waits for its responder gets 503; no new suspension from here on.
        let (requests, streams) = core.registry.close()
        core.sweeper.stop()
        for request in requests { request.resolve(core.shutdownAnswer(request.head), core: core) }
        for stream in streams { stream.finish() }

        // 5. Every suspended connection must be resumed before MHD_stop_daemon (it aborts the
        //    process otherwise). Resolvers that won a race resume right after winning.
        let resumed = await core.counterWaits.wait(until: { core.unresumedSuspensions.load(ordering: .acquiring) <= 0 },
                                                   deadline: clock.now + .seconds(5))
        if !resumed {
            // MHD_stop_daemon would abort the process now: say so and let the caller escalate.
            core.errorLog("shutdown timed out: \(core.unresumedSuspensions.load(ordering: .relaxed)) connection(s) still suspended after 5 s; the daemon cannot be stopped cleanly")
            return false
        }

        // 6. Give the 503s and final chunks a moment to reach their clients.
        _ = await core.counterWaits.wait(until: { core.requestsInProgress.load(ordering: .acquiring) <= 0 },
                                         deadline: clock.now + .milliseconds(250))

        // 7. Close every connection, and let libmicrohttpd finish with each, before it stops:
        //    once MHD_stop_daemon has begun, a head libmicrohttpd 0.9.75 refuses by itself
        //    (`transmit_error_response`) is sent from a response it never queued, and the process
        //    crashes. A shut socket reads as the client's end: the connection closes by itself.
        //    Counted from the hand-over to libmicrohttpd, not from NOTIFY_CONNECTION STARTED: one
        //    that a busy thread starts only now is shut as it starts, and waited for too.
        core.connections.shutAll()
        let closed = await core.counterWaits.wait(until: { core.acceptor.admittedConnections <= 0 },
                                                  deadline: clock.now + .seconds(2))
        if !closed {
            // Not a fault of the server: MHD_stop_daemon closes what is left, as it closed every
            // open connection before this step existed. (A connection libmicrohttpd closed but
            // never cleaned up would stay: see `HTTPStream.read` for the one case known.)
            core.noticeLog("shutdown: \(core.acceptor.admittedConnections) connection(s) still open 2 s after their sockets were shut; stopping the daemon with them")
        }

        // 8. Stop the daemon from a plain thread (it joins libmicrohttpd's threads).
        let daemon = running.daemon
        await runOnPlainThread { MHD_stop_daemon(daemon.pointer) }
        core.watcher.stop()
        await running.watcherThread.wait()
        await running.sweeper.wait()

        running.attachments.release()
        return true
    }
}

func wholeSecondsRoundedUp(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 1 }
    return Int(clamping: seconds) + (attoseconds > 0 ? 1 : 0)
}
