import CMicroHTTPD
import Locking

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One plain thread with an epoll set, for the two things libmicrohttpd does not watch:
///
/// - **A stream's client leaving.** libmicrohttpd does not poll a suspended connection, and a
///   stream with nothing to send is suspended; without this, a client that closes its stream is
///   noticed only on the next write (a keep-alive comment, seconds later), and its connection
///   slot stays taken until then. A stream's socket is watched for the peer closing (EPOLLRDHUP,
///   HUP, ERR); the stream then ends at once. A client that shuts down only its sending side
///   counts as gone too.
/// - **Lingering close** (nginx's `lingering_close`). A request answered before its body was
///   read (413 on its Content-Length, 400 on a bad head, an early 404/405) leaves its connection
///   closed while the client may still be sending; closing a socket with unread bytes makes the
///   kernel reset the connection, and the reset can destroy the answer before the client reads
///   it (clients that send the whole body before reading, such as Python's http.client, then
///   see a broken pipe). So such a socket is kept open after libmicrohttpd is done with it,
///   through a descriptor of its own: what arrives is read and dropped, until the client closes
///   or `lingerTime` or `lingerBytes` runs out, and then it is closed.
final class SocketWatcher: Sendable {
    struct Limits: Sendable {
        var lingerNanoseconds: Int64
        var lingerBytes: Int
        var maxLingering: Int
    }

    private struct Lingering: Sendable {
        let fd: Int32
        let deadline: Int64
        var bytesLeft: Int
    }

    private struct Watched: Sendable {
        let fd: Int32
        let stream: HTTPStream
    }

    private struct State: Sendable {
        var nextToken: UInt64 = 1
        var streams: [UInt64: Watched] = [:]
        var lingering: [UInt64: Lingering] = [:]
        var stopping = false
    }

    /// The token of the wake-up descriptor (stop).
    private static let wakeToken: UInt64 = 0

    let limits: Limits
    private let epollFD: Int32
    private let wakeup = WakeSignal()
    private let state = LockedValue(State())

    init(limits: Limits) {
        self.limits = limits
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        if epollFD >= 0 && wakeup.fd >= 0 {
            _ = sheetd_watch_add(epollFD, wakeup.fd, Self.wakeToken, 1)
        }
    }

    deinit {
        if epollFD >= 0 { close(epollFD) }
    }

    // MARK: - Streams

    /// Watches `fd`, the socket of `stream`, for its client leaving; returns the token for
    /// `unwatch`, or nil if it cannot be watched (then the next write notices, as before).
    func watch(_ stream: HTTPStream, fd: Int32) -> UInt64? {
        guard fd >= 0, epollFD >= 0 else { return nil }
        return state.withLock { s -> UInt64? in
            if s.stopping { return nil }
            let token = s.nextToken
            s.nextToken += 1
            guard sheetd_watch_add(epollFD, fd, token, 0) == 0 else { return nil }
            s.streams[token] = Watched(fd: fd, stream: stream)
            return token
        }
    }

    /// Stops watching a stream's socket. Called when its response is released, which
    /// libmicrohttpd does before it closes the socket, so `fd` is still the stream's own.
    func unwatch(_ token: UInt64) {
        state.withLock { s in
            if let watched = s.streams.removeValue(forKey: token) {
                _ = sheetd_watch_remove(epollFD, watched.fd)
            }
        }
    }

    // MARK: - Lingering close

    /// libmicrohttpd is about to close `fd` (NOTIFY_CONNECTION CLOSED, after it shut down the
    /// sending side): keep the socket open on a descriptor of its own and drain it. `now` is the
    /// server's clock in nanoseconds (`ServerCore.clockNanoseconds`): the time bound runs on it,
    /// and `closeOverdue` ends it.
    func linger(fd: Int32, now: Int64) {
        guard fd >= 0, epollFD >= 0 else { return }
        state.withLock { s in
            guard !s.stopping, s.lingering.count < limits.maxLingering else { return }
            let copy = sheetd_dup_socket(fd)
            guard copy >= 0 else { return }
            let token = s.nextToken
            s.nextToken += 1
            guard sheetd_watch_add(epollFD, copy, token, 1) == 0 else {
                close(copy)
                return
            }
            s.lingering[token] = Lingering(fd: copy, deadline: now + limits.lingerNanoseconds, bytesLeft: limits.lingerBytes)
        }
        wakeup.signal()
    }

    /// Closes the lingering sockets whose time is up at `now` (the server's clock, as in
    /// `linger`); the deadline sweep calls it. Returns how many it closed.
    @discardableResult
    func closeOverdue(now: Int64) -> Int {
        state.withLock { s -> Int in
            let overdue = s.lingering.filter { $0.value.deadline <= now }
            for (token, lingering) in overdue {
                s.lingering[token] = nil
                close(lingering.fd)
            }
            return overdue.count
        }
    }

    /// Sockets lingering now (for tests and metrics).
    var lingeringCount: Int { state.withLock { $0.lingering.count } }

    // MARK: - The thread

    /// The watcher's loop; returns after `stop()`, with every lingering socket closed.
    func run() {
        guard epollFD >= 0, wakeup.fd >= 0 else { return }
        var tokens = [UInt64](repeating: 0, count: 64)
        var flags = [Int32](repeating: 0, count: 64)
        while true {
            // Woken by its sockets and by `stop()`; lingering's time bound is the sweep's.
            if state.withLock({ $0.stopping }) { break }
            let count = sheetd_watch_wait(epollFD, &tokens, &flags, 64, -1)
            var leaving: [HTTPStream] = []
            state.withLock { s in
                for index in 0..<max(0, Int(count)) {
                    let token = tokens[index]
                    if token == Self.wakeToken {
                        wakeup.drain()
                    } else if let watched = s.streams.removeValue(forKey: token) {
                        _ = sheetd_watch_remove(epollFD, watched.fd)
                        leaving.append(watched.stream)
                    } else if var lingering = s.lingering[token] {
                        var ended: Int32 = 0
                        lingering.bytesLeft -= sheetd_drain_socket(lingering.fd, lingering.bytesLeft, &ended)
                        if ended != 0 || lingering.bytesLeft <= 0 || flags[index] & Int32(SHEETD_WATCH_PEER_CLOSED) != 0 {
                            s.lingering[token] = nil
                            close(lingering.fd)
                        } else {
                            s.lingering[token] = lingering
                        }
                    }
                }
            }
            for stream in leaving { stream.peerClosed() }
        }
        state.withLock { s in
            for lingering in s.lingering.values { close(lingering.fd) }
            s.lingering = [:]
            for watched in s.streams.values { _ = sheetd_watch_remove(epollFD, watched.fd) }
            s.streams = [:]
        }
    }

    /// Ends `run()`. Called once the daemon stopped (no connection is left to watch).
    func stop() {
        state.withLock { $0.stopping = true }
        wakeup.signal()
    }
}
