import Locking

/// Everything that holds a connection suspended: requests waiting for their responder and
/// attached streams. It serves two purposes:
/// - deadlines: the sweeper finds requests whose responder overran `suspendedRequestDeadline`;
/// - shutdown: `close()` hands out every one of them, and refuses new ones afterwards, so that
///   no connection can stay suspended when `MHD_stop_daemon` runs.
///
/// One uncontended mutex acquisition per request. Entries are removed lazily (by the sweep, or
/// when the array grows), so the hot path never searches.
final class SuspensionRegistry: Sendable {
    private struct State: Sendable {
        var isClosed = false
        var streamsClosed = false
        var requests = CompactingList<RequestContext>(compactingFrom: 1024) { $0.isResolved }
        var streams = CompactingList<HTTPStream>(compactingFrom: 64) { $0.isDetached }
    }

    private let state = LockedValue(State())

    init() {}

    /// Registers a suspended request. False when shutdown has begun: the caller answers it itself.
    func add(_ request: RequestContext) -> Bool {
        state.withLock { s in
            if s.isClosed { return false }
            s.requests.append(request)
            return true
        }
    }

    /// Registers a stream attached to a connection. False when shutdown has begun.
    func add(_ stream: HTTPStream) -> Bool {
        state.withLock { s in
            if s.streamsClosed { return false }
            s.streams.append(stream)
            return true
        }
    }

    /// Drops finished entries; returns the requests whose deadline has passed.
    func sweep(now: ContinuousClock.Instant) -> [RequestContext] {
        state.withLock { s in
            var expired: [RequestContext] = []
            s.requests.removeAll { request in
                if request.isResolved { return true }
                if let deadline = request.deadline, deadline <= now {
                    expired.append(request)
                    return true
                }
                return false
            }
            s.streams.removeAll { $0.isDetached }
            return expired
        }
    }

    /// Refuses new streams and returns the open ones (shutdown finishes them first, while
    /// requests in flight still get their grace period).
    func closeStreams() -> [HTTPStream] {
        state.withLock { s in
            s.streamsClosed = true
            return s.streams.takeUnfinished()
        }
    }

    /// Closes the registry: returns everything still pending; later `add` calls return false.
    func close() -> (requests: [RequestContext], streams: [HTTPStream]) {
        state.withLock { s in
            s.isClosed = true
            s.streamsClosed = true
            return (s.requests.takeUnfinished(), s.streams.takeUnfinished())
        }
    }

    var pendingRequestCount: Int {
        state.withLock { s in s.requests.unfinishedCount }
    }
}
