import CMicroHTTPD
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Accepts connections on the listening socket, on one plain thread, and hands each to
/// libmicrohttpd (`MHD_add_connection`), which serves it on its thread pool.
///
/// libmicrohttpd could accept by itself, but then the only way to stop accepting while open
/// connections finish is `MHD_quiesce_daemon`, and with a thread pool on epoll (0.9.75) that
/// races each worker's own removal of the listening socket from its epoll set: when the worker
/// wins, quiesce aborts the process. Owning the accept loop, a graceful stop ends it and closes
/// the listening socket at once, so a new connection is refused instead of waiting in the
/// backlog for the drain to end.
///
/// At `maxConnections` admitted and not yet closed, the loop stops accepting: a further
/// connection waits in the listen backlog, as with libmicrohttpd's own limit, and is accepted as
/// soon as one closes (NOTIFY_CONNECTION CLOSED wakes the loop).
final class ConnectionAcceptor: Sendable {
    /// Connections admitted at most at once.
    let maxConnections: Int
    /// Connections handed to libmicrohttpd and not yet closed. A connection libmicrohttpd drops
    /// between `MHD_add_connection` and NOTIFY_CONNECTION STARTED (no memory for its pool) keeps
    /// its slot: only possible when malloc fails, and it errs towards refusing (shutdown's last
    /// wait, for the connections to close, then runs to its bound).
    private let admitted = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    /// Signalled by `stop()` and by a close that frees a slot at the limit.
    private let wakeup = WakeSignal()
    private let errorLog: @Sendable (String) -> Void

    /// How long the loop waits after the process ran out of descriptors or memory to accept.
    static let resourceBackoffMilliseconds: Int32 = 100

    init(maxConnections: Int, errorLog: @escaping @Sendable (String) -> Void) {
        self.maxConnections = max(1, maxConnections)
        self.errorLog = errorLog
    }

    /// Connections admitted now (tests).
    var admittedConnections: Int { admitted.load(ordering: .acquiring) }

    /// A connection libmicrohttpd reported STARTED has closed (NOTIFY_CONNECTION CLOSED).
    func connectionClosed() {
        let before = admitted.subtract(1, ordering: .acquiringAndReleasing).oldValue
        if before >= maxConnections { wakeup.signal() }
    }

    /// The loop: returns after `stop()`. `listenFD` is non-blocking; the caller closes it after.
    func run(listenFD: Int32, daemon: DaemonHandle) {
        guard wakeup.fd >= 0 else {
            errorLog("cannot accept connections: no eventfd (\(String(cString: strerror(errno))))")
            return
        }
        var lastFailure: Int32 = 0
        while !stopping.load(ordering: .acquiring) {
            // At the limit only a close or stop() wakes the loop; the backlog holds what arrives.
            let full = admitted.load(ordering: .acquiring) >= maxConnections
            let woken = sheetd_accept_wait(full ? -1 : listenFD, wakeup.fd, -1)
            if woken < 0 {
                errorLog("cannot wait for connections: \(String(cString: strerror(errno))); no further connection is accepted")
                return
            }
            if woken != 1 { continue }
            // Accept what waits, while there is room.
            accepting: while admitted.load(ordering: .acquiring) < maxConnections {
                // Counted before the hand-over: the connection may close before the call returns.
                admitted.add(1, ordering: .acquiringAndReleasing)
                var err: Int32 = 0
                let outcome = Int(sheetd_accept_one(daemon.pointer, listenFD, &err))
                if outcome == SHEETD_ACCEPT_ADDED { lastFailure = 0; continue }
                admitted.subtract(1, ordering: .acquiringAndReleasing)
                switch outcome {
                case SHEETD_ACCEPT_REFUSED, SHEETD_ACCEPT_AGAIN:
                    continue
                case SHEETD_ACCEPT_OUT_OF_RESOURCES:
                    if err != lastFailure {
                        errorLog("cannot accept a connection: \(String(cString: strerror(err))); waiting \(Self.resourceBackoffMilliseconds) ms between tries until it can")
                        lastFailure = err
                    }
                    wakeup.wait(milliseconds: Self.resourceBackoffMilliseconds)
                    break accepting
                case SHEETD_ACCEPT_BROKEN:
                    errorLog("the listening socket failed: \(String(cString: strerror(err))); no further connection is accepted")
                    return
                default: // SHEETD_ACCEPT_NONE
                    break accepting
                }
            }
        }
    }

    /// Ends `run()`; idempotent.
    func stop() {
        stopping.store(true, ordering: .releasing)
        wakeup.signal()
    }
}

/// The daemon pointer, carried to the threads that use it.
// @unchecked Sendable: libmicrohttpd's daemon may be used from any thread for the calls made
// with it (MHD_add_connection from the accept loop, MHD_stop_daemon once that loop has ended and
// every other user is done); the server frees it only through MHD_stop_daemon.
struct DaemonHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}
