import Locking
import CMicroHTTPD
import Synchronization

/// One TCP connection, from NOTIFY_CONNECTION STARTED to CLOSED (stored in its `socket_context`).
///
/// libmicrohttpd's connection timeout counts *inactivity*: a peer that trickles a byte every
/// few seconds (slowloris) never trips it. So the server adds its own rule: from the moment a
/// connection is ready for a request (accepted, or the previous exchange completed), the whole
/// next request, head and body, must arrive within `connectionTimeout`. While a request is being
/// answered (responder, stream) the rule does not apply.
final class ConnectionState: Sendable {
    static let busy: Int64 = -1
    static let cut: Int64 = -2

    let fd: Int32
    /// The peer's address, read once per connection rather than once per request.
    let clientAddress: String
    /// Monotonic ns since which the connection waits for a complete request, or `busy` / `cut`.
    let receivingSince: Atomic<Int64>
    /// Set at NOTIFY_CONNECTION CLOSED, before libmicrohttpd closes the fd: the sweeper only
    /// shuts a socket down under this lock while it is false, so it never touches a reused fd.
    let closed = LockedValue(false)
    /// Set when the server answered a request before reading all of it: closing the socket with
    /// the rest still arriving would reset the connection and could destroy the answer in the
    /// client's receive buffer, so the socket lingers (`SocketWatcher.linger`).
    let lingers = Atomic<Bool>(false)
    /// The target of the request being read, exactly as it arrived (the URI-log callback sets
    /// it, the same request's first access-handler call takes it).
    // nonisolated(unsafe): both callbacks run on the connection's libmicrohttpd thread, one
    // after the other for each request; no other thread touches it.
    nonisolated(unsafe) var rawTarget: String?
    /// Between the URI-log callback and the first access-handler call of a request: its head is
    /// being read, and only libmicrohttpd has seen it (`ContentLengthRefusal`).
    // nonisolated(unsafe): set and cleared by those callbacks and read by the log callback, all
    // on the connection's libmicrohttpd thread (readers on other threads skip it by `thread`).
    nonisolated(unsafe) var headPending = false
    /// libmicrohttpd's connection, valid until NOTIFY_CONNECTION CLOSED (`closed`).
    // nonisolated(unsafe): only passed to libmicrohttpd on the connection's own thread
    // (`thread`), and only while `closed` is false; both are checked by the reader.
    nonisolated(unsafe) let connection: OpaquePointer?
    /// The libmicrohttpd thread that accepted the connection; it runs all of its callbacks.
    let thread: UInt64

    init(fd: Int32, clientAddress: String, now: Int64, connection: OpaquePointer? = nil, thread: UInt64 = 0) {
        self.fd = fd
        self.clientAddress = clientAddress
        self.receivingSince = Atomic(now)
        self.connection = connection
        self.thread = thread
    }

    @inline(__always) func markBusy() {
        receivingSince.store(Self.busy, ordering: .relaxed)
    }

    @inline(__always) func lingerOnClose() {
        lingers.store(true, ordering: .relaxed)
    }

    @inline(__always) func markReceiving(now: Int64) {
        // A connection already cut stays cut.
        _ = receivingSince.compareExchange(expected: Self.busy, desired: now, ordering: .relaxed)
    }
}

/// All open connections, for the request-receive deadline.
final class ConnectionTracker: Sendable {
    private struct State: Sendable {
        var connections = CompactingList<ConnectionState>(compactingFrom: 256) { $0.closed.withLock { $0 } }
    }

    private let state = LockedValue(State())
    /// Set by `shutAll`: a connection that opens from then on is shut as it opens.
    private let shuttingAll = Atomic<Bool>(false)
    let timeoutNanoseconds: Int64

    init(timeout: Duration) {
        let (seconds, attoseconds) = timeout.components
        timeoutNanoseconds = max(1, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    func opened(_ connection: ConnectionState) {
        state.withLock { s in s.connections.append(connection) }
        // After the append: `shutAll` either finds it in the list or has set the flag first.
        if shuttingAll.load(ordering: .sequentiallyConsistent) { shut(connection) }
    }

    /// Shuts down the socket of every open connection, and of each one opened later: libmicrohttpd
    /// reads the end of each, finishes what it was doing with it and closes it itself.
    func shutAll() {
        shuttingAll.store(true, ordering: .sequentiallyConsistent)
        for connection in state.withLock({ s in s.connections.elements }) { shut(connection) }
    }

    /// Shuts `connection`'s socket unless it closed (its descriptor may be another's by then).
    private func shut(_ connection: ConnectionState) {
        connection.closed.withLock { closed in
            if !closed { _ = sheetd_shutdown_socket(connection.fd) }
        }
    }

    func closed(_ connection: ConnectionState) {
        connection.closed.withLock { $0 = true }
    }

    /// Shuts down the sockets of connections that did not deliver a complete request in time.
    /// Returns how many were cut.
    @discardableResult
    func cutOverdue(now: Int64) -> Int {
        let limit = now - timeoutNanoseconds
        return state.withLock { s -> Int in
            var cut = 0
            s.connections.removeAll { connection in
                connection.closed.withLock { closed -> Bool in
                    if closed { return true }
                    let since = connection.receivingSince.load(ordering: .relaxed)
                    // Bytes waiting in the kernel mean the server is behind, not the peer: a
                    // loaded server must not cut a client whose request already arrived.
                    if since >= 0 && since < limit && sheetd_socket_unread(connection.fd) <= 0 {
                        let (exchanged, _) = connection.receivingSince.compareExchange(
                            expected: since, desired: ConnectionState.cut, ordering: .relaxed)
                        if exchanged {
                            _ = sheetd_shutdown_socket(connection.fd)
                            cut += 1
                        }
                    }
                    return false
                }
            }
            return cut
        }
    }

    /// The open connections of the calling libmicrohttpd thread whose request head only
    /// libmicrohttpd has seen so far (`ConnectionState.headPending`).
    func pendingHeads(onThread thread: UInt64) -> [ConnectionState] {
        state.withLock { s in
            s.connections.elements.filter { connection in
                connection.thread == thread && connection.closed.withLock { !$0 } && connection.headPending
            }
        }
    }

    var count: Int { state.withLock { s in s.connections.elements.count } }
}
