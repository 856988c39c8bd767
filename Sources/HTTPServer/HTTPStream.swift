import Locking
import CMicroHTTPD

/// Server-sent byte stream: the application writes chunks; the HTTP layer sends them as
/// libmicrohttpd asks for data (content-reader callback, suspending the connection when empty,
/// resuming it on write).
///
/// Client gone: libmicrohttpd notices only when it sends, and does not poll a suspended
/// connection; the server's `SocketWatcher` watches each stream's socket and ends the stream as
/// soon as its client closes (the next write would notice too, later).
public final class HTTPStream: Sendable {
    /// The connection a stream is attached to once its response is queued.
    // @unchecked Sendable: `connection` is only used for MHD_suspend_connection (on the
    // connection's own thread, inside the reader) and MHD_resume_connection (thread-safe), both
    // while the connection provably exists: the response (and so the connection) cannot be freed
    // while it is suspended, and the attachment is dropped when the response is freed.
    struct Attachment: @unchecked Sendable {
        let connection: OpaquePointer
        let core: ServerCore
        /// The connection's socket; open while the attachment exists (the response is freed
        /// before libmicrohttpd closes the socket).
        let fd: Int32
        /// The `SocketWatcher` token of this stream's socket, if it is watched.
        let watchToken: UInt64?
    }

    private struct State: Sendable {
        var queue: [[UInt8]] = []
        /// Index of the first chunk not fully handed to libmicrohttpd.
        var head = 0
        /// Bytes of `queue[head]` already handed over.
        var offset = 0
        /// `finish()` called (or the server is stopping): no more writes, end after the queue.
        var finished = false
        /// The response is over: ended, client gone, or it never reached a connection.
        var closed = false
        var attachment: Attachment?
        /// The reader suspended the connection; the next write / finish resumes it.
        var suspended = false
        var onClose: (@Sendable () -> Void)?
        var bytesSent = 0
        /// The client closed its end (`SocketWatcher`): the next read ends the response (see
        /// `read`), and the exchange is recorded as not completed normally (`clientLeft`).
        var peerGone = false
    }

    private let state = LockedValue(State())

    public init() {}

    /// Queues bytes. Returns false when the stream is closed (client gone, finished, server stopping).
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool {
        var toResume: Attachment?
        let accepted = state.withLock { s -> Bool in
            if s.finished || s.closed { return false }
            if bytes.isEmpty { return true }
            s.queue.append(bytes)
            if s.suspended {
                s.suspended = false
                toResume = s.attachment
            }
            return true
        }
        if let toResume { Self.resume(toResume) }
        return accepted
    }

    /// Sends what is queued, then ends the response (final chunk).
    public func finish() {
        var toResume: Attachment?
        state.withLock { s in
            if s.finished || s.closed { return }
            s.finished = true
            if s.suspended {
                s.suspended = false
                toResume = s.attachment
            }
        }
        if let toResume { Self.resume(toResume) }
    }

    /// Number of `write` calls whose bytes libmicrohttpd has not yet taken (queued in this object).
    public var pendingWrites: Int {
        state.withLock { s in s.queue.count - s.head }
    }

    /// Bytes this stream handed to the socket that the client has not yet acknowledged (the
    /// kernel's send queue, TIOCOUTQ): with `pendingWrites`, how far behind the client really is.
    /// 0 when the stream is not (or no longer) attached to a connection. (Added to the contract.)
    public var unsentSocketBytes: Int {
        state.withLock { s in
            guard let attachment = s.attachment, attachment.fd >= 0 else { return 0 }
            return max(0, Int(sheetd_socket_unsent(attachment.fd)))
        }
    }

    /// True once the response ended (finished, or the server is stopping) or the client went away.
    public var isClosed: Bool {
        state.withLock { s in s.closed || s.finished }
    }

    /// Called once when the stream closes for any reason (client gone, finish, shutdown). Set it
    /// before returning the response; if the stream is already closed it runs at once. It runs on
    /// whichever thread closes the stream (often a libmicrohttpd thread): must not block.
    public func onClose(_ handler: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { s -> Bool in
            if s.closed { return true }
            s.onClose = handler
            return false
        }
        if runNow { handler() }
    }

    // MARK: - HTTP layer side

