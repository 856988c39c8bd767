import Locking

/// Everything that holds a connection suspended: requests waiting for their responder and
/// attached streams. It serves two purposes:
/// - deadlines: the sweeper finds requests whose responder overran `suspendedRequestDeadline`;
/// - shutdown: `close()` hands out every one of them, and refuses new ones afterwards, so that
///   no connection can stay suspended when `MHD_stop_daemon` runs.
///
/// A request is added when its connection is suspended and removed when it completes, by the
/// connection's own thread, in O(1) (each request knows its slot): so the registry never holds
/// the last reference to a finished request, and a request is freed on the thread that made it.
/// Dropped lazily instead, by whichever thread next grew the list or swept it, nearly all were
/// freed on another thread, and memory made on one thread and freed on another sends glibc's
/// malloc to its slow paths on both. Two mutex acquisitions per suspended request. Streams are
/// removed lazily.
final class SuspensionRegistry: Sendable {
    private struct State: Sendable {
        var isClosed = false
        var streamsClosed = false
        /// Suspended requests, each at its `registrySlot`.
        var requests: [RequestContext] = []
        var streams = CompactingList<HTTPStream>(compactingFrom: 64) { $0.isDetached }

        /// Takes the request at `slot` out, moving the last one into its place.
        mutating func removeRequest(at slot: Int) {
            requests[slot].registrySlot = -1
            let last = requests.removeLast()
            if slot < requests.count {
                last.registrySlot = slot
                requests[slot] = last
            }
        }

        /// Takes every request out (they stay as they are otherwise).
        mutating func takeRequests() -> [RequestContext] {
            for request in requests { request.registrySlot = -1 }
            defer { requests = [] }
            return requests
        }
    }

    private let state = LockedValue(State())

    init() {}

    /// Registers a suspended request. False when shutdown has begun: the caller answers it itself.
    func add(_ request: RequestContext) -> Bool {
        state.withLock { s in
            if s.isClosed { return false }
            request.registrySlot = s.requests.count
            s.requests.append(request)
            return true
        }
    }

    /// Takes a request out, if it is in (the sweep and shutdown take out what they hand over).
    /// Called by the request's connection thread when the request completes.
    func remove(_ request: RequestContext) {
        state.withLock { s in
            let slot = request.registrySlot
            if slot >= 0 { s.removeRequest(at: slot) }
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

    /// Takes out and returns the unanswered requests whose deadline has passed; drops finished
    /// streams.
    func sweep(now: ContinuousClock.Instant) -> [RequestContext] {
        state.withLock { s in
            var expired: [RequestContext] = []
            var slot = 0
            while slot < s.requests.count {
                let request = s.requests[slot]
                if !request.isResolved, let deadline = request.deadline, deadline <= now {
                    expired.append(request)
                    s.removeRequest(at: slot)   // the last one moves here: look at this slot again
                } else {
                    slot += 1
                }
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
            return (s.takeRequests().filter { !$0.isResolved }, s.streams.takeUnfinished())
        }
    }

    var pendingRequestCount: Int {
        state.withLock { s in s.requests.reduce(0) { $0 + ($1.isResolved ? 0 : 1) } }
    }

    /// How many requests are in, answered or not (for tests).
    var requestCount: Int {
        state.withLock { s in s.requests.count }
    }
}