    /// Body bytes handed to libmicrohttpd so far.
    var bytesSent: Int { state.withLock { s in s.bytesSent } }

    /// Whether the stream ended because its client closed its end.
    var clientLeft: Bool { state.withLock { s in s.peerGone } }

    /// Whether the response is over (for the registry; `isClosed` also counts `finish()`).
    var isDetached: Bool { state.withLock { s in s.closed } }

    /// The response carrying this stream was queued on `connection`.
    func attach(connection: OpaquePointer, fd: Int32, core: ServerCore) {
        core.activeStreams.add(1, ordering: .relaxed)
        // Shutdown's grace waits for the requests in progress that are not streams: one that
        // becomes a stream only now, after that wait began, leaves it, and must wake it.
        core.countersWentDown()
        let token = core.watcher.watch(self, fd: fd)
        state.withLock { s in
            s.attachment = Attachment(connection: connection, core: core, fd: fd, watchToken: token)
        }
    }

    /// The client closed its end of the connection (`SocketWatcher`, on its thread).
    func peerClosed() {
        var toResume: Attachment?
        state.withLock { s in
            if s.closed { return }
            s.peerGone = true
            if s.suspended {
                s.suspended = false
                toResume = s.attachment
            }
        }
        if let toResume { Self.resume(toResume) }
    }

    /// The content-reader callback, on the connection's thread.
    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        state.withLock { s -> Int in
            if s.closed { return sheetd_reader_end_with_error }
            // The client left: end the body as if finished, not with END_WITH_ERROR. On that error
            // libmicrohttpd 0.9.75 marks the connection closed but does not clean it up, and one
            // just resumed is in no epoll set: its socket and slot stay taken until a turn of its
            // worker's loop finds it the oldest of that worker's connections (an idle keep-alive
            // client older than it holds it there). Ended normally, the last chunk goes to the
            // closed socket and the connection closes by the usual path (the send fails, or the
            // next read finds the client's end).
            if s.peerGone { return sheetd_reader_end_of_stream }
            var written = 0
            while written < max && s.head < s.queue.count {
                let chunkCount = s.queue[s.head].count
                let n = min(chunkCount - s.offset, max - written)
                let offset = s.offset
                s.queue[s.head].withUnsafeBytes { source in
                    UnsafeMutableRawPointer(buffer + written)
                        .copyMemory(from: source.baseAddress! + offset, byteCount: n)
                }
                written += n
                s.offset += n
                if s.offset == chunkCount {
                    s.queue[s.head] = []
                    s.head += 1
                    s.offset = 0
                }
            }
            if s.head == s.queue.count {
                s.queue.removeAll(keepingCapacity: true)
                s.head = 0
            } else if s.head >= 64 && s.head * 2 >= s.queue.count {
                s.queue.removeFirst(s.head)
                s.head = 0
            }
            if written > 0 {
                s.bytesSent += written
                return written
            }
            if s.finished { return sheetd_reader_end_of_stream }
            guard let attachment = s.attachment else { return sheetd_reader_end_with_error }
            // Nothing to send: suspend (under the lock, so no write can try to resume first);
            // the next write or finish resumes. Returning 0 without suspending would busy-loop.
            s.suspended = true
            attachment.core.suspensionBegan()
            MHD_suspend_connection(attachment.connection)
            return 0
        }
    }

    /// The response was freed (ended, client gone, or never sent): the stream is closed.
    func responseReleased() {
        close()
    }

    /// The stream never reached a connection (its request was answered otherwise).
    func abandon() {
        close()
    }

    private func close() {
        let (handler, attachment) = state.withLock { s -> ((@Sendable () -> Void)?, Attachment?) in
            if s.closed { return (nil, nil) }
            s.closed = true
            s.finished = true
            let attachment = s.attachment
            s.attachment = nil
            s.queue = []
            s.head = 0
            s.offset = 0
            let handler = s.onClose
            s.onClose = nil
            return (handler, attachment)
        }
        if let attachment {
            if let token = attachment.watchToken { attachment.core.watcher.unwatch(token) }
            attachment.core.activeStreams.subtract(1, ordering: .releasing)
            attachment.core.countersWentDown()
        }
        handler?()
    }

    private static func resume(_ attachment: Attachment) {
        MHD_resume_connection(attachment.connection)
        attachment.core.suspensionEnded()
    }
}
